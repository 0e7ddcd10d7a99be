#include "stages/perfusion/perfusion_fit/perfusion_fitter.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "sdk/thread_pool.h"

namespace sonopipe::perfusion {

FitConfig make_fit_config(const FitSettings& settings) {
  FitConfig config;
  config.optimiser = settings.optimiser;
  for (int j = 0; j < kParameterCount; ++j) config.start_si[j] = settings.start[j];
  to_si(config.start_si);
  config.convolution = settings.convolution;
  config.linear_start = settings.linear_start;
  config.linear_grid = LinearStartGrid{};
  return config;
}

void fit_voxels_cpu(const FitProblem& problem, const FitSettings& settings, const double* tissue,
                    std::size_t voxels, VoxelFit* out, ThreadPool& pool, const Progress& progress) {
  const FitConfig config = make_fit_config(settings);
  const ModelInputs in = problem.view();
  const std::size_t samples = static_cast<std::size_t>(in.samples);
  // Chunks of a few hundred voxels: small enough for an even load and a live progress bar.
  const std::size_t chunk = 256;
  const std::size_t chunks = (voxels + chunk - 1) / chunk;
  std::atomic<std::size_t> done{0};
  pool.parallel_for(chunks, [&](std::size_t first_chunk, std::size_t end_chunk) {
    std::vector<double> scratch(2 * static_cast<std::size_t>(in.fft_length));
    for (std::size_t c = first_chunk; c < end_chunk; ++c) {
      const std::size_t begin = c * chunk, end = std::min(voxels, begin + chunk);
      for (std::size_t v = begin; v < end; ++v)
        out[v] = fit_voxel(in, config, tissue + v * samples, 1, scratch.data());
      const std::size_t now = done.fetch_add(end - begin) + (end - begin);
      if (progress) progress(now, voxels);
    }
  });
}

}  // namespace sonopipe::perfusion
