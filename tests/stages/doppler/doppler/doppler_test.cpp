// The `doppler` stage: Kasai's sign and scale against a moving scatterer's exact phase, the Nyquist
// velocity in the header, power, the R1 box and the threshold, PRF sources and refusals, and the CUDA
// kernels against the CPU reference on fresh random ensembles.
#include "stages/doppler/doppler/doppler.h"

#include <cmath>
#include <complex>
#include <random>

#include "stages/doppler/doppler_conventions.h"
#include "tests/stages/common/stage_runner.h"
#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

constexpr double kC = 1540, kFc = 5e6, kPrf = 4000;
const double kNyquist = kC * kPrf / (4 * kFc);  // 0.308 m/s

FrameMeta ensemble_frame(std::int64_t frames, std::int64_t lateral, std::int64_t axial, bool times_vector = true) {
  FrameMeta f;
  f.kind = FrameKind::iq;
  f.center_frequency_hz = kFc;
  f.demodulation_frequency_hz = kFc;
  f.speed_of_sound_m_per_s = kC;
  f.payload.dtype = DType::complex64;
  f.payload.axes = {{"frame", frames}, {"lateral", lateral, 1e-4, "m", -1e-3}, {"axial", axial, 5e-5, "m", 1e-2}};
  if (times_vector) {
    std::vector<double> t(static_cast<std::size_t>(frames));
    for (std::int64_t n = 0; n < frames; ++n) t[n] = 0.25 + static_cast<double>(n) / kPrf;  // any origin
    f.vectors[doppler::kEnsembleTimeVector] = t;
  } else {
    f.payload.axes[0].spacing = 1 / kPrf;
    f.payload.axes[0].unit = "s";
  }
  return f;
}

// One scatterer per pixel moving at v (m/s, + = deeper): its echo's phase is -2 k_c z_s(t), so
// x[n] = A exp(-j 4 pi f_c v n / (c PRF)) (doppler_conventions.h).
std::vector<std::complex<float>> moving_scatterers(const std::vector<double>& velocity, std::int64_t frames,
                                                   double amplitude = 3) {
  const auto pixels = static_cast<std::int64_t>(velocity.size());
  std::vector<std::complex<float>> x(static_cast<std::size_t>(frames * pixels));
  for (std::int64_t n = 0; n < frames; ++n)
    for (std::int64_t p = 0; p < pixels; ++p)
      x[n * pixels + p] = std::polar(amplitude, -4 * doppler::kPi * kFc * velocity[p] * n / (kC * kPrf) + 0.3 * p);
  return x;
}

}  // namespace

TEST_CASE("doppler: a scatterer moving away gives positive velocity of the right scale, towards negative",
          "[doppler]") {
  // Velocities across (-v_N, v_N), both signs; 2 x 4 pixels.
  const std::vector<double> v = {0.01, -0.01, 0.2, -0.2, 0.9 * kNyquist, -0.9 * kNyquist, 0.0, 0.123};
  const FrameMeta frame = ensemble_frame(16, 2, 4);
  const auto x = moving_scatterers(v, 16);
  ThreadPool pool(2);
  DopplerStage stage(DopplerParams{});
  const auto run = test::run_stage_cpu(stage, frame, frame.payload, x.data(), pool);
  for (std::size_t p = 0; p < v.size(); ++p) {
    INFO("pixel " << p << ": truth " << v[p] << " m/s, estimate " << run.as<float>(0)[p]);
    // Exact phase ramp: only float rounding of the input (1e-7 rad per sample) separates them.
    CHECK(run.as<float>(0)[p] == Approx(v[p]).margin(1e-6 * kNyquist));
  }
  CHECK(stage.shape().nyquist_velocity_m_per_s == Approx(kNyquist).epsilon(1e-12));
}

TEST_CASE("doppler: beyond the Nyquist velocity the estimate aliases to the other sign", "[doppler]") {
  const std::vector<double> v = {1.1 * kNyquist};
  const FrameMeta frame = ensemble_frame(8, 1, 1);
  ThreadPool pool(1);
  DopplerStage stage(DopplerParams{});
  const auto run = test::run_stage_cpu(stage, frame, frame.payload, moving_scatterers(v, 8).data(), pool);
  CHECK(run.as<float>(0)[0] == Approx(-0.9 * kNyquist).epsilon(1e-5));
}

