#include "cuda/beamform/beamform.cuh"

#include "cuda/common/cuda_check.h"

namespace sonopipe::cuda {

namespace {

template <int C>
__global__ void spline_lines(const float* input, std::int64_t lines, std::int64_t samples, float* m, float* c) {
  const std::int64_t line = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (line >= lines) return;
  beamform::spline_line<float, C>(input + line * samples * C, samples,
                                  reinterpret_cast<spline::Vec<float, C>*>(m) + line * samples, c + line * samples);
}

// Depth is the fastest output axis: neighbouring threads take neighbouring depths of one lateral
// position, so their delays (and the channel samples they read) are close together.
template <int C>
__global__ void delay_and_sum(BeamformLaunch launch) {
  const std::int64_t pixel = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (pixel >= launch.lateral * launch.depth) return;
  const std::int64_t i = pixel / launch.depth, j = pixel - i * launch.depth;
  const float depth = launch.depth_min_m + launch.depth_step_m * static_cast<float>(j);
  float x = 0.0f, z = depth;
  int t_begin = 0, t_end = static_cast<int>(launch.transmits);
  switch (launch.grid) {
    case BeamformLaunch::Grid::linear: x = launch.lateral_min + launch.lateral_step * static_cast<float>(i); break;
    case BeamformLaunch::Grid::sector: {
      const float angle = launch.lateral_min + launch.lateral_step * static_cast<float>(i);
      x = depth * sinf(angle);
      z = depth * cosf(angle);
      break;
    }
    case BeamformLaunch::Grid::lines:
      x = launch.setup.transmits[i].source_x_m;
      t_begin = static_cast<int>(i);
      t_end = t_begin + 1;
      break;
  }
  const std::int64_t elements = launch.setup.elements, samples = launch.setup.samples;
  const auto* m = reinterpret_cast<const spline::Vec<float, C>*>(launch.spline_m);
  const spline::Vec<float, C> value =
      beamform::das_pixel<float, C>(launch.setup, x, z, t_begin, t_end, [&](int t, int e) {
        const std::int64_t line = t * elements + e;
        return beamform::Line<float, C>{launch.input + line * samples * C, m ? m + line * samples : nullptr};
      });
  float* out = static_cast<float*>(launch.output) + pixel * C;
  for (int c = 0; c < C; ++c) out[c] = value.v[c];
}

template <int C>
void run(const BeamformLaunch& launch, cudaStream_t stream) {
  constexpr int kThreads = 256;
  if (launch.setup.cubic) {
    const std::int64_t lines = launch.transmits * launch.setup.elements;
    spline_lines<C><<<static_cast<unsigned>((lines + 127) / 128), 128, 0, stream>>>(
        launch.input, lines, launch.setup.samples, launch.spline_m, launch.spline_c);
    SONOPIPE_CUDA_CHECK_LAUNCH();
  }
  const std::int64_t pixels = launch.lateral * launch.depth;
  delay_and_sum<C><<<static_cast<unsigned>((pixels + kThreads - 1) / kThreads), kThreads, 0, stream>>>(launch);
  SONOPIPE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void beamform(const BeamformLaunch& launch, cudaStream_t stream) {
  if (launch.channels == 1) run<1>(launch, stream);
  else run<2>(launch, stream);
}

}  // namespace sonopipe::cuda
