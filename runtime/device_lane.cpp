#include "runtime/device_lane.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include <pthread.h>
#include <spdlog/spdlog.h>

#include "sdk/thread_pool.h"
#include "wire/wall_clock.h"

namespace sonopipe {
namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
double ms_between(std::int64_t from_ns, std::int64_t to_ns) { return (to_ns - from_ns) * 1e-6; }

// True while a receiver still holds `buffer`; when not, the slot may write into it again. A
// receiver drops its reference after its last read (a release decrement) on another thread, and
// use_count() is only a relaxed load: the acquire fence orders those reads before our writes (found
// by ThreadSanitizer, pipeline_executor_test). TSan does not model fences; it sees the same
// order through the probe copy's increment (acquire-release in libstdc++).
bool held_by_receivers(const std::shared_ptr<Buffer>& buffer) {
  if (buffer.use_count() > 1) return true;
  if (buffer) {
    const std::shared_ptr<Buffer> probe = buffer;
    std::atomic_thread_fence(std::memory_order_acquire);
  }
  return false;
}

// The CPU stages read the payload in place when it is aligned for the widest element type
// (float64, complex64); otherwise it is copied into the slot's aligned input first. Large ZeroMQ
// messages usually arrive 8-byte aligned.
constexpr std::uintptr_t kCpuInputAlignment = 8;

// Repeated events (evictions, copied results, publish errors) are logged at their 1st, 2nd, 4th,
// 8th, ... occurrence: a flood is told about, in a bounded number of lines, with its count.
bool worth_a_line(std::uint64_t count) { return count > 0 && (count & (count - 1)) == 0; }

// A spare no receiver holds, taken out of `spares`; null if every one is held.
std::shared_ptr<Buffer> take_released(std::vector<std::shared_ptr<Buffer>>& spares) {
  for (std::size_t i = 0; i < spares.size(); ++i) {
    if (!held_by_receivers(spares[i])) {
      std::shared_ptr<Buffer> released = std::move(spares[i]);
      spares[i] = std::move(spares.back());
      spares.pop_back();
      return released;
    }
  }
  return nullptr;
}

// How often a lane waiting for a spare result buffer looks whether a receiver let one go.
constexpr std::chrono::microseconds kSparePoll{20};

// How long receivers must keep up before the spare result buffers they no longer hold are freed
// (on CUDA freeing pinned memory waits for the device: not for every frame).
constexpr std::chrono::nanoseconds kSpareIdle = std::chrono::seconds(1);

}  // namespace

// Memory a slot's frame runs in that depends on the stages' plans. Used by one frame at a time (the
// one in its slot), so setups of successive parameter generations share a slot's buffers when they
// fit both and only a change that needs more gets new ones.
struct DeviceLane::SlotBuffers {
  std::vector<std::vector<Buffer>> outputs;   // [stage][output]
  std::vector<std::vector<void*>> output_pointers;
  std::vector<Buffer> workspace, staging;     // [stage]
  // [published output] host memory the results are published from (pinned for CUDA). CPU stages
  // write published outputs straight into these; CUDA copies them back into these.
  std::vector<std::shared_ptr<Buffer>> results;
  // [published output] used instead when the spare cap is reached: never handed to a receiver,
  // published as a copy (copy_results[p]); allocated on first need.
  std::vector<std::shared_ptr<Buffer>> private_results;
  std::vector<bool> copy_results;
};

// Everything a frame runs with besides its slot's streams and events: one parameter generation's
// stage instances, configured for one frame description. Built whole, then switched to by a
// pointer exchange between two frames (DeviceLane::prepare_stages); a slot keeps the setup its
// frame started with until the frame has finished.
struct DeviceLane::Setup {
  std::uint64_t generation = 0;
  std::vector<std::shared_ptr<Stage>> instances;  // [stage]; unchanged ones shared with the setup before
  std::vector<std::function<std::unique_ptr<Stage>()>> makes;  // [stage] builds one like it (may be empty)
  bool configured = false;       // for `frame`, as of configuration `configuration`
  std::uint64_t configuration = 0;
  FrameMeta frame;
  std::vector<TensorSpec> stage_inputs;
  std::vector<StagePlan> plans;
  std::vector<PublishedOutput> published_outputs;
  std::vector<std::shared_ptr<SlotBuffers>> buffers;  // [slot]
  // What those buffers hold at least: per stage the sizes of the plans they were sized for (these
  // plans, or larger ones of an earlier setup), per published output the bytes of a result buffer.
  std::vector<StagePlan> sized_for;
  std::vector<std::size_t> result_bytes;
  std::shared_ptr<StreamStates> states;
  bool states_reset = false;  // fresh states where the setup before kept others for the same frames
};

// A setup switched away from, freed once no slot runs it, with the spare result buffers of its
// outputs when the next setup changed them.
struct DeviceLane::Retired {
  std::shared_ptr<Setup> setup;
  std::vector<std::vector<std::shared_ptr<Buffer>>> spares;
};

struct DeviceLane::Slot {
  // Memory: host for the CPU backend; device (+ pinned host for copies) for CUDA.
  Buffer input_host;                      // aligned copy (CPU); pinned staging (CUDA, SONOPIPE_STAGING=slot)
  Buffer input_device;
  // [published output] the receiver's memory the result is written into instead (claim_result).
  std::vector<std::shared_ptr<ResultClaim>> claims;
  StreamStates::Entry* state = nullptr;  // the frame's stream state (stateful stages), submit thread

  // CUDA handles (null on the CPU backend), created once.
  std::unique_ptr<GpuStreamHandle> stream;
  std::unique_ptr<GpuEvent> start, after_h2d, done;
  std::vector<std::unique_ptr<GpuEvent>> after_stage;

  // The frame in flight and the setup it started with (held until it has finished).
  InputFrame frame;
  std::shared_ptr<Setup> setup;
  SlotBuffers* buffers = nullptr;  // setup->buffers[this slot]
  std::uint64_t generation = 0;    // parameter generation it started with
  bool produced = false;
  bool failed = false;
  std::string error;
  std::size_t stages_run = 0;
  std::vector<double> enqueue_ms, cpu_compute_ms;  // [stage]
  std::int64_t compute_start_ns = 0, compute_end_ns = 0, compute_start_steady_ns = 0;
  bool busy = false;
};

