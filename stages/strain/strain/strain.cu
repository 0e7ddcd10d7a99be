#include "stages/strain/strain/strain.cuh"

#include "stages/common/cuda_check.h"
#include "stages/strain/strain/strain_params.h"

namespace sonopipe::cuda {
namespace {

__global__ void median_kernel(StrainGrid grid, const float* in, float* out) {
  const int points = grid.points[0] * grid.points[1] * grid.points[2];
  const int id = blockIdx.x * blockDim.x + threadIdx.x;
  if (id >= points * grid.rank) return;
  const int p = id / grid.rank, c = id % grid.rank;
  const int coords[3] = {p % grid.points[0], (p / grid.points[0]) % grid.points[1],
                         p / (grid.points[0] * grid.points[1])};
  float values[strain::kMaxMedianCount];
  int count = 0;
  int lo[3], hi[3];
  for (int d = 0; d < 3; ++d) {
    lo[d] = max(0, coords[d] - grid.median[d] / 2);
    hi[d] = min(grid.points[d] - 1, coords[d] + grid.median[d] / 2);
  }
  for (int e = lo[2]; e <= hi[2]; ++e)
    for (int l = lo[1]; l <= hi[1]; ++l)
      for (int a = lo[0]; a <= hi[0]; ++a)
        values[count++] = in[((e * grid.points[1] + l) * grid.points[0] + a) * grid.rank + c];
  out[id] = strain::median_of(values, count);
}

__global__ void strain_kernel(StrainGrid grid, const float* field, float* out) {
  const int points = grid.points[0] * grid.points[1] * grid.points[2];
  const int id = blockIdx.x * blockDim.x + threadIdx.x;
  if (id >= points * grid.rank) return;
  const int p = id / grid.rank, c = id % grid.rank;
  const long long stride[3] = {1, grid.points[0], static_cast<long long>(grid.points[0]) * grid.points[1]};
  const int j = static_cast<int>((p / stride[c]) % grid.points[c]);
  const float* line = field + (p - j * stride[c]) * grid.rank + c;
  out[id] = strain::slope_per_step<float>(line, stride[c] * grid.rank, j, grid.points[c], grid.half_window) /
            grid.spacing[c];
}

}  // namespace

void strain(const StrainGrid& grid, const float* displacement, float* smoothed, float* out,
            cudaStream_t stream) {
  const int work = grid.points[0] * grid.points[1] * grid.points[2] * grid.rank;
  const int blocks = (work + 255) / 256;
  const float* field = displacement;
  if (grid.median[0] * grid.median[1] * grid.median[2] > 1) {
    median_kernel<<<blocks, 256, 0, stream>>>(grid, displacement, smoothed);
    SONOPIPE_CUDA_CHECK_LAUNCH();
    field = smoothed;
  }
  strain_kernel<<<blocks, 256, 0, stream>>>(grid, field, out);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace sonopipe::cuda
