// One device's lane of a pipeline (runtime/pipeline_executor.h runs one lane per device): a queue
// in front, a ring of slots, a submit thread and a completion thread.
//
// Data flow per frame: the submit thread takes the next frame from the queue, waits for the next
// slot in the ring to be free, and issues the frame's work on that slot — on CUDA: H2D on the
// slot's stream (from pageable memory through the driver's pinned buffers, or straight from a
// pinned payload), every stage on that stream, D2H of the published
// outputs, events between the steps; on the CPU: every stage in turn, each parallelised on the
// thread pool. The completion thread takes slots in submission order, waits for their work (CUDA
// event), publishes their results and frees the slot. With S slots, frame N+1's H2D overlaps frame
// N's kernels and frame N-1's D2H; results always leave in frame order.
//
// Buffers are sized by Stage::configure() and grow only when the input description changes, so
// same-shaped frames never allocate. On CUDA the lane's device and pinned buffers come from its own
// MemoryPool (runtime/gpu_resources.h): allocating and letting go of them while frames run (a live
// change, a new description, a retired setup) never waits for the device. Stages that keep state
// run in frame order across slots (the stream waits on the previous frame's event for that stage)
// and keep one state per stream id (runtime/stream_states.h, at most `max_streams` live, least
// recently used evicted).
//
// Result buffers a receiver still holds are parked as spares, at most `max_spare_results` (and
// `max_spare_bytes`, but at least 2) per published output; past that, under overflow: block, the
// lane waits for a receiver to let one go (`spare_wait`, counted: results_waited), and otherwise
// the result is written to a slot-private buffer and published as a copy (counted:
// results_copied), so a receiver that never lets go cannot pin more memory.
// Spares are freed once receivers have kept up for a second (the memory of a stalled receiver
// that left is returned).
// Nothing thrown in the submit or completion thread escapes it: per frame it is a counted stage
// or publish error; a description that failed to configure is refused without configuring again.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sdk/backend.h"
#include "runtime/frame_queue.h"
#include "runtime/gpu_resources.h"
#include "runtime/host_path_switches.h"
#include "runtime/host_timeline.h"
#include "runtime/pipeline_def.h"
#include "runtime/sample_window.h"
#include "runtime/stream_states.h"

