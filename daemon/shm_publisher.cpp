#include "daemon/shm_publisher.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <stdexcept>
#include <thread>

#include "runtime/gpu_resources.h"
#include "shm/producer.h"
#include "daemon/publisher.h"
#include "wire/wire.h"
#include "wire/wall_clock.h"

namespace sonopipe {
struct ShmPublisher::Core {
  std::unique_ptr<shm::Producer> producer;
  bool registered = false;
};

// A slot lent to an executor. Committed by publish_result() with a hold (ZeroMQ may still send
// its bytes); the last reference lets the hold go, or gives back a slot never committed.
struct ShmPublisher::Claim : ResultClaim {
  std::shared_ptr<Core> core;
  shm::Producer::Claim slot;
  bool committed = false;  // set under the publisher's mutex, read by the last owner
  ~Claim() override {
    try {
      if (committed) core->producer->release_hold(slot.slot);
      else core->producer->abandon(slot);
    } catch (const std::exception& e) {
      spdlog::warn("publish: giving a result slot back failed: {}", e.what());
    }
  }
};

ShmPublisher::ShmPublisher(const DaemonConfig& config, bool register_with_cuda) : core_(std::make_shared<Core>()) {
  shm::PoolOptions options;
  options.slot_count = config.publish_shm.slots;
  options.header_capacity = wire::HeaderLimits::bytes + 4096;  // the frame's header is copied into the result's
  options.payload_capacity = config.publish_shm.payload_bytes ? config.publish_shm.payload_bytes : config.max_frame_bytes;
  options.mode = config.publish_shm.lossless ? shm::Mode::lossless : shm::Mode::live;
  options.permissions = config.shm_permissions;
  // A result no lossless subscriber is waiting for (none attached, or the one attached died) is
  // not kept for a later one: a dead recorder must not hold the pipelines back.
  options.hold_unclaimed = false;
  pool_ = shm::Pool::create(config.publish_shm.endpoint, options);
  core_->producer = std::make_unique<shm::Producer>(config.publish_shm.endpoint);
  if (register_with_cuda) {
    const shm::Pool& mapped = core_->producer->pool();  // where the claims' payloads lie
    try {
      register_host_memory(mapped.mapping(), mapped.mapping_bytes());
      core_->registered = true;
    } catch (const std::exception& e) {
      spdlog::warn("publish: {}: cannot page-lock the pool for the GPU ({}); results are copied into it from pinned "
                   "buffers", config.publish_shm.endpoint, e.what());
    }
  }
  spdlog::info("publish: {} {} pool, {} slots of {} MiB{}", config.publish_shm.endpoint, shm::mode_name(options.mode),
               options.slot_count, pool_->geometry().payload_capacity >> 20,
               core_->registered ? ", registered with CUDA" : "");
}

ShmPublisher::~ShmPublisher() {
  // Claims still held (by ZeroMQ messages not yet sent) keep the producer; the registration goes
  // only once none does (the daemon has drained its executors; a bounded wait covers the rest).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (core_.use_count() > 1 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (core_->registered && core_.use_count() == 1) {
    try {
      unregister_host_memory(core_->producer->pool().mapping());
    } catch (const std::exception& e) {
      spdlog::warn("publish: CUDA unregistration of the result pool failed: {}", e.what());
    }
  }
  core_.reset();
  pool_.reset();
}

bool ShmPublisher::registered_with_cuda() const { return core_->registered; }

std::shared_ptr<ResultClaim> ShmPublisher::claim(std::size_t bytes) {
  if (bytes > core_->producer->pool().geometry().payload_capacity) return nullptr;
  auto slot = core_->producer->claim(std::chrono::steady_clock::now() + kLosslessWait);
  if (!slot) return nullptr;
  auto claim = std::make_shared<Claim>();
  claim->core = core_;
  claim->slot = *slot;
  claim->data = slot->payload.data();
  return claim;
}

void ShmPublisher::publish_result(const PublishedResult& result) {
  v1::ResultHeader header = result_header(result);
  const std::string topic = result_topic(result.pipeline, result.output);
  auto* own = dynamic_cast<Claim*>(result.claim.get());
  if (own && own->core != core_) own = nullptr;
  std::lock_guard lock(mutex_);
  header.mutable_timing()->set_published_ns(wall_clock_ns());
  header.SerializeToString(&header_bytes_);
  const std::size_t header_bytes = topic.size() + 1 + header_bytes_.size();
  const shm::PoolGeometry& g = core_->producer->pool().geometry();
  if (header_bytes > g.header_capacity || result.bytes > g.payload_capacity)
    throw std::runtime_error(core_->producer->pool().endpoint() + ": result of " + std::to_string(result.bytes) +
                             " bytes does not fit a slot of " + std::to_string(g.payload_capacity) +
                             " (raise publish.shm.payload_bytes)");
  std::optional<shm::Producer::Claim> copy_slot;
  if (!own) {
    copy_slot = core_->producer->claim(std::chrono::steady_clock::now() + kLosslessWait);
    if (!copy_slot)
      throw std::runtime_error(core_->producer->pool().endpoint() + ": no slot free for " +
                               std::to_string(kLosslessWait.count()) + " s (a lossless subscriber does not keep up)");
  }
  const shm::Producer::Claim& slot = own ? own->slot : *copy_slot;
  std::memcpy(slot.header.data(), topic.data(), topic.size());
  slot.header[topic.size()] = std::byte{0};
  std::memcpy(slot.header.data() + topic.size() + 1, header_bytes_.data(), header_bytes_.size());
  if (own) {
    // The result is in the slot already (written by the D2H copy or the stage); ZeroMQ may still
    // send these bytes: held until the claim's last reference goes.
    core_->producer->commit(slot, header_bytes, result.bytes, true);
    own->committed = true;
    in_place_.fetch_add(1, std::memory_order_relaxed);
  } else {
    std::memcpy(slot.payload.data(), result.data, result.bytes);
    core_->producer->commit(slot, header_bytes, result.bytes);
  }
}

}  // namespace sonopipe
