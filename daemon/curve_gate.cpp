#include "daemon/curve_gate.h"

#include <spdlog/spdlog.h>

#include <array>
#include <chrono>
#include <cstring>

#include "wire/log_text.h"

namespace sonopipe {
namespace {

// Refused handshakes as a server's monitor reports them (libzmq >= 4.3).
constexpr int kRefusedEvents =
    ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;

std::string text_of(const zmq::message_t& part) { return std::string(part.data<char>(), part.size()); }

std::string z85_of(const zmq::message_t& part) {
  if (part.size() != 32) return "(not a 32-byte key)";
  std::array<char, curve::kKeyTextLength + 1> text{};
  zmq_z85_encode(text.data(), part.data<std::uint8_t>(), 32);
  return text.data();
}

}  // namespace

CurveGate::CurveGate(zmq::context_t& context, curve::KeyPair server, const std::vector<std::string>& authorized_keys)
    : context_(context), server_(std::move(server)), authorized_(authorized_keys.begin(), authorized_keys.end()),
      zap_(context, zmq::socket_type::rep) {
  zap_.set(zmq::sockopt::linger, 0);
  zap_.bind(kZapEndpoint);
  spdlog::info("security: CURVE on, {} authorized client key(s); server public key {}", authorized_.size(),
               server_.public_key);
}

CurveGate::~CurveGate() {
  quit_.store(true);
  if (thread_.joinable()) thread_.join();
}

void CurveGate::secure(zmq::socket_t& socket, const std::string& name) {
  curve::make_server(socket, server_, name);
  auto watched = std::make_unique<Watched>();
  watched->name = name;
  const std::string address = "inproc://sonopipe-curve-gate-" + name;
  if (zmq_socket_monitor(socket.handle(), address.c_str(), kRefusedEvents) != 0)
    throw std::runtime_error("security: cannot monitor the " + name + " socket: " + zmq_strerror(zmq_errno()));
  watched->monitor = zmq::socket_t(context_, zmq::socket_type::pair);
  watched->monitor.set(zmq::sockopt::linger, 0);
  watched->monitor.connect(address);
  watched_.push_back(std::move(watched));
}

void CurveGate::start() { thread_ = std::thread([this] { run(); }); }

void CurveGate::run() {
  std::vector<zmq::pollitem_t> items{{zap_.handle(), 0, ZMQ_POLLIN, 0}};
  for (const auto& watched : watched_) items.push_back({watched->monitor.handle(), 0, ZMQ_POLLIN, 0});
  while (!quit_.load()) {
    try {
      if (zmq::poll(items, std::chrono::milliseconds(100)) == 0) continue;
      if (items[0].revents & ZMQ_POLLIN) answer_zap();
      for (std::size_t i = 0; i < watched_.size(); ++i)
        if (items[i + 1].revents & ZMQ_POLLIN) read_monitor(*watched_[i]);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;  // the context is closing
      spdlog::error("security: {}", e.what());
    }
  }
}

void CurveGate::answer_zap() {
  // Request: version, request id, domain, address, routing id, mechanism, credentials...
  std::vector<zmq::message_t> request;
  do {
    zmq::message_t part;
    if (!zap_.recv(part, zmq::recv_flags::dontwait)) break;
    request.push_back(std::move(part));
  } while (request.back().more());
  if (request.empty()) return;
  const std::string version = text_of(request[0]);
  const std::string request_id = request.size() > 1 ? text_of(request[1]) : std::string();
  bool accepted = false;
  std::string key;
  if (request.size() >= 7 && version == "1.0" && text_of(request[5]) == "CURVE") {
    key = z85_of(request[6]);
    accepted = authorized_.count(key) > 0;
  }
  // The socket's monitor counts the refusal (HANDSHAKE_FAILED_AUTH); the key is only known here.
  const std::string domain = request.size() > 2 ? log_safe(text_of(request[2]), 32) : "?";
  if (!accepted && key_lines_[domain].allow(LineLimiter::Clock::now())) {
    const std::uint64_t held_back = key_lines_[domain].take_held_back();
    spdlog::warn("security: {} refused client key {} from {} (not in authorized_client_keys){}",
                 domain, key.empty() ? "(none)" : key,
                 request.size() > 3 ? log_safe(text_of(request[3]), 64) : "?",
                 held_back > 0 ? " (and " + std::to_string(held_back) + " more since the last line)" : "");
  }
  // Reply: version, request id, status code, status text, user id (the key: ControlServer reads it
  // as the message property User-Id), metadata.
  const std::string status = accepted ? "200" : "400";
  zap_.send(zmq::buffer(std::string_view("1.0")), zmq::send_flags::sndmore);
  zap_.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
  zap_.send(zmq::buffer(status), zmq::send_flags::sndmore);
  zap_.send(zmq::buffer(std::string_view(accepted ? "OK" : "unknown client key")), zmq::send_flags::sndmore);
  zap_.send(zmq::buffer(accepted ? key : std::string()), zmq::send_flags::sndmore);
  zap_.send(zmq::message_t(), zmq::send_flags::none);
}

void CurveGate::read_monitor(Watched& watched) {
  // Event: [uint16 id, uint32 value][endpoint]
  std::vector<zmq::message_t> event;
  do {
    zmq::message_t part;
    if (!watched.monitor.recv(part, zmq::recv_flags::dontwait)) break;
    event.push_back(std::move(part));
  } while (event.back().more());
  if (event.empty() || event[0].size() < 6) return;
  std::uint16_t id = 0;
  std::uint32_t value = 0;
  std::memcpy(&id, event[0].data(), sizeof id);
  std::memcpy(&value, event[0].data<char>() + 2, sizeof value);
  if (!(id & kRefusedEvents)) return;
  watched.refused.fetch_add(1, std::memory_order_relaxed);
  if (id != ZMQ_EVENT_HANDSHAKE_FAILED_AUTH && handshake_lines_.allow(LineLimiter::Clock::now())) {
    const std::uint64_t held_back = handshake_lines_.take_held_back();
    spdlog::warn("security: {} refused a handshake (error {:#x}: no CURVE keys, the wrong server key, or not "
                 "ZeroMQ){}",
                 watched.name, value,
                 held_back > 0 ? " (and " + std::to_string(held_back) + " more since the last line)" : "");
  }
}

std::map<std::string, std::uint64_t> CurveGate::refused_by_socket() const {
  std::map<std::string, std::uint64_t> counts;
  for (const auto& watched : watched_) counts[watched->name] = watched->refused.load(std::memory_order_relaxed);
  return counts;
}

std::uint64_t CurveGate::refused() const {
  std::uint64_t total = 0;
  for (const auto& watched : watched_) total += watched->refused.load(std::memory_order_relaxed);
  return total;
}

}  // namespace sonopipe
