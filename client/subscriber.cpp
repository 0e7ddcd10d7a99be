// sp_subscriber_*: results from sonopiped's publish socket, [topic][ResultHeader][payload].
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "client/handles.h"
#include "client/status.h"
#include "wire/wire.h"

using sonopipe::client::ClientError;
using sonopipe::client::guarded;
using sonopipe::client::require;

namespace {

constexpr const char* kResultTopicPrefix = "result/";  // daemon/publisher.cpp: "result/<pipeline>/<output>"

std::unique_ptr<sp_subscriber> new_subscriber() {
  auto subscriber = std::make_unique<sp_subscriber>();
  subscriber->socket = zmq::socket_t(subscriber->context, zmq::socket_type::sub);
  subscriber->socket.set(zmq::sockopt::linger, 0);
  return subscriber;
}

void connect(sp_subscriber& subscriber, const char* endpoint, const char* topic_prefix) {
  if (subscriber.connected) throw ClientError(SP_ERROR_STATE, "the subscriber is already connected");
  if (subscriber.curve) sonopipe::client::apply_curve(subscriber.socket, *subscriber.curve);
  const std::string prefix = topic_prefix && *topic_prefix ? topic_prefix : kResultTopicPrefix;
  subscriber.socket.set(zmq::sockopt::subscribe, prefix);
  try {
    subscriber.socket.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw ClientError(SP_ERROR_SOCKET, "cannot connect to '" + std::string(endpoint) + "': " + e.what());
  }
  subscriber.connected = true;
}

// The result in `parts`, or nullptr when they are not one: a status heartbeat, the wrong number
// of parts, an unreadable header, or a payload that disagrees with the header's shape.
std::unique_ptr<sp_result> result_of(std::vector<zmq::message_t>& parts) {
  if (parts.size() != 3) return nullptr;
  auto result = std::make_unique<sp_result>();
  result->topic = parts[0].to_string();
  if (result->topic.rfind(kResultTopicPrefix, 0) != 0) return nullptr;
  if (!result->header.ParseFromArray(parts[1].data(), static_cast<int>(parts[1].size()))) return nullptr;
  if (result->header.schema_version() != sonopipe::wire::kSchemaVersion) return nullptr;
  try {
    if (sonopipe::wire::tensor_spec_from_result(result->header).byte_size() != parts[2].size()) return nullptr;
  } catch (const sonopipe::wire::WireError&) {
    return nullptr;  // an element type this library does not know
  }
  result->payload = std::move(parts[2]);
  return result;
}

}  // namespace

extern "C" {

int sp_subscriber_create(sp_subscriber** subscriber) {
  return guarded(__func__, [&] {
    require(subscriber, "subscriber");
    *subscriber = nullptr;
    *subscriber = new_subscriber().release();
  });
}

int sp_subscriber_set_curve(sp_subscriber* subscriber, const char* server_public_key, const char* client_public_key,
                            const char* client_secret_key) {
  return guarded(__func__, [&] {
    require(subscriber, "subscriber");
    auto keys = sonopipe::client::curve_keys(server_public_key, client_public_key, client_secret_key);
    std::lock_guard lock(subscriber->mutex);
    if (subscriber->connected)
      throw ClientError(SP_ERROR_STATE, "CURVE keys must be set before sp_subscriber_connect");
    subscriber->curve = std::move(keys);
  });
}

int sp_subscriber_connect(sp_subscriber* subscriber, const char* endpoint, const char* topic_prefix) {
  return guarded(__func__, [&] {
    require(subscriber, "subscriber");
    require(endpoint, "endpoint");
    std::lock_guard lock(subscriber->mutex);
    connect(*subscriber, endpoint, topic_prefix);
  });
}

int sp_subscriber_open(const char* endpoint, const char* topic_prefix, sp_subscriber** subscriber) {
  return guarded(__func__, [&] {
    require(endpoint, "endpoint");
    require(subscriber, "subscriber");
    *subscriber = nullptr;
    auto created = new_subscriber();
    connect(*created, endpoint, topic_prefix);
    *subscriber = created.release();
  });
}

int sp_subscriber_next(sp_subscriber* subscriber, int timeout_ms, sp_result** result) {
  return guarded(__func__, [&] {
    require(subscriber, "subscriber");
    require(result, "result");
    *result = nullptr;
    if (timeout_ms < -1) throw ClientError(SP_ERROR_ARGUMENT, "timeout_ms " + std::to_string(timeout_ms) + " < -1");
    std::lock_guard lock(subscriber->mutex);
    if (!subscriber->connected)
      throw ClientError(SP_ERROR_STATE, "the subscriber is not connected (sp_subscriber_connect)");
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    std::vector<zmq::message_t> parts;
    for (;;) {
      long wait_ms = -1;
      if (timeout_ms >= 0)
        wait_ms = std::max<long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      zmq::pollitem_t item{subscriber->socket.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(wait_ms)) == 0)
        throw ClientError(SP_ERROR_TIMEOUT, "no result within " + std::to_string(timeout_ms) + " ms");
      // A message's parts arrive together: once the first is there, the rest are.
      parts.clear();
      do {
        zmq::message_t part;
        if (!subscriber->socket.recv(part, zmq::recv_flags::none)) break;
        parts.push_back(std::move(part));
      } while (parts.back().more());
      const bool heartbeat = !parts.empty() && parts[0].to_string_view() == "status";
      if (auto received = result_of(parts)) {
        *result = received.release();
        return;
      }
      if (!heartbeat) ++subscriber->skipped;
    }
  });
}

uint64_t sp_subscriber_skipped(const sp_subscriber* subscriber) {
  if (subscriber == nullptr) return 0;
  std::lock_guard lock(subscriber->mutex);
  return subscriber->skipped;
}

int sp_subscriber_close(sp_subscriber* subscriber) {
  return guarded(__func__, [&] { delete subscriber; });
}

}  // extern "C"
