#include "stages/strain/ncc_track/ncc_track.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "sdk/thread_pool.h"

#ifdef SONOPIPE_WITH_CUDA
#include "stages/strain/ncc_track/ncc_track.cuh"
#else
namespace sonopipe::cuda {
class NccTracker {};  // no CUDA path in this build
}  // namespace sonopipe::cuda
#endif

namespace sonopipe {
namespace {

using ncc::kDims;

const char* method_name(ncc::Method method) {
  switch (method) {
    case ncc::Method::standard: return "standard";
    case ncc::Method::lewis: return "lewis";
    case ncc::Method::luo: return "luo";
    case ncc::Method::auto_select: return "auto";
  }
  return "?";
}

// Item d of a per-axis list ([axial, lateral, elevational]) or `fallback` when the list is short.
int list_item(const std::vector<int>& items, int d, int fallback) {
  return d < static_cast<int>(items.size()) ? items[d] : fallback;
}

}  // namespace

StageInfo NccTrackStage::info() {
  return make_stage_info<NccTrackStage>(
      "ncc_track", "NCC block matching between RF frames i-lag and i (2-D/3-D; standard, lewis, luo)");
}

void NccTrackStage::declare(ParamSpec<Params>& spec) {
  const std::string per_axis = " per axis [axial, lateral(, elevational)]";
  spec.choice(&Params::method, "method",
              {{"standard", ncc::Method::standard}, {"lewis", ncc::Method::lewis}, {"luo", ncc::Method::luo},
               {"auto", ncc::Method::auto_select}},
              {.doc = "NCC evaluation: eq. (1) directly, Lewis FFT + sum-tables, Luo-Konofagou sum-tables, "
                      "or the fastest (timed once at configure)", .live = true});
  spec.param(&Params::lag, "lag", {.min = 1, .max = 64, .unit = "frames", .doc = "pair frame i with frame i - lag", .live = true});
  spec.param(&Params::kernel, "kernel", {.min = 1, .unit = "samples", .doc = "tracking window size" + per_axis, .live = true});
  spec.param(&Params::search_min, "search_min", {.unit = "samples", .doc = "smallest shift" + per_axis, .live = true});
  spec.param(&Params::search_max, "search_max", {.unit = "samples", .doc = "largest shift" + per_axis, .live = true});
  spec.param(&Params::step, "step", {.min = 1, .unit = "samples", .doc = "estimation grid step" + per_axis, .live = true});
  spec.param(&Params::points, "points", {.min = 0, .doc = "estimation points" + per_axis + "; 0 = as many as fit", .live = true});
  spec.param(&Params::roi_start, "roi_start",
             {.min = -1, .unit = "samples",
              .doc = "first sample of the first window" + per_axis + "; -1 = centre the grid", .live = true});
  spec.choice(&Params::fit, "fit", {{"parabola", ncc::Fit::parabola}, {"quadratic_surface", ncc::Fit::quadratic_surface}},
              {.doc = "sub-sample peak: separable 3-point parabola or least-squares quadratic on 3^n", .live = true});
  spec.param(&Params::zero_mean, "zero_mean", {.doc = "false: eq. (1) as in the papers (TM_CCORR_NORMED); true: Pearson", .live = true});
  spec.param(&Params::batch_mb, "batch_mb",
             {.min = 1, .max = 65536, .unit = "MB", .doc = "CUDA memory bound for the batched lewis spectra / luo cross tables"});
}

NccTrackStage::NccTrackStage(const Params& params)
    : params_(params), requested_method_(params.method), lag_(params.lag) {}

NccTrackStage::~NccTrackStage() = default;

ncc::Geometry NccTrackStage::geometry_for(const Params& params, const TensorSpec& input) {
  const int rank = static_cast<int>(input.axes.size());
  if (rank != 2 && rank != 3)
    throw StageError("ncc_track: expected a 2-D [lateral, axial] or 3-D [elevational, lateral, axial] "
                     "frame, got " + input.shape_string());
  const std::pair<const char*, const std::vector<int>*> lists[] = {
      {"kernel", &params.kernel}, {"search_min", &params.search_min}, {"search_max", &params.search_max},
      {"step", &params.step},     {"points", &params.points},         {"roi_start", &params.roi_start}};
  for (const auto& [key, items] : lists)
    if (static_cast<int>(items->size()) > rank)
      throw StageError(std::string("ncc_track: ") + key + " has more items than the frame has axes (" +
                       std::to_string(rank) + ")");
  ncc::Geometry g{};
  g.zero_mean = params.zero_mean;
  g.fit = params.fit;
  static const char* axis_word[kDims] = {"axial", "lateral", "elevational"};
  for (int d = 0; d < kDims; ++d) {
    const bool present = d < rank;
    g.frame[d] = present ? static_cast<int>(input.axes[rank - 1 - d].size) : 1;
    g.kernel[d] = list_item(params.kernel, d, 1);
    g.search_min[d] = list_item(params.search_min, d, 0);
    g.search_max[d] = list_item(params.search_max, d, 0);
    g.step[d] = list_item(params.step, d, 1);
    int points = present ? list_item(params.points, d, 0) : 1;
    int start = list_item(params.roi_start, d, -1);
    const std::string where = std::string("ncc_track: ") + axis_word[d] + " axis: ";
    if (g.search_min[d] > g.search_max[d])
      throw StageError(where + "search_min " + std::to_string(g.search_min[d]) + " > search_max " +
                       std::to_string(g.search_max[d]));
    const int margin_low = std::max(0, -g.search_min[d]);
    const int margin_high = std::max(0, g.search_max[d]);
    const int available = g.frame[d] - margin_low - margin_high;
    if (points == 0) points = available >= g.kernel[d] ? (available - g.kernel[d]) / g.step[d] + 1 : 0;
    if (points < 1)
      throw StageError(where + "no window of " + std::to_string(g.kernel[d]) + " samples with shifts [" +
                       std::to_string(g.search_min[d]) + ", " + std::to_string(g.search_max[d]) +
                       "] fits in " + std::to_string(g.frame[d]) + " samples");
    g.points[d] = points;
    const int extent = g.reference_extent(d);
    if (start < 0) start = margin_low + (available - extent) / 2;
    g.start[d] = start;
    if (start < 0 || start + g.search_min[d] < 0 || start + extent > g.frame[d] ||
        start + extent - 1 + g.search_max[d] > g.frame[d] - 1)
      throw StageError(where + std::to_string(points) + " points, step " + std::to_string(g.step[d]) +
                       ", kernel " + std::to_string(g.kernel[d]) + ", shifts [" +
                       std::to_string(g.search_min[d]) + ", " + std::to_string(g.search_max[d]) +
                       "] from sample " + std::to_string(start) + " leave the frame of " +
                       std::to_string(g.frame[d]) + " samples");
  }
  return g;
}

StagePlan NccTrackStage::configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) {
  if (input.dtype != DType::float32)
    throw StageError("ncc_track: expected float32 RF (put `convert` first), got " +
                     std::string(dtype_name(input.dtype)));
  // RF frames, or channel RF once `beamform` has made it an image (its first axis is no longer `transmit`).
  const bool beamformed = frame.kind == FrameKind::channel_rf && !input.axes.empty() && input.axes[0].name != "transmit";
  if (frame.kind != FrameKind::rf && !beamformed)
    throw StageError("ncc_track: expected RF frames (or channel RF after beamform), got " +
                     std::string(frame_kind_name(frame.kind)));
  geometry_ = geometry_for(params_, input);
  backend_ = backend;
  frame_elements_ = static_cast<std::size_t>(input.element_count());
  const int rank = static_cast<int>(input.axes.size());

  bool metric = true;
  for (int d = 0; d < rank; ++d) metric = metric && input.axes[rank - 1 - d].spacing > 0.0;
  for (int d = 0; d < kDims; ++d)
    spacing_[d] = (metric && d < rank) ? static_cast<float>(input.axes[rank - 1 - d].spacing) : 1.f;

  // Output grid: the input axes with point count, step and window-centre origin.
  TensorSpec grid;
  grid.dtype = DType::float32;
  for (int axis = 0; axis < rank; ++axis) {
    const int d = rank - 1 - axis;
    const Axis& in = input.axes[axis];
    Axis out = in;
    out.size = geometry_.points[d];
    const double sample = metric ? in.spacing : 1.0;
    out.spacing = geometry_.step[d] * sample;
    out.unit = metric ? in.unit : "samples";
    out.origin = (metric ? in.origin : 0.0) + geometry_.centre_samples(d, 0) * sample;
    grid.axes.push_back(out);
  }
  TensorSpec displacement = grid;
  displacement.axes.push_back(Axis{.name = "component", .size = rank});
  displacement.unit = metric ? "m" : "samples";
  TensorSpec displacement_samples = displacement;
  displacement_samples.unit = "samples";
  TensorSpec correlation = grid;
  correlation.unit = "1";
  TensorSpec flags = grid;
  flags.dtype = DType::uint8;

  method_ = requested_method_;
  cpu_.reset();
#ifdef SONOPIPE_WITH_CUDA
  gpu_.reset();
#endif
  [[maybe_unused]] const std::size_t batch_bytes = static_cast<std::size_t>(params_.batch_mb) << 20;
  const std::vector<int> key = shape_key(backend);
  const auto remembered = auto_choices_.find(key);
  const bool seen_before = remembered != auto_choices_.end();
  if (method_ == ncc::Method::auto_select && seen_before) method_ = remembered->second;
  if (backend == Backend::cuda) {
#ifdef SONOPIPE_WITH_CUDA
    gpu_ = std::make_unique<cuda::NccTracker>(geometry_, batch_bytes, method_);
    if (method_ == ncc::Method::auto_select) method_ = resolve_auto_cuda();
    device_bytes_ = gpu_->device_bytes(method_);
#else
    throw StageError("ncc_track: this binary was built without CUDA");
#endif
  } else {
    const int lanes = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    cpu_ = std::make_unique<ncc::CpuTracker>(geometry_, lanes);
    if (method_ == ncc::Method::auto_select) method_ = resolve_auto_cpu();
  }
  if (!seen_before) {
    if (auto_choices_.size() >= kRememberedShapes) auto_choices_.clear();
    auto_choices_.emplace(key, method_);
  }
  if (!seen_before) spdlog::info("ncc_track: {} on {}, {} points x {} shifts, kernel {}x{}x{}, lag {}{}", method_name(method_),
               backend_name(backend), geometry_.point_count(), geometry_.shift_count(),
               geometry_.kernel[0], geometry_.kernel[1], geometry_.kernel[2], lag_,
               backend == Backend::cuda ? fmt::format(", device scratch {:.1f} MB", device_bytes_ / 1048576.0)
                                        : std::string());

  StagePlan plan;
  plan.outputs = {{"displacement", displacement},
                  {"displacement_samples", displacement_samples},
                  {"correlation", correlation},
                  {"flags", flags}};
  plan.state_bytes = static_cast<std::size_t>(lag_ + 1) * frame_elements_ * sizeof(float);
  return plan;
}

