#include "daemon/shm_publisher.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <stdexcept>

#include "shm/producer.h"
#include "daemon/publisher.h"
#include "wire/wire.h"
#include "wire/wall_clock.h"

namespace sonopipe {
ShmPublisher::ShmPublisher(const DaemonConfig& config) {
  shm::PoolOptions options;
  options.slot_count = config.publish_shm.slots;
  options.header_capacity = wire::HeaderLimits::bytes + 4096;  // the frame's header is copied into the result's
  options.payload_capacity = config.publish_shm.payload_bytes ? config.publish_shm.payload_bytes : config.max_frame_bytes;
  options.mode = config.publish_shm.lossless ? shm::Mode::lossless : shm::Mode::live;
  options.permissions = config.shm_permissions;
  pool_ = shm::Pool::create(config.publish_shm.endpoint, options);
  producer_ = std::make_unique<shm::Producer>(config.publish_shm.endpoint);
  spdlog::info("publish: {} {} pool, {} slots of {} MiB", config.publish_shm.endpoint, shm::mode_name(options.mode),
               options.slot_count, pool_->geometry().payload_capacity >> 20);
}

ShmPublisher::~ShmPublisher() {
  producer_.reset();
  pool_.reset();
}

void ShmPublisher::publish_result(const PublishedResult& result) {
  v1::ResultHeader header = result_header(result);
  const std::string topic = result_topic(result.pipeline, result.output);
  std::lock_guard lock(mutex_);
  header.mutable_timing()->set_published_ns(wall_clock_ns());
  header.SerializeToString(&header_bytes_);
  const std::size_t header_bytes = topic.size() + 1 + header_bytes_.size();
  const shm::PoolGeometry& g = pool_->geometry();
  if (header_bytes > g.header_capacity || result.bytes > g.payload_capacity)
    throw std::runtime_error(pool_->endpoint() + ": result of " + std::to_string(result.bytes) +
                             " bytes does not fit a slot of " + std::to_string(g.payload_capacity) +
                             " (raise publish.shm.payload_bytes)");
  auto claim = producer_->claim(std::chrono::steady_clock::now() + kLosslessWait);
  if (!claim)
    throw std::runtime_error(pool_->endpoint() + ": no slot free for " + std::to_string(kLosslessWait.count()) +
                             " s (a lossless subscriber does not keep up)");
  std::memcpy(claim->header.data(), topic.data(), topic.size());
  claim->header[topic.size()] = std::byte{0};
  std::memcpy(claim->header.data() + topic.size() + 1, header_bytes_.data(), header_bytes_.size());
  std::memcpy(claim->payload.data(), result.data, result.bytes);
  producer_->commit(*claim, header_bytes, result.bytes);
}

}  // namespace sonopipe
