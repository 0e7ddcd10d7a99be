#include "stages/arfi/loupas/loupas.h"

#include <complex>

#include "stages/arfi/arfi_conventions.h"
#include "tests/stages/arfi/arfi_chain.h"
#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

constexpr double kFs = 400e6 / 9;  // upsampled IQ rate

// Frame for an already converted/upsampled set [location, ensemble, sample].
FrameMeta complex_frame(std::int64_t locations, std::int64_t ensemble, std::int64_t samples,
                        double f_dem = 4.8e6) {
  FrameMeta frame;
  frame.kind = FrameKind::iq;
  frame.sampling_frequency_hz = kFs;
  frame.center_frequency_hz = 5.33e6;
  frame.demodulation_frequency_hz = f_dem;
  frame.speed_of_sound_m_per_s = 1540;
  frame.payload.dtype = DType::complex64;
  frame.payload.axes = {{"location", locations}, {"ensemble", ensemble}, {"sample", samples, 1 / kFs, "s"}};
  return frame;
}

// A pure tone at f0 (IQ convention of arfi_conventions.h) and its copy delayed by 2 d / c.
std::vector<std::complex<float>> tone_pair(std::int64_t samples, double f0, double f_dem, double d_um,
                                           double amplitude = 1000) {
  std::vector<std::complex<float>> z(2 * samples);
  const double tau = 2 * d_um * 1e-6 / 1540;
  for (std::int64_t m = 0; m < samples; ++m) {
    const double t = m / kFs;
    // analytic(rf)(t) = A exp(j 2 pi f0 t); demodulated by exp(-j 2 pi f_dem t)
    z[m] = std::polar(amplitude, 2 * arfi::kPi * f0 * t - 2 * arfi::kPi * f_dem * t);
    z[samples + m] = std::polar(amplitude, 2 * arfi::kPi * f0 * (t - tau) - 2 * arfi::kPi * f_dem * t);
  }
  return z;
}

std::unique_ptr<Stage> make(const char* name, std::map<std::string, RawParam> given = {}) {
  const StageInfo info = std::string(name) == "kasai" ? LoupasStage::kasai_info() : LoupasStage::info();
  return info.create(validate_params(info.params, given));
}

}  // namespace

TEST_CASE("loupas recovers a tone's delay exactly in both directions; kasai is off by f0/f_dem", "[loupas]") {
  ThreadPool pool(2);
  const double f0 = 5.6e6, f_dem = 4.8e6;
  for (double d_um : {3.7, -3.7, 0.25, -12.0}) {
    auto z = tone_pair(200, f0, f_dem, d_um);
    FrameMeta frame = complex_frame(1, 2, 200, f_dem);
    auto loupas = make("loupas");
    auto kasai = make("kasai");
    auto l = test::run_stage_cpu(*loupas, frame, frame.payload, z.data(), pool);
    auto k = test::run_stage_cpu(*kasai, frame, frame.payload, z.data(), pool);
    for (std::int64_t o = 0; o < 200; ++o) {
      INFO("d = " << d_um << " um, depth " << o);
      // float32 input and output: relative precision ~1e-6 of the tone's phase
      REQUIRE(l.as<float>()[o] == Approx(d_um).margin(1e-4));
      REQUIRE(k.as<float>()[o] == Approx(d_um * f0 / f_dem).margin(1e-4));
      REQUIRE(l.as<float>(1)[o] == Approx(1.0).margin(1e-5));  // identical shape: quality 1
    }
  }
}

TEST_CASE("loupas kernel is clipped at the line ends and centred elsewhere", "[loupas]") {
  ThreadPool pool(2);
  std::mt19937_64 rng(test::fresh_seed());
  std::normal_distribution<float> dist(0, 100);
  const std::int64_t samples = 64;
  std::vector<std::complex<float>> z(3 * samples);
  for (auto& v : z) v = {dist(rng), dist(rng)};
  FrameMeta frame = complex_frame(1, 3, samples);
  auto stage = make("loupas", {{"kernel_samples", RawParam{{"9"}}}});
  auto run = test::run_stage_cpu(*stage, frame, frame.payload, z.data(), pool);
  // Depth 0 uses samples [0, 5) (window [-4, 5) clipped); depth 30 uses [26, 35); 63 uses [59, 64).
  for (auto [depth, begin, end] : {std::tuple{0, 0, 5}, std::tuple{30, 26, 35}, std::tuple{63, 59, 64}}) {
    std::complex<double> slow = 0, fast = 0;
    for (int m = begin; m < end; ++m) {
      const std::complex<double> r = z[m], t = z[2 * samples + m];  // track 1 = ensemble 2
      slow += t * std::conj(r);
      if (m + 1 < end) fast += std::complex<double>(z[m + 1]) * std::conj(r) +
                               std::complex<double>(z[2 * samples + m + 1]) * std::conj(t);
    }
    const double f_mean = 4.8e6 + std::arg(fast) / (2 * arfi::kPi / kFs);
    const double expected = -1540 * std::arg(slow) / (4 * arfi::kPi * f_mean) * 1e6;
    REQUIRE(run.as<float>()[1 * samples + depth] == Approx(expected).epsilon(1e-5));
  }
}