// Times each method once on random speckle of the configured size (CPU: on at most 256 points,
// the cost per point is what differs) and keeps the fastest.
ncc::Method NccTrackStage::resolve_auto_cpu() {
  ncc::Geometry probe = geometry_;
  while (probe.point_count() > 256 && probe.points[0] > 1) probe.points[0] = (probe.points[0] + 1) / 2;
  while (probe.point_count() > 256 && probe.points[1] > 1) probe.points[1] = (probe.points[1] + 1) / 2;
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal;
  std::vector<float> f(frame_elements_), g(frame_elements_);
  for (auto& v : f) v = normal(rng);
  for (auto& v : g) v = normal(rng);
  ++auto_timings_;
  ThreadPool pool(0);
  ncc::CpuTracker tracker(probe, pool.size());
  double best_ms = 0.0;
  ncc::Method best = ncc::Method::luo;
  std::string why;
  for (ncc::Method m : {ncc::Method::standard, ncc::Method::lewis, ncc::Method::luo}) {
    const auto t0 = std::chrono::steady_clock::now();
    tracker.correlate(m, f.data(), g.data(), pool);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    why += fmt::format(" {} {:.2f} ms", method_name(m), ms);
    if (m == ncc::Method::standard || ms < best_ms) {
      best_ms = ms;
      best = m;
    }
  }
  spdlog::info("ncc_track: auto picked {} on the CPU (timed on {} points:{})", method_name(best),
               probe.point_count(), why);
  return best;
}

