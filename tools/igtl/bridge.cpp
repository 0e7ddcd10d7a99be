#include "tools/igtl/bridge.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <memory>
#include <optional>
#include <sstream>

#include "shm/consumer.h"
#include "wire/wire.h"
#include "tools/common/clock.h"
#include "tools/common/control_client.h"
#include "wire/log_text.h"
#include "tools/common/stop_signal.h"
#include "tools/common/published_message.h"
#include "tools/common/zmq_io.h"
#include "tools/igtl/client_connection.h"
#include "tools/igtl/image_layout.h"
#include "tools/igtl/message_encoding.h"
#include "tools/igtl/tcp_listener.h"

namespace sonopipe::igtl_bridge {

namespace {

using tools::SteadyClock;

constexpr auto kPollInterval = std::chrono::milliseconds(100);
constexpr auto kSubscriptionMargin = std::chrono::milliseconds(150);  // handshake -> subscription at the PUB
constexpr int kMaxDrain = 1000;  // messages taken from the SUB socket per loop

ClientSummary summary_of(const ClientConnection& client) {
  const ClientCounters counters = client.counters();
  return {client.id(),   client.peer(),      client.end_reason(),  counters.offered,
          counters.sent, counters.conflated, counters.bytes_sent, counters.unsent};
}

// A connected client and what was last logged about it.
struct Client {
  std::unique_ptr<ClientConnection> connection;
  std::uint64_t conflated_logged = 0;
  SteadyClock::time_point logged_at = SteadyClock::now();
};

class Bridge {
 public:
  explicit Bridge(const BridgeOptions& options)
      : options_(options), listener_(options.bind_address, options.port, options.client_send_buffer_bytes),
        subscriber_(context_, zmq::socket_type::sub) {
    if (!options.float_images && !options.uint8_images)
      throw std::invalid_argument("no image variant selected (float32 and uint8 are both off)");
    report_.port = listener_.port();
    subscriber_.set(zmq::sockopt::rcvhwm, options.receive_high_water_mark);
    subscriber_.set(zmq::sockopt::linger, 0);
    watch_ = std::make_unique<tools::PeerWatch>(context_, subscriber_);
    if (shm::is_shm_endpoint(options.endpoint)) {
      // A live reader of the daemon's result pool: it never holds the daemon back, and what it
      // missed shows as sequence gaps. Attached at once: no subscription has to travel.
      try {
        shm_ = std::make_unique<shm::Consumer>(options.endpoint, shm::Mode::live);
      } catch (const std::exception& e) {
        throw std::runtime_error(e.what());
      }
      if (!options.status_endpoint.empty()) tools::attach(subscriber_, options.status_endpoint, false);
      subscriber_.set(zmq::sockopt::subscribe, tools::kStatusTopic);
      return;
    }
    tools::attach(subscriber_, options.endpoint, false);
    for (const std::string& topic : options.topics) subscriber_.set(zmq::sockopt::subscribe, tools::kResultTopicPrefix + topic);
    subscriber_.set(zmq::sockopt::subscribe, tools::kStatusTopic);
  }

