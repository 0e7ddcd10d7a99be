// What the opaque handles of sonopipe_client.h hold. C callers see only the names.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "sdk/frame.h"
#include "client/curve.h"
#include "client/sonopipe_client.h"
#include "shm/consumer.h"
#include "shm/producer.h"
#include "wire/delivery.h"
#include "sonopipe/v1/result.pb.h"

struct sp_frame {
  sonopipe::FrameMeta meta;                        // acquisition_time_ns 0 = stamp at send
  std::map<std::string, std::string> vector_units;  // FrameMeta keeps values only; the wire has units
  bool sequence_fixed = false;                     // else the sender numbers the frame
};

struct sp_sender {
  mutable std::mutex mutex;  // one sp_send at a time: a ZeroMQ socket is not thread-safe
  zmq::context_t context{1};
  zmq::socket_t socket;
  bool lossless = true;
  bool connected = false;
  int send_timeout_ms = SP_DEFAULT_SEND_TIMEOUT_MS;
  // shm:// endpoints: the producer of the daemon's pool instead of the socket.
  std::unique_ptr<sonopipe::shm::Producer> shm;
  // sp_frame_buffer: the slot being filled (shm) or a private buffer (ZeroMQ), until sp_send_buffer.
  std::optional<sonopipe::shm::Producer::Claim> claim;
  std::vector<std::byte> buffer;
  bool buffer_open = false;
  std::size_t buffer_bytes = 0;
  std::optional<sonopipe::client::CurveKeys> curve;
  std::map<std::uint32_t, std::uint64_t> next_sequence;  // per stream id
  std::uint64_t frames_sent = 0;
  // sp_sender_set_ack_endpoint: the daemon's acknowledgements (ZeroMQ; wire/delivery.h), read
  // whenever the sender is used; the ledger of what is not acknowledged yet.
  std::string ack_endpoint;
  mutable zmq::socket_t acks;
  mutable std::optional<sonopipe::wire::DeliveryLedger> ledger;
};

struct sp_subscriber {
  mutable std::mutex mutex;
  zmq::context_t context{1};
  zmq::socket_t socket;
  bool connected = false;
  std::shared_ptr<sonopipe::shm::Consumer> shm;  // shm:// endpoints; results hold it too
  std::string topic_prefix;                      // shm: filtered here
  std::optional<sonopipe::client::CurveKeys> curve;
  std::uint64_t skipped = 0;
};

struct sp_result {
  std::string topic;
  sonopipe::v1::ResultHeader header;
  zmq::message_t payload;  // the received bytes, not copied
  // shm: the payload read in place in the pool's slot, given back at sp_result_release.
  const void* data = nullptr;
  std::size_t bytes = 0;
  std::shared_ptr<sonopipe::shm::Consumer> shm;
  std::uint32_t slot = 0;
  ~sp_result() {
    if (shm) shm->release(slot);
  }
};