std::vector<int> NccTrackStage::shape_key(Backend backend) const {
  const ncc::Geometry& g = geometry_;
  std::vector<int> key{static_cast<int>(backend), g.zero_mean ? 1 : 0, static_cast<int>(g.fit)};
  for (const int* field : {g.frame, g.start, g.step, g.points, g.kernel, g.search_min, g.search_max})
    key.insert(key.end(), field, field + kDims);
  return key;
}

// `frames_seen`: the stream's frames already in its state ring (StageIo::state_frames).
NccTrackStage::Slots NccTrackStage::advance(std::uint64_t frames_seen) const {
  const int ring = lag_ + 1;
  Slots slots;
  slots.current = static_cast<int>(frames_seen % ring);
  slots.reference = static_cast<int>((frames_seen + ring - lag_) % ring);
  slots.ready = frames_seen >= static_cast<std::uint64_t>(lag_);
  return slots;
}

bool NccTrackStage::run_cpu(const StageIo& io) {
  const Slots slots = advance(io.state_frames);
  float* history = static_cast<float*>(io.state);
  float* current = history + slots.current * frame_elements_;
  const float* input = static_cast<const float*>(io.input);
  const double scale = ncc::normalisation_scale(input, frame_elements_, *io.pool);
  ncc::scale_frame(input, current, frame_elements_, static_cast<float>(scale), *io.pool);
  if (!slots.ready) return false;
  const float* reference = history + slots.reference * frame_elements_;
  cpu_->correlate(method_, reference, current, *io.pool);
  cpu_->find_peaks(*io.pool);
  write_outputs_cpu(io);
  return true;
}

