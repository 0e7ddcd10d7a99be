#include "tools/record/recorder.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <iomanip>
#include <memory>
#include <optional>
#include <sstream>

#include "wire/wire.h"
#include "tools/common/clock.h"
#include "tools/common/recording.h"
#include "tools/common/stop_signal.h"
#include "tools/common/published_message.h"
#include "tools/common/zmq_io.h"

namespace sonopipe::record {

namespace {

using tools::SteadyClock;

constexpr auto kPollInterval = std::chrono::milliseconds(50);
constexpr auto kSubscriptionMargin = std::chrono::milliseconds(150);  // handshake -> subscription at the PUB
constexpr double kFlushInterval_s = 1.0;

void count_sequence(SeriesCount& series, std::uint64_t sequence, std::size_t bytes) {
  if (series.messages == 0) {
    series.first_sequence = sequence;
  } else if (sequence > series.last_sequence + 1) {
    series.sequence_gaps += sequence - series.last_sequence - 1;
  } else if (sequence <= series.last_sequence) {
    ++series.out_of_order;
  }
  if (series.messages == 0 || sequence > series.last_sequence) series.last_sequence = sequence;
  ++series.messages;
  series.bytes += bytes;
}

// One socket the recorder reads, with its readiness state.
struct Input {
  zmq::socket_t socket;
  std::unique_ptr<tools::PeerWatch> watch;     // set while waiting for a SUB to attach
  std::size_t peers = 1;                       // handshakes to wait for
  std::optional<SteadyClock::time_point> ready_at;
};

class Recorder {
 public:
  explicit Recorder(const RecorderOptions& options) : options_(options), writer_(options.out) {
    writer_.set_attribute("created_by", "sonopipe-record");
    if (!options.endpoints.empty()) {
      results_.emplace(Input{zmq::socket_t(context_, zmq::socket_type::sub), nullptr, 1, std::nullopt});
      if (options.curve.enabled() && options.bind)
        throw std::invalid_argument("CURVE keys are for connecting to a daemon; --bind makes record the server");
      tools::apply_curve_client(results_->socket, options.curve);
      setup(*results_, options.endpoints, options.bind, true);
      for (const std::string& topic : options.topics) results_->socket.set(zmq::sockopt::subscribe, topic);
    }
    if (!options.raw_endpoint.empty()) {
      if (options.raw_pattern != "pull" && options.raw_pattern != "sub")
        throw std::invalid_argument("raw pattern must be pull or sub, got '" + options.raw_pattern + "'");
      const bool sub = options.raw_pattern == "sub";
      raw_.emplace(Input{zmq::socket_t(context_, sub ? zmq::socket_type::sub : zmq::socket_type::pull), nullptr, 1,
                         std::nullopt});
      raw_->socket.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(options.max_frame_bytes) + (1 << 20));
      setup(*raw_, {options.raw_endpoint}, options.raw_bind, sub);
      if (sub) raw_->socket.set(zmq::sockopt::subscribe, "");
    }
    if (!results_ && !raw_) throw std::invalid_argument("nothing to record: no result endpoint and no raw endpoint");
  }

  RecorderReport run() {
    const auto start = SteadyClock::now();
    auto last_message = start, last_flush = start;
    bool any_message = false, announced = false;
    std::vector<zmq::message_t> parts;
    while (true) {
      if (!announced && ready()) {
        announced = true;
        if (!options_.ready_file.empty()) std::ofstream(options_.ready_file) << "ready\n";
        spdlog::info("sonopipe-record: ready, writing {}", options_.out);
      }
      std::vector<zmq::pollitem_t> items;
      if (results_) items.push_back({results_->socket.handle(), 0, ZMQ_POLLIN, 0});
      if (raw_) items.push_back({raw_->socket.handle(), 0, ZMQ_POLLIN, 0});
      try {
        zmq::poll(items.data(), items.size(), kPollInterval);
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw;
      }
      std::size_t slot = 0;
      if (results_ && (items[slot++].revents & ZMQ_POLLIN)) {
        // Drain what is queued before checking the stop conditions again.
        while (!limits_reached() && tools::receive_message(results_->socket, parts, true)) {
          handle_result(parts);
          any_message = true;
          last_message = SteadyClock::now();
        }
      }
      if (raw_ && (items[slot++].revents & ZMQ_POLLIN)) {
        while (!limits_reached() && tools::receive_message(raw_->socket, parts, true)) {
          handle_frame(parts);
          any_message = true;
          last_message = SteadyClock::now();
        }
      }
      if (tools::seconds_since(last_flush) >= kFlushInterval_s) {
        writer_.flush();  // a crash loses at most the last second
        last_flush = SteadyClock::now();
      }
      if (tools::stop_requested()) { report_.stop_reason = "signal"; break; }
      if (limits_reached()) { report_.stop_reason = "count"; break; }
      if (options_.duration_s > 0 && tools::seconds_since(start) >= options_.duration_s) {
        report_.stop_reason = "duration";
        break;
      }
      if (options_.idle_timeout_s > 0 && any_message && tools::seconds_since(last_message) >= options_.idle_timeout_s) {
        report_.stop_reason = "idle";
        break;
      }
    }
    if (last_status_) writer_.set_attribute("daemon_status", last_status_->ShortDebugString());
    writer_.flush();
    report_.duration_s = tools::seconds_since(start);
    return report_;
  }