DeviceLane::DeviceLane(std::string name, std::vector<PipelineStage> stages,
                                   ExecutorOptions options, ExecutorCallbacks callbacks)
    : name_(std::move(name)), stages_(std::move(stages)), options_(options),
      may_wait_for_spares_(options.overflow == OverflowPolicy::block && options.spare_wait.count() > 0),
      callbacks_(std::move(callbacks)), queue_(options.queue_depth, options.overflow),
      started_steady_ns_(steady_ns()) {
  if (stages_.empty()) throw std::invalid_argument("pipeline '" + name_ + "' has no stages");
  if (options_.slots < 1) throw std::invalid_argument("slots must be at least 1");
  if (options_.backend == Backend::cpu && !options_.pool)
    throw std::invalid_argument("the CPU backend needs a thread pool");
  if (options_.backend == Backend::cuda) {
    use_gpu_device(options_.device_id);
    memory_ = std::make_shared<MemoryPool>(options_.device_id, options_.keep_pinned_bytes);
  }
  setup_ = std::make_shared<Setup>();
  for (PipelineStage& stage : stages_) {
    setup_->instances.push_back(std::move(stage.stage));
    setup_->makes.push_back(std::move(stage.make));
  }
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    stage_compute_ms_.push_back(std::make_unique<SampleWindow>());
    stage_enqueue_ms_.push_back(std::make_unique<SampleWindow>());
  }
  for (int s = 0; s < options_.slots; ++s) {
    auto slot = std::make_unique<Slot>();
    slot->enqueue_ms.assign(stages_.size(), 0.0);
    slot->cpu_compute_ms.assign(stages_.size(), 0.0);
    if (options_.backend == Backend::cuda) {
      slot->stream = std::make_unique<GpuStreamHandle>();
      slot->start = std::make_unique<GpuEvent>();
      slot->after_h2d = std::make_unique<GpuEvent>();
      slot->done = std::make_unique<GpuEvent>();
      for (std::size_t i = 0; i < stages_.size(); ++i)
        slot->after_stage.push_back(std::make_unique<GpuEvent>());
    }
    slots_.push_back(std::move(slot));
  }
  if (options_.backend == Backend::cuda) {
    epoch_ = std::make_unique<GpuEvent>();
    epoch_->record(slots_[0]->stream->get());
    epoch_->synchronize();
    epoch_steady_ns_ = host_steady_ns();
  }
  // Named for per-thread CPU accounting (sonopipe-bench core reads /proc/<pid>/task/*).
  submit_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "lane-submit");
    submit_loop();
  });
  completion_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "lane-complete");
    completion_loop();
  });
  retire_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "lane-retire");
    retire_loop();
  });
}

DeviceLane::~DeviceLane() { drain(); }

bool DeviceLane::submit(InputFrame frame) {
  if (!queue_.push(std::move(frame))) return false;
  accepted_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void DeviceLane::drain() {
  std::call_once(drained_, [this] {
    queue_.close();
    if (submit_thread_.joinable()) submit_thread_.join();
    if (completion_thread_.joinable()) completion_thread_.join();
    {
      std::lock_guard lock(retire_mutex_);
      retire_stop_ = true;
    }
    retire_changed_.notify_all();
    if (retire_thread_.joinable()) retire_thread_.join();
  });
}

bool DeviceLane::same_description(const FrameMeta& frame, const FrameMeta& c) {
  if (!(frame.payload == c.payload) || frame.kind != c.kind ||
      frame.sampling_frequency_hz != c.sampling_frequency_hz ||
      frame.center_frequency_hz != c.center_frequency_hz ||
      frame.demodulation_frequency_hz != c.demodulation_frequency_hz ||
      frame.speed_of_sound_m_per_s != c.speed_of_sound_m_per_s || frame.vectors.size() != c.vectors.size())
    return false;
  // Side vectors: their names and lengths shape the work; their values are read per frame.
  for (auto a = frame.vectors.begin(), b = c.vectors.begin(); a != frame.vectors.end(); ++a, ++b)
    if (a->first != b->first || a->second.size() != b->second.size()) return false;
  return true;
}

// Plans `next` (its generation and instances set) for `frame`. Without `reuse` (submit thread, no
// slot in flight) every instance is configured in place and the slot buffers grow in place. With
// `reuse` (a live change prepared on another thread while `reuse`'s frames may be in flight) an
// instance shared with `reuse` keeps its plan when its input is unchanged; when the input changes a
// fresh instance is built from the stage's factory (none: `next` stays unconfigured, and the submit
// thread configures it in place when it switches to it); buffers that fit are shared, others are new.
void DeviceLane::plan(Setup& next, const FrameMeta& frame, const Setup* reuse) {
  const Backend backend = options_.backend;
  next.configured = false;
  next.stage_inputs.clear();
  next.plans.clear();
  next.published_outputs.clear();
  TensorSpec input = frame.payload;
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    next.stage_inputs.push_back(input);
    const bool shared = reuse && next.instances[i] == reuse->instances[i];
    if (shared && input == reuse->stage_inputs[i]) {
      next.plans.push_back(reuse->plans[i]);  // configured for this input already
    } else {
      if (shared) {
        // Frames in flight run this instance: configure one like it instead.
        if (!next.makes[i]) return;
        next.instances[i] = next.makes[i]();
      }
      next.plans.push_back(next.instances[i]->configure(frame, input, backend));
    }
    const StagePlan& plan = next.plans.back();
    if (plan.outputs.empty())
      throw StageError("stage '" + stages_[i].label + "' declared no outputs");
    if (stages_[i].publish) {
      for (std::size_t o = 0; o < plan.outputs.size(); ++o) {
        std::string output_name = stages_[i].output_prefix + plan.outputs[o].name;
        for (const PublishedOutput& other : next.published_outputs)
          if (other.name == output_name)
            throw StageError("output '" + output_name + "' is published twice in pipeline '" + name_ +
                             "'; give one of the stages a name");
        next.published_outputs.push_back({i, o, output_name, plan.outputs[o].spec});
      }
    }
    if (!plan.passes_input) input = plan.outputs[0].spec;
  }

  // Slot buffers grow only: shared when every buffer the new plans need fits in the old ones (a
  // change back to a smaller or an earlier shape allocates nothing), else new ones (in place on
  // the submit thread).
  const Setup* old = reuse ? reuse : setup_.get();
  bool fit = old->configured && old->sized_for.size() == next.plans.size() &&
             old->result_bytes.size() == next.published_outputs.size() && old->buffers.size() == slots_.size();
  for (std::size_t i = 0; fit && i < next.plans.size(); ++i) {
    const StagePlan &a = next.plans[i], &b = old->sized_for[i];
    fit = a.outputs.size() == b.outputs.size() && a.workspace_bytes <= b.workspace_bytes &&
          a.host_staging_bytes <= b.host_staging_bytes;
    for (std::size_t o = 0; fit && o < a.outputs.size(); ++o)
      fit = a.outputs[o].spec.byte_size() <= b.outputs[o].spec.byte_size();
  }
  for (std::size_t p = 0; fit && p < next.published_outputs.size(); ++p)
    fit = next.published_outputs[p].spec.byte_size() <= old->result_bytes[p];
  if (fit) {
    next.sized_for = old->sized_for;
    next.result_bytes = old->result_bytes;
  } else {
    next.sized_for = next.plans;
    next.result_bytes.clear();
    for (const PublishedOutput& out : next.published_outputs) next.result_bytes.push_back(out.spec.byte_size());
  }
  next.buffers.resize(slots_.size());
  for (std::size_t k = 0; k < slots_.size(); ++k) {
    if (fit) {
      next.buffers[k] = old->buffers[k];
    } else if (reuse || k >= old->buffers.size() || !old->buffers[k]) {
      next.buffers[k] = std::make_shared<SlotBuffers>();
      size_buffers(*next.buffers[k], next);
    } else {
      next.buffers[k] = old->buffers[k];  // nothing in flight: grown in place
      size_buffers(*next.buffers[k], next);
    }
  }

  // A new description starts every stream's history afresh; a parameter change on the same
  // description keeps it when every state keeps its size.
  const MemoryKind data_memory = backend == Backend::cuda ? MemoryKind::device : MemoryKind::host;
  std::vector<std::size_t> state_bytes(stages_.size(), 0);
  for (std::size_t i = 0; i < stages_.size(); ++i)
    if (next.instances[i]->keeps_state()) state_bytes[i] = next.plans[i].state_bytes;
  const bool same_frames = reuse ? true : ever_configured_ && same_description(frame, configured_frame_);
  next.states_reset = false;
  if (same_frames && old->states && old->states->bytes() == state_bytes) {
    next.states = old->states;  // the stages read the same histories with their new parameters
  } else {
    next.states_reset = same_frames && old->states != nullptr;
    next.states = std::make_shared<StreamStates>(options_.max_streams);
    next.states->configure(std::move(state_bytes), data_memory, memory_);
    if (next.states_reset)
      for (std::size_t i = 0; i < stages_.size(); ++i)
        if (i < old->states->bytes().size() && next.states->bytes()[i] != old->states->bytes()[i])
          spdlog::warn("pipeline {}: stage {} keeps {} bytes of state per stream with its new parameters "
                       "instead of {}: its streams start their history afresh (state_resets)",
                       name_, stages_[i].label, next.states->bytes()[i], old->states->bytes()[i]);
  }
  next.frame = frame;
  next.configured = true;
}

