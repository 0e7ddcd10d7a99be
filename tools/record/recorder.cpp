#include "tools/record/recorder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <memory>
#include <optional>
#include <sstream>

#include "shm/consumer.h"
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

// One shm:// pool read in place: the daemon's results (publish.shm) or its ingest frames.
struct PoolInput {
  std::unique_ptr<shm::Consumer> consumer;
  bool results = false;
};

constexpr std::size_t kMaxDrain = 64;                      // messages from one pool before the others get a turn
constexpr auto kPoolTurn = std::chrono::milliseconds(1);   // wait on one input while others are read too

std::unique_ptr<shm::Consumer> open_pool(const std::string& endpoint, bool lossless) {
  try {
    return std::make_unique<shm::Consumer>(endpoint, lossless ? shm::Mode::lossless : shm::Mode::live);
  } catch (const shm::ShmError& e) {
    throw std::runtime_error(e.what());
  }
}

// The mode a consumer got: a live pool makes every consumer live.
std::string pool_mode(const shm::Consumer& consumer, bool asked_lossless) {
  return consumer.pool().header().mode == shm::Mode::live || !asked_lossless ? "live" : "lossless";
}

class Recorder {
 public:
  explicit Recorder(const RecorderOptions& options) : options_(options), writer_(options.out) {
    writer_.set_attribute("created_by", "sonopipe-record");
    writer_.flush();  // readable from the start: a recorder killed before its first periodic flush leaves an empty recording
    const bool shm_results = std::any_of(options.endpoints.begin(), options.endpoints.end(),
                                         [](const std::string& e) { return shm::is_shm_endpoint(e); });
    if (shm_results) {
      // The daemon's publish.shm pool: results read in place, no socket in between.
      if (options.endpoints.size() != 1)
        throw std::invalid_argument("shm:// results come from one daemon's pool: give it alone with --endpoint");
      if (options.bind || options.curve.enabled())
        throw std::invalid_argument("--bind and CURVE keys do not apply to shm:// (same host; the pool's permissions protect it)");
      if (options.result_mode != "lossless" && options.result_mode != "live")
        throw std::invalid_argument("result mode must be lossless or live, got '" + options.result_mode + "'");
      const bool lossless = options.result_mode == "lossless";
      pools_.push_back(PoolInput{open_pool(options.endpoints.front(), lossless), true});
      report_.results_mode = pool_mode(*pools_.back().consumer, lossless);
    } else if (!options.endpoints.empty()) {
      results_.emplace(Input{zmq::socket_t(context_, zmq::socket_type::sub), nullptr, 1, std::nullopt});
      if (options.curve.enabled() && options.bind)
        throw std::invalid_argument("CURVE keys are for connecting to a daemon; --bind makes record the server");
      tools::apply_curve_client(results_->socket, options.curve);
      setup(*results_, options.endpoints, options.bind, true);
      for (const std::string& topic : options.topics) results_->socket.set(zmq::sockopt::subscribe, topic);
    }
    if (!options.raw_endpoint.empty() && options.raw_pattern != "pull" && options.raw_pattern != "sub")
      throw std::invalid_argument("raw pattern must be pull or sub, got '" + options.raw_pattern + "'");
    if (!options.raw_endpoint.empty() && shm::is_shm_endpoint(options.raw_endpoint)) {
      // The daemon's own ingest pool, read beside the daemon: pull = a lossless consumer (the
      // producer waits for the recorder too: every frame is recorded), sub = a live observer.
      const bool lossless = options.raw_pattern == "pull";
      pools_.push_back(PoolInput{open_pool(options.raw_endpoint, lossless), false});
      report_.raw_mode = pool_mode(*pools_.back().consumer, lossless);
    } else if (!options.raw_endpoint.empty()) {
      const bool sub = options.raw_pattern == "sub";
      raw_.emplace(Input{zmq::socket_t(context_, sub ? zmq::socket_type::sub : zmq::socket_type::pull), nullptr, 1,
                         std::nullopt});
      raw_->socket.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(options.max_frame_bytes) + (1 << 20));
      setup(*raw_, {options.raw_endpoint}, options.raw_bind, sub);
      if (sub) raw_->socket.set(zmq::sockopt::subscribe, "");
    }
    if (!results_ && !raw_ && pools_.empty())
      throw std::invalid_argument("nothing to record: no result endpoint and no raw endpoint");
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
      // Pools first, without waiting: what is in them is read in place and released.
      std::size_t moved = 0;
      for (PoolInput& pool : pools_) moved += drain(pool, SteadyClock::now());
      std::vector<zmq::pollitem_t> items;
      if (results_) items.push_back({results_->socket.handle(), 0, ZMQ_POLLIN, 0});
      if (raw_) items.push_back({raw_->socket.handle(), 0, ZMQ_POLLIN, 0});
      if (!items.empty()) {
        try {
          // With a pool to read too, the sockets are polled briefly so the pool's messages keep moving.
          zmq::poll(items.data(), items.size(),
                    pools_.empty() ? kPollInterval : moved > 0 ? std::chrono::milliseconds(0) : kPoolTurn);
        } catch (const zmq::error_t& e) {
          if (e.num() != EINTR) throw;
        }
      } else if (moved == 0) {
        // Pools only: wait on the first (on its futex); briefly when another pool must be read too.
        moved += drain(pools_.front(), SteadyClock::now() + (pools_.size() == 1 ? kPollInterval : kPoolTurn));
      }
      if (moved > 0) note_message(any_message, last_message);
      std::size_t slot = 0;
      if (results_ && (items[slot++].revents & ZMQ_POLLIN)) {
        // Drain what is queued before checking the stop conditions again.
        while (!limits_reached() && tools::receive_message(results_->socket, parts, true)) {
          handle_result(parts);
          note_message(any_message, last_message);
        }
      }
      if (raw_ && (items[slot++].revents & ZMQ_POLLIN)) {
        while (!limits_reached() && tools::receive_message(raw_->socket, parts, true)) {
          handle_frame(parts);
          note_message(any_message, last_message);
        }
      }
      if (tools::seconds_since(last_flush) >= kFlushInterval_s) {
        writer_.flush();  // a crash loses at most the last second
        last_flush = SteadyClock::now();
        if (moved == 0 && pool_removed()) { report_.stop_reason = "pool removed"; break; }
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
    for (const PoolInput& pool : pools_) {
      const shm::ConsumerCounters counters = pool.consumer->counters();
      (pool.results ? report_.results_missed : report_.frames_missed) = counters.missed;
      if (counters.refused_total() > 0) report_.rejected["bad_slot_descriptor"] += counters.refused_total();
    }
    if (last_status_) writer_.set_attribute("daemon_status", last_status_->ShortDebugString());
    writer_.flush();
    report_.duration_s = tools::seconds_since(start);
    if (any_message) report_.active_s = std::chrono::duration<double>(last_message - first_message_).count();
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

  // A SUB is ready once every publisher it connects to completed its handshake and our
  // subscription had time to arrive. A pool is ready once attached (in the constructor).
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

  void note_message(bool& any_message, SteadyClock::time_point& last_message) {
    last_message = SteadyClock::now();
    if (!any_message) first_message_ = last_message;
    any_message = true;
  }

  // Messages of one pool up to `deadline` for the first (only those already there after it), each
  // written from its slot and released; returns how many.
  std::size_t drain(PoolInput& pool, SteadyClock::time_point deadline) {
    std::size_t taken = 0;
    while (taken < kMaxDrain && !limits_reached()) {
      const std::optional<shm::Message> message = pool.consumer->take(deadline);
      if (!message) break;
      if (pool.results)
        handle_result_slot(*message);
      else
        handle_frame_bytes(message->header, message->header_bytes, message->payload, message->payload_bytes);
      pool.consumer->release(message->slot);
      ++taken;
      deadline = SteadyClock::now();
    }
    return taken;
  }

  // A pool its daemon removed (a clean stop with nothing left for us) brings nothing more.
  bool pool_removed() const {
    return std::any_of(pools_.begin(), pools_.end(), [](const PoolInput& pool) { return pool.consumer->pool().removed(); });
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
    if (message.kind == tools::PublishedMessage::Kind::status) {
      ++report_.status_messages;
      last_status_ = std::move(message.status);
      return;
    }
    record_result(message, parts[2].data(), parts[2].size());
  }

  // A result read in place from publish.shm: [topic '\0' ResultHeader][payload]. The topics asked
  // for filter as a SUB's subscriptions do (the pool holds every result).
  void handle_result_slot(const shm::Message& slot) {
    const tools::PublishedMessage message = tools::decode_published_slot(slot.header, slot.header_bytes);
    if (message.kind == tools::PublishedMessage::Kind::refused) return reject(message.reason, message.detail);
    const bool wanted = std::any_of(options_.topics.begin(), options_.topics.end(),
                                    [&](const std::string& prefix) { return message.topic.rfind(prefix, 0) == 0; });
    if (wanted) record_result(message, slot.payload, slot.payload_bytes);
  }

  void record_result(const tools::PublishedMessage& message, const void* payload, std::size_t payload_bytes) {
    const v1::ResultHeader& header = message.header;
    try {
      writer_.append_result(header, payload, payload_bytes);
    } catch (const std::exception& e) {  // bad element type, size mismatch, shape change
      return reject("unwritable_result", message.topic + ": " + e.what());
    }
    count_sequence(report_.results[header.pipeline() + "/" + header.output()], header.input_sequence(), payload_bytes);
  }

  void handle_frame(std::vector<zmq::message_t>& parts) {
    if (parts.size() != 2)
      return reject("malformed_message", "raw frame with " + std::to_string(parts.size()) +
                                             " parts, expected [FrameHeader][payload]");
    handle_frame_bytes(parts[0].data(), parts[0].size(), parts[1].data(), parts[1].size());
  }

  // One raw frame [FrameHeader][payload], from a socket or read in place in a pool.
  void handle_frame_bytes(const void* header, std::size_t header_bytes, const void* payload, std::size_t payload_bytes) {
    const std::int64_t received_ns = tools::wall_clock_ns();
    FrameMeta meta;
    try {
      meta = wire::decode_frame(header, header_bytes, payload_bytes, options_.max_frame_bytes);
    } catch (const wire::WireError& e) {
      return reject(std::string(wire::reject_reason_name(e.reason)), e.what());
    }
    try {
      writer_.append_frame(meta, payload, payload_bytes, received_ns);
    } catch (const std::exception& e) {
      return reject("unwritable_frame", "stream " + std::to_string(meta.stream_id) + ": " + e.what());
    }
    count_sequence(report_.streams[meta.stream_id], meta.sequence, payload_bytes);
  }

  RecorderOptions options_;
  recording::Writer writer_;
  zmq::context_t context_{1};
  std::optional<Input> results_, raw_;
  std::vector<PoolInput> pools_;  // shm:// results (publish.shm) and raw frames (the ingest pool)
  RecorderReport report_;
  std::optional<v1::Status> last_status_;
  SteadyClock::time_point first_message_{};
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
  std::size_t bytes = 0;
  for (const auto& [name, series] : report.results) bytes += series.bytes;
  for (const auto& [id, series] : report.streams) bytes += series.bytes;
  if (report.active_s > 0)
    out << "\n  from the first message to the last: " << report.active_s << " s, "
        << static_cast<double>(report.results_written()) / report.active_s << " results/s and "
        << static_cast<double>(report.frames_written()) / report.active_s << " raw frames/s, "
        << static_cast<double>(bytes) / report.active_s / 1e6 << " MB/s written";
  for (const auto& [name, series] : report.results) describe_series(out, "result/" + name, series);
  for (const auto& [id, series] : report.streams) describe_series(out, "stream " + std::to_string(id), series);
  if (!report.results_mode.empty())
    out << "\n  results read in place from " << options.endpoints.front() << " (" << report.results_mode << "), missed "
        << report.results_missed;
  if (!report.raw_mode.empty())
    out << "\n  raw frames read in place from " << options.raw_endpoint << " (" << report.raw_mode << "), missed "
        << report.frames_missed;
  for (const auto& [reason, count] : report.rejected) out << "\n  rejected " << reason << ": " << count;
  if (report.status_messages) out << "\n  status messages: " << report.status_messages << " (last one in attribute daemon_status)";
  return out.str();
}

}  // namespace sonopipe::record
