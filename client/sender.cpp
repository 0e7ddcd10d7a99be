// sp_sender_* and sp_send: frames out to sonopiped's ingest socket as [FrameHeader][payload].
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "client/handles.h"
#include "client/status.h"
#include "wire/wire.h"

using sonopipe::client::ClientError;
using sonopipe::client::guarded;
using sonopipe::client::require;

namespace {

std::int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

// The header of `frame` as it goes out: numbered, stamped, vector units added.
sonopipe::v1::FrameHeader outgoing_header(const sp_sender& sender, const sp_frame& frame) {
  sonopipe::v1::FrameHeader header = sonopipe::wire::frame_header_from_meta(frame.meta);
  if (!frame.sequence_fixed) {
    auto next = sender.next_sequence.find(frame.meta.stream_id);
    header.set_sequence(next == sender.next_sequence.end() ? 0 : next->second);
  }
  if (frame.meta.acquisition_time_ns == 0) header.set_acquisition_time_ns(wall_clock_ns());
  for (sonopipe::v1::Vector& vector : *header.mutable_vectors())
    if (auto unit = frame.vector_units.find(vector.name()); unit != frame.vector_units.end())
      vector.set_unit(unit->second);
  return header;
}

std::unique_ptr<sp_sender> new_sender(bool lossless) {
  auto sender = std::make_unique<sp_sender>();
  sender->lossless = lossless;
  sender->socket = zmq::socket_t(sender->context, lossless ? zmq::socket_type::push : zmq::socket_type::pub);
  sender->socket.set(zmq::sockopt::sndhwm, SP_SEND_HIGH_WATER_MARK);
  sender->socket.set(zmq::sockopt::linger, SP_DEFAULT_CLOSE_LINGER_MS);
  if (lossless) {
    // Without a connected daemon PUSH would queue frames for a peer that may never come; with
    // IMMEDIATE, sp_send waits for the daemon (up to the send timeout) and says so.
    sender->socket.set(zmq::sockopt::immediate, 1);
    sender->socket.set(zmq::sockopt::sndtimeo, SP_DEFAULT_SEND_TIMEOUT_MS);
  }
  return sender;
}

void connect(sp_sender& sender, const char* endpoint) {
  if (sender.connected) throw ClientError(SP_ERROR_STATE, "the sender is already connected");
  if (sender.curve) sonopipe::client::apply_curve(sender.socket, *sender.curve);
  try {
    sender.socket.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw ClientError(SP_ERROR_SOCKET, "cannot connect to '" + std::string(endpoint) + "': " + e.what());
  }
  sender.connected = true;
}

}  // namespace

extern "C" {

int sp_sender_create(int lossless, sp_sender** sender) {
  return guarded(__func__, [&] {
    require(sender, "sender");
    *sender = nullptr;
    *sender = new_sender(lossless != 0).release();
  });
}

int sp_sender_set_curve(sp_sender* sender, const char* server_public_key, const char* client_public_key,
                        const char* client_secret_key) {
  return guarded(__func__, [&] {
    require(sender, "sender");
    auto keys = sonopipe::client::curve_keys(server_public_key, client_public_key, client_secret_key);
    std::lock_guard lock(sender->mutex);
    if (sender->connected)
      throw ClientError(SP_ERROR_STATE, "CURVE keys must be set before sp_sender_connect");
    sender->curve = std::move(keys);
  });
}

int sp_sender_set_send_timeout(sp_sender* sender, int timeout_ms) {
  return guarded(__func__, [&] {
    require(sender, "sender");
    if (timeout_ms < -1) throw ClientError(SP_ERROR_ARGUMENT, "timeout_ms " + std::to_string(timeout_ms) + " < -1");
    std::lock_guard lock(sender->mutex);
    sender->socket.set(zmq::sockopt::sndtimeo, timeout_ms);
  });
}

int sp_sender_connect(sp_sender* sender, const char* endpoint) {
  return guarded(__func__, [&] {
    require(sender, "sender");
    require(endpoint, "endpoint");
    std::lock_guard lock(sender->mutex);
    connect(*sender, endpoint);
  });
}

int sp_sender_open(const char* endpoint, int lossless, sp_sender** sender) {
  return guarded(__func__, [&] {
    require(endpoint, "endpoint");
    require(sender, "sender");
    *sender = nullptr;
    auto created = new_sender(lossless != 0);
    connect(*created, endpoint);
    *sender = created.release();
  });
}

int sp_sender_next_sequence(const sp_sender* sender, uint32_t stream_id, uint64_t* sequence) {
  return guarded(__func__, [&] {
    require(sender, "sender");
    require(sequence, "sequence");
    std::lock_guard lock(sender->mutex);
    auto next = sender->next_sequence.find(stream_id);
    *sequence = next == sender->next_sequence.end() ? 0 : next->second;
  });
}

uint64_t sp_sender_frames_sent(const sp_sender* sender) {
  if (sender == nullptr) return 0;
  std::lock_guard lock(sender->mutex);
  return sender->frames_sent;
}

int sp_sender_close(sp_sender* sender) {
  return guarded(__func__, [&] {
    // The socket's linger (SP_DEFAULT_CLOSE_LINGER_MS) bounds how long queued frames are delivered.
    delete sender;
  });
}

int sp_send(sp_sender* sender, const sp_frame* frame, const void* data, size_t bytes) {
  return guarded(__func__, [&] {
    require(sender, "sender");
    require(frame, "frame");
    if (bytes > 0) require(data, "data");
    std::lock_guard lock(sender->mutex);
    if (!sender->connected) throw ClientError(SP_ERROR_STATE, "the sender is not connected (sp_sender_connect)");
    const sonopipe::v1::FrameHeader header = outgoing_header(*sender, *frame);
    const std::string header_bytes = header.SerializeAsString();
    // The daemon's own ingest check (daemon/ingest.cpp): header rules and limits, then shape x element
    // size against the payload. The sender does not know the daemon's max_frame_bytes.
    sonopipe::wire::decode_frame(header_bytes.data(), header_bytes.size(), bytes,
                                 std::numeric_limits<std::size_t>::max());
    if (!sender->socket.send(zmq::buffer(header_bytes), zmq::send_flags::sndmore))
      throw ClientError(SP_ERROR_TIMEOUT, "no daemon took the frame within the send timeout (" +
                                              std::to_string(sender->socket.get(zmq::sockopt::sndtimeo)) +
                                              " ms): none is connected, or its queue is full; nothing was sent");
    // ZeroMQ checks the queue at a message's first part only: the payload part cannot time out.
    if (!sender->socket.send(zmq::const_buffer(data, bytes), zmq::send_flags::none))
      throw ClientError(SP_ERROR_INTERNAL, "the payload part was refused after the header part");
    sender->next_sequence[header.stream_id()] = header.sequence() + 1;
    ++sender->frames_sent;
  });
}

}  // extern "C"