void DeviceLane::size_buffers(SlotBuffers& buffers, const Setup& setup) const {
  const Backend backend = options_.backend;
  const MemoryKind data_memory = backend == Backend::cuda ? MemoryKind::device : MemoryKind::host;
  const MemoryKind staging_memory = backend == Backend::cuda ? MemoryKind::pinned : MemoryKind::host;
  const std::size_t stages = setup.sized_for.size();
  buffers.outputs.resize(stages);
  buffers.output_pointers.resize(stages);
  buffers.workspace.resize(stages);
  buffers.staging.resize(stages);
  for (std::size_t i = 0; i < stages; ++i) {
    const StagePlan& plan = setup.sized_for[i];
    buffers.outputs[i].resize(plan.outputs.size());
    buffers.output_pointers[i].resize(plan.outputs.size());
    for (std::size_t o = 0; o < plan.outputs.size(); ++o) {
      buffers.outputs[i][o].reserve(data_memory, plan.outputs[o].spec.byte_size(), memory_);
      buffers.output_pointers[i][o] = buffers.outputs[i][o].data();
    }
    buffers.workspace[i].reserve(data_memory, plan.workspace_bytes, memory_);
    buffers.staging[i].reserve(staging_memory, plan.host_staging_bytes, memory_);
  }
  // Fresh result buffers: ones a receiver still holds stay alive until it lets go.
  buffers.results.clear();
  for (const std::size_t bytes : setup.result_bytes) {
    buffers.results.push_back(std::make_shared<Buffer>());
    buffers.results.back()->reserve(staging_memory, bytes, memory_);
  }
  buffers.private_results.assign(setup.published_outputs.size(), nullptr);
  buffers.copy_results.assign(setup.published_outputs.size(), false);
}

// A new description (or a setup prepared for other frames): configures setup_'s instances in place
// for `frame` (submit thread, no slot in flight) and switches to the result.
void DeviceLane::configure(const FrameMeta& frame) {
  auto next = std::make_shared<Setup>();
  next->generation = setup_->generation;
  next->instances = setup_->instances;
  next->makes = setup_->makes;
  next->configuration = configurations_.fetch_add(1, std::memory_order_acq_rel) + 1;
  try {
    plan(*next, frame, nullptr);
  } catch (...) {
    // The instances may be half configured for `frame`: nothing runs them until one configures.
    next->configured = false;
    install(std::move(next));
    throw;
  }
  for (auto& slot : slots_) {
    // CPU: an aligned copy for unaligned payloads. CUDA: no pinned input unless the payload is
    // staged through the slot (SONOPIPE_STAGING=slot, enqueue_on_cuda).
    if (options_.backend == Backend::cpu)
      slot->input_host.reserve(MemoryKind::host, frame.payload.byte_size(), memory_);
    else if (switches_.staging == HostPathSwitches::Staging::slot)
      slot->input_host.reserve(MemoryKind::pinned, frame.payload.byte_size(), memory_);
    if (options_.backend == Backend::cuda)
      slot->input_device.reserve(MemoryKind::device, frame.payload.byte_size(), memory_);
  }
  if (next->states_reset && setup_->states && setup_->states->live() > 0)
    state_resets_.fetch_add(1, std::memory_order_relaxed);
  if (next->states != setup_->states) streams_live_.store(0, std::memory_order_relaxed);
  configured_frame_ = frame;
  ever_configured_ = true;
  install(std::move(next));
  reserve_headroom();
}

void DeviceLane::reserve_headroom() {
  if (!memory_) return;
  constexpr std::size_t kLeast = std::size_t(16) << 20;
  try {
    for (const MemoryKind kind : {MemoryKind::device, MemoryKind::pinned})
      memory_->reserve(kind, std::min(std::max(2 * memory_->in_use(kind), kLeast), options_.reserve_bytes));
  } catch (const std::exception& e) {
    // Not this frame's problem: a later growth allocates from the driver, as without the room.
    spdlog::warn("pipeline {}: reserving memory for live changes failed: {}", name_, e.what());
  }
}

void DeviceLane::submit_loop() {
  std::string device_error;
  if (options_.backend == Backend::cuda) {
    try {
      use_gpu_device(options_.device_id);
    } catch (const std::exception& e) {
      device_error = std::string("selecting the CUDA device failed: ") + e.what();
    }
  }
  while (std::optional<InputFrame> frame = queue_.pop()) {
    if (!device_error.empty()) refuse(frame->meta, device_error);  // counted, never lost
    else process(*frame);
  }
  {
    std::lock_guard lock(slot_mutex_);
    submit_finished_ = true;
  }
  slot_changed_.notify_all();
}

std::optional<DeviceLane::Description> DeviceLane::description() const {
  std::lock_guard lock(setup_mutex_);
  if (!setup_->configured) return std::nullopt;
  return Description{setup_->frame, setup_->stage_inputs};
}