  BridgeReport run() {
    spdlog::info("sonopipe-igtl: serving OpenIGTLink on {}:{}, results from {}", options_.bind_address, listener_.port(),
                 options_.endpoint);
    const auto start = SteadyClock::now();
    auto last_status = start;
    std::uint64_t results_at_last_status = 0;
    std::optional<SteadyClock::time_point> ready_at;
    bool announced = false;
    std::vector<zmq::message_t> parts;
    while (true) {
      if (!announced) {
        if (!ready_at && (shm_ || watch_->wait(std::chrono::milliseconds(0))))
          ready_at = SteadyClock::now() + (shm_ ? std::chrono::milliseconds(0) : kSubscriptionMargin);
        if (ready_at && SteadyClock::now() >= *ready_at) {
          announced = true;
          if (!options_.ready_file.empty()) write_ready_file();
          spdlog::info("sonopipe-igtl: subscribed to {}", options_.endpoint);
        }
      }
      zmq::pollitem_t items[2] = {{subscriber_.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, listener_.descriptor(), ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, 2, shm_ ? std::chrono::milliseconds(0) : kPollInterval);
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw;
      }
      if (shm_) take_from_pool();
      if (items[0].revents & ZMQ_POLLIN) {
        // Take what is queued (bounded, so clients are still accepted under a flood), then convert only
        // the newest result of each topic: a display wants the present, not a backlog.
        for (int n = 0; n < kMaxDrain && tools::receive_message(subscriber_, parts, true); ++n) receive(parts);
        convert_pending();
      }
      if (items[1].revents & ZMQ_POLLIN)
        while (auto accepted = listener_.accept()) add_client(*accepted);
      reap_clients();
      log_conflation();
      if (tools::seconds_since(last_status) >= options_.status_interval_s) {
        const double interval_s = tools::seconds_since(last_status);
        const std::uint64_t results = total_results();
        publish(pack_string(kStatusDevice, status_text(tools::seconds_since(start),
                                                       static_cast<double>(results - results_at_last_status) / interval_s)));
        results_at_last_status = results;
        last_status = SteadyClock::now();
      }
      if (tools::stop_requested()) { report_.stop_reason = "signal"; break; }
      if (options_.duration_s > 0 && tools::seconds_since(start) >= options_.duration_s) {
        report_.stop_reason = "duration";
        break;
      }
    }
    for (Client& client : clients_) {
      ended_.push_back(summary_of(*client.connection));
      if (ended_.back().end_reason.empty()) ended_.back().end_reason = "still connected at the stop";
    }
    clients_.clear();  // stops the senders
    report_.clients = ended_;
    report_.duration_s = tools::seconds_since(start);
    return report_;
  }

 private:
  // Written aside and renamed, so a reader never sees it half written.
  void write_ready_file() const {
    const std::string aside = options_.ready_file + ".partial";
    std::ofstream(aside) << "port " << listener_.port() << "\n";
    std::error_code error;
    std::filesystem::rename(aside, options_.ready_file, error);
    if (error) spdlog::warn("sonopipe-igtl: cannot write the ready file {}: {}", options_.ready_file, error.message());
  }

  void reject(const std::string& reason, const std::string& detail) {
    const std::uint64_t count = ++report_.rejected[reason];
    if (count <= 5 || count % 1000 == 0)  // first few of each reason, then one in a thousand
      spdlog::warn("sonopipe-igtl: rejected {} message ({} so far): {}", reason, count, detail);
  }

  // A result waiting for conversion: the newest of its topic so far.
  struct PendingResult {
    v1::ResultHeader header;
    zmq::message_t payload;
  };

  void receive(std::vector<zmq::message_t>& parts) {
    tools::PublishedMessage message = tools::decode_published(parts);
    if (message.kind == tools::PublishedMessage::Kind::refused) return reject(message.reason, message.detail);
    const std::string& topic = message.topic;
    if (message.kind == tools::PublishedMessage::Kind::status) {
      daemon_status_ = std::move(message.status);
      ++report_.status_messages;
      have_daemon_status_ = true;
      return;
    }
    v1::ResultHeader& header = message.header;
    if (header.schema_version() != wire::kSchemaVersion)
      return reject("unknown_schema", topic + ": schema version " + std::to_string(header.schema_version()));
    count_result(header);
    TopicCount& count = report_.topics[header.pipeline() + "/" + header.output()];
    auto [pending, inserted] = pending_.try_emplace(topic);
    if (!inserted) ++count.superseded;
    pending->second = PendingResult{std::move(header), std::move(parts[2])};
  }

  // shm://: waits up to kPoolWait for results, then converts each from its slot in place (the
  // live pool has already kept only the newest a slow reader can get) and gives the slot back.
  void take_from_pool() {
    constexpr auto kPoolWait = std::chrono::milliseconds(20);  // also how often clients are looked at
    auto deadline = SteadyClock::now() + kPoolWait;
    for (int n = 0; n < kMaxDrain; ++n) {
      const std::optional<shm::Message> message = shm_->take(deadline);
      if (!message) return;
      deadline = SteadyClock::now();  // the rest: only what is there already
      convert_slot(*message);
      shm_->release(message->slot);
    }
  }

