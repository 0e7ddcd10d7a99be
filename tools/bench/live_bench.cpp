// `sonopipe-bench live`: how soon a live parameter change reaches the frames, and what it costs them
// (issue 22's speed goals; docs/live-parameters.md). One pipeline `live` (convert -> upsample) on one
// device, IQ frames paced at --rate (default 1 kHz) on one thread; every --every frames a `set` goes in
// from another thread (a third of an interval after a frame) through the daemon's own
// LiveParameters (parse, validate, build, try on the frames, prepare the lane: everything
// `sonopipe-ctl set` does but the control socket's round trip). The changes alternate, in one run:
//   scale    live.convert.scale (same shapes)
//   replan   live.upsample.factor between 4 and the largest factor so far (a shape change: the plans
//            and buffers are re-planned; the buffers fit, since the lane has held that shape before)
//   grow     live.upsample.factor to a factor the lane has never held (its buffers must grow): the
//            first factor change and --grow more, spread over the run
// A second pipeline `bystander` (the same stages, its own executor on the same device) takes the same
// frames and is never changed: its latency shows whether a change holds up other pipelines.
// Per kind, over the changes:
//   set ms        the set call itself (on the calling thread, off the frame path)
//   to frame      from the set call to the compute start of the first frame with the new generation:
//                 goal A, p99 <= one frame interval + 1 ms
//   cost          that frame's latency (received -> published) minus the median latency of the
//                 --neighbours frames after it with the same generation (same settings, not first):
//                 goal B, p99 <= one frame's latency (the median latency of the run's frames)
// and `control`: the same cost for the frame halfway between two changes (changed by nothing): the
// noise floor of `cost`, measured the same way in the same run.
// The same cost on the device (the goal's own terms: "costs at most one frame's latency on the
// device"), from each frame's GPU events (runtime/host_timeline.h, as SONOPIPE_HOST_TIMELINE
// records them): its device span, from the H2D's start to the D2H's end, minus the median span of
// the same neighbours; and the host time a change adds on the frame's path, measured directly: the
// setup switch (popped -> setup in place) and the issue (slot -> work queued), each against the
// same frames. The host cost above also holds the threads' wake-ups and the scheduler; the control
// frames show how much.
// Not a test: it prints (and --csv writes one line per change).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <tuple>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "daemon/live_params.h"
#include "runtime/host_timeline.h"
#include "runtime/pipeline_executor.h"
#include "sdk/thread_pool.h"
#include "stages/registry.h"
#include "stages/strain/ncc_track/fft_size.h"
#include "tools/bench/commands.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>
#include <cufft.h>
#endif

namespace sonopipe::bench {
namespace {

struct LiveOptions {
  std::string backend = "cpu";
  double rate_hz = 1000;
  int frames = 9000;  // 100 warm-up, then about 220 changes of each kind (scale; replan + grow)
  int every = 20;
  int grow = 3;         // growth changes after the first one
  int neighbours = 8;   // frames after a change's first frame its cost is measured against
  std::int64_t lines = 64, samples = 256;
  std::string chain = "upsample";
  std::string csv;
  int configure_parts = 0;  // ncc: time the parts of a kernel change's configure this many times instead
  bool probe_first_change = false;  // ncc, CUDA: take the run's first kernel change apart (frames running)
  bool pinned_input = false;        // CUDA: frames in pinned host memory (as from shm://), not pageable
  std::vector<std::string> warm_fft;  // CUDA: 2-D R2C/C2R sizes ("9x49") planned and run once before the frames
  int fft_patient_jit = -1;           // --warm-fft's plans: NVFFT_PLAN_PROPERTY_INT64_PATIENT_JIT (-1: cuFFT's default)
  // --probe-first-change's steps in this process, or the new box's plans made in another process
  // first (this program, --warm-fft), whose CUDA JIT cache the set then finds.
  std::string probe_mode = "steps";
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<std::size_t>(p * static_cast<double>(values.size() - 1))];
}
double maximum(const std::vector<double>& values) {
  return values.empty() ? 0.0 : *std::max_element(values.begin(), values.end());
}

// convert -> upsample (IQ), or with --chain ncc convert -> ncc_track (RF, lewis: cuFFT plans and the
// stage's own device tables, made when it is configured and freed with the instance).
PipelineConfig live_pipeline(const StageRegistry& registry, const std::string& name, const std::string& chain) {
  auto stage = [&](const std::string& type, const std::map<std::string, std::string>& values, bool publish) {
    StageConfig config{.type = type, .publish = publish};
    std::map<std::string, RawParam> raw;
    for (const auto& [key, value] : values) {
      RawParam item;
      std::string error;
      if (!raw_param_from_yaml(value, item, error)) throw std::invalid_argument(key + ": " + error);
      raw[key] = item;
    }
    config.params = registry.find(type)->validate(raw);
    return config;
  };
  PipelineConfig pipeline{.name = name};
  pipeline.stages.push_back(stage("convert", {{"scale", "1"}}, false));
  if (chain == "ncc")
    pipeline.stages.push_back(stage("ncc_track",
                                    {{"method", "lewis"}, {"kernel", "[31, 5]"}, {"search_min", "[-4, -2]"},
                                     {"search_max", "[4, 2]"}, {"step", "[4, 1]"}},
                                    true));
  else
    pipeline.stages.push_back(stage("upsample", {{"factor", "4"}}, true));
  return pipeline;
}

// What a frame is measured by: its latency (received -> published), or the span between two of its
// points.
struct Measure {
  HostPoint from = HostPoint::count, to = HostPoint::count;  // count: the latency
};

// Every published frame of a pipeline, by sequence (the completion thread writes, the main thread
// reads after draining).
struct FrameLog {
  struct Frame {
    bool published = false;
    std::uint64_t generation = 0;
    double latency_ms = 0;
    std::int64_t received_ns = 0, compute_start_ns = 0, published_ns = 0;
  };
  std::mutex mutex;
  std::vector<Frame> frames;
  // Each frame's instants on the host clock, the GPU's from the slot's events (the lane marks them).
  HostTimeline timeline;

