#include "stages/strain/strain/strain.h"

#include <algorithm>

#include "sdk/thread_pool.h"
#include "stages/strain/strain/strain_params.h"

#ifdef SONOPIPE_WITH_CUDA
#include "stages/strain/strain/strain.cuh"
#endif

namespace sonopipe {
namespace {

// Median of component c around point p (grid coordinates axial fastest), window clipped.
double median_at(const StrainStage::Grid& grid, const int median[3], const float* displacement,
                 std::size_t p, int c) {
  int coords[3] = {static_cast<int>(p % grid.points[0]),
                   static_cast<int>((p / grid.points[0]) % grid.points[1]),
                   static_cast<int>(p / (static_cast<std::size_t>(grid.points[0]) * grid.points[1]))};
  double values[strain::kMaxMedianCount];
  int count = 0;
  int lo[3], hi[3];
  for (int d = 0; d < 3; ++d) {
    lo[d] = std::max(0, coords[d] - median[d] / 2);
    hi[d] = std::min(grid.points[d] - 1, coords[d] + median[d] / 2);
  }
  for (int e = lo[2]; e <= hi[2]; ++e)
    for (int l = lo[1]; l <= hi[1]; ++l)
      for (int a = lo[0]; a <= hi[0]; ++a) {
        const std::size_t q = (static_cast<std::size_t>(e) * grid.points[1] + l) * grid.points[0] + a;
        values[count++] = displacement[q * grid.rank + c];
      }
  return strain::median_of(values, count);
}

template <typename U>
double strain_at(const StrainStage::Grid& grid, int half_window, const U* field, std::size_t p, int c) {
  const long long stride_points[3] = {1, grid.points[0],
                                      static_cast<long long>(grid.points[0]) * grid.points[1]};
  const int j = static_cast<int>((p / stride_points[c]) % grid.points[c]);
  const U* line = field + (p - j * stride_points[c]) * grid.rank + c;
  return strain::slope_per_step<double>(line, stride_points[c] * grid.rank, j, grid.points[c], half_window) /
         grid.spacing[c];
}

}  // namespace

StageInfo StrainStage::info() {
  return {
      .name = "strain",
      .doc = "normal strains of a displacement field by the least-squares differentiator (+ median)",
      .params = {
          {.key = "window", .type = ParamType::integer, .default_value = "5", .min = 3, .max = 63,
           .unit = "grid points", .doc = "odd length N = 2h+1 of the least-squares differentiator"},
          {.key = "median", .type = ParamType::integer_list, .default_value = "[1]", .min = 1, .max = 9,
           .unit = "grid points",
           .doc = "median pre-filter window per axis [axial, lateral(, elevational)], odd, 1 = off"},
      },
      .create = [](const ParamValues& p) { return std::make_unique<StrainStage>(p); },
  };
}

StrainStage::StrainStage(const ParamValues& params) {
  const auto window = params.integer("window");
  if (window % 2 == 0) throw ParamError("window", "an odd number of grid points", 0);
  half_window_ = static_cast<int>(window / 2);
  const auto& median = params.integers("median");
  if (median.size() > 3) throw ParamError("median", "at most three items", 0);
  int count = 1;
  for (std::size_t d = 0; d < median.size(); ++d) {
    if (median[d] % 2 == 0) throw ParamError("median", "odd window sizes", 0);
    median_[d] = static_cast<int>(median[d]);
    count *= median_[d];
  }
  if (count > strain::kMaxMedianCount)
    throw ParamError("median", "a window of at most " + std::to_string(strain::kMaxMedianCount) + " points", 0);
}

StagePlan StrainStage::configure(const FrameMeta&, const TensorSpec& input, Backend) {
  const int axes = static_cast<int>(input.axes.size());
  if (input.dtype != DType::float32 || axes < 3 || axes > 4 || input.axes.back().name != "component" ||
      input.axes.back().size != axes - 1)
    throw StageError("strain: expected the float32 displacement [grid..., component] of ncc_track, got " +
                     input.shape_string());
  grid_ = Grid{};
  grid_.rank = axes - 1;
  for (int d = 0; d < grid_.rank; ++d) {
    const Axis& axis = input.axes[grid_.rank - 1 - d];
    grid_.points[d] = static_cast<int>(axis.size);
    grid_.spacing[d] = axis.spacing;
    if (!(axis.spacing > 0.0))
      throw StageError("strain: grid axis '" + axis.name + "' has no spacing (the tracking step)");
  }
  for (int d = grid_.rank; d < 3; ++d)
    if (median_[d] != 1) throw StageError("strain: median window given for an axis the grid lacks");
  TensorSpec out = input;
  out.unit = "1";
  const bool filtered = median_[0] * median_[1] * median_[2] > 1;
  StagePlan plan{.outputs = {{"strain", out}}};
  plan.workspace_bytes = filtered ? input.byte_size() : 0;  // median-filtered displacement
  return plan;
}

void StrainStage::strain_reference(const Grid& grid, int half_window, const int median[3],
                                   const float* displacement, double* strain) {
  const std::size_t points = static_cast<std::size_t>(grid.points[0]) * grid.points[1] * grid.points[2];
  const bool filtered = median[0] * median[1] * median[2] > 1;
  std::vector<double> smoothed;
  if (filtered) {
    smoothed.resize(points * grid.rank);
    for (std::size_t p = 0; p < points; ++p)
      for (int c = 0; c < grid.rank; ++c) smoothed[p * grid.rank + c] = median_at(grid, median, displacement, p, c);
  }
  for (std::size_t p = 0; p < points; ++p)
    for (int c = 0; c < grid.rank; ++c)
      strain[p * grid.rank + c] = filtered ? strain_at(grid, half_window, smoothed.data(), p, c)
                                           : strain_at(grid, half_window, displacement, p, c);
}

bool StrainStage::run_cpu(const StageIo& io) {
  const auto* displacement = static_cast<const float*>(io.input);
  auto* out = static_cast<float*>(io.outputs[0]);
  const std::size_t points = static_cast<std::size_t>(grid_.points[0]) * grid_.points[1] * grid_.points[2];
  const bool filtered = median_[0] * median_[1] * median_[2] > 1;
  const float* field = displacement;
  if (filtered) {
    auto* smoothed = static_cast<float*>(io.workspace);
    io.pool->parallel_for(points, [&](std::size_t begin, std::size_t end) {
      for (std::size_t p = begin; p < end; ++p)
        for (int c = 0; c < grid_.rank; ++c)
          smoothed[p * grid_.rank + c] = static_cast<float>(median_at(grid_, median_, displacement, p, c));
    }, 256);
    field = smoothed;
  }
  io.pool->parallel_for(points, [&](std::size_t begin, std::size_t end) {
    for (std::size_t p = begin; p < end; ++p)
      for (int c = 0; c < grid_.rank; ++c)
        out[p * grid_.rank + c] = static_cast<float>(strain_at(grid_, half_window_, field, p, c));
  }, 256);
  return true;
}

#ifdef SONOPIPE_WITH_CUDA
bool StrainStage::run_cuda(const StageIo& io) {
  cuda::StrainGrid grid{};
  for (int d = 0; d < 3; ++d) {
    grid.points[d] = grid_.points[d];
    grid.spacing[d] = static_cast<float>(grid_.spacing[d]);
    grid.median[d] = median_[d];
  }
  grid.rank = grid_.rank;
  grid.half_window = half_window_;
  cuda::strain(grid, static_cast<const float*>(io.input), static_cast<float*>(io.workspace),
               static_cast<float*>(io.outputs[0]), reinterpret_cast<cudaStream_t>(io.stream));
  return true;
}
#else
bool StrainStage::run_cuda(const StageIo& io) { return Stage::run_cuda(io); }
#endif

}  // namespace sonopipe
