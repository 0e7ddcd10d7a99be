#include "stages/arfi/loupas/loupas.h"

#include <cmath>

#include "sdk/thread_pool.h"
#include "stages/arfi/arfi_conventions.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>
#include "stages/common/cuda_check.h"
#include "stages/arfi/loupas/loupas.cuh"
#endif

namespace sonopipe {
namespace {

std::vector<ParamDecl> estimator_params() {
  return {
      {.key = "kernel_samples", .type = ParamType::integer, .default_value = "0", .min = 0,
       .max = 4096, .unit = "samples",
       .doc = "axial kernel M in input samples; 0 = from kernel_wavelengths and f_c"},
      {.key = "kernel_wavelengths", .type = ParamType::real, .default_value = "1.5", .min = 0.1,
       .max = 100, .unit = "wavelengths", .doc = "axial kernel length when kernel_samples is 0"},
      {.key = "output_step", .type = ParamType::integer, .default_value = "1", .min = 1, .max = 1024,
       .unit = "samples", .doc = "decimation: one output depth every output_step input samples"},
      {.key = "output_dtype", .type = ParamType::choice, .default_value = "float32",
       .choices = {"float32", "float16"}, .doc = "element type of both outputs (float16 halves the copy)"},
  };
}

// T_s of an axis: its spacing in s, or 2 dz / c for a depth spacing, or 1 / fs when it has none.
double sample_period_s(const Axis& axis, const FrameMeta& frame) {
  if (axis.spacing > 0 && axis.unit == "s") return axis.spacing;
  if (axis.spacing > 0 && axis.unit == "m") return 2 * axis.spacing / frame.speed_of_sound_m_per_s;
  if (frame.sampling_frequency_hz > 0) return 1.0 / frame.sampling_frequency_hz;
  return 0;
}

}  // namespace

StageInfo LoupasStage::info() {
  return {.name = "loupas",
          .doc = "Loupas 2-D autocorrelator: axial displacement (um, + = away) of every track vs the reference",
          .params = estimator_params(),
          .create = [](const ParamValues& p) { return std::make_unique<LoupasStage>(p, Estimator::loupas); }};
}

StageInfo LoupasStage::kasai_info() {
  return {.name = "kasai",
          .doc = "Kasai 1-D autocorrelator (f_dem instead of the mean frequency): biased by f_mean/f_dem",
          .params = estimator_params(),
          .create = [](const ParamValues& p) { return std::make_unique<LoupasStage>(p, Estimator::kasai); }};
}

LoupasStage::LoupasStage(const ParamValues& p, Estimator estimator) {
  params_.estimator = estimator;
  params_.kernel_samples = p.integer("kernel_samples");
  params_.kernel_wavelengths = p.real("kernel_wavelengths");
  params_.output_step = p.integer("output_step");
  params_.output_half = p.text("output_dtype") == "float16";
}

StagePlan LoupasStage::configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) {
  const char* name = params_.estimator == Estimator::loupas ? "loupas" : "kasai";
  auto fail = [&](const std::string& why) { throw StageError(std::string(name) + ": " + why); };
  if (input.dtype != DType::complex64)
    fail("expected complex64 input (convert, then upsample), got " + std::string(dtype_name(input.dtype)));
  if (input.axes.size() != 3 || input.axes[0].name != arfi::kLocationAxis ||
      input.axes[1].name != arfi::kEnsembleAxis || input.axes[2].name != arfi::kSampleAxis)
    fail("expected axes [location, ensemble, sample], got " + input.shape_string());
  LoupasShape s;
  s.locations = input.axes[0].size;
  s.ensemble = input.axes[1].size;
  s.samples = input.axes[2].size;
  if (s.ensemble < 2) fail("needs a reference and at least one track (ensemble >= 2)");
  if (s.samples < 2) fail("needs at least 2 samples per line");
  s.sample_period_s = sample_period_s(input.axes[2], frame);
  if (!(s.sample_period_s > 0)) fail("no sample period: set sampling_frequency_hz or the sample axis spacing");
  s.speed_of_sound_m_per_s = frame.speed_of_sound_m_per_s;
  if (!(s.speed_of_sound_m_per_s > 0)) fail("speed_of_sound_m_per_s must be > 0");
  if (!(frame.demodulation_frequency_hz > 0) && !frame.vector(arfi::kDemodulationVector))
    fail("demodulation_frequency_hz must be > 0 (or the per-depth vector given)");
  s.kernel_samples = params_.kernel_samples;
  if (s.kernel_samples == 0) {
    if (!(frame.center_frequency_hz > 0)) fail("kernel_samples is 0 and the frame has no center_frequency_hz");
    // M = w lambda / dz with lambda = c / f_c, dz = c T_s / 2
    s.kernel_samples = std::llround(2 * params_.kernel_wavelengths / (frame.center_frequency_hz * s.sample_period_s));
  }
  if (s.kernel_samples < 2) s.kernel_samples = 2;
  if (s.kernel_samples > s.samples) s.kernel_samples = s.samples;
  s.output_step = params_.output_step;
  s.depths = (s.samples + s.output_step - 1) / s.output_step;
  s.use_mean_frequency = params_.estimator == Estimator::loupas;
  s.output_half = params_.output_half;
  shape_ = s;
  f_dem_hz_.assign(static_cast<std::size_t>(s.depths), 0.0);
  demodulation_per_depth(frame, s, f_dem_hz_.data());  // validates the vector now

  const Axis& sample_axis = input.axes[2];
  TensorSpec out;
  out.dtype = s.output_half ? DType::float16 : DType::float32;
  const double dz_m = s.speed_of_sound_m_per_s * s.sample_period_s / 2;
  const double origin_m = sample_axis.unit == "m" ? sample_axis.origin
                          : sample_axis.unit == "s" ? sample_axis.origin * s.speed_of_sound_m_per_s / 2
                                                    : 0.0;
  out.axes = {input.axes[0],
              Axis{.name = arfi::kTrackAxis, .size = s.ensemble - 1, .spacing = input.axes[1].spacing,
                   .unit = input.axes[1].unit, .origin = input.axes[1].origin + input.axes[1].spacing},
              Axis{.name = arfi::kDepthAxis, .size = s.depths, .spacing = dz_m * s.output_step,
                   .unit = "m", .origin = origin_m}};
  out.unit = "um";
  TensorSpec quality = out;
  quality.unit = "1";
  StagePlan plan{.outputs = {{"displacement", out}, {"quality", quality}}};
  if (backend == Backend::cuda) {
    plan.host_staging_bytes = static_cast<std::size_t>(s.depths) * sizeof(float);
    plan.workspace_bytes = plan.host_staging_bytes;
  }
  return plan;
}

