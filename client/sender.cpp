// sp_sender_* and sp_send: frames out to sonopiped's ingest socket as [FrameHeader][payload].
#include <chrono>
#include <cstdint>
#include <cstring>
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
  if (sonopipe::shm::is_shm_endpoint(endpoint)) {
    if (!sender.ack_endpoint.empty())
      throw ClientError(SP_ERROR_STATE, "shm:// acknowledges through the pool; no ack endpoint");
    if (sender.curve)
      throw ClientError(SP_ERROR_STATE, "CURVE does not apply to shm:// (same host; the pool's permissions protect it)");
    try {
      sender.shm = std::make_unique<sonopipe::shm::Producer>(endpoint);
    } catch (const std::exception& e) {  // ShmError, or a bad name
      throw ClientError(SP_ERROR_SOCKET, e.what());
    }
    sender.connected = true;
    return;
  }
  if (sender.curve) sonopipe::client::apply_curve(sender.socket, *sender.curve);
  try {
    if (!sender.ack_endpoint.empty()) {
      sender.ledger.emplace();
      sender.acks = zmq::socket_t(sender.context, zmq::socket_type::sub);
      sender.acks.set(zmq::sockopt::rcvhwm, 0);  // acknowledgements are small; never drop one here
      sender.acks.set(zmq::sockopt::linger, 0);
      sender.acks.set(zmq::sockopt::subscribe, sonopipe::wire::ack_topic(sender.ledger->sender_id()));
      if (sender.curve) sonopipe::client::apply_curve(sender.acks, *sender.curve);
      sender.acks.connect(sender.ack_endpoint);
    }
    sender.socket.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw ClientError(SP_ERROR_SOCKET, "cannot connect to '" + std::string(endpoint) + "' (ack endpoint '" +
                                           sender.ack_endpoint + "'): " + e.what());
  }
  sender.connected = true;
}

// Applies the acknowledgements that have arrived, waiting up to `wait_ms` for the first.
void read_acknowledgements(const sp_sender& sender, int wait_ms) {
  if (!sender.ledger) return;
  zmq::pollitem_t item{sender.acks.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(wait_ms)) == 0) return;
  sonopipe::wire::Acknowledgement ack;
  while (true) {
    zmq::message_t topic, body;
    if (!sender.acks.recv(topic, zmq::recv_flags::dontwait)) return;
    if (!topic.more()) continue;
    if (!sender.acks.recv(body, zmq::recv_flags::none)) return;
    while (body.more()) sender.acks.recv(body, zmq::recv_flags::none);  // not ours: drain
    if (sonopipe::wire::decode_ack(body.data(), body.size(), ack)) sender.ledger->apply(ack);
  }
}

// Waits until every frame sent is acknowledged or the deadline passes.
void wait_acknowledged(const sp_sender& sender, std::chrono::steady_clock::time_point deadline) {
  while (sender.ledger && sender.ledger->outstanding() > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    read_acknowledgements(sender, static_cast<int>(std::min<long>(left.count(), 50)));
  }
}

std::chrono::steady_clock::time_point deadline_after(int timeout_ms) {
  if (timeout_ms < 0) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
}

// The header bytes of `frame` for a payload of `bytes`, checked as the daemon's ingest checks them.
std::string checked_header(const sp_sender& sender, const sp_frame& frame, std::size_t bytes,
                           sonopipe::v1::FrameHeader& header) {
  header = outgoing_header(sender, frame);
  if (sender.ledger) {  // the number this message will carry (count_sent records it once it is out)
    header.set_sender_id(sender.ledger->sender_id());
    header.set_send_index(sender.ledger->next_index());
  }
  std::string header_bytes = header.SerializeAsString();
  // The daemon's own ingest check (daemon/frame_admission.cpp): header rules and limits, then shape x
  // element size against the payload. The sender does not know the daemon's max_frame_bytes.
  sonopipe::wire::decode_frame(header_bytes.data(), header_bytes.size(), bytes, std::numeric_limits<std::size_t>::max());
  return header_bytes;
}

// A slot of the daemon's pool, or SP_ERROR_TIMEOUT.
sonopipe::shm::Producer::Claim claim_slot(sp_sender& sender) {
  std::optional<sonopipe::shm::Producer::Claim> claim;
  try {
    claim = sender.shm->claim(deadline_after(sender.send_timeout_ms));
  } catch (const sonopipe::shm::ShmError& e) {
    throw ClientError(SP_ERROR_SOCKET, e.what());
  }
  if (!claim)
    throw ClientError(SP_ERROR_TIMEOUT, "no slot of " + sender.shm->pool().endpoint() + " came free within " +
                                            std::to_string(sender.send_timeout_ms) +
                                            " ms (the daemon does not keep up, or is gone); nothing was sent");
  return *claim;
}