  void convert_slot(const shm::Message& message) {
    // [topic '\0' ResultHeader][payload] (docs/shared-memory.md).
    const char* header = reinterpret_cast<const char*>(message.header);
    const std::size_t topic_length = strnlen(header, message.header_bytes);
    if (topic_length == message.header_bytes) return reject("malformed_message", "a slot header without a topic");
    const std::string topic(header, topic_length);
    const bool wanted = std::any_of(options_.topics.begin(), options_.topics.end(), [&](const std::string& prefix) {
      return topic.rfind(tools::kResultTopicPrefix + prefix, 0) == 0;
    });
    if (!wanted) return;
    v1::ResultHeader result;
    if (!result.ParseFromArray(header + topic_length + 1, static_cast<int>(message.header_bytes - topic_length - 1)))
      return reject("unparsable_header", topic + ": not a ResultHeader");
    if (result.schema_version() != wire::kSchemaVersion)
      return reject("unknown_schema", topic + ": schema version " + std::to_string(result.schema_version()));
    count_result(result);
    std::vector<Image> images;
    try {
      images = images_of_result(result, message.payload, message.payload_bytes);
    } catch (const LayoutError& e) {
      return reject("unshowable_result", e.what());
    }
    serve(images);
  }

  void count_result(const v1::ResultHeader& header) {
    TopicCount& count = report_.topics[header.pipeline() + "/" + header.output()];
    if (count.results > 0 && header.input_sequence() > count.last_sequence + 1)
      count.sequence_gaps += header.input_sequence() - count.last_sequence - 1;
    ++count.results;
    count.last_sequence = header.input_sequence();
  }

  void convert_pending() {
    for (auto& [topic, pending] : pending_) {
      std::vector<Image> images;
      try {
        images = images_of_result(pending.header, pending.payload.data(), pending.payload.size());
      } catch (const LayoutError& e) {
        reject("unshowable_result", e.what());
        continue;
      }
      serve(images);
    }
    pending_.clear();
  }

  void serve(const std::vector<Image>& images) {
    for (const Image& image : images) {
      const std::string base = device_for(image.key);
      if (options_.float_images) publish(pack_float_image(base, image), image.key + " float32 " + image.unit);
      if (options_.uint8_images) {
        const std::optional<DisplayWindow> fixed = fixed_window(image.key);
        const bool nyquist = !fixed && image.nyquist_velocity_m_per_s > 0;
        const DisplayWindow window =
            nyquist ? nyquist_window(image.nyquist_velocity_m_per_s) : window_for(image.values, fixed);
        publish(pack_uint8_image(device_name(base + kUint8Suffix), image, to_display_uint8(image.values, window)),
                image.key + " uint8 (window " + (fixed ? "fixed" : nyquist ? "+-Nyquist" : "auto") + ")");
      }
      ++report_.images_packed;
    }
  }

  std::string device_for(const std::string& key) const {
    const auto named = options_.names.find(key);
    return device_name(named != options_.names.end() ? named->second : key);
  }

  std::optional<DisplayWindow> fixed_window(const std::string& key) const {
    std::optional<DisplayWindow> found;
    std::size_t longest = 0;
    for (const auto& [prefix, window] : options_.windows)
      if (key.rfind(prefix, 0) == 0 && (!found || prefix.size() > longest)) {
        found = window;
        longest = prefix.size();
      }
    return found;
  }

  // Keeps `message` as the newest of its device (a late client gets it) and offers it to every client.
  // `description` registers a new image device in the device list.
  void publish(const MessagePointer& message, const std::string& description = "") {
    if (!latest_.count(message->device)) {
      latest_order_.push_back(message->device);
      if (!description.empty()) {
        devices_text_ += message->device + " = " + description + "\n";
        latest_[kDevicesDevice] = pack_string(kDevicesDevice, devices_text_);
        if (std::find(latest_order_.begin(), latest_order_.end(), kDevicesDevice) == latest_order_.end())
          latest_order_.insert(latest_order_.begin(), kDevicesDevice);
        for (Client& client : clients_) client.connection->offer(latest_[kDevicesDevice]);
        spdlog::info("sonopipe-igtl: new device {} = {}", message->device, description);
      }
    }
    latest_[message->device] = message;
    for (Client& client : clients_) client.connection->offer(message);
  }

