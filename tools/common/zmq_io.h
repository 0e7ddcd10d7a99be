// Moving sonopipe messages over ZeroMQ (the framing is in proto/): ingest frames
// [FrameHeader][payload], results [topic][ResultHeader][payload], and a watch that tells when a
// peer has really attached to a socket (ZeroMQ's handshake), so tools start their clocks and
// subscriptions at the right moment.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>
#include <zmq.hpp>

namespace sonopipe::tools {

constexpr char kResultTopicPrefix[] = "result/";
constexpr char kStatusTopic[] = "status";

std::string result_topic(const std::string& pipeline, const std::string& output);  // "result/<p>/<o>"

// Binds or connects; a failure names the endpoint (throws std::runtime_error).
void attach(zmq::socket_t& socket, const std::string& endpoint, bool bind);

// CURVE keys of a tool that connects to a daemon with security.curve (docs/operations.md, "Security"):
// --curve-server-key (the daemon's public key, 40 characters or its .key file) and
// --curve-client-key-file (the tool's .key_secret from sonopipe-keygen). Both or neither.
struct CurveClient {
  std::string server_key;       // Z85 text or a key file path
  std::string client_key_file;  // .key_secret
  bool enabled() const { return !server_key.empty() || !client_key_file.empty(); }
};
// Sets the CURVE client options on a socket before its connect; nothing when !curve.enabled().
// Throws std::runtime_error naming the flag and file when a key is missing or not a key.
void apply_curve_client(zmq::socket_t& socket, const CurveClient& curve);

// Watches a socket for completed ZMTP handshakes and lost connections. Create it before bind/connect.
class PeerWatch {
 public:
  PeerWatch(zmq::context_t& context, zmq::socket_t& socket);
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;
  // True once at least one peer completed its handshake (immediately if one already has).
  bool wait(std::chrono::milliseconds timeout) { return wait_for(1, timeout); }
  // True once `peers` handshakes completed (a socket connected to several endpoints).
  bool wait_for(std::size_t peers, std::chrono::milliseconds timeout);
  // Collects the events that have arrived, without waiting.
  void update();
  std::size_t handshakes() const { return handshakes_; }  // completed so far (reconnections count)
  bool connected() const { return handshakes_ > disconnections_; }  // a peer is attached now
  std::size_t disconnections() const { return disconnections_; }

 private:
  zmq::socket_t& socket_;
  bool read_event();  // one event if one is ready
  zmq::socket_t monitor_;
  std::size_t handshakes_ = 0, disconnections_ = 0;
};

enum class SendResult { sent, would_block, interrupted };

// [header][payload] as one multipart message. With dont_wait a full queue gives would_block
// (nothing sent); a signal during a blocking send gives interrupted (nothing sent).
SendResult send_frame(zmq::socket_t& socket, const std::string& header_bytes, zmq::message_t payload,
                      bool dont_wait);

// Receives every part of one message into `parts` (cleared first). False when nothing arrived:
// dont_wait and no message, the socket's receive timeout expired, or a signal interrupted.
bool receive_message(zmq::socket_t& socket, std::vector<zmq::message_t>& parts, bool dont_wait = false);

}  // namespace sonopipe::tools