namespace sonopipe {

class ThreadPool;

struct ExecutorOptions {
  Backend backend = Backend::cpu;
  int device_id = 0;               // CUDA device
  int slots = 2;                   // frames in flight (>= 1; >= 2 to overlap)
  std::size_t queue_depth = 8;     // frames waiting in front of the executor
  OverflowPolicy overflow = OverflowPolicy::block;
  ThreadPool* pool = nullptr;      // CPU backend: required
  std::size_t trace_capacity = 0;  // keep the timelines of the last N frames (tests, benchmarks)
  std::size_t max_streams = 64;        // live per-stream states of stateful stages
  std::size_t max_spare_results = 8;   // parked result buffers per published output
  // ... and at most this many bytes of them, but always 2 (large results: a short queue in front of
  // the publisher's I/O thread keeps it busy, and the results it reads are still in the cache).
  std::size_t max_spare_bytes = std::size_t(32) << 20;
  // overflow: block only. With every spare held, how long the submit thread waits for a receiver to
  // let one go before it publishes a copy. Receivers that keep up (ZeroMQ's I/O thread writing
  // results more slowly than the device makes them) let go within one result's write: the lane
  // waits for them, and the back-pressure reaches the sender as the block policy promises, instead
  // of queueing copies that the I/O thread then reads from memory no cache holds. A receiver that
  // holds on past this (a stalled subscriber) costs one wait: copies follow, as under drop_oldest,
  // until a spare comes back (and for at least a second). The daemon takes publish.stall_timeout_s
  // when it is shorter: the lane waits no longer than the daemon takes to call a subscriber stalled.
  std::chrono::microseconds spare_wait{100'000};
  // CUDA: pinned memory the lane lets go of while it runs (buffers replaced by a live change or a new
  // description) is kept for reuse up to this many bytes, not freed (cudaFreeHost waits for the
  // whole device); see MemoryPool.
  std::size_t keep_pinned_bytes = std::size_t(64) << 20;
  // CUDA: after configuring for a description the lane's pools hold, beyond what its buffers use,
  // twice that again (at least 16 MiB, at most this, per device and pinned memory), so that a live
  // change to a larger shape allocates without the driver (see MemoryPool).
  std::size_t reserve_bytes = std::size_t(256) << 20;
  // A setup a live change replaced is freed (its stage instances destroyed: on CUDA often cudaFree or
  // cufftDestroy, which wait for the whole device) between two of the lane's frames, when no frame is
  // in flight; after waiting this long for such a moment, anyway.
  std::chrono::milliseconds retire_idle_wait{100};
};

// Where one frame's work sat in time, in ms since the executor started (CUDA: from the slot's
// events, so the timelines of different slots can be compared to see copies and kernels overlap).
struct FrameTrace {
  std::uint64_t sequence = 0;
  double h2d_start_ms = 0, h2d_end_ms = 0;  // CPU: both = compute start
  double compute_end_ms = 0;                // last stage finished
  double d2h_end_ms = 0;                    // CPU: = compute_end_ms
};

// Wall-clock instants of one frame's trip (ns since the Unix epoch). On CUDA compute_start/end
// are derived from the slot's events: end = when the host saw the frame finish minus the D2H
// time, start = end minus the stages' GPU time.
struct ResultTiming {
  std::int64_t received_ns = 0;
  std::int64_t compute_start_ns = 0;
  std::int64_t compute_end_ns = 0;
};

// Host memory a published result is written into, lent by the receiver that publishes it (e.g. a
// slot of a shared-memory pool registered with CUDA): the lane's D2H copy (CPU: the stage itself)
// writes there, so the result is written once. The receiver recognises its claim in publish() and
// publishes in place; whoever holds the last reference gives the memory back (a claim never
// published, e.g. of a frame a stage refused, is abandoned). Its destructor must make no CUDA call.
struct ResultClaim {
  virtual ~ResultClaim() = default;
  void* data = nullptr;
};

// One published array. `data` is host memory valid during the callback; a receiver that wants
// to send it without copying keeps `owner` (a reference to the buffer) until it is done: the
// executor never reuses a result buffer somebody else still holds.
struct PublishedResult {
  const std::string& pipeline;
  const std::string& output;
  const FrameMeta& frame;
  const TensorSpec& spec;
  const void* data;
  std::size_t bytes;
  ResultTiming timing;
  Backend backend;
  std::shared_ptr<const void> owner;
  // Set when `data` is the receiver's own claim (ExecutorCallbacks::claim_result); `owner` then
  // holds it too.
  std::shared_ptr<ResultClaim> claim;
  // The pipeline's parameter generation in force when this frame started (0: as configured at
  // start; each accepted live change adds one). See DeviceLane::update_stages.
  std::uint64_t param_generation = 0;
};

// A stage instance built from changed parameters, to replace stage `stage` of a lane, and how to
// build another like it (PipelineStage::make).
struct StageUpdate {
  std::size_t stage = 0;
  std::unique_ptr<Stage> instance;
  std::function<std::unique_ptr<Stage>()> make;
};

struct ExecutorCallbacks {
  // Called from the completion thread, in frame order.
  std::function<void(const PublishedResult&)> publish;
  // A frame the pipeline could not process (StageError from configure or an error from a stage).
  std::function<void(const FrameMeta& frame, const std::string& pipeline, const std::string& why)>
      stage_error;
  // Called once per frame that left the executor (published, produced nothing, or refused by a
  // stage), from the thread that finished it, in frame order and after its publish/stage_error
  // calls. The multi-device executor uses it to release results in frame order across devices.
  std::function<void(const FrameMeta& frame)> frame_done;
  // A result the publish callback threw on (the frame was processed; the result is lost, counted
  // in publish_errors). Called at the 1st, 2nd, 4th, 8th, ... error, so a flood logs few lines.
  std::function<void(const FrameMeta& frame, const std::string& pipeline, const std::string& why)>
      publish_error;
  // Optional: memory to write a published output of `bytes` into (see ResultClaim), asked for by the
  // submit thread before the frame's work is issued (it may wait, e.g. for a lossless subscriber:
  // back-pressure). Null or a claim without data: the lane's own result buffer is used.
  std::function<std::shared_ptr<ResultClaim>(const std::string& pipeline, const std::string& output,
                                             std::size_t bytes)>
      claim_result;
};

struct StageStats {
  std::string label;
  Percentiles compute_ms;  // CUDA: GPU time between the events around the stage; CPU: wall time
  Percentiles enqueue_ms;  // host time spent in run_*() (the whole compute on the CPU backend)
};

struct LaneStats {
  std::string name;
  std::uint64_t accepted = 0;     // frames handed to this pipeline (queued)
  std::uint64_t issued = 0;       // frames whose work was issued on a slot (in flight until processed)
  std::uint64_t processed = 0;    // frames that went through every stage (with or without output)
  std::uint64_t published = 0;    // results published
  std::uint64_t dropped = 0;      // discarded by the overflow policy
  std::uint64_t stage_errors = 0; // frames refused by a stage
  std::uint64_t publish_errors = 0;  // results the publish callback threw on
  std::uint64_t results_copied = 0;  // results published from a private buffer (spare cap reached)
  std::uint64_t results_waited = 0;  // results that waited for a receiver to let go of a spare (spare_wait)
  std::uint64_t spare_waits_timed_out = 0;  // waits that ran out (a receiver held on): copies followed
  std::size_t streams_live = 0;      // streams with state (stateful stages)
  std::uint64_t streams_evicted = 0; // least recently used streams forgotten (max_streams)
  std::uint64_t param_generation = 0;  // parameter generation of the frames started now
  std::uint64_t param_changes = 0;     // parameter changes applied (between two frames)
  // Stream states started afresh by a parameter change that changed their size (logged with the
  // stage and the sizes); a change that keeps the sizes keeps every stream's history.
  std::uint64_t state_resets = 0;
  std::size_t queue_depth = 0;
  int slots = 0;
  Percentiles latency_ms;   // received -> last result published
  Percentiles h2d_ms;       // CUDA only
  Percentiles d2h_ms;       // CUDA only
  Percentiles busy_ms;      // per frame: H2D + stages + D2H (CUDA) or stages (CPU)
  Percentiles interval_ms;  // between consecutive frame completions
  double busy_ms_total = 0; // sum of busy_ms over every processed frame
  std::vector<StageStats> stages;
};

class DeviceLane {
 public:
  DeviceLane(std::string name, std::vector<PipelineStage> stages, ExecutorOptions options,
                   ExecutorCallbacks callbacks);
  ~DeviceLane();  // drains
  DeviceLane(const DeviceLane&) = delete;
  DeviceLane& operator=(const DeviceLane&) = delete;

