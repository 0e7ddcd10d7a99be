#include "stages/arfi/upsample/upsample.h"

#include <numeric>

#include "sdk/thread_pool.h"

#ifdef SONOPIPE_WITH_CUDA
#include "stages/common/cuda_check.h"
#include "stages/arfi/upsample/upsample.cuh"
#endif

namespace sonopipe {

StageInfo UpsampleStage::info() {
  return {
      .name = "upsample",
      .doc = "cubic-spline upsampling of every line along its last axis (exact or the paper's overlapping subsets)",
      .params =
          {
              {.key = "mode", .type = ParamType::choice, .default_value = "subsets",
               .choices = {"subsets", "exact"},
               .doc = "exact: spline of the whole line; subsets: rosenzweig2011's overlapping small systems"},
              {.key = "boundary", .type = ParamType::choice, .default_value = "natural",
               .choices = {"natural", "not-a-knot"}, .doc = "boundary condition at the line ends"},
              {.key = "factor", .type = ParamType::integer, .default_value = "5", .min = 1, .max = 64,
               .doc = "output rate = input rate * factor / factor_denominator"},
              {.key = "factor_denominator", .type = ParamType::integer, .default_value = "1", .min = 1,
               .max = 64, .doc = "denominator of a rational factor (1 = integer factor)"},
              {.key = "subset_knots", .type = ParamType::integer, .default_value = "16", .min = 4,
               .max = 256, .unit = "samples", .doc = "subsets: coefficients kept per subset (n)"},
              {.key = "overlap", .type = ParamType::integer, .default_value = "12", .min = 0, .max = 64,
               .unit = "samples",
               .doc = "subsets: knots of overlap on each side (k); edge error ~0.27^k, 12 ~ float32 exact"},
          },
      .create = [](const ParamValues& p) { return std::make_unique<UpsampleStage>(p); },
  };
}

UpsampleStage::UpsampleStage(const ParamValues& p) {
  params_.exact = p.text("mode") == "exact";
  params_.boundary = p.text("boundary") == "natural" ? spline::Boundary::natural
                                                     : spline::Boundary::not_a_knot;
  params_.factor = p.integer("factor");
  params_.factor_denominator = p.integer("factor_denominator");
  params_.subset_knots = p.integer("subset_knots");
  params_.overlap = p.integer("overlap");
  const std::int64_t g = std::gcd(params_.factor, params_.factor_denominator);
  params_.factor /= g;
  params_.factor_denominator /= g;
}

StagePlan UpsampleStage::configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) {
  if (input.dtype != DType::complex64 && input.dtype != DType::float32)
    throw StageError("upsample: expected complex64 or float32 input (run convert first), got " +
                     std::string(dtype_name(input.dtype)));
  if (input.axes.empty()) throw StageError("upsample: input has no axes");
  channels_ = input.dtype == DType::complex64 ? 2 : 1;
  length_ = input.axes.back().size;
  lines_ = input.element_count() / (length_ > 0 ? length_ : 1);
  const std::int64_t min_length = params_.boundary == spline::Boundary::not_a_knot ? 4 : 2;
  if (length_ < min_length)
    throw StageError("upsample: axis '" + input.axes.back().name + "' has " + std::to_string(length_) +
                     " samples, the spline needs at least " + std::to_string(min_length));
  out_length_ = spline::output_length(length_, params_.factor, params_.factor_denominator);

  TensorSpec out = input;
  Axis& axis = out.axes.back();
  const double ratio = static_cast<double>(params_.factor) / params_.factor_denominator;
  axis.size = out_length_;
  if (axis.spacing > 0) {
    axis.spacing /= ratio;
  } else if (frame.sampling_frequency_hz > 0) {
    axis.spacing = 1.0 / (frame.sampling_frequency_hz * ratio);
    axis.unit = "s";
  }
  StagePlan plan{.outputs = {{"upsampled", out}}};
#ifdef SONOPIPE_WITH_CUDA
  if (backend == Backend::cuda) {
    try {
      cuda::prepare_upsample(params_, length_, channels_);
    } catch (const cuda::CudaError& e) {  // a line the kernel's tiling cannot hold: a stage error
      throw StageError(e.what());
    }
  }
#else
  (void)backend;
#endif
  return plan;
}