  void add_client(const AcceptedClient& accepted) {
    const int id = ++client_count_;
    CommandHandler on_command;
    if (!options_.control_endpoint.empty())
      on_command = [this, id](const std::string& command) {
        std::string answer = answer_command(context_, options_.control_endpoint, command);
        spdlog::info("sonopipe-igtl: client #{} command '{}': {}", id, log_safe(command, 200), answer);
        return answer;
      };
    Client client{std::make_unique<ClientConnection>(accepted.descriptor, accepted.peer, id, std::move(on_command))};
    for (const std::string& device : latest_order_) client.connection->offer(latest_[device]);
    spdlog::info("sonopipe-igtl: client #{} {} connected ({} devices waiting for it, {} clients)", id, accepted.peer,
                 latest_order_.size(), clients_.size() + 1);
    clients_.push_back(std::move(client));
  }

  void reap_clients() {
    for (auto it = clients_.begin(); it != clients_.end();) {
      if (it->connection->alive()) {
        ++it;
        continue;
      }
      const ClientSummary s = summary_of(*it->connection);
      spdlog::info("sonopipe-igtl: client #{} {} ended ({}): sent {} messages ({:.3f} MB), conflated {}, dropped {} unsent",
                   s.id, s.peer, s.end_reason, s.sent, static_cast<double>(s.bytes_sent) / 1e6, s.conflated, s.dropped);
      ended_.push_back(s);
      it = clients_.erase(it);
    }
  }

  void log_conflation() {
    for (Client& client : clients_) {
      if (tools::seconds_since(client.logged_at) < options_.conflation_log_interval_s) continue;
      const ClientCounters counters = client.connection->counters();
      if (counters.conflated > client.conflated_logged)
        spdlog::info("sonopipe-igtl: client #{} {} reads slower than results arrive: {} messages conflated in the last "
                     "{:.1f} s ({} in all, {} sent)",
                     client.connection->id(), client.connection->peer(), counters.conflated - client.conflated_logged,
                     tools::seconds_since(client.logged_at), counters.conflated, counters.sent);
      client.conflated_logged = counters.conflated;
      client.logged_at = SteadyClock::now();
    }
  }

  std::uint64_t total_results() const {
    std::uint64_t total = 0;
    for (const auto& [name, count] : report_.topics) total += count.results;
    return total;
  }

  // key=value lines (Slicer shows them as a text node; scripts split them).
  std::string status_text(double uptime_s, double rate_hz) const {
    std::uint64_t conflated = 0, rejected = 0, gaps = 0, superseded = 0;
    for (const Client& client : clients_) conflated += client.connection->counters().conflated;
    for (const ClientSummary& s : ended_) conflated += s.conflated;
    for (const auto& [reason, count] : report_.rejected) rejected += count;
    for (const auto& [name, count] : report_.topics) {
      gaps += count.sequence_gaps;
      superseded += count.superseded;
    }
    std::ostringstream out;
    out << std::fixed << std::setprecision(3);
    out << "bridge_uptime_s=" << uptime_s << "\nresult_rate_hz=" << rate_hz << "\nresults_received=" << total_results()
        << "\nresults_missing=" << gaps << "\nresults_superseded=" << superseded << "\nimages_packed=" << report_.images_packed << "\nrejected=" << rejected
        << "\nclients=" << clients_.size() << "\nconflated=" << conflated << "\n";
    if (have_daemon_status_) {
      const v1::Status& s = daemon_status_;
      out << "daemon_backend=" << s.backend() << "\ndaemon_frames_received=" << s.frames_received()
          << "\ndaemon_frames_processed=" << s.frames_processed() << "\ndaemon_results_published=" << s.results_published()
          << "\ndaemon_frames_dropped=" << s.frames_dropped() << "\ndaemon_frames_rejected=" << s.frames_rejected() << "\n";
      for (const v1::PipelineStatus& p : s.pipelines())
        out << "pipeline_" << p.name() << "_latency_ms_p50=" << p.latency_ms_p50() << "\npipeline_" << p.name()
            << "_latency_ms_p99=" << p.latency_ms_p99() << "\n";
    }
    return out.str();
  }