  const std::string& name() const { return name_; }
  // Queues a frame (blocks or drops per the overflow policy). False after drain() began.
  bool submit(InputFrame frame);
  // Stops taking frames, finishes and publishes every queued one, joins the threads. Idempotent.
  void drain();
  LaneStats stats() const;
  // The last `trace_capacity` frames' timelines, oldest first.
  std::vector<FrameTrace> traces() const;
  // A live parameter change, in two steps so that a pipeline over several devices changes on all
  // or none. prepare_stages() builds the lane's next *setup* off the frame path, on the calling
  // thread with the lane's device current: the changed instances configured for the frames the lane
  // sees now, a fresh instance of every later stage whose input it changes, buffers for every slot
  // where the old ones do not fit (shared where they do), stream states kept when their size is
  // (else started afresh: state_resets). Throws when a stage refuses (nothing changes).
  // commit_stages() queues it: the next frame the lane starts whose stated generation
  // (InputFrame::param_generation) reaches `generation` switches to it by a pointer exchange, and
  // carries `generation`; frames already started finish with their own setup; the old setup is
  // freed on the lane's retire thread once its last frame has finished. A setup prepared for other
  // frames than the ones arriving (their description changed meanwhile) is configured between two
  // frames, after the frames in flight, as a new description is. Calls must not overlap (the
  // executor serialises them); each builds on the setup committed before it.
  struct Setup;
  std::shared_ptr<Setup> prepare_stages(std::vector<StageUpdate> updates, std::uint64_t generation);
  void commit_stages(std::shared_ptr<Setup> setup);
  // Both steps at once (one lane).
  void update_stages(std::vector<StageUpdate> updates, std::uint64_t generation);
  // The frame description the lane last configured, and each stage's input for it (none before the
  // first frame). Any thread: a live change is tried on it before it is accepted.
  struct Description {
    FrameMeta frame;
    std::vector<TensorSpec> stage_inputs;
  };
  std::optional<Description> description() const;

 private:
  struct Slot;
  struct SlotBuffers;
  struct Retired;
  struct PublishedOutput {
    std::size_t stage = 0, output = 0;
    std::string name;
    TensorSpec spec;
  };

  void submit_loop();
  void completion_loop();
  void retire_loop();
  static bool same_description(const FrameMeta& frame, const FrameMeta& reference);
  void process(InputFrame& frame);
  void acquire_stream_state(Slot& slot);
  void configure(const FrameMeta& frame);          // submit thread, nothing in flight
  void reserve_headroom();                         // CUDA: the pools' room for growth
  void plan(Setup& next, const FrameMeta& frame, const Setup* reuse);
  void size_buffers(SlotBuffers& buffers, const Setup& setup) const;
  void switch_setup(std::uint64_t stated_generation);  // submit thread, before a frame starts
  void install(std::shared_ptr<Setup> next);       // submit thread: setup_ = next, the old one retired
  void retire_replaced(std::shared_ptr<Setup> previous);  // submit thread: after setup_ changed
  bool ready_for(const FrameMeta& frame) const;    // setup_ is configured for `frame`
  void wait_until_idle();                          // no slot in flight
  void set_switching(bool switching);              // submit thread: a frame is switching setups
  void run_on_cpu(Slot& slot);
  void enqueue_on_cuda(Slot& slot);
  void finish(Slot& slot);
  void record_trace(const FrameTrace& trace);
  void prepare_result_buffers(Slot& slot);
  void release_idle_spares(std::size_t output);
  std::shared_ptr<Buffer> wait_for_spare(std::vector<std::shared_ptr<Buffer>>& spares);
  std::size_t spare_cap(std::size_t result_bytes) const;  // spares of one output: max_spare_results / _bytes
  void release_staged_payload(Slot& slot);
  void stage_into_pinned(void* pinned, const void* payload, std::size_t bytes);  // SONOPIPE_STAGING=slot
  void report_stage_error(const FrameMeta& frame, const std::string& why);
  void refuse(const FrameMeta& frame, const std::string& why);
  void report_frame_done(const FrameMeta& frame);