  explicit FrameLog(std::size_t count) : frames(count), timeline("", count) {}
  // Frame `sequence`'s record, its received instant marked now.
  FrameTimes* times_of(std::uint64_t sequence) {
    FrameTimes* times = timeline.frame(sequence);
    times->mark(HostPoint::received, host_steady_ns());
    return times;
  }
  // Between two points of frame `n`, ms (nullopt when it did not pass both).
  std::optional<double> between(std::size_t n, HostPoint from, HostPoint to) const {
    const FrameTimes* times = timeline.find(n);
    if (!times) return std::nullopt;
    const std::int64_t a = times->at[static_cast<std::size_t>(from)].load(std::memory_order_relaxed);
    const std::int64_t b = times->at[static_cast<std::size_t>(to)].load(std::memory_order_relaxed);
    if (a == 0 || b == 0) return std::nullopt;
    return (b - a) * 1e-6;
  }
  ExecutorCallbacks callbacks() {
    return {.publish =
                [this](const PublishedResult& r) {
                  const std::int64_t now = now_ns();
                  std::lock_guard lock(mutex);
                  if (r.frame.sequence >= frames.size()) return;
                  frames[r.frame.sequence] = {.published = true, .generation = r.param_generation,
                                              .latency_ms = (now - r.timing.received_ns) * 1e-6,
                                              .received_ns = r.timing.received_ns,
                                              .compute_start_ns = r.timing.compute_start_ns, .published_ns = now};
                },
            .stage_error = [](const FrameMeta&, const std::string&, const std::string& why) {
              std::fprintf(stderr, "stage error: %s\n", why.c_str());
            }};
  }
  // From frame `from` on (the first frames configure the lane and fill its pools).
  std::vector<double> latencies(std::size_t from) const {
    std::vector<double> all;
    for (std::size_t n = from; n < frames.size(); ++n)
      if (frames[n].published) all.push_back(frames[n].latency_ms);
    return all;
  }
  std::size_t slowest(std::size_t from) const {
    std::size_t worst = from;
    for (std::size_t n = from; n < frames.size(); ++n)
      if (frames[n].published && frames[n].latency_ms > frames[worst].latency_ms) worst = n;
    return worst;
  }
  std::optional<double> measured(std::size_t n, Measure measure) const {
    if (!frames[n].published) return std::nullopt;
    if (measure.from == HostPoint::count) return frames[n].latency_ms;
    return between(n, measure.from, measure.to);
  }
  // Frame `first`'s measure minus its median over the next `neighbours` published frames of its
  // generation; nullopt when fewer than half of them exist.
  std::optional<double> cost(std::size_t first, int neighbours, Measure measure = {}) const {
    const std::optional<double> own = measured(first, measure);
    if (!own) return std::nullopt;
    std::vector<double> after;
    for (std::size_t n = first + 1; n < frames.size() && after.size() < static_cast<std::size_t>(neighbours); ++n) {
      if (!frames[n].published) continue;
      if (frames[n].generation != frames[first].generation) break;
      if (const std::optional<double> value = measured(n, measure)) after.push_back(*value);
    }
    if (after.size() * 2 < static_cast<std::size_t>(neighbours)) return std::nullopt;
    return *own - percentile(after, 0.5);
  }
  // A measure over every published frame from `from` on.
  std::vector<double> all(std::size_t from, Measure measure) const {
    std::vector<double> values;
    for (std::size_t n = from; n < frames.size(); ++n)
      if (const std::optional<double> value = measured(n, measure)) values.push_back(*value);
    return values;
  }
};

struct Change {
  std::string kind;  // scale, replan, grow
  std::string value;
  std::uint64_t generation = 0;
  std::int64_t called_ns = 0;
  double set_ms = 0;
  // Parts of set_ms: the try on the CPU (LiveParameters' check), the executor's update_stage (the
  // lanes' prepare) and, within it, the new instances' configure on the calling thread.
  double check_ms = 0, apply_ms = 0, configure_ms = 0;
  int sequence_after = 0;  // the last frame submitted before the call
};

// A stage that times its configure() calls made on one thread (the bench's control thread) and
// forwards everything to the stage it wraps: where a `set`'s time goes inside the lane's prepare.
class TimedStage : public Stage {
 public:
  TimedStage(std::unique_ptr<Stage> inner, std::thread::id timed_thread, double* configure_ms)
      : inner_(std::move(inner)), timed_thread_(timed_thread), configure_ms_(configure_ms) {}
  StagePlan configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) override {
    const auto t0 = std::chrono::steady_clock::now();
    StagePlan plan = inner_->configure(frame, input, backend);
    if (std::this_thread::get_id() == timed_thread_)
      *configure_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return plan;
  }
  bool run_cpu(const StageIo& io) override { return inner_->run_cpu(io); }
  bool run_cuda(const StageIo& io) override { return inner_->run_cuda(io); }
  bool keeps_state() const override { return inner_->keeps_state(); }

 private:
  std::unique_ptr<Stage> inner_;
  std::thread::id timed_thread_;
  double* configure_ms_;
};

struct KindFigures {
  // control_ms: the control frames of these changes (the frame halfway to the next change).
  std::vector<double> set_ms, to_frame_ms, to_result_ms, cost_ms, control_ms;
  std::vector<double> check_ms, apply_ms, configure_ms;  // parts of set_ms
  // On the device and on the frame's path, the changed frame's and its control frame's: the device
  // span's cost; the setup switch itself (popped -> setup ready); the issue's cost (slot -> issued).
  std::vector<double> device_cost_ms, control_device_ms, switch_ms, control_switch_ms, issue_cost_ms,
      control_issue_ms;
};

constexpr Measure kDeviceSpan{HostPoint::gpu_start, HostPoint::gpu_done};
constexpr Measure kSetupSwitch{HostPoint::popped, HostPoint::setup_ready};
constexpr Measure kIssue{HostPoint::slot, HostPoint::issued};

void print_row(const char* kind, const KindFigures& f) {
  std::printf("%-7s %4zu | %6.3f %6.3f | %6.3f %6.3f %6.3f | %6.3f %6.3f | %7.3f %7.3f %7.3f | %7.3f %7.3f %7.3f\n",
              kind, f.cost_ms.size(), percentile(f.set_ms, 0.5), percentile(f.set_ms, 0.99),
              percentile(f.to_frame_ms, 0.5), percentile(f.to_frame_ms, 0.99), maximum(f.to_frame_ms),
              percentile(f.to_result_ms, 0.5), percentile(f.to_result_ms, 0.99), percentile(f.cost_ms, 0.5),
              percentile(f.cost_ms, 0.99), maximum(f.cost_ms), percentile(f.control_ms, 0.5),
              percentile(f.control_ms, 0.99), maximum(f.control_ms));
}

#ifdef SONOPIPE_WITH_CUDA
// The ncc chain's frame: int16 RF [line, sample] of the run's shape (ncc_track reads it as float32).
FrameMeta ncc_rf_frame(const LiveOptions& options) {
  FrameMeta frame;
  frame.kind = FrameKind::rf;
  frame.payload.dtype = DType::int16;
  frame.payload.axes = {{"line", options.lines}, {"sample", options.samples}};
  return frame;
}

