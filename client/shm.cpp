// sp_shm_*: the shared-memory pool at the message level, for bindings that build their own headers
// (Python's sonopipe package): claim a slot, write [header][payload] in place, commit; take a
// message, read it in place, release it. sp_sender/sp_subscriber on shm:// use the same pool.
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

#include "shm/consumer.h"
#include "shm/producer.h"
#include "client/deadline.h"
#include "client/handles.h"
#include "client/status.h"

using sonopipe::client::ClientError;
using sonopipe::client::guarded;
using sonopipe::client::deadline_after;
using sonopipe::client::require;

struct sp_shm_producer {
  std::mutex mutex;
  std::unique_ptr<sonopipe::shm::Producer> producer;
  std::optional<sonopipe::shm::Producer::Claim> claim;
};

struct sp_shm_consumer {
  std::mutex mutex;
  std::unique_ptr<sonopipe::shm::Consumer> consumer;
};

namespace {

template <typename Body>
void as_socket_error(Body body) {
  try {
    body();
  } catch (const sonopipe::shm::ShmError& e) {
    throw ClientError(SP_ERROR_SOCKET, e.what());
  } catch (const std::invalid_argument& e) {
    throw ClientError(SP_ERROR_ARGUMENT, e.what());
  }
}

}  // namespace

extern "C" {

int sp_shm_producer_open(const char* endpoint, sp_shm_producer** producer) {
  return guarded(__func__, [&] {
    require(endpoint, "endpoint");
    require(producer, "producer");
    *producer = nullptr;
    auto created = std::make_unique<sp_shm_producer>();
    as_socket_error([&] { created->producer = std::make_unique<sonopipe::shm::Producer>(endpoint); });
    *producer = created.release();
  });
}

int sp_shm_claim(sp_shm_producer* producer, int timeout_ms, void** header, uint64_t* header_capacity, void** payload,
                 uint64_t* payload_capacity) {
  return guarded(__func__, [&] {
    require(producer, "producer");
    require(header, "header");
    require(header_capacity, "header_capacity");
    require(payload, "payload");
    require(payload_capacity, "payload_capacity");
    std::lock_guard lock(producer->mutex);
    if (producer->claim) throw ClientError(SP_ERROR_STATE, "a slot is claimed already (sp_shm_commit it first)");
    as_socket_error([&] { producer->claim = producer->producer->claim(deadline_after(timeout_ms)); });
    if (!producer->claim)
      throw ClientError(SP_ERROR_TIMEOUT, "no slot came free within " + std::to_string(timeout_ms) + " ms");
    *header = producer->claim->header.data();
    *header_capacity = producer->claim->header.size();
    *payload = producer->claim->payload.data();
    *payload_capacity = producer->claim->payload.size();
  });
}

int sp_shm_commit(sp_shm_producer* producer, uint64_t header_bytes, uint64_t payload_bytes) {
  return guarded(__func__, [&] {
    require(producer, "producer");
    std::lock_guard lock(producer->mutex);
    if (!producer->claim) throw ClientError(SP_ERROR_STATE, "no slot is claimed (sp_shm_claim)");
    as_socket_error([&] { producer->producer->commit(*producer->claim, header_bytes, payload_bytes); });
    producer->claim.reset();
  });
}

int sp_shm_abandon(sp_shm_producer* producer) {
  return guarded(__func__, [&] {
    require(producer, "producer");
    std::lock_guard lock(producer->mutex);
    if (producer->claim) producer->producer->abandon(*producer->claim);
    producer->claim.reset();
  });
}

int sp_shm_delivery(sp_shm_producer* producer, int timeout_ms, uint64_t* delivered, uint64_t* undelivered) {
  return guarded(__func__, [&] {
    require(producer, "producer");
    require(delivered, "delivered");
    require(undelivered, "undelivered");
    std::lock_guard lock(producer->mutex);
    if (timeout_ms != 0) producer->producer->wait_delivered(deadline_after(timeout_ms));
    const auto counters = producer->producer->counters();
    *delivered = counters.delivered;
    *undelivered = counters.undelivered();
  });
}

int sp_shm_producer_close(sp_shm_producer* producer) {
  return guarded(__func__, [&] { delete producer; });
}

int sp_shm_consumer_open(const char* endpoint, int lossless, sp_shm_consumer** consumer) {
  return guarded(__func__, [&] {
    require(endpoint, "endpoint");
    require(consumer, "consumer");
    *consumer = nullptr;
    auto created = std::make_unique<sp_shm_consumer>();
    as_socket_error([&] {
      created->consumer = std::make_unique<sonopipe::shm::Consumer>(
          endpoint, lossless ? sonopipe::shm::Mode::lossless : sonopipe::shm::Mode::live);
    });
    *consumer = created.release();
  });
}

int sp_shm_take(sp_shm_consumer* consumer, int timeout_ms, uint32_t* slot, const void** header, uint64_t* header_bytes,
                const void** payload, uint64_t* payload_bytes) {
  return guarded(__func__, [&] {
    require(consumer, "consumer");
    require(slot, "slot");
    require(header, "header");
    require(header_bytes, "header_bytes");
    require(payload, "payload");
    require(payload_bytes, "payload_bytes");
    std::optional<sonopipe::shm::Message> message;
    as_socket_error([&] { message = consumer->consumer->take(deadline_after(timeout_ms)); });
    if (!message) throw ClientError(SP_ERROR_TIMEOUT, "no message within " + std::to_string(timeout_ms) + " ms");
    *slot = message->slot;
    *header = message->header;
    *header_bytes = message->header_bytes;
    *payload = message->payload;
    *payload_bytes = message->payload_bytes;
  });
}

int sp_shm_release(sp_shm_consumer* consumer, uint32_t slot) {
  return guarded(__func__, [&] {
    require(consumer, "consumer");
    consumer->consumer->release(slot);
  });
}

int sp_shm_consumer_close(sp_shm_consumer* consumer) {
  return guarded(__func__, [&] { delete consumer; });
}

}  // extern "C"