std::shared_ptr<DeviceLane::Setup> DeviceLane::prepare_stages(std::vector<StageUpdate> updates,
                                                              std::uint64_t generation) {
  std::lock_guard prepare_lock(prepare_mutex_);
  std::shared_ptr<const Setup> latest;
  {
    std::lock_guard lock(setup_mutex_);
    latest = pending_.empty() ? setup_ : pending_.back();
  }
  auto next = std::make_shared<Setup>(*latest);
  next->generation = generation;
  next->configured = false;
  next->states_reset = false;
  std::vector<std::size_t> changed;
  for (StageUpdate& update : updates) {
    if (update.stage >= stages_.size() || !update.instance)
      throw std::invalid_argument("pipeline " + name_ + ": no stage " + std::to_string(update.stage) + " to update");
    next->instances[update.stage] = std::move(update.instance);
    next->makes[update.stage] = std::move(update.make);
    changed.push_back(update.stage);
  }
  // Planned for the frames the lane configured last, unless it has configured its instances again
  // since (then the submit thread configures this setup when it switches to it).
  next->configuration = configurations_.load(std::memory_order_acquire);
  if (options_.backend == Backend::cuda) use_gpu_device(options_.device_id);
  if (!latest->configured || latest->configuration != next->configuration) {
    // Not planned here; the new instances are still tried on the frames the lane configured last,
    // so that one they cannot take is refused now (they are configured again when switched to).
    const std::optional<Description> seen = description();
    for (const std::size_t stage : changed)
      if (seen && stage < seen->stage_inputs.size())
        next->instances[stage]->configure(seen->frame, seen->stage_inputs[stage], options_.backend);
    return next;
  }
  plan(*next, latest->frame, latest.get());
  return next;
}

void DeviceLane::commit_stages(std::shared_ptr<Setup> setup) {
  std::lock_guard prepare_lock(prepare_mutex_);
  {
    std::lock_guard lock(setup_mutex_);
    pending_.push_back(std::move(setup));
  }
  update_pending_.store(true, std::memory_order_release);
}

void DeviceLane::update_stages(std::vector<StageUpdate> updates, std::uint64_t generation) {
  commit_stages(prepare_stages(std::move(updates), generation));
}

bool DeviceLane::ready_for(const FrameMeta& frame) const {
  return setup_->configured && setup_->configuration == configurations_.load(std::memory_order_relaxed) &&
         same_description(frame, setup_->frame);
}

void DeviceLane::set_switching(bool switching) {
  {
    std::lock_guard lock(slot_mutex_);
    switching_ = switching;
  }
  if (!switching) slot_changed_.notify_all();
}

void DeviceLane::wait_until_idle() {
  std::unique_lock lock(slot_mutex_);
  slot_changed_.wait(lock, [&] { return in_flight_.empty(); });
}

// Switches to the newest committed setup the frame's stated generation reaches: a pointer
// exchange; whatever configuring it needed was done when it was prepared.
void DeviceLane::switch_setup(std::uint64_t stated_generation) {
  std::shared_ptr<Setup> previous;
  std::vector<Retired> skipped;  // committed, superseded before a frame ran them
  std::uint64_t changes = 0;
  {
    std::lock_guard lock(setup_mutex_);
    std::shared_ptr<Setup> next;
    while (!pending_.empty() && pending_.front()->generation <= stated_generation) {
      if (next) skipped.push_back({.setup = std::move(next)});
      next = std::move(pending_.front());
      pending_.pop_front();
      ++changes;
    }
    update_pending_.store(!pending_.empty(), std::memory_order_relaxed);
    if (!next) return;
    const bool stale = !next->configured || next->configuration != configurations_.load(std::memory_order_relaxed);
    if (stale && setup_->configured) {
      // Prepared before the lane configured its instances for the frames it sees now (its first
      // frames, or a new description): it is configured before this frame, keeping the streams'
      // histories the lane has now and growing its buffers in place, as a change prepared after
      // them would.
      auto carried = std::make_shared<Setup>(*next);
      carried->configured = false;
      carried->states = setup_->states;
      carried->buffers = setup_->buffers;
      skipped.push_back({.setup = std::exchange(next, std::move(carried))});
    }
    // Taken from pending_ and made setup_ under one hold of the lock: prepare_stages builds the next
    // change on pending_.back(), or on setup_ when none is pending. Between two holds it would see
    // neither and build on the setup before, and the changes taken here would be lost to every later
    // generation (H100, session 9: live_update_test's [cuda] case, 1 run in 5, a frame of generation
    // 30 with the scale of generation 28).
    previous = std::exchange(setup_, std::move(next));
  }
  if (!skipped.empty()) {
    std::lock_guard lock(retire_mutex_);
    for (Retired& setup : skipped) retired_.push_back(std::move(setup));
  }
  // (An unconfigured setup, prepared before the lane's first frame, gets its states when configured.)
  if (setup_->configured && setup_->states != previous->states) {
    if (setup_->states_reset && previous->states && previous->states->live() > 0)
      state_resets_.fetch_add(1, std::memory_order_relaxed);
    streams_live_.store(setup_->states->live(), std::memory_order_relaxed);
  }
  generation_now_.store(setup_->generation, std::memory_order_relaxed);
  param_changes_.fetch_add(changes, std::memory_order_relaxed);
  failed_frame_.reset();  // a description the old parameters refused may suit the new ones
  retire_replaced(std::move(previous));
}

void DeviceLane::install(std::shared_ptr<Setup> next) {
  std::shared_ptr<Setup> previous;
  {
    std::lock_guard lock(setup_mutex_);
    previous = std::exchange(setup_, std::move(next));
  }
  retire_replaced(std::move(previous));
}

void DeviceLane::retire_replaced(std::shared_ptr<Setup> previous) {
  // Spare result buffers have the size of the slots' result buffers.
  const bool same_outputs = setup_->result_bytes == previous->result_bytes;
  Retired old{.setup = std::move(previous)};
  if (!same_outputs) {
    old.spares = std::move(spare_results_);  // freed with the old setup
    spare_results_.assign(setup_->published_outputs.size(), {});
    spares_needed_steady_ns_.assign(setup_->published_outputs.size(), 0);
    copy_until_steady_ns_.assign(setup_->published_outputs.size(), 0);
    copying_.assign(setup_->published_outputs.size(), 0);
  }
  {
    std::lock_guard lock(retire_mutex_);
    retired_.push_back(std::move(old));
    retiring_.store(true, std::memory_order_relaxed);
  }
  retire_changed_.notify_one();
}

