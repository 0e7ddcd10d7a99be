// Test helper: the Doppler chain (clutter_filter -> doppler) on a simulated ensemble
// (tools/sim/flow_sim.h), CPU or CUDA, and its figures of merit against the truth.
#pragma once

#include <cmath>
#include <complex>
#include <vector>

#include "stages/doppler/clutter_filter/clutter_filter.h"
#include "stages/doppler/doppler/doppler.h"
#include "tests/stages/common/stage_runner.h"
#include "tools/sim/flow_sim.h"

namespace sonopipe::test {

struct DopplerImages {
  std::vector<std::complex<float>> filtered;   // [frame, lateral, axial]
  std::vector<float> velocity, power, power_db;  // [lateral, axial]
  std::vector<TensorSpec> specs;               // doppler's outputs
  EigenRoute route;                            // on CUDA: the filter's eigenvector route ...
  DominantStats dominant;                      // ... and the dominant route's counters
};

inline DopplerImages run_doppler_chain(const FrameMeta& meta, const std::vector<std::complex<float>>& iq,
                                       const ClutterFilterParams& filter, const DopplerParams& estimator,
                                       ThreadPool& pool, bool on_cuda = false) {
  ClutterFilterStage clutter(filter);
  DopplerStage doppler(estimator);
  DopplerImages out;
  StageRun filtered;
#ifdef SONOPIPE_WITH_CUDA
  filtered = on_cuda ? run_stage_cuda(clutter, meta, meta.payload, iq.data())
                     : run_stage_cpu(clutter, meta, meta.payload, iq.data(), pool);
#else
  (void)on_cuda;
  filtered = run_stage_cpu(clutter, meta, meta.payload, iq.data(), pool);
#endif
  const auto* y = filtered.as<std::complex<float>>();
  out.filtered.assign(y, y + iq.size());
  if (on_cuda) {
    out.route = clutter.cuda_eigen_route();
    out.dominant = clutter.dominant_stats();
  }
  StageRun images;
#ifdef SONOPIPE_WITH_CUDA
  images = on_cuda ? run_stage_cuda(doppler, meta, meta.payload, out.filtered.data())
                   : run_stage_cpu(doppler, meta, meta.payload, out.filtered.data(), pool);
#else
  images = run_stage_cpu(doppler, meta, meta.payload, out.filtered.data(), pool);
#endif
  const std::size_t pixels = iq.size() / static_cast<std::size_t>(meta.payload.axes[0].size);
  out.velocity.assign(images.as<float>(0), images.as<float>(0) + pixels);
  out.power.assign(images.as<float>(1), images.as<float>(1) + pixels);
  out.power_db.assign(images.as<float>(2), images.as<float>(2) + pixels);
  for (const StageOutput& o : images.plan.outputs) out.specs.push_back(o.spec);
  return out;
}

struct FlowMetrics {
  double velocity_rms_m_per_s = 0;     // over the lumen pixels with r <= lumen_fraction R
  double velocity_bias_m_per_s = 0;
  double slope = 0;                    // least-squares estimate / truth through the origin
  std::size_t lumen_pixels = 0, missing = 0;  // NaN estimates inside the lumen
  double clutter_rejection_db = 0;     // tissue pixels: power before / after the filter
  double contrast_db = 0;              // power after the filter: lumen / tissue
};

inline FlowMetrics flow_metrics(const sim::FlowSimConfig& config, const sim::FlowIqResult& sim, const DopplerImages& images,
                                double lumen_fraction) {
  FlowMetrics m;
  const std::int64_t lateral = config.lateral_pixels, axial = config.axial_pixels, frames = config.frames;
  const std::int64_t pixels = lateral * axial;
  double squared = 0, sum = 0, cross = 0, truth_squared = 0;
  double lumen_power = 0, tissue_power_after = 0, tissue_power_before = 0;
  std::size_t lumen_all = 0, tissue = 0;
  for (std::int64_t i = 0; i < lateral; ++i)
    for (std::int64_t j = 0; j < axial; ++j) {
      const std::int64_t p = i * axial + j;
      const double x = config.x_min_m + static_cast<double>(i) * sim.x_step_m;
      const double z = config.z_min_m + static_cast<double>(j) * sim.z_step_m;
      if (sim.truth.lumen[p]) {
        lumen_power += images.power[p];
        ++lumen_all;
      }
      if (sim.truth.tissue[p]) {
        tissue_power_after += images.power[p];
        double before = 0;
        for (std::int64_t n = 0; n < frames; ++n) before += std::norm(std::complex<double>(sim.iq[n * pixels + p]));
        tissue_power_before += before / static_cast<double>(frames);
        ++tissue;
      }
      if (sim::distance_from_axis_m(config, x, z) > lumen_fraction * config.tube_radius_m) continue;
      ++m.lumen_pixels;
      const double v = images.velocity[p], truth = sim.truth.axial_velocity_m_per_s[p];
      if (std::isnan(v)) {
        ++m.missing;
        continue;
      }
      squared += (v - truth) * (v - truth);
      sum += v - truth;
      cross += v * truth;
      truth_squared += truth * truth;
    }
  const double counted = static_cast<double>(m.lumen_pixels - m.missing);
  m.velocity_rms_m_per_s = std::sqrt(squared / counted);
  m.velocity_bias_m_per_s = sum / counted;
  m.slope = cross / truth_squared;
  m.clutter_rejection_db = 10 * std::log10(tissue_power_before / tissue_power_after);
  m.contrast_db = 10 * std::log10((lumen_power / static_cast<double>(lumen_all)) /
                                  (tissue_power_after / static_cast<double>(tissue)));
  return m;
}

}  // namespace sonopipe::test