void LoupasStage::demodulation_per_depth(const FrameMeta& frame, const LoupasShape& shape,
                                         double* f_dem_hz) {
  const std::vector<double>* per_sample = frame.vector(arfi::kDemodulationVector);
  if (!per_sample) {
    for (std::int64_t o = 0; o < shape.depths; ++o) f_dem_hz[o] = frame.demodulation_frequency_hz;
    return;
  }
  const int sample_axis = frame.payload.axis_index(arfi::kSampleAxis);
  const std::int64_t payload_samples = sample_axis >= 0 ? frame.payload.axes[sample_axis].size : 0;
  if (static_cast<std::int64_t>(per_sample->size()) != payload_samples || payload_samples < 1)
    throw StageError("vector '" + std::string(arfi::kDemodulationVector) + "' has " +
                     std::to_string(per_sample->size()) + " values, expected one per payload sample (" +
                     std::to_string(payload_samples) + ")");
  const double payload_period =
      sample_axis >= 0 ? sample_period_s(frame.payload.axes[sample_axis], frame) : 0;
  const double ratio = payload_period > 0 ? shape.sample_period_s / payload_period : 1.0;
  const std::int64_t last = payload_samples - 1;
  for (std::int64_t o = 0; o < shape.depths; ++o) {
    const double x = static_cast<double>(o * shape.output_step) * ratio;  // position in payload samples
    std::int64_t i = static_cast<std::int64_t>(std::floor(x));
    if (i >= last) {
      f_dem_hz[o] = (*per_sample)[last];
      continue;
    }
    if (i < 0) i = 0;
    const double t = x - static_cast<double>(i);
    f_dem_hz[o] = (1 - t) * (*per_sample)[i] + t * (*per_sample)[i + 1];
  }
}