void NccTrackStage::write_outputs_cpu(const StageIo& io) const {
  const int rank = static_cast<int>(io.input_spec.axes.size());
  auto* displacement = static_cast<float*>(io.outputs[0]);
  auto* displacement_samples = static_cast<float*>(io.outputs[1]);
  auto* correlation = static_cast<float*>(io.outputs[2]);
  auto* flags = static_cast<std::uint8_t*>(io.outputs[3]);
  const auto& peaks = cpu_->peaks();
  for (std::size_t p = 0; p < peaks.size(); ++p) {
    for (int d = 0; d < rank; ++d) {
      displacement_samples[p * rank + d] = static_cast<float>(peaks[p].displacement[d]);
      displacement[p * rank + d] = static_cast<float>(peaks[p].displacement[d] * spacing_[d]);
    }
    correlation[p] = static_cast<float>(peaks[p].correlation);
    flags[p] = peaks[p].flags;
  }
}

#ifdef SONOPIPE_WITH_CUDA
ncc::Method NccTrackStage::resolve_auto_cuda() {
  std::string why;
  ++auto_timings_;
  const ncc::Method best = gpu_->fastest_method(why);
  spdlog::info("ncc_track: auto picked {} on CUDA (timed once each:{})", method_name(best), why);
  return best;
}

bool NccTrackStage::run_cuda(const StageIo& io) {
  const Slots slots = advance(io.state_frames);
  float* history = static_cast<float*>(io.state);
  float* current = history + slots.current * frame_elements_;
  auto stream = reinterpret_cast<cudaStream_t>(io.stream);
  gpu_->normalise(static_cast<const float*>(io.input), current, frame_elements_, stream);
  if (!slots.ready) return false;
  const float* reference = history + slots.reference * frame_elements_;
  const int rank = static_cast<int>(io.input_spec.axes.size());
  gpu_->correlate(method_, reference, current, stream);
  gpu_->find_peaks(rank, spacing_, static_cast<float*>(io.outputs[0]), static_cast<float*>(io.outputs[1]),
                   static_cast<float*>(io.outputs[2]), static_cast<std::uint8_t*>(io.outputs[3]), stream);
  return true;
}
#else
ncc::Method NccTrackStage::resolve_auto_cuda() { return ncc::Method::standard; }
bool NccTrackStage::run_cuda(const StageIo& io) { return Stage::run_cuda(io); }
#endif

}  // namespace sonopipe
