#include "stages/arfi/motion_filter/motion_filter.h"

#include <cmath>

#include "sdk/thread_pool.h"
#include "stages/arfi/arfi_conventions.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>
#include "stages/common/cuda_check.h"
#include "stages/arfi/motion_filter/motion_filter.cuh"
#endif

namespace sonopipe {

StageInfo MotionFilterStage::info() {
  return {
      .name = "motion_filter",
      .doc = "subtracts a per-depth polynomial in time fitted through the reference and the late tracks (drift)",
      .params =
          {
              {.key = "order", .type = ParamType::integer, .default_value = "1", .min = 1, .max = 2,
               .doc = "polynomial order in time: 1 linear drift, 2 quadratic"},
              {.key = "late_tracks", .type = ParamType::integer, .default_value = "10", .min = 1,
               .max = 100000, .unit = "tracks", .doc = "the last late_tracks tracks enter the fit"},
              {.key = "use_reference", .type = ParamType::boolean, .default_value = "true",
               .doc = "the reference time enters the fit with displacement 0"},
              {.key = "output_dtype", .type = ParamType::choice, .default_value = "float32",
               .choices = {"float32", "float16"}, .doc = "element type of the output"},
          },
      .create = [](const ParamValues& p) { return std::make_unique<MotionFilterStage>(p); },
  };
}

MotionFilterStage::MotionFilterStage(const ParamValues& p) {
  params_.order = static_cast<int>(p.integer("order"));
  params_.late_tracks = p.integer("late_tracks");
  params_.use_reference = p.boolean("use_reference");
  params_.output_half = p.text("output_dtype") == "float16";
}

StagePlan MotionFilterStage::configure(const FrameMeta& frame, const TensorSpec& input, Backend backend) {
  if (input.dtype != DType::float32 && input.dtype != DType::float16)
    throw StageError("motion_filter: expected float32 or float16 displacement, got " +
                     std::string(dtype_name(input.dtype)));
  if (input.axes.size() != 3 || input.axes[1].name != arfi::kTrackAxis)
    throw StageError("motion_filter: expected axes [location, track, depth], got " + input.shape_string());
  MotionFilterShape s;
  s.locations = input.axes[0].size;
  s.tracks = input.axes[1].size;
  s.depths = input.axes[2].size;
  s.late_tracks = params_.late_tracks < s.tracks ? params_.late_tracks : s.tracks;
  s.input_half = input.dtype == DType::float16;
  s.output_half = params_.output_half;
  shape_ = s;
  weights_.assign(static_cast<std::size_t>(s.tracks * s.late_tracks), 0.0);
  fit_weights(frame, s, params_.order, params_.use_reference, weights_.data());  // validates now

  TensorSpec out = input;
  out.dtype = s.output_half ? DType::float16 : DType::float32;
  StagePlan plan{.outputs = {{"displacement_filtered", out}}};
  if (backend == Backend::cuda) {
    plan.host_staging_bytes = weights_.size() * sizeof(float);
    plan.workspace_bytes = plan.host_staging_bytes;
  }
  return plan;
}

void MotionFilterStage::fit_weights(const FrameMeta& frame, const MotionFilterShape& shape, int order,
                                    bool use_reference, double* weights) {
  const std::int64_t tracks = shape.tracks, late = shape.late_tracks;
  auto time_of = [&](std::int64_t ensemble_index) {
    const std::vector<double>* times = frame.vector(arfi::kEnsembleTimeVector);
    return times ? (*times)[ensemble_index] : static_cast<double>(ensemble_index);
  };
  if (const std::vector<double>* times = frame.vector(arfi::kEnsembleTimeVector);
      times && static_cast<std::int64_t>(times->size()) != tracks + 1)
    throw StageError("motion_filter: vector '" + std::string(arfi::kEnsembleTimeVector) + "' has " +
                     std::to_string(times->size()) + " values, expected tracks + 1 = " +
                     std::to_string(tracks + 1));
  const int terms = order + 1;
  const std::int64_t points = late + (use_reference ? 1 : 0);
  if (points < terms)
    throw StageError("motion_filter: order " + std::to_string(order) + " needs " + std::to_string(terms) +
                     " fit points, have " + std::to_string(points) + " (late_tracks + reference)");
  // Normalised time: 0 at the reference, 1 at the last track (keeps the normal equations tame).
  const double t0 = time_of(0), span = time_of(tracks) - t0;
  if (!(std::abs(span) > 0)) throw StageError("motion_filter: ensemble times do not advance");
  auto tau = [&](std::int64_t ensemble_index) { return (time_of(ensemble_index) - t0) / span; };
  // Normal equations A = X^T X over the fit points (reference row has tau = 0, y = 0).
  double a[3][3] = {};
  auto add_point = [&](double x) {
    double p[3] = {1, x, x * x};
    for (int i = 0; i < terms; ++i)
      for (int j = 0; j < terms; ++j) a[i][j] += p[i] * p[j];
  };
  if (use_reference) add_point(0.0);
  for (std::int64_t l = 0; l < late; ++l) add_point(tau(tracks - late + l + 1));
  // Invert A (Gauss-Jordan, partial pivoting; at most 3x3).
  double inv[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  for (int col = 0; col < terms; ++col) {
    int pivot = col;
    for (int r = col + 1; r < terms; ++r)
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    if (!(std::abs(a[pivot][col]) > 1e-12 * points))
      throw StageError("motion_filter: the fit is singular (late track times coincide?)");
    for (int j = 0; j < 3; ++j) {
      std::swap(a[col][j], a[pivot][j]);
      std::swap(inv[col][j], inv[pivot][j]);
    }
    const double scale = 1.0 / a[col][col];
    for (int j = 0; j < terms; ++j) {
      a[col][j] *= scale;
      inv[col][j] *= scale;
    }
    for (int r = 0; r < terms; ++r) {
      if (r == col) continue;
      const double f = a[r][col];
      for (int j = 0; j < terms; ++j) {
        a[r][j] -= f * a[col][j];
        inv[r][j] -= f * inv[col][j];
      }
    }
  }
  // beta = A^-1 X^T y; fitted(t) = phi(t)^T beta = sum_l W[t][l] y_late[l].
  for (std::int64_t t = 0; t < tracks; ++t) {
    const double x = tau(t + 1);
    const double phi_t[3] = {1, x, x * x};
    for (std::int64_t l = 0; l < late; ++l) {
      const double xl = tau(tracks - late + l + 1);
      const double phi_l[3] = {1, xl, xl * xl};
      double w = 0;
      for (int i = 0; i < terms; ++i)
        for (int j = 0; j < terms; ++j) w += phi_t[i] * inv[i][j] * phi_l[j];
      weights[t * late + l] = w;
    }
  }
}

bool MotionFilterStage::run_cpu(const StageIo& io) {
  fit_weights(io.frame, shape_, params_.order, params_.use_reference, weights_.data());
  const MotionFilterShape s = shape_;
  const double* weights = weights_.data();
  // Per location, row by row (depth contiguous): out[t][z] = in[t][z] - sum_l W[t][l] in[late_l][z].
  io.pool->parallel_for(static_cast<std::size_t>(s.locations), [&](std::size_t begin, std::size_t end) {
    thread_local std::vector<double> rows, fitted;
    rows.resize(static_cast<std::size_t>(s.tracks * s.depths));
    fitted.resize(static_cast<std::size_t>(s.depths));
    for (std::size_t location = begin; location < end; ++location) {
      const std::size_t base = location * static_cast<std::size_t>(s.tracks * s.depths);
      for (std::size_t i = 0; i < rows.size(); ++i)
        rows[i] = s.input_half ? arfi::half_bits_to_float(static_cast<const std::uint16_t*>(io.input)[base + i])
                               : static_cast<const float*>(io.input)[base + i];
      for (std::int64_t t = 0; t < s.tracks; ++t) {
        std::fill(fitted.begin(), fitted.end(), 0.0);
        for (std::int64_t l = 0; l < s.late_tracks; ++l) {
          const double w = weights[t * s.late_tracks + l];
          const double* late_row = rows.data() + (s.tracks - s.late_tracks + l) * s.depths;
          for (std::int64_t z = 0; z < s.depths; ++z) fitted[z] += w * late_row[z];
        }
        const double* row = rows.data() + t * s.depths;
        const std::size_t out_at = base + t * s.depths;
        if (s.output_half) {
          auto* out = static_cast<std::uint16_t*>(io.outputs[0]) + out_at;
          for (std::int64_t z = 0; z < s.depths; ++z) out[z] = arfi::float_to_half_bits(static_cast<float>(row[z] - fitted[z]));
        } else {
          auto* out = static_cast<float*>(io.outputs[0]) + out_at;
          for (std::int64_t z = 0; z < s.depths; ++z) out[z] = static_cast<float>(row[z] - fitted[z]);
        }
      }
    }
  });
  return true;
}

#ifdef SONOPIPE_WITH_CUDA
bool MotionFilterStage::run_cuda(const StageIo& io) {
  fit_weights(io.frame, shape_, params_.order, params_.use_reference, weights_.data());
  auto* staging = static_cast<float*>(io.host_staging);
  for (std::size_t i = 0; i < weights_.size(); ++i) staging[i] = static_cast<float>(weights_[i]);
  SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(io.workspace, staging, weights_.size() * sizeof(float),
                                      cudaMemcpyHostToDevice, io.stream));
  cuda::motion_filter(io.input, static_cast<const float*>(io.workspace), shape_, io.outputs[0], io.stream);
  return true;
}
#else
bool MotionFilterStage::run_cuda(const StageIo& io) { return Stage::run_cuda(io); }
#endif

}  // namespace sonopipe