TEST_CASE("doppler: outputs, units and the Nyquist velocity in every output's header attributes", "[doppler]") {
  const FrameMeta frame = ensemble_frame(10, 3, 5);
  DopplerStage stage(DopplerParams{});
  const StagePlan plan = stage.configure(frame, frame.payload, Backend::cpu);
  REQUIRE(plan.outputs.size() == 3);
  CHECK(plan.outputs[0].name == "velocity");
  CHECK(plan.outputs[0].spec.unit == "m/s");
  CHECK(plan.outputs[1].name == "power");
  CHECK(plan.outputs[2].name == "power_db");
  CHECK(plan.outputs[2].spec.unit == "dB");
  for (const StageOutput& out : plan.outputs) {
    CHECK(out.spec.dtype == DType::float32);
    REQUIRE(out.spec.axes.size() == 2);
    CHECK(out.spec.axes[0] == frame.payload.axes[1]);
    CHECK(out.spec.axes[1] == frame.payload.axes[2]);
    REQUIRE(out.spec.attributes.count(doppler::kNyquistAttribute) == 1);
    // The PRF comes from the times vector (offset 0.25 s): its differences round at 1e-16 * 0.25 s.
    CHECK(std::stod(out.spec.attributes.at(doppler::kNyquistAttribute)) == Approx(kNyquist).epsilon(1e-9));
  }
  // The frame axis spacing gives the same PRF when the vector is absent.
  const FrameMeta by_axis = ensemble_frame(10, 3, 5, false);
  DopplerStage other(DopplerParams{});
  other.configure(by_axis, by_axis.payload, Backend::cpu);
  CHECK(other.shape().nyquist_velocity_m_per_s == Approx(kNyquist).epsilon(1e-12));
}

TEST_CASE("doppler: power is the mean |x|^2 and its dB, zero power at the floor", "[doppler]") {
  std::mt19937_64 rng(test::fresh_seed());
  std::normal_distribution<float> normal(0, 2);
  const FrameMeta frame = ensemble_frame(12, 2, 3);
  std::vector<std::complex<float>> x(12 * 6);
  for (auto& v : x) v = {normal(rng), normal(rng)};
  for (std::int64_t n = 0; n < 12; ++n) x[n * 6 + 5] = 0;  // one silent pixel
  ThreadPool pool(1);
  DopplerStage stage(DopplerParams{});
  const auto run = test::run_stage_cpu(stage, frame, frame.payload, x.data(), pool);
  for (int p = 0; p < 5; ++p) {
    double power = 0;
    for (int n = 0; n < 12; ++n) power += std::norm(std::complex<double>(x[n * 6 + p]));
    power /= 12;
    CHECK(run.as<float>(1)[p] == Approx(power).epsilon(1e-6));
    CHECK(run.as<float>(2)[p] == Approx(10 * std::log10(power)).epsilon(1e-6));
  }
  CHECK(run.as<float>(1)[5] == 0.0f);
  CHECK(run.as<float>(2)[5] == float(doppler::kPowerFloorDb));
  CHECK(std::isnan(run.as<float>(0)[5]));  // R1 = 0: no estimate
}

TEST_CASE("doppler: the R1 box sums neighbours (clipped at the edges) and the threshold blanks weak pixels",
          "[doppler]") {
  // Column of 5 axial pixels: a strong one moving at +0.1, the others weak at -0.2.
  const std::vector<double> v = {-0.2, -0.2, 0.1, -0.2, -0.2};
  const FrameMeta frame = ensemble_frame(16, 1, 5);
  auto x = moving_scatterers(v, 16);
  for (std::int64_t n = 0; n < 16; ++n)
    for (int p = 0; p < 5; ++p)
      if (p != 2) x[n * 5 + p] *= 0.01f;  // 40 dB weaker
  ThreadPool pool(1);
  DopplerParams params;
  params.average_axial = 3;
  params.power_threshold_db = -30;
  DopplerStage stage(params);
  const auto run = test::run_stage_cpu(stage, frame, frame.payload, x.data(), pool);
  CHECK(std::isnan(run.as<float>(0)[0]));  // 40 dB below the maximum, threshold -30 dB
  CHECK(std::isnan(run.as<float>(0)[1]));
  CHECK(run.as<float>(0)[2] == Approx(0.1).margin(0.002));  // its R1 dominates its box
  params.power_threshold_db = -300;
  DopplerStage open(params);
  const auto all = test::run_stage_cpu(open, frame, frame.payload, x.data(), pool);
  CHECK(all.as<float>(0)[0] == Approx(-0.2).margin(1e-5));  // box {0, 1}: both at -0.2
  CHECK(all.as<float>(0)[1] == Approx(0.1).margin(0.002));  // box {0, 1, 2}: the strong one wins
}