TEST_CASE("loupas gives NaN and quality 0 for a zero-energy window, never a crash", "[loupas]") {
  ThreadPool pool(2);
  auto z = tone_pair(100, 5.3e6, 4.8e6, 2.0);
  for (int m = 40; m < 70; ++m) z[m] = 0;  // a hole in the reference line
  FrameMeta frame = complex_frame(1, 2, 100);
  auto stage = make("loupas", {{"kernel_samples", RawParam{{"5"}}}});
  auto run = test::run_stage_cpu(*stage, frame, frame.payload, z.data(), pool);
  CHECK(std::isnan(run.as<float>()[55]));
  CHECK(run.as<float>(1)[55] == 0.0f);
  CHECK(run.as<float>()[10] == Approx(2.0).margin(1e-4));
}

TEST_CASE("loupas decimates to output_step and writes float16 on request", "[loupas]") {
  ThreadPool pool(2);
  std::mt19937_64 rng(test::fresh_seed());
  std::normal_distribution<float> dist(0, 100);
  std::vector<std::complex<float>> z(2 * 3 * 101);
  for (auto& v : z) v = {dist(rng), dist(rng)};
  FrameMeta frame = complex_frame(2, 3, 101);
  auto full = make("loupas");
  auto step = make("loupas", {{"output_step", RawParam{{"4"}}}, {"output_dtype", RawParam{{"float16"}}}});
  auto a = test::run_stage_cpu(*full, frame, frame.payload, z.data(), pool);
  auto b = test::run_stage_cpu(*step, frame, frame.payload, z.data(), pool);
  REQUIRE(b.plan.outputs[0].spec.dtype == DType::float16);
  REQUIRE(b.plan.outputs[0].spec.axes[2].size == 26);  // ceil(101 / 4)
  CHECK(b.plan.outputs[0].spec.axes[2].spacing == Approx(4 * 1540 / (2 * kFs)));
  for (std::int64_t pair = 0; pair < 4; ++pair)
    for (std::int64_t o = 0; o < 26; ++o) {
      const float want = a.as<float>()[pair * 101 + o * 4];
      const float got = arfi::half_bits_to_float(b.as<std::uint16_t>()[pair * 26 + o]);
      // White-noise input can put f_mean near 0 and the estimate beyond binary16's range: +-inf.
      if (std::abs(want) > 65504) REQUIRE(got == std::copysign(INFINITY, want));
      else REQUIRE(got == Approx(want).epsilon(1e-3).margin(1e-3));  // binary16: 11-bit mantissa
    }
}

TEST_CASE("a per-depth f_dem vector equal to the scalar changes nothing; a wrong length is refused", "[loupas]") {
  ThreadPool pool(2);
  auto z = tone_pair(120, 5.5e6, 4.8e6, 1.5);
  FrameMeta frame = complex_frame(1, 2, 120);
  auto stage = make("loupas");
  auto scalar = test::run_stage_cpu(*stage, frame, frame.payload, z.data(), pool);
  frame.vectors[arfi::kDemodulationVector] = std::vector<double>(120, 4.8e6);
  auto vector = test::run_stage_cpu(*stage, frame, frame.payload, z.data(), pool);
  for (int o = 0; o < 120; ++o) REQUIRE(vector.as<float>()[o] == scalar.as<float>()[o]);
  frame.vectors[arfi::kDemodulationVector] = std::vector<double>(119, 4.8e6);
  CHECK_THROWS_WITH(stage->configure(frame, frame.payload, Backend::cpu), Catch::Contains("one per payload sample"));
}

TEST_CASE("loupas tracks the simulator's displacement within 2 % of the peak, both signs, f_dem != f_mean", "[loupas][sim]") {
  ThreadPool pool(2);
  for (double peak : {5.0, -5.0}) {
    const sim::ArfiSimConfig config = test::small_push_set(peak, 35);
    const auto set = sim::simulate_arfi(config, &pool);
    REQUIRE(std::abs(set.mean_frequency_hz - config.demodulation_frequency_hz) > 0.05 * config.demodulation_frequency_hz);
    const auto r = test::run_arfi_chain(set, "loupas", pool);
    const auto c = test::compare_with_truth(r, set.displacement_um, config, 0.5);
    INFO("peak " << peak << " um: bias " << c.bias_um << " um, rms " << c.rms_um << " um, gain " << c.ratio
                 << " over " << c.compared << " samples (seed " << config.seed << ")");
    REQUIRE(c.compared > 500);
    CHECK(std::abs(c.bias_um) < 0.02 * std::abs(peak));
    CHECK(c.ratio == Approx(1.0).margin(0.02));
    CHECK(c.rms_um < 0.1 * std::abs(peak));  // jitter of a 1.5-wavelength kernel at 35 dB
  }
}