// Frees setups no longer switched to once no slot runs them: stage instances and buffers are
// destroyed here, not on a frame's way. The lane's buffers go back to its MemoryPool without waiting
// for the device; what a stage holds itself is freed by its destructor.
void DeviceLane::retire_loop() {
  if (options_.backend == Backend::cuda) {
    try {
      use_gpu_device(options_.device_id);
    } catch (const std::exception&) {
    }
  }
  std::unique_lock lock(retire_mutex_);
  while (true) {
    std::vector<Retired> unused;
    for (std::size_t i = 0; i < retired_.size();) {
      // Only retired_ holds it (the acquire fence orders a slot's last reads before the free, as in
      // held_by_receivers()).
      if (retired_[i].setup.use_count() == 1) {
        std::atomic_thread_fence(std::memory_order_acquire);
        unused.push_back(std::move(retired_[i]));
        retired_[i] = std::move(retired_.back());
        retired_.pop_back();
      } else {
        ++i;
      }
    }
    retiring_.store(!retired_.empty(), std::memory_order_relaxed);
    if (!unused.empty()) {
      lock.unlock();
      // What a stage holds itself is freed by its destructor, on CUDA often with cudaFree or
      // cufftDestroy, which wait for the whole device: between two of the lane's frames (no slot
      // busy) rather than while one is in flight, when such a moment comes within retire_idle_wait
      // (H100: ncc_track's first frame after a change 0.7 ms slower when its old instance was freed
      // meanwhile).
      {
        std::unique_lock slots(slot_mutex_);
        const auto idle = [&] {
          return !switching_ && std::none_of(slots_.begin(), slots_.end(),
                                             [](const std::unique_ptr<Slot>& slot) { return slot->busy; });
        };
        slot_changed_.wait_for(slots, options_.retire_idle_wait, [&] { return submit_finished_ || idle(); });
      }
      unused.clear();
      lock.lock();
      continue;
    }
    if (retire_stop_ && retired_.empty()) return;
    // Woken when a setup is retired or a slot lets go of one; the timeout covers a missed wake-up.
    retire_changed_.wait_for(lock, std::chrono::milliseconds(retire_stop_ ? 1 : 20));
  }
}

void DeviceLane::process(InputFrame& frame) {
  mark(frame.times, HostPoint::popped);
  if (update_pending_.load(std::memory_order_acquire)) {
    // The frame that switches counts as in flight from here: the retire thread frees the setup it
    // replaces once that frame has finished, not while it starts.
    set_switching(true);
    switch_setup(frame.param_generation);
  }
  if (!ready_for(frame.meta)) {
    // A description that failed is refused as it was, without configuring (and planning) again.
    if (failed_frame_ && same_description(frame.meta, *failed_frame_)) {
      set_switching(false);
      refuse(frame.meta, failed_why_);
      return;
    }
    // The instances run by the frames in flight are configured again: wait until they are done.
    wait_until_idle();
    try {
      configure(frame.meta);
      failed_frame_.reset();
    } catch (const std::exception& e) {
      failed_frame_ = frame.meta;
      failed_why_ = e.what();
      set_switching(false);
      refuse(frame.meta, failed_why_);
      return;
    }
  }
  mark(frame.times, HostPoint::setup_ready);
  Slot& slot = *slots_[next_slot_];
  {
    std::unique_lock lock(slot_mutex_);
    slot_changed_.wait(lock, [&] { return !slot.busy; });
    slot.busy = true;
    switching_ = false;
  }
  slot.frame = std::move(frame);
  mark(slot.frame.times, HostPoint::slot);
  slot.setup = setup_;
  slot.buffers = setup_->buffers[next_slot_].get();
  slot.generation = setup_->generation;
  slot.produced = false;
  slot.failed = false;
  slot.error.clear();
  slot.stages_run = 0;
  try {
    prepare_result_buffers(slot);  // may allocate: a failure is this frame's error
    acquire_stream_state(slot);
    if (options_.backend == Backend::cuda) enqueue_on_cuda(slot);
    else run_on_cpu(slot);
    release_staged_payload(slot);
  } catch (const std::exception& e) {
    slot.failed = true;
    slot.error = e.what();
    if (slot.stream) {
      try {
        slot.done->record(slot.stream->get());  // the slot is reused only after its work ends
      } catch (const std::exception&) {
      }
    }
  }
  {
    std::lock_guard lock(slot_mutex_);
    in_flight_.push_back(next_slot_);
  }
  issued_.fetch_add(1, std::memory_order_release);
  slot_changed_.notify_all();
  next_slot_ = (next_slot_ + 1) % slots_.size();
}

void DeviceLane::acquire_stream_state(Slot& slot) {
  slot.state = nullptr;
  StreamStates& states = *slot.setup->states;
  if (states.empty_state()) return;
  const std::uint32_t stream_id = slot.frame.meta.stream_id;
  if (options_.backend == Backend::cuda && states.would_evict(stream_id)) {
    // The evicted stream's buffers may still be read by work in flight on another slot.
    std::unique_lock lock(slot_mutex_);
    slot_changed_.wait(lock, [&] { return in_flight_.empty(); });
  }
  bool evicted = false;
  slot.state = &states.acquire(stream_id, evicted, slot.stream ? slot.stream->get() : nullptr);
  streams_live_.store(states.live(), std::memory_order_relaxed);
  if (evicted) {
    const std::uint64_t count = streams_evicted_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (worth_a_line(count))
      spdlog::warn("pipeline {}: more than {} live streams: the least recently used one's state is forgotten "
                   "for stream {} ({} evicted so far; max_streams)", name_, states.capacity(),
                   stream_id, count);
  }
}