// Writes the header into a claimed slot and commits it.
void commit_slot(sp_sender& sender, const sonopipe::shm::Producer::Claim& claim, const std::string& header_bytes,
                 std::size_t payload_bytes) {
  if (header_bytes.size() > claim.header.size() || payload_bytes > claim.payload.size()) {
    sender.shm->abandon(claim);
    throw ClientError(SP_ERROR_SIZE_MISMATCH, "the frame (" + std::to_string(payload_bytes) +
                                                  " payload bytes) does not fit a slot of " +
                                                  sender.shm->pool().endpoint() + " (" +
                                                  std::to_string(claim.payload.size()) + ")");
  }
  std::memcpy(claim.header.data(), header_bytes.data(), header_bytes.size());
  sender.shm->commit(claim, header_bytes.size(), payload_bytes);
}

void count_sent(sp_sender& sender, const sonopipe::v1::FrameHeader& header) {
  sender.next_sequence[header.stream_id()] = header.sequence() + 1;
  ++sender.frames_sent;
  if (sender.ledger) {
    sender.ledger->send(header.stream_id(), header.sequence(), 0);
    read_acknowledgements(sender, 0);
  }
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
    sender->send_timeout_ms = timeout_ms;
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
    std::unique_ptr<sp_sender> closing(sender);
    if (closing && closing->ledger) {
      // ZeroMQ with acknowledgement: the same bound for the daemon to acknowledge what was sent.
      wait_acknowledged(*closing, deadline_after(SP_DEFAULT_CLOSE_LINGER_MS));
      const std::size_t undelivered = closing->ledger->outstanding();
      closing->socket.set(zmq::sockopt::linger, 0);  // what is not acknowledged is reported, not pushed on
      if (undelivered > 0)
        throw ClientError(SP_ERROR_TIMEOUT, std::to_string(undelivered) + " frame(s) not delivered: the daemon did not "
                                            "acknowledge them within " + std::to_string(SP_DEFAULT_CLOSE_LINGER_MS) +
                                            " ms");
      return;
    }
    if (!closing || !closing->shm || closing->shm->mode() != sonopipe::shm::Mode::lossless) return;
    // shm: the same bound for the daemon to take what is in the pool; what it did not is reported.
    closing->shm->wait_delivered(deadline_after(SP_DEFAULT_CLOSE_LINGER_MS));
    const std::uint64_t undelivered = closing->shm->counters().undelivered();
    if (undelivered > 0)
      throw ClientError(SP_ERROR_TIMEOUT, std::to_string(undelivered) + " frame(s) not delivered: the daemon did not "
                                          "take them (they stay in the pool for the next daemon on this name)");
  });
}

int sp_sender_set_ack_endpoint(sp_sender* sender, const char* ack_endpoint) {
  return guarded(__func__, [&] {
    require(sender, "sender");
    require(ack_endpoint, "ack_endpoint");
    std::lock_guard lock(sender->mutex);
    if (sender->connected) throw ClientError(SP_ERROR_STATE, "the ack endpoint must be set before sp_sender_connect");
    if (!sender->lossless)
      throw ClientError(SP_ERROR_STATE, "acknowledgement is for lossless senders (a live sender drops by design)");
    sender->ack_endpoint = ack_endpoint;
  });
}

int sp_sender_wait_delivered(sp_sender* sender, int timeout_ms, uint64_t* delivered, uint64_t* undelivered) {
  return guarded(__func__, [&] {
    require(sender, "sender");
    require(delivered, "delivered");
    require(undelivered, "undelivered");
    std::lock_guard lock(sender->mutex);
    if (sender->shm) {
      sender->shm->wait_delivered(deadline_after(timeout_ms));
      const sonopipe::shm::ProducerCounters counters = sender->shm->counters();
      *delivered = counters.delivered;
      *undelivered = counters.undelivered();
      return;
    }
    if (!sender->ledger)
      throw ClientError(SP_ERROR_STATE, "delivery is acknowledged on shm:// or with sp_sender_set_ack_endpoint only");
    wait_acknowledged(*sender, deadline_after(timeout_ms));
    *delivered = sender->ledger->delivered();
    *undelivered = sender->ledger->outstanding();
  });
}

int sp_sender_undelivered(const sp_sender* sender, uint32_t* stream_ids, uint64_t* sequences, size_t capacity,
                          size_t* count) {
  return guarded(__func__, [&] {
    require(sender, "sender");
    require(count, "count");
    if (capacity > 0) {
      require(stream_ids, "stream_ids");
      require(sequences, "sequences");
    }
    std::lock_guard lock(sender->mutex);
    if (!sender->ledger) throw ClientError(SP_ERROR_STATE, "sp_sender_undelivered needs sp_sender_set_ack_endpoint");
    read_acknowledgements(*sender, 0);
    const auto frames = sender->ledger->undelivered();
    *count = frames.size();
    for (std::size_t i = 0; i < frames.size() && i < capacity; ++i) {
      stream_ids[i] = frames[i].stream_id;
      sequences[i] = frames[i].sequence;
    }
  });
}

