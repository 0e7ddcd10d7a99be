#include "stages/arfi/motion_filter/motion_filter.h"

#include "stages/arfi/arfi_conventions.h"
#include "tests/stages/arfi/arfi_chain.h"
#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

FrameMeta displacement_frame(std::int64_t locations, std::int64_t tracks, std::int64_t depths,
                             std::vector<double> times) {
  FrameMeta frame;
  frame.payload.dtype = DType::float32;
  frame.payload.axes = {{"location", locations}, {"track", tracks}, {"depth", depths}};
  frame.vectors[arfi::kEnsembleTimeVector] = std::move(times);
  return frame;
}

std::vector<double> arfi_times(std::int64_t tracks) {
  std::vector<double> t(tracks + 1);
  t[0] = -1 / 7000.0;
  for (std::int64_t i = 0; i < tracks; ++i) t[i + 1] = 0.2e-3 + i / 7000.0;
  return t;
}

std::unique_ptr<Stage> make(std::map<std::string, RawParam> given) {
  return MotionFilterStage::info().create(validate_params(MotionFilterStage::info().params, given));
}

}  // namespace

TEST_CASE("motion filter removes an injected linear (order 1) and quadratic (order 2) drift exactly", "[motion_filter]") {
  ThreadPool pool(2);
  std::mt19937_64 rng(test::fresh_seed());
  std::uniform_real_distribution<double> coefficient(-500, 500);
  const std::int64_t locations = 3, tracks = 40, depths = 50, late = 8;
  const auto times = arfi_times(tracks);
  FrameMeta frame = displacement_frame(locations, tracks, depths, times);
  for (int order : {1, 2}) {
    std::vector<float> truth(locations * tracks * depths), measured(truth.size());
    for (std::int64_t l = 0; l < locations; ++l)
      for (std::int64_t z = 0; z < depths; ++z) {
        const double b = coefficient(rng), c2 = order == 2 ? coefficient(rng) * 100 : 0.0;
        for (std::int64_t t = 0; t < tracks; ++t) {
          const std::size_t at = (l * tracks + t) * depths + z;
          // a push response that has recovered before the late tracks, plus drift from the reference
          truth[at] = t < tracks - late ? static_cast<float>(5.0 * std::sin(0.1 * t) * std::exp(-0.01 * z)) : 0.0f;
          const double dt = times[t + 1] - times[0];
          measured[at] = static_cast<float>(truth[at] + b * dt + c2 * dt * dt);
        }
      }
    auto stage = make({{"order", RawParam{{std::to_string(order)}}}, {"late_tracks", RawParam{{std::to_string(late)}}}});
    auto run = test::run_stage_cpu(*stage, frame, frame.payload, measured.data(), pool);
    double worst = 0;
    for (std::size_t i = 0; i < truth.size(); ++i) worst = std::max(worst, double(std::abs(run.as<float>()[i] - truth[i])));
    INFO("order " << order << ": max |filtered - truth| = " << worst << " um");
    CHECK(worst < 1e-4);  // drift up to ~3 um; float32 in/out: a few ulps
  }
}

TEST_CASE("motion filter removes the simulator's bulk drift through the whole chain", "[motion_filter][sim]") {
  ThreadPool pool(2);
  sim::ArfiSimConfig config;
  config.locations = 4;
  config.tracks = 40;
  config.samples = 200;
  config.focus_depth_m = 0.014;
  config.depth_sigma_m = 0.003;
  config.lateral_sigma_m = 1e-3;
  config.recovery_time_s = 1e-3;  // recovered (< 0.2 % of peak) by the late tracks
  config.peak_um = 5;
  config.drift_um_per_s = 1500;   // ~1 um while the push response peaks, 9 um by the last track
  config.snr_db = 35;
  config.seed = test::fresh_seed();
  const auto set = sim::simulate_arfi(config, &pool);
  const auto raw = test::compare_with_truth(test::run_arfi_chain(set, "loupas", pool), set.tissue_um, config, 0.5);
  const auto filtered = test::compare_with_truth(test::run_arfi_chain(set, "loupas", pool, true, 10), set.tissue_um, config, 0.5);
  INFO("vs tissue truth: unfiltered bias " << raw.bias_um << " um, filtered bias " << filtered.bias_um << " um, rms "
                                           << filtered.rms_um << " um (seed " << config.seed << ")");
  CHECK(raw.bias_um > 0.2 * config.peak_um);  // the drift is there before the filter
  CHECK(std::abs(filtered.bias_um) < 0.02 * config.peak_um);
}

TEST_CASE("motion filter refuses under-determined fits and wrong time vectors", "[motion_filter]") {
  FrameMeta frame = displacement_frame(1, 10, 5, arfi_times(10));
  auto stage = make({{"order", RawParam{{"2"}}}, {"late_tracks", RawParam{{"1"}}}, {"use_reference", RawParam{{"false"}}}});
  CHECK_THROWS_WITH(stage->configure(frame, frame.payload, Backend::cpu), Catch::Contains("fit points"));
  frame.vectors[arfi::kEnsembleTimeVector].pop_back();
  auto plain = make({});
  CHECK_THROWS_WITH(plain->configure(frame, frame.payload, Backend::cpu), Catch::Contains("tracks + 1"));
  frame.payload.dtype = DType::complex64;
  CHECK_THROWS_AS(plain->configure(frame, frame.payload, Backend::cpu), StageError);
}

#ifdef SONOPIPE_WITH_CUDA
TEST_CASE("motion filter on CUDA matches the CPU reference (float32 and float16)", "[motion_filter][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  ThreadPool pool(2);
  std::mt19937_64 rng(test::fresh_seed());
  std::normal_distribution<float> dist(0, 5);
  const std::int64_t locations = 52, tracks = 80, depths = 2461;
  for (const char* out_dtype : {"float32", "float16"})
    for (std::int64_t late : {10, 70}) {  // 70 > the kernel's register cache: the re-read path
      FrameMeta frame = displacement_frame(locations, tracks, depths, arfi_times(tracks));
      std::vector<float> input(locations * tracks * depths);
      for (auto& v : input) v = dist(rng);
      auto stage = make({{"order", RawParam{{"2"}}}, {"late_tracks", RawParam{{std::to_string(late)}}},
                         {"output_dtype", RawParam{{out_dtype}}}});
      auto cpu = test::run_stage_cpu(*stage, frame, frame.payload, input.data(), pool);
      auto gpu = test::run_stage_cuda(*stage, frame, frame.payload, input.data());
      const bool half = std::string(out_dtype) == "float16";
      double worst = 0, largest = 0;
      for (std::size_t i = 0; i < input.size(); ++i) {
        const double a = half ? arfi::half_bits_to_float(cpu.as<std::uint16_t>()[i]) : cpu.as<float>()[i];
        const double b = half ? arfi::half_bits_to_float(gpu.as<std::uint16_t>()[i]) : gpu.as<float>()[i];
        REQUIRE(std::isfinite(b));
        worst = std::max(worst, std::abs(a - b));
        largest = std::max(largest, std::abs(a));
      }
      WARN(out_dtype << ", late " << late << ": max |gpu - cpu| = " << worst << " um (largest |value| " << largest << ")");
      // float weights and sums of <= 70 terms of ~5 um: ~1e-5 um. float16: the float GPU value and
      // the double CPU value may round to neighbouring halves: one binary16 ulp of the largest
      // value (2^-10 relative).
      CHECK(worst <= (half ? std::ldexp(largest, -10) + 1e-4 : 1e-4));
    }
}
#endif
