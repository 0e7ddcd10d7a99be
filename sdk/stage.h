// The stage interface. A stage is configured once per input description and then run once per
// frame on a slot, either on the CPU (host memory, a thread pool) or on CUDA (device memory, a
// stream). Stages know nothing of sockets or the wire format.
//
// Contract:
// - configure() is called before the first frame and again whenever the input description
//   (dtype, axes, or the acquisition fields the stage reads) changes. It validates the input,
//   returns the output descriptions and the scratch sizes, and may throw StageError. It may
//   allocate and synchronise; run_*() may not (no allocation, logging or host sync per frame).
// - run_cpu()/run_cuda() read `io.input` and write every element of every output. They return
//   false when the frame produced no output (a stage that pairs frames and has only been primed);
//   the executor then publishes nothing for that frame and counts it as processed.
// - A stage that keeps state across frames (history, running estimates) says so with
//   keeps_state(); the executor then runs that stage for consecutive frames in arrival order, never
//   concurrently, and gives it one persistent state buffer (StagePlan::state_bytes) per stream id,
//   with the number of that stream's frames it has seen (StageIo::state_frames).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "sdk/backend.h"
#include "sdk/frame.h"
#include "sdk/params.h"
#include "sdk/tensor.h"

namespace sonopipe {

class ThreadPool;

// An input the stage cannot handle (wrong dtype, missing axis, inconsistent acquisition fields).
struct StageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct StageOutput {
  std::string name;   // published as topic result/<pipeline>/<name>; unique within a pipeline
  TensorSpec spec;
};

struct StagePlan {
  std::vector<StageOutput> outputs;     // outputs[0] feeds the next stage (unless passes_input)
  std::size_t workspace_bytes = 0;      // per slot, same memory space as the data
  std::size_t host_staging_bytes = 0;   // per slot, pinned host memory (CUDA) for per-frame uploads
  std::size_t state_bytes = 0;          // once per pipeline, persistent (see keeps_state())
  // An observing stage (e.g. a B-mode of the data flowing past): the next stage reads this stage's
  // input unchanged, not outputs[0]; every output is a side output, published with `publish: true`.
  bool passes_input = false;
};

// Memory handed to one run. For the CPU backend every pointer is host memory; for CUDA, input,
// outputs, workspace and state are device memory and host_staging is pinned host memory.
struct StageIo {
  const FrameMeta& frame;          // metadata of the frame being processed (host)
  const TensorSpec& input_spec;
  const void* input;
  std::span<void* const> outputs;  // one per StagePlan::outputs, in order
  void* workspace = nullptr;
  void* host_staging = nullptr;
  void* state = nullptr;
  GpuStream stream = nullptr;      // CUDA only: all work goes on this stream, no host sync
  ThreadPool* pool = nullptr;      // CPU only: parallelise over it
  // Stateful stages: frames of this frame's stream run on `state` before (0: a fresh history).
  // The executor keeps one state per stream id (see keeps_state()).
  std::uint64_t state_frames = 0;
};

class Stage {
 public:
  virtual ~Stage() = default;

  virtual StagePlan configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) = 0;
  virtual bool run_cpu(const StageIo& io) = 0;
  // Built only with CUDA; the default says the stage has no CUDA path.
  virtual bool run_cuda(const StageIo& io);
  virtual bool keeps_state() const { return false; }
};

}  // namespace sonopipe