void DeviceLane::prepare_result_buffers(Slot& slot) {
  const MemoryKind kind = options_.backend == Backend::cuda ? MemoryKind::pinned : MemoryKind::host;
  const std::size_t outputs = slot.setup->published_outputs.size();
  slot.claims.assign(outputs, nullptr);
  for (std::size_t p = 0; p < outputs; ++p) {
    slot.buffers->copy_results[p] = false;
    if (callbacks_.claim_result) {
      const PublishedOutput& out = slot.setup->published_outputs[p];
      slot.claims[p] = callbacks_.claim_result(name_, out.name, out.spec.byte_size());
      if (slot.claims[p] && !slot.claims[p]->data) slot.claims[p].reset();
      if (slot.claims[p]) {
        if (options_.backend == Backend::cpu)
          slot.buffers->output_pointers[out.stage][out.output] = slot.claims[p]->data;
        continue;
      }
    }
    std::shared_ptr<Buffer>& current = slot.buffers->results[p];
    std::shared_ptr<Buffer>& own = slot.buffers->private_results[p];
    const bool was_private = own && current == own;
    const bool needs_spare = was_private || held_by_receivers(current);
    const std::int64_t now = steady_ns();
    if (!needs_spare && now - spares_needed_steady_ns_[p] >= kSpareIdle.count()) {
      // Receivers kept up for kSpareIdle: the spares they let go of are freed, and the slot's buffer
      // for copies too, so a stall that reached the cap leaves nothing behind.
      release_idle_spares(p);
      own.reset();
    }
    if (needs_spare) {
      spares_needed_steady_ns_[p] = now;
      // A receiver (e.g. a ZeroMQ message in flight) still holds last round's result: park it and
      // take a released spare, or grow the spares up to the cap when receivers lag.
      std::vector<std::shared_ptr<Buffer>>& spares = spare_results_[p];
      if (!was_private) spares.push_back(std::move(current));
      std::shared_ptr<Buffer> released = take_released(spares);
      if (released) copying_[p] = false;  // receivers let go again: wait for them from now on
      if (!released && spares.size() < spare_cap(slot.setup->result_bytes[p])) {
        released = std::make_shared<Buffer>();
        released->reserve(kind, slot.setup->result_bytes[p]);
      }
      if (!released && may_wait_for_spares_ && !copying_[p] && now >= copy_until_steady_ns_[p]) {
        released = wait_for_spare(spares);
        if (!released) {
          // A receiver that holds on (a stalled subscriber): copies, without waiting again until a
          // spare comes back, and not within kSpareIdle (one that lets go only now and then).
          copying_[p] = true;
          copy_until_steady_ns_[p] = steady_ns() + kSpareIdle.count();
          spare_waits_timed_out_.fetch_add(1, std::memory_order_relaxed);
        }
      }
      if (released) {
        current = std::move(released);
      } else {
        // Cap reached (a receiver that never lets go): publish a copy from the slot's own buffer.
        if (!own) {
          own = std::make_shared<Buffer>();
          own->reserve(kind, slot.setup->result_bytes[p]);
        }
        current = own;
        slot.buffers->copy_results[p] = true;
        const std::uint64_t count = results_copied_.fetch_add(1, std::memory_order_relaxed) + 1;
        if (worth_a_line(count))
          spdlog::warn("pipeline {}: receivers hold {} result buffers of output {}: results are published as "
                       "copies until they let go ({} so far; results_copied)", name_, spares.size(),
                       slot.setup->published_outputs[p].name, count);
      }
    }
    // CPU stages write published outputs directly into the result buffer.
    if (options_.backend == Backend::cpu) {
      const PublishedOutput& out = slot.setup->published_outputs[p];
      slot.buffers->output_pointers[out.stage][out.output] = current->data();
    }
  }
}

void DeviceLane::release_staged_payload(Slot& slot) {
  // The socket's buffer is done with once the CPU stages have run or its bytes are in the slot's
  // pinned input (a pinned payload is read by the H2D still in flight: it stays until completion).
  // Handing it back now, not a frame later at completion, keeps fewer receive buffers alive: the
  // allocator gives ZeroMQ's next receive memory that is already mapped instead of fresh pages.
  if (options_.backend == Backend::cpu || !slot.frame.payload_pinned) {
    slot.frame.payload.reset();
    mark(slot.frame.times, HostPoint::payload_released);
  }
}

std::size_t DeviceLane::spare_cap(std::size_t result_bytes) const {
  constexpr std::size_t kLeastSpares = 2;
  const std::size_t by_bytes = result_bytes > 0 ? options_.max_spare_bytes / result_bytes : options_.max_spare_results;
  return std::min(options_.max_spare_results, std::max(kLeastSpares, by_bytes));
}

std::shared_ptr<Buffer> DeviceLane::wait_for_spare(std::vector<std::shared_ptr<Buffer>>& spares) {
  // The receivers (ZeroMQ's I/O thread) give no signal when they let go: look again every
  // kSparePoll, a fraction of one result's write.
  const auto until = std::chrono::steady_clock::now() + options_.spare_wait;
  while (std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(kSparePoll);
    if (std::shared_ptr<Buffer> released = take_released(spares)) {
      spare_waits_.fetch_add(1, std::memory_order_relaxed);
      return released;
    }
  }
  return nullptr;
}

void DeviceLane::release_idle_spares(std::size_t output) {
  // Receivers keep up again (e.g. a stalled subscriber left; the caller saw kSpareIdle without a
  // spare needed): the spares they let go of are freed, so the memory a lagging receiver cost is
  // returned.
  std::erase_if(spare_results_[output], [](const std::shared_ptr<Buffer>& spare) { return !held_by_receivers(spare); });
}

void DeviceLane::run_on_cpu(Slot& slot) {
  const void* input = slot.frame.payload.get();
  if (reinterpret_cast<std::uintptr_t>(input) % kCpuInputAlignment != 0) {
    std::memcpy(slot.input_host.data(), input, slot.frame.payload_bytes);
    input = slot.input_host.data();
  }
  slot.compute_start_ns = wall_clock_ns();
  slot.compute_start_steady_ns = steady_ns();
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    StageIo io{.frame = slot.frame.meta, .input_spec = slot.setup->stage_inputs[i], .input = input,
               .outputs = slot.buffers->output_pointers[i], .workspace = slot.buffers->workspace[i].data(),
               .host_staging = slot.buffers->staging[i].data(),
               .state = slot.state ? slot.state->buffers[i].data() : nullptr, .pool = options_.pool,
               .state_frames = slot.state ? slot.state->frames[i] : 0};
    const std::int64_t before = steady_ns();
    const bool produced = slot.setup->instances[i]->run_cpu(io);
    if (slot.state) ++slot.state->frames[i];
    slot.cpu_compute_ms[i] = ms_between(before, steady_ns());
    slot.enqueue_ms[i] = slot.cpu_compute_ms[i];
    slot.stages_run = i + 1;
    if (!produced) {
      slot.compute_end_ns = wall_clock_ns();
      return;
    }
    if (!slot.setup->plans[i].passes_input) input = slot.buffers->output_pointers[i][0];
  }
  slot.produced = true;
  slot.compute_end_ns = wall_clock_ns();
}