int sp_sender_delivery(const sp_sender* sender, uint64_t* delivered, uint64_t* undelivered) {
  return guarded(__func__, [&] {
    require(sender, "sender");
    require(delivered, "delivered");
    require(undelivered, "undelivered");
    std::lock_guard lock(sender->mutex);
    if (sender->ledger) {
      read_acknowledgements(*sender, 0);
      *delivered = sender->ledger->delivered();
      *undelivered = sender->ledger->outstanding();
      return;
    }
    if (!sender->shm)
      throw ClientError(SP_ERROR_STATE, "delivery is acknowledged on shm:// or with sp_sender_set_ack_endpoint only");
    const sonopipe::shm::ProducerCounters counters = sender->shm->counters();
    *delivered = counters.delivered;
    *undelivered = counters.undelivered();
  });
}

int sp_frame_buffer(sp_sender* sender, const sp_frame* frame, void** data) {
  return guarded(__func__, [&] {
    require(sender, "sender");
    require(frame, "frame");
    require(data, "data");
    *data = nullptr;
    std::lock_guard lock(sender->mutex);
    if (!sender->connected) throw ClientError(SP_ERROR_STATE, "the sender is not connected (sp_sender_connect)");
    if (sender->buffer_open) throw ClientError(SP_ERROR_STATE, "a buffer is open already (sp_send_buffer it first)");
    const std::size_t bytes = frame->meta.payload.byte_size();
    if (sender->shm) {
      const auto claim = claim_slot(*sender);
      if (bytes > claim.payload.size()) {
        sender->shm->abandon(claim);
        throw ClientError(SP_ERROR_SIZE_MISMATCH, "the frame (" + std::to_string(bytes) +
                                                      " payload bytes) does not fit a slot of " +
                                                      sender->shm->pool().endpoint() + " (" +
                                                      std::to_string(claim.payload.size()) + ")");
      }
      sender->claim = claim;
      *data = claim.payload.data();
    } else {
      sender->buffer.resize(bytes);
      *data = sender->buffer.data();
    }
    sender->buffer_open = true;
    sender->buffer_bytes = bytes;
  });
}

int sp_send_buffer(sp_sender* sender, const sp_frame* frame) {
  return guarded(__func__, [&] {
    require(sender, "sender");
    require(frame, "frame");
    std::lock_guard lock(sender->mutex);
    if (!sender->buffer_open) throw ClientError(SP_ERROR_STATE, "no buffer is open (sp_frame_buffer)");
    sonopipe::v1::FrameHeader header;
    std::string header_bytes;
    try {
      header_bytes = checked_header(*sender, *frame, sender->buffer_bytes, header);
    } catch (...) {
      if (sender->shm && sender->claim) sender->shm->abandon(*sender->claim);
      sender->claim.reset();
      sender->buffer_open = false;
      throw;
    }
    sender->buffer_open = false;
    if (sender->shm) {
      const auto claim = *sender->claim;
      sender->claim.reset();
      commit_slot(*sender, claim, header_bytes, sender->buffer_bytes);
    } else {
      if (!sender->socket.send(zmq::buffer(header_bytes), zmq::send_flags::sndmore))
        throw ClientError(SP_ERROR_TIMEOUT, "no daemon took the frame within the send timeout; nothing was sent");
      sender->socket.send(zmq::const_buffer(sender->buffer.data(), sender->buffer_bytes), zmq::send_flags::none);
    }
    count_sent(*sender, header);
  });
}

int sp_send(sp_sender* sender, const sp_frame* frame, const void* data, size_t bytes) {
  return guarded(__func__, [&] {
    require(sender, "sender");
    require(frame, "frame");
    if (bytes > 0) require(data, "data");
    std::lock_guard lock(sender->mutex);
    if (!sender->connected) throw ClientError(SP_ERROR_STATE, "the sender is not connected (sp_sender_connect)");
    if (sender->buffer_open) throw ClientError(SP_ERROR_STATE, "a buffer is open (sp_send_buffer it first)");
    sonopipe::v1::FrameHeader header;
    const std::string header_bytes = checked_header(*sender, *frame, bytes, header);
    if (sender->shm) {
      const auto claim = claim_slot(*sender);
      if (bytes <= claim.payload.size() && bytes > 0) std::memcpy(claim.payload.data(), data, bytes);
      commit_slot(*sender, claim, header_bytes, bytes);
      count_sent(*sender, header);
      return;
    }
    if (!sender->socket.send(zmq::buffer(header_bytes), zmq::send_flags::sndmore))
      throw ClientError(SP_ERROR_TIMEOUT, "no daemon took the frame within the send timeout (" +
                                              std::to_string(sender->socket.get(zmq::sockopt::sndtimeo)) +
                                              " ms): none is connected, or its queue is full; nothing was sent");
    // ZeroMQ checks the queue at a message's first part only: the payload part cannot time out.
    if (!sender->socket.send(zmq::const_buffer(data, bytes), zmq::send_flags::none))
      throw ClientError(SP_ERROR_INTERNAL, "the payload part was refused after the header part");
    count_sent(*sender, header);
  });
}

}  // extern "C"