#ifdef SONOPIPE_WITH_CUDA
TEST_CASE("loupas and kasai on CUDA match the CPU reference within 0.001 um rms", "[loupas][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  ThreadPool pool(2);
  // Realistic input: a fresh simulated set (the paper's size), converted and upsampled on the CPU.
  sim::ArfiSimConfig config;
  config.seed = test::fresh_seed();
  config.drift_um_per_s = 300;
  const auto set = sim::simulate_arfi(config, &pool);
  ConvertStage convert(default_params(ConvertStage::info().params));
  auto converted = test::run_stage_cpu(convert, set.meta, set.meta.payload, set.payload.data(), pool);
  UpsampleStage upsample(default_params(UpsampleStage::info().params));
  auto up = test::run_stage_cpu(upsample, set.meta, converted.plan.outputs[0].spec, converted.outputs[0].data(), pool);
  const TensorSpec& spec = up.plan.outputs[0].spec;
  // A dead stretch in location 0's reference line: zero-energy windows must be NaN on both sides.
  // 300 samples, so that whole 25- and 101-sample windows fit inside it (an 801-sample one cannot).
  auto* upsampled = reinterpret_cast<std::complex<float>*>(up.outputs[0].data());
  for (std::int64_t m = 1000; m < 1300; ++m) upsampled[m] = 0;
  struct Variant {
    const char* name;
    const char* dtype;
    const char* step;
    const char* kernel;
  };
  // default M = 25 (direct kernel), float16, decimated; M = 101 (tiled prefix-sum kernel), decimated
  // (smaller tiles); M = 801, too long for a tile (direct kernel again)
  for (const Variant v : {Variant{"loupas", "float32", "1", "0"}, Variant{"kasai", "float32", "1", "0"},
                          Variant{"loupas", "float16", "1", "0"}, Variant{"kasai", "float16", "1", "0"},
                          Variant{"loupas", "float16", "5", "0"}, Variant{"loupas", "float32", "1", "101"},
                          Variant{"kasai", "float32", "4", "101"}, Variant{"loupas", "float32", "3", "801"}}) {
    {
      const char* name = v.name;
      const char* dtype = v.dtype;
      auto stage = make(name, {{"output_dtype", RawParam{{dtype}}}, {"output_step", RawParam{{v.step}}},
                               {"kernel_samples", RawParam{{v.kernel}}}});
      auto cpu = test::run_stage_cpu(*stage, set.meta, spec, up.outputs[0].data(), pool);
      auto gpu = test::run_stage_cuda(*stage, set.meta, spec, up.outputs[0].data());
      const bool half = std::string(dtype) == "float16";
      const std::size_t count = static_cast<std::size_t>(cpu.plan.outputs[0].spec.element_count());
      auto value = [&](const test::StageRun& r, int output, std::size_t i) {
        return half ? double(arfi::half_bits_to_float(r.as<std::uint16_t>(output)[i])) : double(r.as<float>(output)[i]);
      };
      double sum2 = 0, worst_quality = 0;
      std::size_t nan_mismatch = 0, nan_both = 0;
      for (std::size_t i = 0; i < count; ++i) {
        const double a = value(cpu, 0, i), b = value(gpu, 0, i);
        if (std::isnan(a) != std::isnan(b)) ++nan_mismatch;
        if (std::isnan(a) && std::isnan(b)) ++nan_both;
        if (!std::isnan(a) && !std::isnan(b)) sum2 += (a - b) * (a - b);
        worst_quality = std::max(worst_quality, std::abs(value(cpu, 1, i) - value(gpu, 1, i)));
      }
      const double rms = std::sqrt(sum2 / count);
      WARN(name << " " << dtype << " step " << v.step << " kernel " << v.kernel << ": rms |gpu - cpu| = " << rms
                << " um, max quality diff " << worst_quality << ", NaN in both " << nan_both);
      CHECK(nan_mismatch == 0);
      if (std::string(v.kernel) != "801") CHECK(nan_both > 0);  // an 801-sample window spans the stretch
      // float32 window sums vs double: ~1e-6 relative phase error, << 0.001 um (paper: 0.012 um).
      // float16 output rounds both sides identically except at rare ties: same bound.
      CHECK(rms <= 0.001);
      CHECK(worst_quality <= (half ? 1e-3 : 1e-5));
    }
  }
}
#endif