void LoupasStage::estimate_pair(const std::complex<float>* reference, const std::complex<float>* track,
                                const LoupasShape& shape, const double* f_dem_hz, double* displacement_um,
                                double* quality) {
  // Per-sample terms of the window sums, then prefix sums (double: the differences of prefix sums
  // lose ~1e-14 relative, far below float), so each window costs O(1) whatever M is.
  thread_local std::vector<double> prefix;
  const std::int64_t n = shape.samples;
  constexpr int kTerms = 6;  // slow re, slow im, fast re, fast im, energy ref, energy track
  prefix.assign(static_cast<std::size_t>((n + 1) * kTerms), 0.0);
  for (std::int64_t m = 0; m < n; ++m) {
    const double rr = reference[m].real(), ri = reference[m].imag();
    const double tr = track[m].real(), ti = track[m].imag();
    double term[kTerms] = {tr * rr + ti * ri, ti * rr - tr * ri, 0, 0, rr * rr + ri * ri, tr * tr + ti * ti};
    if (m + 1 < n) {  // fast-time pair (m, m+1) of both lines: z[m+1] conj(z[m])
      const double r1r = reference[m + 1].real(), r1i = reference[m + 1].imag();
      const double t1r = track[m + 1].real(), t1i = track[m + 1].imag();
      term[2] = r1r * rr + r1i * ri + t1r * tr + t1i * ti;
      term[3] = r1i * rr - r1r * ri + t1i * tr - t1r * ti;
    }
    for (int k = 0; k < kTerms; ++k) prefix[(m + 1) * kTerms + k] = prefix[m * kTerms + k] + term[k];
  }
  auto window_sum = [&](int k, std::int64_t begin, std::int64_t end) {
    return prefix[end * kTerms + k] - prefix[begin * kTerms + k];
  };
  for (std::int64_t o = 0; o < shape.depths; ++o) {
    const arfi::Window w = arfi::kernel_window(o * shape.output_step, shape.kernel_samples, n);
    // R_slow and energies over [begin, end); R_fast over the pairs with both samples inside.
    arfi::EstimateInputs<double> s{window_sum(0, w.begin, w.end), window_sum(1, w.begin, w.end),
                                   window_sum(2, w.begin, w.end - 1), window_sum(3, w.begin, w.end - 1),
                                   window_sum(4, w.begin, w.end), window_sum(5, w.begin, w.end)};
    arfi::finish_estimate<double>(s, f_dem_hz[o], shape.sample_period_s, shape.speed_of_sound_m_per_s,
                                  shape.use_mean_frequency, displacement_um[o], quality[o]);
  }
}

bool LoupasStage::run_cpu(const StageIo& io) {
  demodulation_per_depth(io.frame, shape_, f_dem_hz_.data());
  const auto* in = static_cast<const std::complex<float>*>(io.input);
  const LoupasShape s = shape_;
  const std::int64_t tracks = s.ensemble - 1;
  io.pool->parallel_for(static_cast<std::size_t>(s.locations * tracks), [&](std::size_t begin, std::size_t end) {
    thread_local std::vector<double> disp, qual;
    if (disp.size() < static_cast<std::size_t>(s.depths)) {
      disp.resize(s.depths);
      qual.resize(s.depths);
    }
    for (std::size_t pair = begin; pair < end; ++pair) {
      const std::int64_t location = static_cast<std::int64_t>(pair) / tracks;
      const std::int64_t track = static_cast<std::int64_t>(pair) % tracks;
      const std::complex<float>* line0 = in + location * s.ensemble * s.samples;
      estimate_pair(line0 + arfi::kReferenceEnsembleIndex * s.samples, line0 + (track + 1) * s.samples,
                    s, f_dem_hz_.data(), disp.data(), qual.data());
      const std::size_t offset = pair * static_cast<std::size_t>(s.depths);
      if (s.output_half) {
        auto* d = static_cast<std::uint16_t*>(io.outputs[0]) + offset;
        auto* q = static_cast<std::uint16_t*>(io.outputs[1]) + offset;
        for (std::int64_t o = 0; o < s.depths; ++o) {
          d[o] = arfi::float_to_half_bits(static_cast<float>(disp[o]));
          q[o] = arfi::float_to_half_bits(static_cast<float>(qual[o]));
        }
      } else {
        auto* d = static_cast<float*>(io.outputs[0]) + offset;
        auto* q = static_cast<float*>(io.outputs[1]) + offset;
        for (std::int64_t o = 0; o < s.depths; ++o) {
          d[o] = static_cast<float>(disp[o]);
          q[o] = static_cast<float>(qual[o]);
        }
      }
    }
  });
  return true;
}

#ifdef SONOPIPE_WITH_CUDA
bool LoupasStage::run_cuda(const StageIo& io) {
  // f_dem per depth for this frame: pinned staging -> device workspace, on the stream.
  demodulation_per_depth(io.frame, shape_, f_dem_hz_.data());
  auto* staging = static_cast<float*>(io.host_staging);
  for (std::int64_t o = 0; o < shape_.depths; ++o) staging[o] = static_cast<float>(f_dem_hz_[o]);
  SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(io.workspace, staging, shape_.depths * sizeof(float),
                                      cudaMemcpyHostToDevice, io.stream));
  cuda::loupas(static_cast<const float2*>(io.input), static_cast<const float*>(io.workspace), shape_,
               io.outputs[0], io.outputs[1], io.stream);
  return true;
}
#else
bool LoupasStage::run_cuda(const StageIo& io) { return Stage::run_cuda(io); }
#endif

}  // namespace sonopipe