  BridgeOptions options_;
  TcpListener listener_;
  zmq::context_t context_{1};
  zmq::socket_t subscriber_;                 // results and status; with shm_, status only
  std::unique_ptr<shm::Consumer> shm_;       // shm:// results
  std::unique_ptr<tools::PeerWatch> watch_;
  std::map<std::string, MessagePointer> latest_;  // device -> newest message
  std::vector<std::string> latest_order_;         // devices in the order they first appeared
  std::string devices_text_;
  std::map<std::string, PendingResult> pending_;  // topic -> newest result not yet converted
  std::vector<Client> clients_;
  std::vector<ClientSummary> ended_;
  int client_count_ = 0;
  v1::Status daemon_status_;
  bool have_daemon_status_ = false;
  BridgeReport report_;
};

}  // namespace

BridgeReport run_bridge(const BridgeOptions& options) {
  Bridge bridge(options);
  return bridge.run();
}

std::string answer_command(zmq::context_t& context, const std::string& control_endpoint, const std::string& command) {
  std::istringstream words(command);
  std::string verb, name;
  words >> verb >> name;
  std::string value;
  std::getline(words, value);
  value.erase(0, std::min(value.find_first_not_of(" \t"), value.size()));
  while (!value.empty() && (value.back() == ' ' || value.back() == '\n' || value.back() == '\r' || value.back() == '\t'))
    value.pop_back();
  if (!(verb == "set" && !name.empty() && !value.empty()) && !(verb == "get" && !name.empty() && value.empty()) &&
      !(verb == "list" && value.empty()))
    return "error: expected `set <pipeline>.<stage>.<parameter> <value>`, `get <pipeline>.<stage>.<parameter>` "
           "or `list [<prefix>]`";
  v1::ControlRequest request;
  request.set_command(verb);
  request.set_parameter(name);
  request.set_value(value);
  std::optional<v1::ControlReply> reply;
  try {
    reply = tools::control_request(context, control_endpoint, request, std::chrono::milliseconds(2000));
  } catch (const std::exception& e) {
    return std::string("error: ") + e.what();
  }
  if (!reply) return "error: no answer from the daemon at " + control_endpoint;
  if (!reply->ok()) return "error: " + reply->error();
  std::string answer = "ok:";
  for (int i = 0; i < reply->parameters_size(); ++i)
    answer += (i ? "; " : " ") + reply->parameters(i).name() + " = " + reply->parameters(i).value();
  if (verb == "set")
    answer += " (generation " + std::to_string(reply->generation()) + ", from the next frame)";
  return answer;
}

std::string describe(const BridgeReport& report) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(3);
  std::uint64_t rejected = 0;
  for (const auto& [reason, count] : report.rejected) rejected += count;
  out << "sonopipe-igtl: served port " << report.port << " for " << report.duration_s << " s (stopped by "
      << report.stop_reason << "), " << report.images_packed << " images packed, rejected " << rejected << ", "
      << report.clients.size() << " clients";
  for (const auto& [name, count] : report.topics)
    out << "\n  result/" << name << ": " << count.results << " results, " << count.sequence_gaps << " missing, "
        << count.superseded << " superseded by a newer one before conversion";
  for (const auto& [reason, count] : report.rejected) out << "\n  rejected " << reason << ": " << count;
  for (const ClientSummary& c : report.clients)
    out << "\n  client #" << c.id << " " << c.peer << ": offered " << c.offered << ", sent " << c.sent << ", conflated "
        << c.conflated << ", dropped " << c.dropped << ", " << static_cast<double>(c.bytes_sent) / 1e6 << " MB ("
        << c.end_reason << ")";
  if (report.status_messages) out << "\n  daemon status messages: " << report.status_messages;
  return out.str();
}

}  // namespace sonopipe::igtl_bridge