void DeviceLane::enqueue_on_cuda(Slot& slot) {
  GpuStream stream = slot.stream->get();
  const std::size_t bytes = slot.frame.payload_bytes;
  // Pageable bytes from the socket go to the driver as they are: cudaMemcpyAsync copies them
  // through its own small pinned buffers, each sent while the next is filled, and returns once the
  // last piece is in them (the payload may then be let go of; only this slot's stream, idle here,
  // is waited for). Staging the whole frame into the slot's pinned input first (SONOPIPE_STAGING=
  // slot, before 2026-11-26) wrote and read 5.5 MB more of host memory per channel frame, which
  // made ZeroMQ's receive copy on the I/O thread, the daemon's bottleneck, about 30 % dearer
  // (docs/host-path.md). Pinned payloads (shared memory) are copied asynchronously as they are.
  const void* host_input = slot.frame.payload.get();
  const bool staged = !slot.frame.payload_pinned && switches_.staging == HostPathSwitches::Staging::slot;
  if (staged) {
    mark(slot.frame.times, HostPoint::staging_begin);
    stage_into_pinned(slot.input_host.data(), host_input, bytes);
    mark(slot.frame.times, HostPoint::staging_end);
    host_input = slot.input_host.data();
  }
  slot.start->record(stream);
  if (!staged && !slot.frame.payload_pinned) mark(slot.frame.times, HostPoint::staging_begin);
  copy_to_device_async(slot.input_device.data(), host_input, bytes, stream);
  if (!staged && !slot.frame.payload_pinned) mark(slot.frame.times, HostPoint::staging_end);
  slot.after_h2d->record(stream);
  // The frame's own pinned memory (e.g. a producer's shared-memory slot) goes back when its copy
  // is done, before the rest of the frame: the completion thread waits for after_h2d first. (A
  // CUDA host function queued after the copy did it before, but it held the stream's kernels back
  // until the driver's callback thread had run: a thread wake-up on every frame's path.)
  const void* input = slot.input_device.data();
  bool produced = true;
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    Stage& stage = *slot.setup->instances[i];
    if (stage.keeps_state()) {
      // Frame order for stateful stages: wait for the previous frame's run of this stage, which
      // lives on the previous slot of the ring (slots are used round-robin).
      const std::size_t previous = (next_slot_ + slots_.size() - 1) % slots_.size();
      if (previous != next_slot_ && slots_[previous]->stages_run > i)
        slots_[previous]->after_stage[i]->wait_on(stream);
    }
    StageIo io{.frame = slot.frame.meta, .input_spec = slot.setup->stage_inputs[i], .input = input,
               .outputs = slot.buffers->output_pointers[i], .workspace = slot.buffers->workspace[i].data(),
               .host_staging = slot.buffers->staging[i].data(),
               .state = slot.state ? slot.state->buffers[i].data() : nullptr, .stream = stream,
               .pool = options_.pool, .state_frames = slot.state ? slot.state->frames[i] : 0};
    const std::int64_t before = steady_ns();
    produced = stage.run_cuda(io);
    if (slot.state) ++slot.state->frames[i];
    slot.enqueue_ms[i] = ms_between(before, steady_ns());
    slot.after_stage[i]->record(stream);
    slot.stages_run = i + 1;
    if (!produced) break;
    if (!slot.setup->plans[i].passes_input) input = slot.buffers->output_pointers[i][0];
  }
  if (produced) {
    for (std::size_t p = 0; p < slot.setup->published_outputs.size(); ++p) {
      const PublishedOutput& out = slot.setup->published_outputs[p];
      void* host = slot.claims[p] ? slot.claims[p]->data : slot.buffers->results[p]->data();
      copy_to_host_async(host, slot.buffers->output_pointers[out.stage][out.output], out.spec.byte_size(), stream);
    }
  }
  slot.done->record(stream);
  slot.produced = produced;
  mark(slot.frame.times, HostPoint::issued);
}

void DeviceLane::stage_into_pinned(void* pinned, const void* payload, std::size_t bytes) {
  // One thread copies about 8 GB/s: a 5.5 MB frame took 0.7 ms of the submit thread on the H100's
  // host. Large frames are copied in 1 MiB pieces by the pipeline's pool.
  constexpr std::size_t kPiece = std::size_t(1) << 20;
  if (!options_.pool || bytes < 2 * kPiece) {
    std::memcpy(pinned, payload, bytes);
    return;
  }
  const std::size_t pieces = (bytes + kPiece - 1) / kPiece;
  options_.pool->parallel_for(pieces, [&](std::size_t begin, std::size_t end) {
    const std::size_t from = begin * kPiece, to = std::min(bytes, end * kPiece);
    std::memcpy(static_cast<std::byte*>(pinned) + from, static_cast<const std::byte*>(payload) + from, to - from);
  });
}

void DeviceLane::completion_loop() {
  if (options_.backend == Backend::cuda) {
    try {
      use_gpu_device(options_.device_id);
    } catch (const std::exception&) {
      // The submit thread reports it per frame; waiting on events needs no current device.
    }
  }
  while (true) {
    std::size_t index = 0;
    {
      std::unique_lock lock(slot_mutex_);
      slot_changed_.wait(lock, [&] { return !in_flight_.empty() || submit_finished_; });
      if (in_flight_.empty()) return;
      index = in_flight_.front();
    }
    Slot& slot = *slots_[index];
    finish(slot);
    FrameTimes* const times = slot.frame.times;
    slot.frame.payload.reset();  // hand the socket's buffer back now, not when the slot is reused
    // Let go of the frame's setup; the retire thread frees a replaced one once no slot holds it.
    slot.buffers = nullptr;
    slot.setup.reset();
    if (retiring_.load(std::memory_order_relaxed)) retire_changed_.notify_one();
    {
      std::lock_guard lock(slot_mutex_);
      in_flight_.pop_front();
      slot.busy = false;
    }
    mark(times, HostPoint::slot_free);
    slot_changed_.notify_all();
  }
}

