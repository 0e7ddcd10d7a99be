#include "daemon/shm_ingest.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "runtime/gpu_resources.h"
#include "shm/consumer.h"
#include "daemon/frame_admission.h"
#include "wire/wire.h"
#include "wire/wall_clock.h"

namespace sonopipe {
// The last frame to let go of it may do so in any thread (the executors' completion threads): its
// destructor makes no CUDA call.
struct ShmIngest::Source {
  std::shared_ptr<shm::Pool> pool;
  std::unique_ptr<shm::Consumer> consumer;
  bool registered = false;
};

std::uint32_t ShmIngest::pool_slots(const DaemonConfig& config) {
  if (config.shm_slots > 0) return config.shm_slots;
  const std::size_t pipelines = std::max<std::size_t>(1, config.pipelines.size());
  const std::size_t wanted = pipelines * (config.queue_depth + static_cast<std::size_t>(config.slots)) + 2;
  return static_cast<std::uint32_t>(std::min(wanted, shm::kMaxSlots));
}

ShmIngest::ShmIngest(const DaemonConfig& config, FrameAdmission::Dispatch dispatch, RejectLog& rejects,
                     bool register_with_cuda)
    : source_(std::make_shared<Source>()), admission_(config, std::move(dispatch), rejects) {
  shm::PoolOptions options;
  options.slot_count = pool_slots(config);
  options.header_capacity = wire::HeaderLimits::bytes;
  options.payload_capacity = config.max_frame_bytes;
  options.mode = config.ingest_pattern == IngestPattern::pull ? shm::Mode::lossless : shm::Mode::live;
  options.permissions = config.shm_permissions;
  source_->pool = std::shared_ptr<shm::Pool>(shm::Pool::create(config.ingest_endpoint, options));
  source_->consumer = std::make_unique<shm::Consumer>(source_->pool, shm::Mode::lossless);
  if (register_with_cuda) {
    try {
      register_host_memory(source_->pool->mapping(), source_->pool->mapping_bytes());
      source_->registered = true;
    } catch (const std::exception& e) {
      spdlog::warn("ingest: {}: cannot page-lock the pool for the GPU ({}); frames are staged through pinned "
                   "buffers (one host copy more)", config.ingest_endpoint, e.what());
    }
  }
  spdlog::info("ingest: {} {} pool, {} slots of {} MiB, permissions {:04o}{}", config.ingest_endpoint,
               shm::mode_name(options.mode), options.slot_count, source_->pool->geometry().payload_capacity >> 20,
               static_cast<unsigned>(options.permissions & 0660),
               source_->registered ? ", registered with CUDA" : "");
}

ShmIngest::~ShmIngest() {
  if (!source_->registered) return;
  // Frames still in flight hold the source; the registration goes only once none does (the
  // daemon drains its executors first; a bounded wait covers anything else).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (source_.use_count() > 1 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (source_.use_count() > 1) {
    spdlog::warn("ingest: {}: frames still in flight at exit; the pool stays registered with CUDA",
                 source_->pool->endpoint());
    return;
  }
  try {
    unregister_host_memory(source_->pool->mapping());
  } catch (const std::exception& e) {
    spdlog::warn("ingest: {}: CUDA unregistration failed: {}", source_->pool->endpoint(), e.what());
  }
}

bool ShmIngest::registered_with_cuda() const { return source_->registered; }

void ShmIngest::report_refusals() {
  const shm::ConsumerCounters counters = source_->consumer->counters();
  for (std::size_t i = 0; i < counters.refused.size(); ++i)
    for (; refused_seen_[i] < counters.refused[i]; ++refused_seen_[i])
      admission_.refuse(wire::RejectReason::bad_slot_descriptor,
                        source_->pool->endpoint() + ": slot descriptor refused (" +
                            std::string(shm::descriptor_error_name(static_cast<shm::DescriptorError>(i))) + ")");
}

void ShmIngest::run(const std::atomic<bool>& stop) {
  shm::Consumer& consumer = *source_->consumer;
  std::uint64_t refused_total = 0;
  while (!stop.load()) {
    const auto message = consumer.take(std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
    // Refusals are rare: the counters are read only when the pool says one happened.
    if (const std::uint64_t refused = consumer.refused_total(); refused != refused_total) {
      refused_total = refused;
      report_refusals();
    }
    if (!message) continue;
    const std::int64_t received_ns = wall_clock_ns();
    // The slot goes back when the last pipeline lets go of the payload (after its H2D copy or its
    // CPU stages); the source (pool, CUDA registration) lives as long as any frame holds it.
    std::shared_ptr<const std::byte> payload(message->payload,
                                             [source = source_, slot = message->slot](const std::byte*) {
                                               source->consumer->release(slot);
                                             });
    admission_.admit(message->header, message->header_bytes, std::move(payload), message->payload_bytes,
                     source_->registered, received_ns);
  }
}

}  // namespace sonopipe