// An ncc_track stage as the ncc chain changes it: lewis, `kernel` (e.g. "[41, 5]"), its search and step.
std::unique_ptr<Stage> lewis_tracker(const StageRegistry& registry, const std::string& kernel) {
  std::map<std::string, RawParam> raw;
  for (const auto& [key, value] : std::map<std::string, std::string>{
           {"method", "lewis"}, {"kernel", kernel}, {"search_min", "[-4, -2]"}, {"search_max", "[4, 2]"},
           {"step", "[4, 1]"}}) {
    std::string error;
    if (!raw_param_from_yaml(value, raw[key], error)) throw std::invalid_argument(key + ": " + error);
  }
  return registry.find("ncc_track")->create(registry.find("ncc_track")->validate(raw));
}
#endif

// --configure-parts N (ncc chain, CUDA): what a kernel change's `set` spends, part by part, N times
// with the kernel alternating between [31, 5] and [41, 5], on the frames of the run: the try on the CPU
// (a new instance configured for Backend::cpu, as LiveParameters does), the new instance configured
// for CUDA (all of it), destroying a CUDA instance, and, apart, the two cuFFT plans lewis makes for
// that kernel (cufftPlanMany R2C + C2R of its FFT box and batch) and a cudaMalloc/cudaFree of 16 MiB.
void run_configure_parts(const LiveOptions& options) {
#ifdef SONOPIPE_WITH_CUDA
  const StageRegistry& registry = builtin_stages();
  const FrameMeta frame = ncc_rf_frame(options);
  TensorSpec input = frame.payload;
  input.dtype = DType::float32;
  auto make = [&](const std::string& kernel) { return lewis_tracker(registry, kernel); };
  auto ms_since = [](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  std::map<std::string, std::vector<double>> parts;
  // Warm-up: the first CUDA configure loads modules and creates cuFFT's context.
  { auto warm = make("[31, 5]"); warm->configure(frame, input, Backend::cuda); }
  // Each CUDA instance runs two frames on a stream before it goes, as in a lane (its plans were
  // last used there when the next instance of that shape takes them).
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  void *device_input = nullptr, *device_state = nullptr, *device_outputs = nullptr;
  const std::size_t frame_bytes = static_cast<std::size_t>(input.byte_size());
  cudaMalloc(&device_input, frame_bytes);
  cudaMemset(device_input, 0, frame_bytes);
  cudaMalloc(&device_state, 2 * frame_bytes);
  cudaMalloc(&device_outputs, std::size_t(64) << 20);
  for (int i = 0; i < options.configure_parts; ++i) {
    const bool wide = i % 2 == 0;
    const std::string kernel = wide ? "[41, 5]" : "[31, 5]";
    auto t0 = std::chrono::steady_clock::now();
    auto cpu = make(kernel);
    const StagePlan plan = cpu->configure(frame, input, Backend::cpu);
    parts["cpu try"].push_back(ms_since(t0));
    t0 = std::chrono::steady_clock::now();
    auto gpu = make(kernel);
    gpu->configure(frame, input, Backend::cuda);
    parts["cuda configure"].push_back(ms_since(t0));
    {
      std::vector<void*> outputs;  // the CPU plan's outputs: the same specs
      std::size_t at = 0;
      for (const StageOutput& out : plan.outputs) {
        outputs.push_back(static_cast<std::byte*>(device_outputs) + at);
        at += (out.spec.byte_size() + 255) / 256 * 256;
      }
      for (std::uint64_t n = 0; n < 2; ++n) {
        const StageIo io{.frame = frame, .input_spec = input, .input = device_input, .outputs = outputs,
                         .state = device_state, .stream = stream, .state_frames = n};
        gpu->run_cuda(io);
      }
      t0 = std::chrono::steady_clock::now();
      cudaStreamSynchronize(stream);
      parts["cuda 2 frames, waited"].push_back(ms_since(t0));
    }
    t0 = std::chrono::steady_clock::now();
    gpu.reset();
    parts["cuda destroy"].push_back(ms_since(t0));
    // lewis' plans: the box kernel + shifts - 1 per axis (cuFFT-friendly size), a batch of every point
    // (its bound, batch_mb 256, holds them all here).
    const int box[2] = {ncc::good_fft_size((wide ? 41 : 31) + 9 - 1), ncc::good_fft_size(5 + 5 - 1)};
    const int points = static_cast<int>(plan.outputs[2].spec.element_count());
    int n[2] = {box[1], box[0]};  // slowest first
    cufftHandle forward = 0, inverse = 0;
    t0 = std::chrono::steady_clock::now();
    cufftPlanMany(&forward, 2, n, nullptr, 1, 0, nullptr, 1, 0, CUFFT_R2C, points);
    cufftPlanMany(&inverse, 2, n, nullptr, 1, 0, nullptr, 1, 0, CUFFT_C2R, points);
    parts["cufft plans (2)"].push_back(ms_since(t0));
    t0 = std::chrono::steady_clock::now();
    cufftDestroy(forward);
    cufftDestroy(inverse);
    parts["cufft destroy (2)"].push_back(ms_since(t0));
    void* block = nullptr;
    t0 = std::chrono::steady_clock::now();
    cudaMalloc(&block, std::size_t(16) << 20);
    parts["cudaMalloc 16 MiB"].push_back(ms_since(t0));
    t0 = std::chrono::steady_clock::now();
    cudaFree(block);
    parts["cudaFree 16 MiB"].push_back(ms_since(t0));
  }
  cudaFree(device_input);
  cudaFree(device_state);
  cudaFree(device_outputs);
  cudaStreamDestroy(stream);
  std::printf("ncc_track kernel change, part by part (%d times, %lld x %lld RF): p50 / p99 / max ms\n",
              options.configure_parts, static_cast<long long>(options.lines), static_cast<long long>(options.samples));
  for (const auto& [part, ms] : parts)
    std::printf("  %-20s %7.3f %7.3f %7.3f\n", part.c_str(), percentile(ms, 0.5), percentile(ms, 0.99), maximum(ms));
#else
  (void)options;
  throw std::runtime_error("--configure-parts needs a CUDA build");
#endif
}

// --probe-first-change (ncc, CUDA): before the run's first kernel change, the control thread does
// its suspected parts one at a time, with frames running and a pause between them, so that each
// one's effect on the frames shows apart: a stream-ordered pool of its own growing by 64 MiB (as
// ncc_track's pool grows when a new tracker does not fit), cuFFT's two plans for the new kernel's
// FFT box (as lewis' plan cache makes them: no auto allocation, a work area from that pool), then
// two executions of them on a stream of its own (each waited for). The set itself follows: what it
// still costs is what these did not take from it.
struct FirstChangeProbe {
  struct Step {
    std::string name;
    std::int64_t begin_ns = 0;
    double ms = 0;
  };
  std::vector<Step> steps;
#ifdef SONOPIPE_WITH_CUDA
  int box[2] = {0, 0};
  int points = 0;
  float* real = nullptr;
  cufftComplex* spectra = nullptr;
  cudaStream_t stream = nullptr;
  cudaMemPool_t pool = nullptr;
  bool armed = false;

  // CPU only (no device work while frames run): the [41, 5] tracker's points, for the plans' batch.
  void prepare(const LiveOptions& options) {
    if (options.chain != "ncc" || options.backend != "cuda")
      throw std::invalid_argument("--probe-first-change needs --chain ncc --backend cuda");
    const FrameMeta frame = ncc_rf_frame(options);
    TensorSpec input = frame.payload;
    input.dtype = DType::float32;
    auto stage = lewis_tracker(builtin_stages(), "[41, 5]");
    points = static_cast<int>(stage->configure(frame, input, Backend::cpu).outputs[2].spec.element_count());
    box[0] = ncc::good_fft_size(41 + 9 - 1);  // kernel + shifts - 1, as lewis
    box[1] = ncc::good_fft_size(5 + 5 - 1);
    const std::size_t elements = static_cast<std::size_t>(points) * box[0] * box[1];
    if (cudaMalloc(reinterpret_cast<void**>(&real), elements * sizeof(float)) != cudaSuccess ||
        cudaMalloc(reinterpret_cast<void**>(&spectra), elements * sizeof(cufftComplex)) != cudaSuccess ||
        cudaMemset(real, 0, elements * sizeof(float)) != cudaSuccess ||
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
      throw std::runtime_error("--probe-first-change: device buffers");
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    cudaGetDevice(&props.location.id);
    std::uint64_t keep = std::uint64_t(1) << 30;
    if (cudaMemPoolCreate(&pool, &props) != cudaSuccess ||
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess)
      throw std::runtime_error("--probe-first-change: memory pool");
    armed = true;
  }
  bool ready() const { return armed; }
  std::string mode = "steps";
  void run(double rate_hz) {
    armed = false;
    if (mode == "process") {
      run_elsewhere();
      return;
    }
    const auto pause = std::chrono::milliseconds(std::max(30, static_cast<int>(8e3 / rate_hz)));
    auto timed = [&](const char* name, const auto& body) {
      Step step{.name = name, .begin_ns = now_ns()};
      const auto t0 = std::chrono::steady_clock::now();
      body();
      step.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      steps.push_back(step);
      std::this_thread::sleep_for(pause);
    };
    int n[2] = {box[1], box[0]};  // slowest first
    cufftHandle forward = 0, inverse = 0;
    void* block = nullptr;
    timed("a stream-ordered pool grows by 64 MiB", [&] {
      cudaMallocFromPoolAsync(&block, std::size_t(64) << 20, pool, stream);
      cudaFreeAsync(block, stream);  // kept by the pool (its release threshold): room for the work areas
      cudaStreamSynchronize(stream);
    });
    timed("cuFFT plans R2C + C2R of the new box (made)", [&] {
      std::size_t work_bytes[2] = {0, 0};
      cufftCreate(&forward);
      cufftCreate(&inverse);
      cufftSetAutoAllocation(forward, 0);
      cufftSetAutoAllocation(inverse, 0);
      cufftMakePlanMany(forward, 2, n, nullptr, 1, 0, nullptr, 1, 0, CUFFT_R2C, points, &work_bytes[0]);
      cufftMakePlanMany(inverse, 2, n, nullptr, 1, 0, nullptr, 1, 0, CUFFT_C2R, points, &work_bytes[1]);
      // The work areas from the pool (they fit in what it just took).
      void* work = nullptr;
      cudaMallocFromPoolAsync(&work, std::max<std::size_t>(std::max(work_bytes[0], work_bytes[1]), 256), pool, stream);
      cudaStreamSynchronize(stream);
      cufftSetWorkArea(forward, work);
      cufftSetWorkArea(inverse, work);
    });
    timed("their first execution (own stream, waited)", [&] {
      cufftSetStream(forward, stream);
      cufftSetStream(inverse, stream);
      cufftExecR2C(forward, real, spectra);
      cufftExecC2R(inverse, spectra, real);
      cudaStreamSynchronize(stream);
    });
    timed("their second execution (own stream, waited)", [&] {
      cufftExecR2C(forward, real, spectra);
      cufftExecC2R(inverse, spectra, real);
      cudaStreamSynchronize(stream);
    });
    // Kept (destroying a plan waits for the device) until the process ends.
  }
  // The new box's plans made (and run) by another process: this program, `live --frames 0
  // --warm-fft`, with this one's environment (its CUDA JIT cache); waited for.
  void run_elsewhere() {
    Step step{.name = "the new box's plans made in another process", .begin_ns = now_ns()};
    const auto t0 = std::chrono::steady_clock::now();
    const std::string size = std::to_string(box[1]) + "x" + std::to_string(box[0]);
    std::vector<std::string> words = {"sonopipe-bench", "live", "--backend", "cuda", "--frames", "0", "--warm-fft", size};
    std::vector<char*> argv;
    for (std::string& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    pid_t child = 0;
    int status = -1;
    if (posix_spawn(&child, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0 ||
        waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      std::fprintf(stderr, "--probe-mode process: the other process failed (status %d)\n", status);
    step.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    steps.push_back(step);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
#else
  void prepare(const LiveOptions&) { throw std::runtime_error("--probe-first-change needs a CUDA build"); }
  bool ready() const { return false; }
  void run(double) {}
#endif
};

// --warm-fft: before the frames, each 2-D size is planned (R2C and C2R, a batch of 64) and run once
// on a stream of its own, waited for: does having loaded cuFFT's kernels for these sizes take the
// first kernel change's stall away? Timed, printed.
void warm_fft_sizes(const std::vector<std::string>& sizes, int patient_jit) {
#ifdef SONOPIPE_WITH_CUDA
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  for (const std::string& size : sizes) {
    int n[2] = {0, 0};
    if (std::sscanf(size.c_str(), "%dx%d", &n[0], &n[1]) != 2 || n[0] < 1 || n[1] < 1)
      throw std::invalid_argument("--warm-fft " + size + ": expected AxB (slowest first), e.g. 9x49");
    constexpr int kBatch = 64;
    const std::size_t elements = static_cast<std::size_t>(kBatch) * n[0] * n[1];
    void *real = nullptr, *spectra = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    cufftHandle forward = 0, inverse = 0;
    long long patient[2] = {-2, -2};  // the property as the plans have it (-2: not readable)
    const auto plan = [&](cufftHandle& handle, cufftType type, long long& patient_now) {
      std::size_t work = 0;
      if (cufftCreate(&handle) != CUFFT_SUCCESS) return false;
      if (patient_jit >= 0 &&
          cufftSetPlanPropertyInt64(handle, NVFFT_PLAN_PROPERTY_INT64_PATIENT_JIT, patient_jit) != CUFFT_SUCCESS)
        return false;
      if (cufftGetPlanPropertyInt64(handle, NVFFT_PLAN_PROPERTY_INT64_PATIENT_JIT, &patient_now) != CUFFT_SUCCESS)
        patient_now = -2;
      return cufftMakePlanMany(handle, 2, n, nullptr, 1, 0, nullptr, 1, 0, type, kBatch, &work) == CUFFT_SUCCESS;
    };
    if (cudaMalloc(&real, elements * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&spectra, elements * sizeof(cufftComplex)) != cudaSuccess ||
        cudaMemsetAsync(real, 0, elements * sizeof(float), stream) != cudaSuccess ||
        !plan(forward, CUFFT_R2C, patient[0]) || !plan(inverse, CUFFT_C2R, patient[1]) ||
        cufftSetStream(forward, stream) != CUFFT_SUCCESS || cufftSetStream(inverse, stream) != CUFFT_SUCCESS ||
        cufftExecR2C(forward, static_cast<float*>(real), static_cast<cufftComplex*>(spectra)) != CUFFT_SUCCESS ||
        cufftExecC2R(inverse, static_cast<cufftComplex*>(spectra), static_cast<float*>(real)) != CUFFT_SUCCESS ||
        cudaStreamSynchronize(stream) != cudaSuccess)
      throw std::runtime_error("--warm-fft " + size + ": a CUDA or cuFFT call failed");
    const double made_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    // Run once more: the execution alone (what the frames would pay per transform pair at this batch).
    const auto t1 = std::chrono::steady_clock::now();
    cufftExecR2C(forward, static_cast<float*>(real), static_cast<cufftComplex*>(spectra));
    cufftExecC2R(inverse, static_cast<cufftComplex*>(spectra), static_cast<float*>(real));
    cudaStreamSynchronize(stream);
    std::printf("warm-fft %s: planned and run in %.3f ms (patient JIT property %lld / %lld); run again %.3f ms\n",
                size.c_str(), made_ms, patient[0], patient[1],
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count());
    cufftDestroy(forward);
    cufftDestroy(inverse);
    cudaFree(real);
    cudaFree(spectra);
  }
  cudaStreamDestroy(stream);
#else
  (void)sizes;
  (void)patient_jit;
  throw std::runtime_error("--warm-fft needs a CUDA build");
#endif
}

void run(const LiveOptions& options) {
  // A control frame (halfway between two changes) has every / 2 - 1 frames of its generation after
  // it; its cost needs at least half the neighbours (FrameLog::cost), all of them from 2 x
  // neighbours + 2 on.
  if (options.every / 2 - 1 < (options.neighbours + 1) / 2)
    std::fprintf(stderr, "--every %d leaves the control frames %d frames of their generation, fewer than half of "
                         "--neighbours %d: they are not measured (use --every >= %d)\n",
                 options.every, options.every / 2 - 1, options.neighbours, 2 * options.neighbours + 2);
  const StageRegistry& registry = builtin_stages();
  const Backend backend = options.backend == "cuda" ? Backend::cuda : Backend::cpu;
  const auto frames = static_cast<std::size_t>(options.frames);
  ThreadPool pool(2), bystander_pool(2);
  FrameLog live(frames), bystander(frames);
  const ExecutorOptions executor_options{.backend = backend, .slots = 3, .queue_depth = 64, .pool = &pool};
  const PipelineConfig config = live_pipeline(registry, "live", options.chain);
  PipelineExecutor executor("live", {0}, [&] { return build_stages(config, registry); }, executor_options,
                            live.callbacks());
  ExecutorOptions bystander_options = executor_options;
  bystander_options.pool = &bystander_pool;
  const PipelineConfig bystander_config = live_pipeline(registry, "bystander", options.chain);
  PipelineExecutor other("bystander", {0}, [&] { return build_stages(bystander_config, registry); },
                         bystander_options, bystander.callbacks());
  // The set's parts, timed on this thread (the control thread of the run).
  double check_ms = 0, apply_ms = 0, configure_ms = 0;
  const std::thread::id control_thread = std::this_thread::get_id();
  const auto ms_since = [](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  LiveParameters parameters(
      {config}, registry,
      [&](std::size_t, std::size_t stage, const std::function<std::unique_ptr<Stage>()>& make,
          std::uint64_t generation) {
        const auto t0 = std::chrono::steady_clock::now();
        executor.update_stage(
            stage, [&, make] { return std::make_unique<TimedStage>(make(), control_thread, &configure_ms); },
            generation);
        apply_ms = ms_since(t0);
      },
      [&](std::size_t, std::size_t stage, Stage& candidate) {
        const auto t0 = std::chrono::steady_clock::now();
        executor.check_stage(stage, candidate);
        check_ms = ms_since(t0);
      });

  InputFrame input;
  const bool ncc = options.chain == "ncc";
  input.meta.kind = ncc ? FrameKind::rf : FrameKind::iq;
  input.meta.payload.dtype = DType::int16;
  input.meta.payload.axes = {{"line", options.lines}, {"sample", options.samples}};
  if (!ncc) input.meta.payload.axes.push_back({"iq", 2});
  auto payload = std::make_shared<std::vector<std::int16_t>>(input.meta.payload.element_count());
  std::mt19937 rng(7);
  for (auto& v : *payload) v = static_cast<std::int16_t>(rng() % 2000) - 1000;
  input.payload = std::shared_ptr<const std::byte>(payload, reinterpret_cast<const std::byte*>(payload->data()));
  input.payload_bytes = payload->size() * sizeof(std::int16_t);
  if (options.pinned_input) {
    // As a frame from shm:// arrives: the lane copies it to the device as it is, asynchronously.
#ifdef SONOPIPE_WITH_CUDA
    void* pinned = nullptr;
    if (cudaHostAlloc(&pinned, input.payload_bytes, cudaHostAllocDefault) != cudaSuccess)
      throw std::runtime_error("--pinned-input: cudaHostAlloc failed");
    std::memcpy(pinned, payload->data(), input.payload_bytes);
    input.payload = std::shared_ptr<const std::byte>(static_cast<const std::byte*>(pinned),
                                                     [](const std::byte* p) { cudaFreeHost(const_cast<std::byte*>(p)); });
    input.payload_pinned = true;
#else
    throw std::runtime_error("--pinned-input needs a CUDA build");
#endif
  }
  FirstChangeProbe probe;
  probe.mode = options.probe_mode;
  if (options.probe_first_change) probe.prepare(options);
  if (!options.warm_fft.empty()) warm_fft_sizes(options.warm_fft, options.fft_patient_jit);

  // The changes: scale and factor alternate; factor changes go between 4 and the largest factor so
  // far, except --grow + 1 that raise it (the first factor change, then spread over the run).
  constexpr int kWarmUpFrames = 100;
  const int planned = std::max(0, (options.frames - kWarmUpFrames - 2 * options.neighbours) / options.every);
  const int factor_changes = planned / 2;
  std::vector<int> grow_at{0};  // factor-change indices that grow
  for (int g = 1; g <= options.grow; ++g) grow_at.push_back(factor_changes * g / (options.grow + 1));

  // Frames on their own thread, as the daemon's ingest; the changes on this one, as its control
  // thread, a third of an interval after frame warm-up + k x every (the same clock, no hand-over):
  // a long `set` delays no frame.
  const auto interval = std::chrono::nanoseconds(static_cast<std::int64_t>(1e9 / options.rate_hz));
  const auto start = std::chrono::steady_clock::now() + std::chrono::milliseconds(10);
  std::thread frame_clock([&] {
    for (int n = 0; n < options.frames; ++n) {
      std::this_thread::sleep_until(start + n * interval);
      InputFrame frame = input;
      frame.meta.sequence = static_cast<std::uint64_t>(n);
      frame.received_ns = now_ns();
      InputFrame copy = frame;
      copy.times = bystander.times_of(frame.meta.sequence);
      other.submit(std::move(copy));
      frame.times = live.times_of(frame.meta.sequence);
      executor.submit(std::move(frame));
    }
  });
  std::vector<Change> changes;
  int largest_factor = 4, current_factor = 4, scale = 1, factor_index = 0;
  for (int k = 0; k < planned; ++k) {
    const int after = kWarmUpFrames + k * options.every;
    std::this_thread::sleep_until(start + after * interval + interval / 3);
    Change change{.sequence_after = after};
    std::string name;
    if (k % 2 == 0) {
      scale = scale % 7 + 1;
      change.kind = "scale";
      change.value = std::to_string(scale);
      name = "live.convert.scale";
    } else if (ncc) {
      change.kind = "replan";
      change.value = factor_index++ % 2 == 0 ? "[41, 5]" : "[31, 5]";
      name = "live.ncc_track.kernel";
    } else {
      const bool grow = std::find(grow_at.begin(), grow_at.end(), factor_index) != grow_at.end();
      ++factor_index;
      if (grow) largest_factor += 1;
      current_factor = grow ? largest_factor : current_factor == 4 ? largest_factor : 4;
      change.kind = grow ? "grow" : "replan";
      change.value = std::to_string(current_factor);
      name = "live.upsample.factor";
    }
    if (change.kind == "replan" && probe.ready()) probe.run(options.rate_hz);
    check_ms = apply_ms = configure_ms = 0;
    change.called_ns = now_ns();
    const LiveParameters::Outcome outcome = parameters.set(name, change.value, "bench");
    change.set_ms = (now_ns() - change.called_ns) * 1e-6;
    change.check_ms = check_ms;
    change.apply_ms = apply_ms;
    change.configure_ms = configure_ms;
    if (!outcome.ok) {
      std::fprintf(stderr, "set %s %s refused: %s\n", name.c_str(), change.value.c_str(), outcome.error.c_str());
      continue;
    }
    change.generation = outcome.generation;
    changes.push_back(change);
  }
  frame_clock.join();
  executor.drain();
  other.drain();

  // The first published frame of each generation, in frame order.
  std::map<std::uint64_t, std::size_t> first_of;
  for (std::size_t n = 0; n < frames; ++n)
    if (live.frames[n].published && !first_of.contains(live.frames[n].generation))
      first_of[live.frames[n].generation] = n;
  std::map<std::string, KindFigures> figures;
  KindFigures control;
  std::FILE* csv = options.csv.empty() ? nullptr : std::fopen(options.csv.c_str(), "w");
  if (csv)
    std::fprintf(csv, "kind,value,generation,set_ms,check_ms,apply_ms,configure_ms,to_frame_ms,to_result_ms,cost_ms,"
                      "control_cost_ms,device_cost_ms,control_device_cost_ms,switch_ms,control_switch_ms,"
                      "issue_cost_ms,control_issue_cost_ms\n");
  for (const Change& change : changes) {
    auto found = first_of.find(change.generation);
    if (found == first_of.end()) continue;  // superseded before a frame ran it
    const FrameLog::Frame& first = live.frames[found->second];
    const std::optional<double> cost = live.cost(found->second, options.neighbours);
    KindFigures& f = figures[change.kind];
    f.set_ms.push_back(change.set_ms);
    f.check_ms.push_back(change.check_ms);
    f.apply_ms.push_back(change.apply_ms);
    f.configure_ms.push_back(change.configure_ms);
    f.to_frame_ms.push_back((first.compute_start_ns - change.called_ns) * 1e-6);
    f.to_result_ms.push_back((first.published_ns - change.called_ns) * 1e-6);
    if (cost) f.cost_ms.push_back(*cost);
    const std::optional<double> device_cost = live.cost(found->second, options.neighbours, kDeviceSpan);
    const std::optional<double> switch_ms = live.measured(found->second, kSetupSwitch);
    const std::optional<double> issue_cost = live.cost(found->second, options.neighbours, kIssue);
    if (device_cost) f.device_cost_ms.push_back(*device_cost);
    if (switch_ms) f.switch_ms.push_back(*switch_ms);
    if (issue_cost) f.issue_cost_ms.push_back(*issue_cost);
    // The control: the frame halfway to the next change, its own cost measured the same way.
    const std::size_t halfway = found->second + static_cast<std::size_t>(options.every / 2);
    std::optional<double> control_cost, control_device, control_switch, control_issue;
    if (halfway < frames && live.frames[halfway].published && live.frames[halfway].generation == change.generation) {
      control_cost = live.cost(halfway, options.neighbours);
      control_device = live.cost(halfway, options.neighbours, kDeviceSpan);
      control_switch = live.measured(halfway, kSetupSwitch);
      control_issue = live.cost(halfway, options.neighbours, kIssue);
    }
    if (control_cost) {
      control.cost_ms.push_back(*control_cost);
      f.control_ms.push_back(*control_cost);
    }
    for (auto [value, into, all] : {std::tuple{control_device, &f.control_device_ms, &control.control_device_ms},
                                    std::tuple{control_switch, &f.control_switch_ms, &control.control_switch_ms},
                                    std::tuple{control_issue, &f.control_issue_ms, &control.control_issue_ms}})
      if (value) {
        into->push_back(*value);
        all->push_back(*value);
      }
    if (csv)
      std::fprintf(csv, "%s,\"%s\",%llu,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n",
                   change.kind.c_str(), change.value.c_str(), static_cast<unsigned long long>(change.generation),
                   change.set_ms, change.check_ms, change.apply_ms, change.configure_ms, f.to_frame_ms.back(),
                   f.to_result_ms.back(), cost.value_or(-1.0), control_cost.value_or(-1.0),
                   device_cost.value_or(-1.0), control_device.value_or(-1.0), switch_ms.value_or(-1.0),
                   control_switch.value_or(-1.0), issue_cost.value_or(-1.0), control_issue.value_or(-1.0));
  }
  if (csv) std::fclose(csv);

  const auto settled = static_cast<std::size_t>(kWarmUpFrames);
  const std::vector<double> latencies = live.latencies(settled), bystander_latencies = bystander.latencies(settled);
  const double frame_latency_ms = percentile(latencies, 0.5);
  std::printf("%-7s %4s | %13s | %20s | %13s | %23s | %23s\n", "change", "n", "set call", "to frame (A)",
              "to result", "cost (B)", "control frames' cost");
  std::printf("%-7s %4s | %6s %6s | %6s %6s %6s | %6s %6s | %7s %7s %7s | %7s %7s %7s\n", "", "", "p50", "p99", "p50",
              "p99", "max", "p50", "p99", "p50", "p99", "max", "p50", "p99", "max");
  for (const char* kind : {"scale", "replan", "grow"}) print_row(kind, figures[kind]);
  std::printf("%-7s %4zu | %13s | %20s | %13s | %7.3f %7.3f %7.3f\n", "control", control.cost_ms.size(), "-", "-",
              "-", percentile(control.cost_ms, 0.5), percentile(control.cost_ms, 0.99), maximum(control.cost_ms));
  std::printf("frames %zu of %d published after the first %d; latency p50 %.3f p99 %.3f max %.3f ms; bystander "
              "p50 %.3f p99 %.3f max %.3f ms\n",
              latencies.size(), options.frames - kWarmUpFrames, kWarmUpFrames, frame_latency_ms,
              percentile(latencies, 0.99), maximum(latencies), percentile(bystander_latencies, 0.5),
              percentile(bystander_latencies, 0.99), maximum(bystander_latencies));
  // Where the slowest frames were: after which change (the last one called before the frame arrived).
  for (const auto& [who, log] : {std::pair<const char*, const FrameLog*>{"live", &live}, {"bystander", &bystander}}) {
    const std::size_t worst = log->slowest(settled);
    const Change* before = nullptr;
    for (const Change& change : changes)
      if (change.sequence_after < static_cast<int>(worst)) before = &change;
    std::printf("slowest %s frame %zu (%.3f ms): %s\n", who, worst, log->frames[worst].latency_ms,
                before ? (std::to_string(worst - before->sequence_after) + " frames after a " + before->kind + " to " +
                          before->value)
                             .c_str()
                       : "before the first change");
  }
  std::printf("set call's parts, p50 / p99 ms: try on the CPU | update_stage (the lanes' prepare) | new instances' "
              "configure within it\n");
  for (const char* kind : {"scale", "replan", "grow"}) {
    const KindFigures& f = figures[kind];
    std::printf("%-7s %6.3f %6.3f | %6.3f %6.3f | %6.3f %6.3f\n", kind, percentile(f.check_ms, 0.5),
                percentile(f.check_ms, 0.99), percentile(f.apply_ms, 0.5), percentile(f.apply_ms, 0.99),
                percentile(f.configure_ms, 0.5), percentile(f.configure_ms, 0.99));
  }
  const double goal_a_ms = 1e3 / options.rate_hz + 1.0;
  for (const char* kind : {"scale", "replan", "grow"}) {
    const KindFigures& f = figures[kind];
    const double a = percentile(f.to_frame_ms, 0.99), b = percentile(f.cost_ms, 0.99);
    std::printf("%-7s goal A p99 %.3f <= %.3f ms: %s; goal B p99 %.3f <= %.3f ms: %s (control frames p99 %.3f)\n",
                kind, a, goal_a_ms, a <= goal_a_ms ? "met" : "NOT met", b, frame_latency_ms,
                b <= frame_latency_ms ? "met" : "NOT met", percentile(f.control_ms, 0.99));
  }

  // Goal B on the device: the changed frame's device span against its neighbours', and what the
  // change adds on the frame's path on the host, each beside its control frames.
  const std::vector<double> spans = live.all(settled, kDeviceSpan), bystander_spans = bystander.all(settled, kDeviceSpan);
  const double frame_device_ms = percentile(spans, 0.5);
  std::printf("on the device (a frame's GPU span: H2D start -> D2H end; p50 %.3f p99 %.3f max %.3f ms, bystander "
              "p50 %.3f p99 %.3f max %.3f ms) and on the frame's path on the host:\n",
              frame_device_ms, percentile(spans, 0.99), maximum(spans), percentile(bystander_spans, 0.5),
              percentile(bystander_spans, 0.99), maximum(bystander_spans));
  std::printf("%-7s %4s | %23s | %23s | %23s | %15s | %23s | %15s\n", "change", "n", "device cost (B)",
              "control device cost", "setup switch", "control switch", "issue cost", "control issue");
  std::printf("%-7s %4s | %7s %7s %7s | %7s %7s %7s | %7s %7s %7s | %7s %7s | %7s %7s %7s | %7s %7s\n", "", "", "p50",
              "p99", "max", "p50", "p99", "max", "p50", "p99", "max", "p50", "p99", "p50", "p99", "max", "p50", "p99");
  for (const char* kind : {"scale", "replan", "grow"}) {
    const KindFigures& f = figures[kind];
    std::printf("%-7s %4zu | %7.3f %7.3f %7.3f | %7.3f %7.3f %7.3f | %7.3f %7.3f %7.3f | %7.3f %7.3f | %7.3f %7.3f "
                "%7.3f | %7.3f %7.3f\n",
                kind, f.device_cost_ms.size(), percentile(f.device_cost_ms, 0.5), percentile(f.device_cost_ms, 0.99),
                maximum(f.device_cost_ms), percentile(f.control_device_ms, 0.5),
                percentile(f.control_device_ms, 0.99), maximum(f.control_device_ms), percentile(f.switch_ms, 0.5),
                percentile(f.switch_ms, 0.99), maximum(f.switch_ms), percentile(f.control_switch_ms, 0.5),
                percentile(f.control_switch_ms, 0.99), percentile(f.issue_cost_ms, 0.5),
                percentile(f.issue_cost_ms, 0.99), maximum(f.issue_cost_ms), percentile(f.control_issue_ms, 0.5),
                percentile(f.control_issue_ms, 0.99));
  }
  std::printf("%-7s %4zu | %23s | %7.3f %7.3f %7.3f | %23s | %7.3f %7.3f | %23s | %7.3f %7.3f\n", "control",
              control.control_device_ms.size(), "-", percentile(control.control_device_ms, 0.5),
              percentile(control.control_device_ms, 0.99), maximum(control.control_device_ms), "-",
              percentile(control.control_switch_ms, 0.5), percentile(control.control_switch_ms, 0.99), "-",
              percentile(control.control_issue_ms, 0.5), percentile(control.control_issue_ms, 0.99));
  for (const char* kind : {"scale", "replan", "grow"}) {
    const KindFigures& f = figures[kind];
    const double b = percentile(f.device_cost_ms, 0.99);
    std::printf("%-7s goal B on the device: p99 %.3f <= %.3f ms (a frame's device span): %s (control frames p99 "
                "%.3f); setup switch p99 %.3f ms\n",
                kind, b, frame_device_ms, b <= frame_device_ms ? "met" : "NOT met",
                percentile(f.control_device_ms, 0.99), percentile(f.switch_ms, 0.99));
  }

  // The run's first re-planning change (ncc: the first new kernel shape), and what the frames
  // received meanwhile paid: the probe's steps first, when asked for.
  const auto window = [&](const char* what, std::int64_t begin_ns, double ms) {
    const std::int64_t end_ns = begin_ns + static_cast<std::int64_t>(ms * 1e6);
    double worst[2] = {0, 0}, worst_span = 0, worst_issue = 0;
    int count = 0;
    for (std::size_t n = 0; n < frames; ++n) {
      int who = 0;
      for (const FrameLog* log : {&live, &bystander}) {
        const FrameLog::Frame& frame = log->frames[n];
        if (frame.published && frame.received_ns >= begin_ns - static_cast<std::int64_t>(1e9 / options.rate_hz) &&
            frame.received_ns <= end_ns) {
          worst[who] = std::max(worst[who], frame.latency_ms);
          worst_span = std::max(worst_span, log->measured(n, kDeviceSpan).value_or(0));
          worst_issue = std::max(worst_issue, log->measured(n, kIssue).value_or(0));
          count += who == 0;
        }
        ++who;
      }
    }
    std::printf("  %-44s %8.3f ms | %2d frames meanwhile: latency max %7.3f / %7.3f ms (live / bystander), device "
                "span max %.3f, issue max %.3f ms\n",
                what, ms, count, worst[0], worst[1], worst_span, worst_issue);
  };
  for (const Change& change : changes) {
    if (change.kind != "replan") continue;
    std::printf("first replan (to %s), frames running:\n", change.value.c_str());
    for (const FirstChangeProbe::Step& step : probe.steps) window(step.name.c_str(), step.begin_ns, step.ms);
    window("the set call", change.called_ns, change.set_ms);
    std::printf("  %-44s %8.3f ms\n", "  of which the new instances' configure", change.configure_ms);
    auto found = first_of.find(change.generation);
    if (found != first_of.end())
      std::printf("  its first frame %zu: latency %.3f ms, device span %.3f ms, setup switch %.3f ms, issue %.3f ms\n",
                  found->second, live.frames[found->second].latency_ms,
                  live.measured(found->second, kDeviceSpan).value_or(-1),
                  live.measured(found->second, kSetupSwitch).value_or(-1),
                  live.measured(found->second, kIssue).value_or(-1));
    break;
  }
}

}  // namespace

void add_live_bench(CLI::App& app) {
  auto options = std::make_shared<LiveOptions>();
  CLI::App* command = app.add_subcommand("live", "live parameter changes: set -> next frame, re-plan cost");
  command->add_option("--backend", options->backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  command->add_option("--rate", options->rate_hz, "frames per second")->capture_default_str();
  command->add_option("--frames", options->frames, "frames in the run")->capture_default_str();
  command->add_option("--every", options->every, "frames between two changes (>= 4)")
      ->check(CLI::Range(4, 1000000))->capture_default_str();
  command->add_option("--grow", options->grow, "changes that grow the buffers, after the first")
      ->check(CLI::Range(0, 32))->capture_default_str();
  command->add_option("--neighbours", options->neighbours, "frames after a change's first frame to compare with")
      ->check(CLI::Range(2, 1000))->capture_default_str();
  command->add_option("--lines", options->lines, "IQ lines per frame")->capture_default_str();
  command->add_option("--samples", options->samples, "IQ samples per line")->capture_default_str();
  command->add_option("--chain", options->chain,
                      "upsample: convert -> upsample (IQ); ncc: convert -> ncc_track (RF, lewis), its kernel "
                      "changed between [31, 5] and [41, 5] (replan)")
      ->check(CLI::IsMember({"upsample", "ncc"}))->capture_default_str();
  command->add_option("--csv", options->csv, "write one line per change here");
  command->add_flag("--probe-first-change", options->probe_first_change,
                    "ncc chain on CUDA: before the first kernel change, make and run its cuFFT plans apart, "
                    "frames running, and report what each part cost the frames");
  command->add_flag("--pinned-input", options->pinned_input,
                    "CUDA: frames in pinned host memory (copied asynchronously, as from shm://) instead of "
                    "pageable memory (the driver's staged copy, as from tcp/ipc)");
  command->add_option("--warm-fft", options->warm_fft,
                      "CUDA: 2-D FFT sizes (AxB, slowest first) planned and run once before the frames (does "
                      "loading cuFFT's kernels for them take a first kernel change's stall away?)")
      ->delimiter(',');
  command->add_option("--fft-patient-jit", options->fft_patient_jit,
                      "--warm-fft's plans: cuFFT's NVFFT_PLAN_PROPERTY_INT64_PATIENT_JIT (-1: its default)")
      ->capture_default_str();
  command->add_option("--probe-mode", options->probe_mode,
                      "--probe-first-change: steps (in this process, one at a time) or process (the new box's plans "
                      "made by another process first)")
      ->check(CLI::IsMember({"steps", "process"}))->capture_default_str();
  command->add_option("--configure-parts", options->configure_parts,
                      "ncc chain on CUDA: time the parts of a kernel change's configure this many times (no run)");
  command->callback([options] {
    spdlog::set_level(spdlog::level::warn);  // not a line per change
    std::printf("live parameters, %s backend, %.0f frames/s, %lld x %lld %s, convert -> %s, a change every %d "
                "frames; times in ms\n",
                options->backend.c_str(), options->rate_hz, static_cast<long long>(options->lines),
                static_cast<long long>(options->samples), options->chain == "ncc" ? "RF" : "IQ",
                options->chain == "ncc" ? "ncc_track" : "upsample", options->every);
    if (options->configure_parts > 0) run_configure_parts(*options);
    else if (options->frames == 0) warm_fft_sizes(options->warm_fft, options->fft_patient_jit);  // no run
    else run(*options);
  });
}

}  // namespace sonopipe::bench
