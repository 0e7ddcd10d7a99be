#include "tools/common/zmq_io.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <zmq_addon.hpp>

#include "curve/curve_keys.h"

namespace sonopipe::tools {

std::string result_topic(const std::string& pipeline, const std::string& output) {
  return std::string(kResultTopicPrefix) + pipeline + "/" + output;
}

void attach(zmq::socket_t& socket, const std::string& endpoint, bool bind) {
  try {
    if (bind)
      socket.bind(endpoint);
    else
      socket.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error(std::string(bind ? "cannot bind " : "cannot connect to ") + endpoint + ": " + e.what());
  }
}

void apply_curve_client(zmq::socket_t& socket, const CurveClient& curve) {
  if (!curve.enabled()) return;
  if (curve.server_key.empty() || curve.client_key_file.empty())
    throw std::runtime_error("CURVE needs both --curve-server-key and --curve-client-key-file");
  try {
    const std::string server = curve::read_public_key(curve.server_key);
    const curve::KeyPair client = curve::read_key_file(curve.client_key_file);
    if (client.secret_key.empty())
      throw curve::KeyError(curve.client_key_file + ": no secret-key (pass the .key_secret file, not the .key)");
    curve::make_client(socket, server, client);
  } catch (const curve::KeyError& e) {
    throw std::runtime_error(std::string("CURVE keys: ") + e.what());
  }
}

PeerWatch::PeerWatch(zmq::context_t& context, zmq::socket_t& socket)
    : socket_(socket), monitor_(context, zmq::socket_type::pair) {
  static std::atomic<unsigned> counter{0};
  const std::string address = "inproc://sonopipe-peer-watch-" + std::to_string(counter++);
  if (zmq_socket_monitor(socket_.handle(), address.c_str(), ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED) != 0)
    throw std::runtime_error(std::string("zmq_socket_monitor: ") + zmq_strerror(zmq_errno()));
  monitor_.connect(address);
}

PeerWatch::~PeerWatch() {
  zmq_socket_monitor(socket_.handle(), nullptr, 0);  // stop monitoring
}

bool PeerWatch::wait_for(std::size_t peers, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (handshakes_ < peers) {
    // Poll at least once, so a zero timeout still collects events already queued.
    const auto left = std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                   deadline - std::chrono::steady_clock::now()));
    zmq::pollitem_t item{monitor_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      if (zmq::poll(&item, 1, left) == 0) {
        if (left.count() == 0) return false;
        continue;
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) return false;
      throw;
    }
    read_event();
  }
  return true;
}

bool PeerWatch::read_event() {
  std::vector<zmq::message_t> event;
  if (!receive_message(monitor_, event, true)) return false;
  if (event.empty() || event[0].size() < 2) return true;
  std::uint16_t id = 0;
  std::memcpy(&id, event[0].data(), sizeof id);  // event frame: uint16 id, uint32 value
  if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) ++handshakes_;
  if (id == ZMQ_EVENT_DISCONNECTED) ++disconnections_;
  return true;
}

void PeerWatch::update() {
  while (read_event()) {
  }
}

SendResult send_frame(zmq::socket_t& socket, const std::string& header_bytes, zmq::message_t payload,
                      bool dont_wait) {
  const zmq::send_flags wait = dont_wait ? zmq::send_flags::dontwait : zmq::send_flags::none;
  try {
    // ZeroMQ delivers multipart messages atomically: once the first part is queued, the second is.
    if (!socket.send(zmq::buffer(header_bytes), wait | zmq::send_flags::sndmore)) return SendResult::would_block;
    socket.send(std::move(payload), zmq::send_flags::none);
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return SendResult::interrupted;
    throw;
  }
  return SendResult::sent;
}

bool receive_message(zmq::socket_t& socket, std::vector<zmq::message_t>& parts, bool dont_wait) {
  parts.clear();
  try {
    const auto received = zmq::recv_multipart(socket, std::back_inserter(parts),
                                              dont_wait ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
    return received.has_value() && *received > 0;
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return false;
    throw;
  }
}

}  // namespace sonopipe::tools