  const std::string name_;
  // Labels, prefixes and publish flags; the instances and their factories live in the setups.
  std::vector<PipelineStage> stages_;
  const ExecutorOptions options_;
  // spare_wait applies (overflow: block); drop_oldest never holds a frame for a receiver.
  const bool may_wait_for_spares_;
  const ExecutorCallbacks callbacks_;
  FrameQueue queue_;
  std::shared_ptr<MemoryPool> memory_;  // CUDA: where the slots' and setups' buffers come from

  // What the frames the submit thread starts run: stage instances, their plans for one frame
  // description, every slot's buffers, the stream states (runtime/device_lane.cpp). Replaced, never
  // changed once other threads can see it; written by the submit thread under setup_mutex_.
  std::shared_ptr<Setup> setup_;
  std::deque<std::shared_ptr<Setup>> pending_;  // committed, not switched to yet (setup_mutex_)
  mutable std::mutex setup_mutex_;
  std::mutex prepare_mutex_;                    // one prepare/commit at a time
  std::atomic<bool> update_pending_{false};
  // Bumped each time the submit thread configures its instances in place (a new description): a
  // setup prepared before that is configured again when it is switched to.
  std::atomic<std::uint64_t> configurations_{0};
  FrameMeta configured_frame_;  // submit thread: the description last configured in place
  bool ever_configured_ = false;
  std::atomic<std::size_t> streams_live_{0};
  std::atomic<std::uint64_t> streams_evicted_{0};
  // The last description configure() refused and why: frames like it are refused without
  // configuring again (submit thread only).
  std::optional<FrameMeta> failed_frame_;
  std::string failed_why_;
  // Host buffers of published outputs that a receiver still held when their slot came round
  // again, per published output; reused once released (submit thread only).
  std::vector<std::vector<std::shared_ptr<Buffer>>> spare_results_;
  std::vector<std::int64_t> spares_needed_steady_ns_;  // [published output] last time a spare was taken
  std::vector<std::int64_t> copy_until_steady_ns_;  // [published output] a spare wait timed out: copy until then
  std::vector<char> copying_;  // [published output] ... and until a spare comes back

  // Setups no longer switched to, freed (device memory, stage instances) on the retire thread once
  // no slot runs them, so no frame waits on a free.
  std::mutex retire_mutex_;
  std::condition_variable retire_changed_;
  std::vector<Retired> retired_;
  std::atomic<bool> retiring_{false};
  bool retire_stop_ = false;

  std::vector<std::unique_ptr<Slot>> slots_;
  std::size_t next_slot_ = 0;
  std::mutex slot_mutex_;
  std::condition_variable slot_changed_;
  std::deque<std::size_t> in_flight_;  // slot indices in submission order
  bool submit_finished_ = false;
  bool switching_ = false;  // the submit thread switched setups for a frame not yet on a slot (slot_mutex_)

  std::atomic<std::uint64_t> accepted_{0}, issued_{0}, processed_{0}, published_{0}, stage_errors_{0};
  std::atomic<std::uint64_t> publish_errors_{0}, results_copied_{0}, spare_waits_{0}, spare_waits_timed_out_{0};
  std::atomic<std::uint64_t> busy_ns_total_{0};
  SampleWindow latency_ms_, h2d_ms_, d2h_ms_, busy_ms_, interval_ms_;
  std::vector<std::unique_ptr<SampleWindow>> stage_compute_ms_, stage_enqueue_ms_;
  std::int64_t last_completion_steady_ns_ = 0;
  const std::int64_t started_steady_ns_;
  std::unique_ptr<GpuEvent> epoch_;  // CUDA: time origin of the traces
  std::int64_t epoch_steady_ns_ = 0;  // host_steady_ns() when epoch_ was seen done (timeline)
  const HostPathSwitches switches_ = host_path_switches_from_environment();
  mutable std::mutex trace_mutex_;
  std::deque<FrameTrace> traces_;

  std::atomic<std::uint64_t> generation_now_{0}, param_changes_{0}, state_resets_{0};

  std::thread submit_thread_, completion_thread_, retire_thread_;
  std::once_flag drained_;
};

}  // namespace sonopipe