TEST_CASE("doppler: refuses inputs it cannot estimate from", "[doppler]") {
  DopplerStage stage(DopplerParams{});
  FrameMeta frame = ensemble_frame(8, 2, 2);
  FrameMeta no_prf = ensemble_frame(8, 2, 2, false);
  no_prf.payload.axes[0].unit = "";
  CHECK_THROWS_WITH(stage.configure(no_prf, no_prf.payload, Backend::cpu), Catch::Contains("no PRF"));
  FrameMeta uneven = frame;
  uneven.vectors[doppler::kEnsembleTimeVector][4] += 0.1 / kPrf;
  CHECK_THROWS_WITH(stage.configure(uneven, uneven.payload, Backend::cpu), Catch::Contains("not uniformly spaced"));
  FrameMeta short_vector = frame;
  short_vector.vectors[doppler::kEnsembleTimeVector].pop_back();
  CHECK_THROWS_WITH(stage.configure(short_vector, short_vector.payload, Backend::cpu), Catch::Contains("one per frame"));
  FrameMeta real = frame;
  real.payload.dtype = DType::float32;
  CHECK_THROWS_WITH(stage.configure(real, real.payload, Backend::cpu), Catch::Contains("complex64"));
  FrameMeta no_frame_axis = frame;
  no_frame_axis.payload.axes[0].name = "ensemble";
  CHECK_THROWS_WITH(stage.configure(no_frame_axis, no_frame_axis.payload, Backend::cpu), Catch::Contains("[frame, lateral, axial]"));
  FrameMeta no_fc = frame;
  no_fc.center_frequency_hz = 0;
  no_fc.demodulation_frequency_hz = 0;
  CHECK_THROWS_WITH(stage.configure(no_fc, no_fc.payload, Backend::cpu), Catch::Contains("center_frequency_hz"));
  DopplerParams even;
  even.average_lateral = 2;
  DopplerStage even_stage(even);
  CHECK_THROWS_WITH(even_stage.configure(frame, frame.payload, Backend::cpu), Catch::Contains("odd"));
  // A frame whose PRF changed after configure is refused (its header's v_N would be stale).
  stage.configure(frame, frame.payload, Backend::cpu);
  FrameMeta faster = frame;
  for (double& t : faster.vectors[doppler::kEnsembleTimeVector]) t *= 0.5;
  std::vector<std::complex<float>> x(8 * 4, {1, 0});
  std::vector<float> out(3 * 4);
  void* outputs[3] = {out.data(), out.data() + 4, out.data() + 8};
  ThreadPool pool(1);
  StageIo io{.frame = faster, .input_spec = faster.payload, .input = x.data(), .outputs = outputs, .pool = &pool};
  CHECK_THROWS_WITH(stage.run_cpu(io), Catch::Contains("frame period changed"));
}

#ifdef SONOPIPE_WITH_CUDA
TEST_CASE("doppler: CUDA matches the CPU reference on fresh random ensembles", "[doppler][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  std::mt19937_64 rng(test::fresh_seed());
  std::normal_distribution<float> normal(0, 1);
  const std::int64_t frames = 100, lateral = 37, axial = 53, pixels = lateral * axial;
  const FrameMeta frame = ensemble_frame(frames, lateral, axial);
  // Random flow per pixel plus noise, so R1 has a direction and some pixels are nearly random.
  // Every pixel's power is about 11 (9 + 2 of noise), its mean over 100 frames within about +-0.6:
  // a threshold of -0.5 dB under the frame's largest power (about 13) blanks most pixels and keeps
  // the top tenth, so both branches are compared (-2 dB, tried first, blanked none on the H100).
  std::uniform_real_distribution<double> velocity(-kNyquist, kNyquist);
  std::vector<double> v(static_cast<std::size_t>(pixels));
  for (double& value : v) value = velocity(rng);
  auto x = moving_scatterers(v, frames);
  for (auto& value : x) value += std::complex<float>(normal(rng), normal(rng));
  ThreadPool pool(2);
  for (const auto& [box_lateral, box_axial, threshold] :
       std::vector<std::tuple<int, int, double>>{{1, 1, -300}, {3, 5, -300}, {5, 3, -0.5}}) {
    DopplerParams params;
    params.average_lateral = box_lateral;
    params.average_axial = box_axial;
    params.power_threshold_db = threshold;
    DopplerStage cpu_stage(params), gpu_stage(params);
    const auto cpu = test::run_stage_cpu(cpu_stage, frame, frame.payload, x.data(), pool);
    const auto gpu = test::run_stage_cuda(gpu_stage, frame, frame.payload, x.data());
    // R1 and power of the box in double, to scale the velocity tolerance per pixel.
    std::size_t compared = 0, blank = 0;
    for (std::int64_t p = 0; p < pixels; ++p) {
      INFO("box " << box_lateral << "x" << box_axial << ", threshold " << threshold << " dB, pixel " << p);
      // Power: float sums of 100 terms, relative error below 100 eps = 1.2e-5.
      CHECK(gpu.as<float>(1)[p] == Approx(cpu.as<float>(1)[p]).epsilon(2e-5));
      CHECK(gpu.as<float>(2)[p] == Approx(cpu.as<float>(2)[p]).margin(1e-4));
      const float a = cpu.as<float>(0)[p], b = gpu.as<float>(0)[p];
      if (std::isnan(a) || std::isnan(b)) {
        // Threshold decisions agree (a power within float rounding of the threshold is improbable).
        ++blank;
        CHECK(std::isnan(a) == std::isnan(b));
        continue;
      }
      // arg(R1): amplitude 3 against unit noise gives |R1| ~ 9 (frames - 1) per pixel, the float sum's
      // error ~ sqrt(frames) eps |x|^2 ~ 1e-5 of it: phase within 1e-4 rad, velocity within 1e-4 v_N / pi.
      // Angles near +-pi may land on either side: compared modulo 2 v_N.
      double d = std::abs(double(a) - double(b));
      d = std::min(d, 2 * kNyquist - d);
      CHECK(d <= 1e-4 * kNyquist);
      ++compared;
    }
    INFO("compared " << compared << ", blank " << blank);
    CHECK(compared > 0);
    if (threshold > -300) CHECK(blank > 0);
  }
}
#endif
