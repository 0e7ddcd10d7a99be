// Lewis' method on the GPU (peng2019 section 2.2.4): per estimation point, the reference window and
// its target region are zero-padded into FFT boxes, transformed by cuFFT (batched, in
// stages/strain/ncc_track/ncc_track.cu), multiplied as conj(F) G (eq. (3)) and transformed back; these kernels do the
// gather and the spectrum product.
#include "stages/common/cuda_check.h"
#include "stages/strain/ncc_track/ncc_kernels.cuh"

namespace sonopipe::cuda::ncc_kernels {
namespace {

using ncc::Geometry;
using ncc::kDims;

// One thread per element of the padded boxes of the batch: window (f at the reference window,
// zero elsewhere) and region (g from origin + search_min over W + S - 1, zero elsewhere).
__global__ void gather_kernel(Geometry geo, int p0, int p1, int p2, int first_point, int batch,
                              const float* f, const float* g, float* windows, float* regions) {
  const std::size_t total = static_cast<std::size_t>(p0) * p1 * p2;
  const std::size_t id = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (id >= total * batch) return;
  const int b = static_cast<int>(id / total);
  const std::size_t r = id % total;
  const int a = static_cast<int>(r % p0);
  const int l = static_cast<int>((r / p0) % p1);
  const int e = static_cast<int>(r / (static_cast<std::size_t>(p0) * p1));
  const int p = first_point + b;
  float window = 0.f, region = 0.f;
  if (p < geo.point_count()) {
    int c[kDims];
    geo.point_coords(p, c);
    const int oa = geo.start[0] + c[0] * geo.step[0];
    const int ol = geo.start[1] + c[1] * geo.step[1];
    const int oe = geo.start[2] + c[2] * geo.step[2];
    if (a < geo.kernel[0] && l < geo.kernel[1] && e < geo.kernel[2])
      window = f[geo.frame_index(oa + a, ol + l, oe + e)];
    if (a < geo.kernel[0] + geo.shifts(0) - 1 && l < geo.kernel[1] + geo.shifts(1) - 1 &&
        e < geo.kernel[2] + geo.shifts(2) - 1)
      region = g[geo.frame_index(oa + geo.search_min[0] + a, ol + geo.search_min[1] + l,
                                 oe + geo.search_min[2] + e)];
  }
  windows[id] = window;
  regions[id] = region;
}

// region <- conj(window) * region * scale: the cross-correlation spectrum (eq. (3)); scale undoes
// cuFFT's unnormalised inverse.
__global__ void cross_spectrum_kernel(const float2* window, float2* region, std::size_t count,
                                      float scale) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    const float2 w = window[i], r = region[i];
    region[i] = make_float2((w.x * r.x + w.y * r.y) * scale, (w.x * r.y - w.y * r.x) * scale);
  }
}

}  // namespace

void lewis_gather(const Geometry& geometry, const int fft_size[kDims], int first_point, int batch,
                  const float* f, const float* g, float* windows, float* regions,
                  cudaStream_t stream) {
  const std::size_t work = static_cast<std::size_t>(fft_size[0]) * fft_size[1] * fft_size[2] * batch;
  gather_kernel<<<static_cast<int>((work + 255) / 256), 256, 0, stream>>>(
      geometry, fft_size[0], fft_size[1], fft_size[2], first_point, batch, f, g, windows, regions);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

void lewis_cross_spectrum(const float2* window_spectra, float2* region_spectra, std::size_t count,
                          float scale, cudaStream_t stream) {
  std::size_t blocks = (count + 255) / 256;
  if (blocks > 65535) blocks = 65535;
  cross_spectrum_kernel<<<static_cast<int>(blocks), 256, 0, stream>>>(window_spectra, region_spectra,
                                                                      count, scale);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace sonopipe::cuda::ncc_kernels
