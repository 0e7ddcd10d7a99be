#include "runtime/pipeline_executor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

namespace sonopipe {

// A published result held until the frames before it have left: copies of what the callback's
// references point to, and the buffer's owner so its bytes stay valid.
struct PipelineExecutor::HeldResult {
  std::string output;
  FrameMeta frame;
  TensorSpec spec;
  const void* data = nullptr;
  std::size_t bytes = 0;
  ResultTiming timing;
  Backend backend = Backend::cpu;
  std::shared_ptr<const void> owner;
  std::shared_ptr<ResultClaim> claim;
  std::uint64_t param_generation = 0;
};

struct PipelineExecutor::Ticket {
  std::vector<HeldResult> results;
  bool done = false;
};

PipelineExecutor::PipelineExecutor(std::string name, std::vector<int> devices,
                                         const std::function<std::vector<PipelineStage>()>& make_stages,
                                         ExecutorOptions options, ExecutorCallbacks callbacks)
    : name_(std::move(name)), devices_(std::move(devices)), backend_(options.backend), callbacks_(std::move(callbacks)),
      placement_(devices_.empty() ? 1 : devices_.size(), false) {
  if (devices_.empty()) throw std::invalid_argument("pipeline '" + name_ + "' has no devices");
  std::vector<std::vector<PipelineStage>> stage_sets;
  bool stateful = false;
  for (std::size_t lane = 0; lane < devices_.size(); ++lane) {
    stage_sets.push_back(make_stages());
    for (const PipelineStage& stage : stage_sets.back()) stateful = stateful || stage.stage->keeps_state();
  }
  placement_ = Placement(devices_.size(), stateful);

  if (devices_.size() == 1) {
    options.device_id = devices_[0];
    lanes_.push_back(std::make_unique<DeviceLane>(name_, std::move(stage_sets[0]), options, callbacks_));
    return;
  }
  // Several devices: the overflow policy applies at the front queue; the devices' own queues
  // are short and block, so a frame that got a ticket is never dropped behind it.
  queue_ = std::make_unique<FrameQueue>(options.queue_depth, options.overflow);
  lane_tickets_.resize(devices_.size());
  for (std::size_t lane = 0; lane < devices_.size(); ++lane) {
    ExecutorOptions lane_options = options;
    lane_options.device_id = devices_[lane];
    lane_options.overflow = OverflowPolicy::block;
    lane_options.queue_depth = 2;
    ExecutorCallbacks lane_callbacks{
        .publish = [this, lane](const PublishedResult& result) { on_result(lane, result); },
        .stage_error = callbacks_.stage_error,
        .frame_done = [this, lane](const FrameMeta&) { on_frame_done(lane); },
        .publish_error = callbacks_.publish_error,
        .claim_result = callbacks_.claim_result,
    };
    lanes_.push_back(std::make_unique<DeviceLane>(name_, std::move(stage_sets[lane]), lane_options,
                                                        lane_callbacks));
  }
  dispatcher_ = std::thread([this] { dispatch_loop(); });
}

PipelineExecutor::~PipelineExecutor() { drain(); }

bool PipelineExecutor::submit(InputFrame frame) {
  if (!queue_) return lanes_[0]->submit(std::move(frame));
  if (!queue_->push(std::move(frame))) return false;
  accepted_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void PipelineExecutor::drain() {
  std::call_once(drained_, [this] {
    if (queue_) {
      queue_->close();
      if (dispatcher_.joinable()) dispatcher_.join();
    }
    for (auto& lane : lanes_) lane->drain();
  });
}

void PipelineExecutor::dispatch_loop() {
  while (std::optional<InputFrame> frame = queue_->pop()) {
    bool new_stream = false;
    std::size_t lane = 0, streams_there = 0;
    {
      std::lock_guard lock(placement_mutex_);
      lane = placement_.lane_for(frame->meta.stream_id, &new_stream);
      streams_there = placement_.streams_on(lane);
    }
    // The first placements at info, the rest (a churn of stream ids) at debug.
    if (new_stream)
      spdlog::log(++placements_logged_ <= 16 ? spdlog::level::info : spdlog::level::debug,
                  "pipeline {}: stream {} placed on device {} ({} streams there)", name_, frame->meta.stream_id,
                   devices_[lane], streams_there);
    {
      std::lock_guard lock(order_mutex_);
      auto ticket = std::make_shared<Ticket>();
      tickets_.push_back(ticket);
      lane_tickets_[lane].push_back(std::move(ticket));
    }
    frame->param_generation = dispatch_generation_.load(std::memory_order_acquire);
    lanes_[lane]->submit(std::move(*frame));  // blocks while that device is full
  }
}

void PipelineExecutor::on_result(std::size_t lane, const PublishedResult& result) {
  // A result without an owner (published as a copy: its buffer is reused after the callback) is
  // copied to be held.
  std::shared_ptr<const void> owner = result.owner;
  const void* data = result.data;
  if (!owner) {
    const auto* begin = static_cast<const std::byte*>(result.data);
    auto copy = std::make_shared<std::vector<std::byte>>(begin, begin + result.bytes);
    data = copy->data();
    owner = std::move(copy);
  }
  std::lock_guard lock(order_mutex_);
  Ticket& ticket = *lane_tickets_[lane].front();
  ticket.results.push_back({result.output, result.frame, result.spec, data, result.bytes, result.timing,
                            result.backend, std::move(owner), result.claim, result.param_generation});
}

void PipelineExecutor::on_frame_done(std::size_t lane) {
  std::lock_guard lock(order_mutex_);
  lane_tickets_[lane].front()->done = true;
  lane_tickets_[lane].pop_front();
  release_finished_locked();
}

// Publishes, in arrival order, every finished frame that no unfinished frame precedes. Runs under
// order_mutex_, so the publish callback is never called by two devices at once.
void PipelineExecutor::release_finished_locked() {
  while (!tickets_.empty() && tickets_.front()->done) {
    std::shared_ptr<Ticket> ticket = std::move(tickets_.front());
    tickets_.pop_front();
    if (!callbacks_.publish) continue;
    for (const HeldResult& held : ticket->results) {
      try {
        callbacks_.publish(PublishedResult{.pipeline = name_, .output = held.output, .frame = held.frame,
                                           .spec = held.spec, .data = held.data, .bytes = held.bytes,
                                           .timing = held.timing, .backend = held.backend, .owner = held.owner,
                                           .claim = held.claim, .param_generation = held.param_generation});
      } catch (const std::exception& e) {
        // As the executor does: the result is lost and counted, the device thread goes on.
        const std::uint64_t count = ++publish_errors_;
        if (callbacks_.publish_error && (count & (count - 1)) == 0) {
          try {
            callbacks_.publish_error(held.frame, name_, "publishing " + held.output + " failed (" +
                                                            std::to_string(count) + " so far): " + e.what());
          } catch (const std::exception&) {
          }
        }
      }
    }
  }
}

void PipelineExecutor::update_stage(std::size_t stage, const std::function<std::unique_ptr<Stage>()>& make,
                                    std::uint64_t generation) {
  std::lock_guard lock(update_mutex_);
  std::vector<std::unique_ptr<Stage>> instances;
  for (std::size_t lane = 0; lane < lanes_.size(); ++lane) instances.push_back(make());
  std::vector<std::shared_ptr<DeviceLane::Setup>> setups;
  for (std::size_t lane = 0; lane < lanes_.size(); ++lane) {
    std::vector<StageUpdate> updates;
    updates.push_back({.stage = stage, .instance = std::move(instances[lane]), .make = make});
    setups.push_back(lanes_[lane]->prepare_stages(std::move(updates), generation));
  }
  for (std::size_t lane = 0; lane < lanes_.size(); ++lane) lanes_[lane]->commit_stages(std::move(setups[lane]));
  // From here the dispatcher states the new generation: every lane has it.
  dispatch_generation_.store(generation, std::memory_order_release);
}

void PipelineExecutor::check_stage(std::size_t stage, Stage& instance) const {
  if (backend_ == Backend::cuda) return;  // tried on the devices by update_stage (see the header)
  const std::optional<DeviceLane::Description> description = lanes_.front()->description();
  if (!description || stage >= description->stage_inputs.size()) return;
  instance.configure(description->frame, description->stage_inputs[stage], Backend::cpu);
}

PipelineStats PipelineExecutor::stats() const {
  PipelineStats stats;
  std::lock_guard lock(placement_mutex_);
  for (std::size_t lane = 0; lane < lanes_.size(); ++lane) {
    LaneStats s = lanes_[lane]->stats();
    stats.devices.push_back({.device = devices_[lane], .processed = s.processed, .busy_ms_total = s.busy_ms_total,
                             .queue_depth = s.queue_depth, .streams = placement_.stream_affinity()
                                                                           ? placement_.streams_on(lane) : 0});
    if (lane == 0) {
      stats.total = std::move(s);
      continue;
    }
    stats.total.accepted += s.accepted;
    stats.total.issued += s.issued;
    stats.total.processed += s.processed;
    stats.total.published += s.published;
    stats.total.dropped += s.dropped;
    stats.total.stage_errors += s.stage_errors;
    stats.total.queue_depth += s.queue_depth;
    stats.total.busy_ms_total += s.busy_ms_total;
    stats.total.publish_errors += s.publish_errors;
    stats.total.results_copied += s.results_copied;
    stats.total.results_waited += s.results_waited;
    stats.total.streams_live += s.streams_live;
    stats.total.streams_evicted += s.streams_evicted;
    stats.total.state_resets += s.state_resets;
    // A change counts once for the pipeline; the generation is the lowest any lane runs.
    stats.total.param_generation = std::min(stats.total.param_generation, s.param_generation);
    stats.total.param_changes = std::min(stats.total.param_changes, s.param_changes);
  }
  if (queue_) {
    // Frames count as accepted when the front queue takes them; the devices' own counts are the
    // same frames passed on.
    stats.total.accepted = accepted_.load(std::memory_order_relaxed);
    stats.total.dropped = queue_->dropped();
    stats.total.queue_depth += queue_->depth();
    const std::uint64_t publish_errors = publish_errors_.load();
    stats.total.publish_errors += publish_errors;
    stats.total.published -= std::min(stats.total.published, publish_errors);
  }
  stats.streams_forgotten = placement_.streams_forgotten();
  return stats;
}

}  // namespace sonopipe