 private:
  void setup(Input& input, const std::vector<std::string>& endpoints, bool bind, bool needs_subscription) {
    input.socket.set(zmq::sockopt::rcvhwm, options_.receive_high_water_mark);
    input.socket.set(zmq::sockopt::linger, 0);
    if (needs_subscription) input.watch = std::make_unique<tools::PeerWatch>(context_, input.socket);
    // Bound, we cannot know how many publishers will come: the first one makes it ready.
    input.peers = bind ? 1 : endpoints.size();
    for (const std::string& endpoint : endpoints) tools::attach(input.socket, endpoint, bind);
    if (!needs_subscription) input.ready_at = SteadyClock::now();  // PULL: senders queue until we read
  }

  // A SUB is ready once every publisher it connects to completed its handshake and our subscription had time to arrive.
  bool ready() {
    for (std::optional<Input>* input : {&results_, &raw_}) {
      if (!*input) continue;
      Input& in = **input;
      if (!in.ready_at && in.watch && in.watch->wait_for(in.peers, std::chrono::milliseconds(0)))
        in.ready_at = SteadyClock::now() + kSubscriptionMargin;
      if (!in.ready_at || SteadyClock::now() < *in.ready_at) return false;
    }
    return true;
  }

  bool limits_reached() const {
    const bool results_done = options_.result_count > 0 && report_.results_written() >= options_.result_count;
    const bool raw_done = options_.raw_count > 0 && report_.frames_written() >= options_.raw_count;
    if (options_.result_count > 0 && options_.raw_count > 0) return results_done && raw_done;
    return results_done || raw_done;
  }

  void reject(const std::string& reason, const std::string& detail) {
    const std::size_t count = ++report_.rejected[reason];
    // First few of each reason, then one in a thousand: a flood cannot drown the log.
    if (count <= 5 || count % 1000 == 0)
      spdlog::warn("sonopipe-record: rejected {} message ({} so far): {}", reason, count, detail);
  }

  void handle_result(std::vector<zmq::message_t>& parts) {
    tools::PublishedMessage message = tools::decode_published(parts);
    if (message.kind == tools::PublishedMessage::Kind::refused) return reject(message.reason, message.detail);
    const std::string& topic = message.topic;
    if (message.kind == tools::PublishedMessage::Kind::status) {
      ++report_.status_messages;
      last_status_ = std::move(message.status);
      return;
    }
    const v1::ResultHeader& header = message.header;
    try {
      writer_.append_result(header, parts[2].data(), parts[2].size());
    } catch (const std::exception& e) {  // bad element type, size mismatch, shape change
      return reject("unwritable_result", topic + ": " + e.what());
    }
    count_sequence(report_.results[header.pipeline() + "/" + header.output()], header.input_sequence(),
                   parts[2].size());
  }

  void handle_frame(std::vector<zmq::message_t>& parts) {
    const std::int64_t received_ns = tools::wall_clock_ns();
    if (parts.size() != 2)
      return reject("malformed_message", "raw frame with " + std::to_string(parts.size()) +
                                             " parts, expected [FrameHeader][payload]");
    FrameMeta meta;
    try {
      meta = wire::decode_frame(parts[0].data(), parts[0].size(), parts[1].size(), options_.max_frame_bytes);
    } catch (const wire::WireError& e) {
      return reject(std::string(wire::reject_reason_name(e.reason)), e.what());
    }
    try {
      writer_.append_frame(meta, parts[1].data(), parts[1].size(), received_ns);
    } catch (const std::exception& e) {
      return reject("unwritable_frame", "stream " + std::to_string(meta.stream_id) + ": " + e.what());
    }
    count_sequence(report_.streams[meta.stream_id], meta.sequence, parts[1].size());
  }

  RecorderOptions options_;
  recording::Writer writer_;
  zmq::context_t context_{1};
  std::optional<Input> results_, raw_;
  RecorderReport report_;
  std::optional<v1::Status> last_status_;
};

void describe_series(std::ostringstream& out, const std::string& name, const SeriesCount& s) {
  out << "\n  " << name << ": " << s.messages << " messages, " << static_cast<double>(s.bytes) / 1e6
      << " MB, sequence " << s.first_sequence << ".." << s.last_sequence << ", " << s.sequence_gaps << " missing";
  if (s.out_of_order) out << ", " << s.out_of_order << " out of order";
}

}  // namespace

std::size_t RecorderReport::results_written() const {
  std::size_t total = 0;
  for (const auto& [name, series] : results) total += series.messages;
  return total;
}

std::size_t RecorderReport::frames_written() const {
  std::size_t total = 0;
  for (const auto& [id, series] : streams) total += series.messages;
  return total;
}

RecorderReport run_recorder(const RecorderOptions& options) {
  Recorder recorder(options);
  return recorder.run();
}

std::string describe(const RecorderReport& report, const RecorderOptions& options) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(3);
  std::size_t rejected = 0;
  for (const auto& [reason, count] : report.rejected) rejected += count;
  out << "sonopipe-record: wrote " << report.results_written() << " results and " << report.frames_written()
      << " raw frames to " << options.out << " in " << report.duration_s << " s (stopped by " << report.stop_reason
      << "), rejected " << rejected;
  for (const auto& [name, series] : report.results) describe_series(out, "result/" + name, series);
  for (const auto& [id, series] : report.streams) describe_series(out, "stream " + std::to_string(id), series);
  for (const auto& [reason, count] : report.rejected) out << "\n  rejected " << reason << ": " << count;
  if (report.status_messages) out << "\n  status messages: " << report.status_messages << " (last one in attribute daemon_status)";
  return out.str();
}

}  // namespace sonopipe::record