void UpsampleStage::second_derivatives(const double* y, std::int64_t length,
                                       const UpsampleParams& params, double* m_out,
                                       std::vector<double>& scratch) {
  using V = spline::Vec<double, 1>;
  const std::int64_t n = params.exact ? length : params.subset_knots;
  const std::int64_t k = params.exact ? 0 : params.overlap;
  const std::size_t slots = static_cast<std::size_t>(n + k + 2);  // rows kept for back substitution
  if (scratch.size() < 2 * slots) scratch.resize(2 * slots);
  double* c = scratch.data();
  double* d = scratch.data() + slots;
  auto y_at = [&](std::int64_t i) { return V{{y[i]}}; };
  auto c_at = [&](std::int64_t r) -> double& { return c[r]; };
  auto d_at = [&](std::int64_t r) -> V& { return *reinterpret_cast<V*>(&d[r]); };
  auto m_at = [&](std::int64_t i, const V& m) { m_out[i] = m.v[0]; };
  for (std::int64_t a = 0; a < length; a += n) {
    const spline::KnotRange owned{a, a + n < length ? a + n : length};
    const spline::KnotRange window =
        params.exact ? spline::KnotRange{0, length} : spline::subset_window(owned, k, length);
    spline::solve_window<double, 1>(window, owned, length, params.boundary, y_at,
                                    spline::ComputedPivots<double, decltype(c_at)>{c_at}, d_at, m_at);
  }
}

void UpsampleStage::upsample_line(const double* y, std::int64_t length, const UpsampleParams& params,
                                  double* out, SplineScratch& scratch) {
  using V = spline::Vec<double, 1>;
  if (scratch.m.size() < static_cast<std::size_t>(length)) scratch.m.resize(length);
  second_derivatives(y, length, params, scratch.m.data(), scratch.solver);
  const double* m = scratch.m.data();
  const std::int64_t p = params.factor, q = params.factor_denominator;
  const std::int64_t count = spline::output_length(length, p, q);
  for (std::int64_t j = 0; j < count; ++j) {
    std::int64_t rest;
    const std::int64_t i = spline::output_interval(j, p, q, length, rest);
    const double t = static_cast<double>(rest) / static_cast<double>(p);
    out[j] = spline::evaluate<double, 1>(V{{y[i]}}, V{{y[i + 1]}}, V{{m[i]}}, V{{m[i + 1]}}, t).v[0];
  }
}

bool UpsampleStage::run_cpu(const StageIo& io) {
  const auto* in = static_cast<const float*>(io.input);
  auto* out = static_cast<float*>(io.outputs[0]);
  const std::int64_t length = length_, out_length = out_length_;
  const int channels = channels_;
  const UpsampleParams params = params_;
  io.pool->parallel_for(static_cast<std::size_t>(lines_), [&](std::size_t begin, std::size_t end) {
    // Per-thread buffers, grown once and reused across frames (no per-frame allocation after the first).
    thread_local std::vector<double> line, result;
    thread_local SplineScratch scratch;
    if (line.size() < static_cast<std::size_t>(length)) line.resize(length);
    if (result.size() < static_cast<std::size_t>(out_length)) result.resize(out_length);
    for (std::size_t l = begin; l < end; ++l) {
      const float* src = in + l * length * channels;
      float* dst = out + l * out_length * channels;
      for (int c = 0; c < channels; ++c) {  // I and Q independently
        for (std::int64_t i = 0; i < length; ++i) line[i] = src[i * channels + c];
        upsample_line(line.data(), length, params, result.data(), scratch);
        for (std::int64_t j = 0; j < out_length; ++j) dst[j * channels + c] = static_cast<float>(result[j]);
      }
    }
  });
  return true;
}

#ifdef SONOPIPE_WITH_CUDA
bool UpsampleStage::run_cuda(const StageIo& io) {
  cuda::upsample(static_cast<const float*>(io.input), static_cast<float*>(io.outputs[0]), lines_,
                 length_, channels_, params_, io.stream);
  return true;
}
#else
bool UpsampleStage::run_cuda(const StageIo& io) { return Stage::run_cuda(io); }
#endif

}  // namespace sonopipe