void DeviceLane::finish(Slot& slot) {
  const bool cuda = options_.backend == Backend::cuda;
  double busy_ms = 0.0;
  ResultTiming timing{.received_ns = slot.frame.received_ns};
  if (cuda && !slot.failed) {
    try {
      if (slot.frame.payload_pinned) {
        slot.after_h2d->synchronize();
        slot.frame.payload.reset();  // its bytes are on the device: the producer's slot goes back
      }
      slot.done->synchronize();
      const std::int64_t seen_done_ns = wall_clock_ns();
      mark(slot.frame.times, HostPoint::done_seen);
      const double h2d = slot.after_h2d->milliseconds_since(*slot.start);
      double stages_ms = 0.0;
      const GpuEvent* previous = slot.after_h2d.get();
      for (std::size_t i = 0; i < slot.stages_run; ++i) {
        const double ms = slot.after_stage[i]->milliseconds_since(*previous);
        stage_compute_ms_[i]->add(ms);
        stages_ms += ms;
        previous = slot.after_stage[i].get();
      }
      const double d2h = slot.done->milliseconds_since(*previous);
      h2d_ms_.add(h2d);
      d2h_ms_.add(d2h);
      busy_ms = h2d + stages_ms + d2h;
      timing.compute_end_ns = seen_done_ns - static_cast<std::int64_t>(d2h * 1e6);
      timing.compute_start_ns = timing.compute_end_ns - static_cast<std::int64_t>(stages_ms * 1e6);
      if (slot.frame.times) {
        // The GPU's instants on the host clock, through the epoch event (within its sync's latency).
        const double start_ms = slot.start->milliseconds_since(*epoch_);
        auto at = [&](double ms) { return epoch_steady_ns_ + static_cast<std::int64_t>(ms * 1e6); };
        slot.frame.times->mark(HostPoint::gpu_start, at(start_ms));
        slot.frame.times->mark(HostPoint::gpu_h2d_end, at(start_ms + h2d));
        slot.frame.times->mark(HostPoint::gpu_stages_end, at(start_ms + h2d + stages_ms));
        slot.frame.times->mark(HostPoint::gpu_done, at(start_ms + busy_ms));
      }
      if (options_.trace_capacity > 0) {
        const double start_ms = slot.start->milliseconds_since(*epoch_);
        record_trace({slot.frame.meta.sequence, start_ms, start_ms + h2d, start_ms + h2d + stages_ms,
                      start_ms + busy_ms});
      }
    } catch (const std::exception& e) {
      slot.failed = true;
      slot.error = e.what();
    }
  } else if (!cuda) {
    for (std::size_t i = 0; i < slot.stages_run; ++i) {
      stage_compute_ms_[i]->add(slot.cpu_compute_ms[i]);
      busy_ms += slot.cpu_compute_ms[i];
    }
    timing.compute_start_ns = slot.compute_start_ns;
    timing.compute_end_ns = slot.compute_end_ns;
    if (options_.trace_capacity > 0 && !slot.failed) {
      const double start_ms = ms_between(started_steady_ns_, slot.compute_start_steady_ns);
      record_trace({slot.frame.meta.sequence, start_ms, start_ms, start_ms + busy_ms, start_ms + busy_ms});
    }
  }
  if (slot.failed) {
    if (cuda) {
      try {
        slot.done->synchronize();  // work issued before the error still reads the slot's buffers
      } catch (const std::exception&) {
      }
    }
    report_stage_error(slot.frame.meta, slot.error);
    for (auto& claim : slot.claims) claim.reset();  // abandoned: never published
    report_frame_done(slot.frame.meta);
    return;
  }
  for (std::size_t i = 0; i < slot.stages_run; ++i) stage_enqueue_ms_[i]->add(slot.enqueue_ms[i]);
  busy_ms_.add(busy_ms);
  busy_ns_total_.fetch_add(static_cast<std::uint64_t>(busy_ms * 1e6), std::memory_order_relaxed);
  // Counted before the results leave, so whoever has received a result finds it in the status;
  // published first, so that a status showing a frame processed shows its results published.
  const bool publishing = slot.produced && callbacks_.publish;
  if (publishing) published_.fetch_add(slot.setup->published_outputs.size(), std::memory_order_release);
  processed_.fetch_add(1, std::memory_order_release);
  if (publishing) {
    for (std::size_t p = 0; p < slot.setup->published_outputs.size(); ++p) {
      const PublishedOutput& out = slot.setup->published_outputs[p];
      std::shared_ptr<const void> owner;
      std::shared_ptr<ResultClaim> claim = std::move(slot.claims[p]);
      const void* data = claim ? claim->data : slot.buffers->results[p]->data();
      if (claim) owner = claim;
      else if (!slot.buffers->copy_results[p]) owner = slot.buffers->results[p];
      try {
        callbacks_.publish(PublishedResult{.pipeline = name_, .output = out.name, .frame = slot.frame.meta,
                                           .spec = out.spec, .data = data,
                                           .bytes = out.spec.byte_size(), .timing = timing,
                                           .backend = options_.backend, .owner = std::move(owner),
                                           .claim = std::move(claim), .param_generation = slot.generation});
      } catch (const std::exception& e) {
        published_.fetch_sub(1, std::memory_order_relaxed);
        const std::uint64_t count = publish_errors_.fetch_add(1, std::memory_order_relaxed) + 1;
        if (callbacks_.publish_error && worth_a_line(count)) {
          try {
            callbacks_.publish_error(slot.frame.meta, name_,
                                     "publishing " + out.name + " failed (" + std::to_string(count) +
                                         " so far): " + e.what());
          } catch (const std::exception&) {
          }
        }
      }
    }
  }
  for (auto& claim : slot.claims) claim.reset();  // a frame that produced nothing: abandoned
  mark(slot.frame.times, HostPoint::published);
  const std::int64_t now_steady = steady_ns();
  latency_ms_.add(ms_between(slot.frame.received_ns, wall_clock_ns()));
  if (last_completion_steady_ns_ != 0) interval_ms_.add(ms_between(last_completion_steady_ns_, now_steady));
  last_completion_steady_ns_ = now_steady;
  report_frame_done(slot.frame.meta);
}

void DeviceLane::report_stage_error(const FrameMeta& frame, const std::string& why) {
  stage_errors_.fetch_add(1, std::memory_order_relaxed);
  if (!callbacks_.stage_error) return;
  try {
    callbacks_.stage_error(frame, name_, why);
  } catch (const std::exception&) {
    // Reporting must not end the thread; the frame is counted above.
  }
}

// A frame refused before it got a slot. With a frame_done receiver it is reported once every frame
// issued before it has left, so frame_done stays in frame order.
void DeviceLane::refuse(const FrameMeta& frame, const std::string& why) {
  if (callbacks_.frame_done) {
    std::unique_lock lock(slot_mutex_);
    slot_changed_.wait(lock, [&] { return in_flight_.empty(); });
  }
  report_stage_error(frame, why);
  report_frame_done(frame);
}

void DeviceLane::report_frame_done(const FrameMeta& frame) {
  if (callbacks_.frame_done) callbacks_.frame_done(frame);
}

void DeviceLane::record_trace(const FrameTrace& trace) {
  std::lock_guard lock(trace_mutex_);
  if (traces_.size() == options_.trace_capacity) traces_.pop_front();
  traces_.push_back(trace);
}

std::vector<FrameTrace> DeviceLane::traces() const {
  std::lock_guard lock(trace_mutex_);
  return {traces_.begin(), traces_.end()};
}

LaneStats DeviceLane::stats() const {
  LaneStats stats;
  stats.name = name_;
  stats.accepted = accepted_.load();
  stats.issued = issued_.load(std::memory_order_acquire);
  stats.processed = processed_.load(std::memory_order_acquire);  // before published: see finish()
  stats.published = published_.load(std::memory_order_acquire);
  stats.dropped = queue_.dropped();
  stats.stage_errors = stage_errors_.load();
  stats.publish_errors = publish_errors_.load(std::memory_order_relaxed);
  stats.results_copied = results_copied_.load(std::memory_order_relaxed);
  stats.results_waited = spare_waits_.load(std::memory_order_relaxed);
  stats.spare_waits_timed_out = spare_waits_timed_out_.load(std::memory_order_relaxed);
  stats.streams_live = streams_live_.load(std::memory_order_relaxed);
  stats.streams_evicted = streams_evicted_.load(std::memory_order_relaxed);
  stats.param_generation = generation_now_.load(std::memory_order_relaxed);
  stats.param_changes = param_changes_.load(std::memory_order_relaxed);
  stats.state_resets = state_resets_.load(std::memory_order_relaxed);
  stats.queue_depth = queue_.depth();
  stats.slots = options_.slots;
  stats.latency_ms = latency_ms_.percentiles();
  stats.h2d_ms = h2d_ms_.percentiles();
  stats.d2h_ms = d2h_ms_.percentiles();
  stats.busy_ms = busy_ms_.percentiles();
  stats.interval_ms = interval_ms_.percentiles();
  stats.busy_ms_total = busy_ns_total_.load(std::memory_order_relaxed) * 1e-6;
  for (std::size_t i = 0; i < stages_.size(); ++i)
    stats.stages.push_back({stages_[i].label, stage_compute_ms_[i]->percentiles(),
                            stage_enqueue_ms_[i]->percentiles()});
  return stats;
}

}  // namespace sonopipe
