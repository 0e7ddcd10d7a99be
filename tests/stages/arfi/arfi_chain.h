// Test helper: run the ARFI chain (convert -> upsample -> loupas|kasai [-> motion_filter]) on one
// simulated set with the CPU backend, and compare displacements with the simulator's truth.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "stages/arfi/arfi_conventions.h"
#include "stages/common/convert/convert.h"
#include "stages/arfi/loupas/loupas.h"
#include "stages/arfi/motion_filter/motion_filter.h"
#include "stages/arfi/upsample/upsample.h"
#include "tests/stages/common/stage_runner.h"
#include "tests/support/test_support.h"
#include "tools/sim/arfi_sim.h"

namespace sonopipe::test {

// The small simulated set the estimator tests share: 4 locations x 10 tracks x 260 samples, a push
// at 16 mm depth (sigma 4 mm deep, 1 mm across), a fresh seed.
inline sim::ArfiSimConfig small_push_set(double peak_um, double snr_db) {
  sim::ArfiSimConfig config;
  config.locations = 4;
  config.tracks = 10;
  config.samples = 260;
  config.focus_depth_m = 0.016;
  config.depth_sigma_m = 0.004;
  config.lateral_sigma_m = 1e-3;
  config.peak_um = peak_um;
  config.snr_db = snr_db;
  config.seed = fresh_seed();
  return config;
}

struct ChainResult {
  std::vector<float> displacement_um;  // [location, track, depth]
  std::vector<float> quality;
  std::int64_t depths = 0;
  std::int64_t factor = 5;
};

inline ChainResult run_arfi_chain(const sim::ArfiSimResult& set, const std::string& estimator,
                                  ThreadPool& pool, bool motion_filter = false, std::int64_t late_tracks = 10) {
  const FrameMeta& frame = set.meta;
  ConvertStage convert(default_params(ConvertStage::info().params));
  auto converted = run_stage_cpu(convert, frame, frame.payload, set.payload.data(), pool);
  UpsampleStage upsample(default_params(UpsampleStage::info().params));
  const TensorSpec& c_spec = converted.plan.outputs[0].spec;
  auto upsampled = run_stage_cpu(upsample, frame, c_spec, converted.outputs[0].data(), pool);
  const StageInfo info = estimator == "kasai" ? LoupasStage::kasai_info() : LoupasStage::info();
  auto stage = info.create(default_params(info.params));
  const TensorSpec& u_spec = upsampled.plan.outputs[0].spec;
  auto estimated = run_stage_cpu(*stage, frame, u_spec, upsampled.outputs[0].data(), pool);
  ChainResult result;
  const TensorSpec& d_spec = estimated.plan.outputs[0].spec;
  result.depths = d_spec.axes[2].size;
  const std::size_t count = static_cast<std::size_t>(d_spec.element_count());
  result.quality.assign(estimated.as<float>(1), estimated.as<float>(1) + count);
  if (motion_filter) {
    std::map<std::string, RawParam> given{{"late_tracks", RawParam{{std::to_string(late_tracks)}}}};
    MotionFilterStage filter(validate_params(MotionFilterStage::info().params, given));
    auto filtered = run_stage_cpu(filter, frame, d_spec, estimated.outputs[0].data(), pool);
    result.displacement_um.assign(filtered.as<float>(), filtered.as<float>() + count);
  } else {
    result.displacement_um.assign(estimated.as<float>(), estimated.as<float>() + count);
  }
  return result;
}

struct TruthComparison {
  double bias_um = 0;     // mean(estimate - truth) over the compared samples
  double rms_um = 0;      // rms(estimate - truth)
  double ratio = 0;       // sum(estimate * truth) / sum(truth^2): the gain of the estimator
  std::size_t compared = 0;
};

// Compares at input samples i (output depth i * factor) where |truth| >= min_fraction * |peak|,
// skipping `edge` IQ samples at each line end (the kernel is clipped there).
inline TruthComparison compare_with_truth(const ChainResult& r, const std::vector<double>& truth_um,
                                          const sim::ArfiSimConfig& config, double min_fraction,
                                          std::int64_t edge = 4) {
  TruthComparison c;
  double sum = 0, sum2 = 0, cross = 0, power = 0;
  for (std::int64_t l = 0; l < config.locations; ++l)
    for (std::int64_t t = 0; t < config.tracks; ++t)
      for (std::int64_t i = edge; i < config.samples - edge; ++i) {
        const double truth = truth_um[(l * config.tracks + t) * config.samples + i];
        if (std::abs(truth) < min_fraction * std::abs(config.peak_um)) continue;
        const double est = r.displacement_um[(l * config.tracks + t) * r.depths + i * r.factor];
        sum += est - truth;
        sum2 += (est - truth) * (est - truth);
        cross += est * truth;
        power += truth * truth;
        ++c.compared;
      }
  if (c.compared) {
    c.bias_um = sum / c.compared;
    c.rms_um = std::sqrt(sum2 / c.compared);
    c.ratio = cross / power;
  }
  return c;
}

}  // namespace sonopipe::test
