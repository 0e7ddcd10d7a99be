#include "tools/sim/speckle_sim.h"

#include <cmath>
#include <complex>
#include <cstring>
#include <filesystem>
#include <numbers>

#include "tests/support/test_support.h"
#include "tools/common/recording.h"

using namespace sonopipe;
using namespace sonopipe::sim;

namespace {

std::vector<std::complex<float>> as_complex(const std::vector<std::byte>& payload) {
  std::vector<std::complex<float>> values(payload.size() / sizeof(std::complex<float>));
  std::memcpy(values.data(), payload.data(), payload.size());
  return values;
}

SpeckleParams float_iq(std::uint64_t seed) {
  SpeckleParams p;
  p.kind = FrameKind::iq;
  p.integer_samples = false;
  p.shape = {32, 512};
  p.snr_db = std::numeric_limits<double>::infinity();
  p.seed = seed;
  return p;
}

}  // namespace

TEST_CASE("speckle at high scatterer density has a Rayleigh envelope", "[speckle]") {
  SpeckleParams p = float_iq(test::fresh_seed());
  p.scatterers_per_cell = 50;
  SpeckleGenerator generator(p);
  const auto z = as_complex(generator.frame(0));
  double sum = 0, sum2 = 0;
  for (auto v : z) {
    sum += std::abs(v);
    sum2 += std::norm(v);
  }
  const double n = static_cast<double>(z.size());
  const double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
  // Fully developed speckle: mean/sd of a Rayleigh variable = sqrt(pi / (4 - pi)) = 1.913. With
  // ~16k samples correlated over ~10 samples the estimate scatters by ~2 %; 6 % allows 3 sigma.
  CHECK(mean / sd == Approx(1.913).epsilon(0.06));
  // The float scale makes the |z| rms one (kFloatTargetRms).
  CHECK(std::sqrt(sum2 / n) == Approx(1.0).epsilon(1e-5));
}

TEST_CASE("speckle RF spectrum is centred on the pulse frequency", "[speckle]") {
  SpeckleParams p = float_iq(test::fresh_seed());
  p.kind = FrameKind::rf;
  p.shape = {8, 1024};
  p.center_frequency_hz = 6.0e6;
  SpeckleGenerator generator(p);
  const std::vector<std::byte> payload = generator.frame(0);
  std::vector<float> rf(payload.size() / 4);
  std::memcpy(rf.data(), payload.data(), payload.size());
  // Power-weighted mean frequency by a direct DFT of every line (no FFT library in the tools).
  const double fs = generator.params().sampling_frequency_hz;
  double weighted = 0, total = 0;
  for (int bin = 1; bin < 512; bin += 2) {
    const double f = bin * fs / 1024.0;
    for (int line = 0; line < 8; ++line) {
      std::complex<double> acc = 0;
      for (int k = 0; k < 1024; ++k)
        acc += static_cast<double>(rf[line * 1024 + k]) * std::polar(1.0, -2.0 * std::numbers::pi * bin * k / 1024.0);
      weighted += f * std::norm(acc);
      total += std::norm(acc);
    }
  }
  // A Gaussian pulse spectrum is symmetric about f_c; 8 lines of speckle estimate its centroid to ~1 %.
  CHECK(weighted / total == Approx(6.0e6).epsilon(0.03));
}

TEST_CASE("speckle frames move by the recorded axial shift", "[speckle]") {
  SpeckleParams p = float_iq(test::fresh_seed());
  p.axial_velocity_m_per_s = 3e-3;  // 30 um per frame at 100 frames/s; 60 um < lambda/4 = 77 um (no wrap)
  p.frames = 3;
  p.snr_db = 40;
  SpeckleGenerator generator(p);
  CHECK(generator.axial_shift_m(2) == Approx(60e-6));
  const auto z0 = as_complex(generator.frame(0)), z2 = as_complex(generator.frame(2));
  std::complex<double> r = 0;
  for (std::size_t i = 0; i < z0.size(); ++i) r += std::complex<double>(z2[i]) * std::conj(std::complex<double>(z0[i]));
  // Phase of the lag-one correlation, demodulated at f_c: d = -c arg(R) / (4 pi f_c) (positive away).
  const double estimate = -p.speed_of_sound_m_per_s * std::arg(r) / (4.0 * std::numbers::pi * p.center_frequency_hz);
  // Whole-frame phase estimate of a pure shift: the only errors are noise (40 dB) and speckle
  // decorrelation at the frame ends (60 um of 40 mm); 2 % covers both.
  CHECK(estimate == Approx(60e-6).epsilon(0.02));
}

TEST_CASE("speckle int16 IQ is the scaled float field, interleaved on an iq axis", "[speckle]") {
  const std::uint64_t seed = test::fresh_seed();
  SpeckleParams p = float_iq(seed);
  SpeckleGenerator floating(p);
  p.integer_samples = true;
  SpeckleGenerator integer(p);
  const FrameMeta meta = integer.frame_meta(4);
  CHECK(meta.payload.shape_string() == "int16[line=32, sample=512, iq=2]");
  CHECK(meta.sequence == 4);
  CHECK(meta.acquisition_time_ns == 40'000'000);
  CHECK(floating.frame_meta(0).payload.shape_string() == "complex64[line=32, sample=512]");
  const auto z = as_complex(floating.frame(0));
  const std::vector<std::byte> bytes = integer.frame(0);
  std::vector<std::int16_t> counts(bytes.size() / 2);
  std::memcpy(counts.data(), bytes.data(), bytes.size());
  const double scale = integer.counts_per_unit() / floating.counts_per_unit();
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < z.size(); ++i) {
    // Rounding to the nearest count, from the same double field: off by at most half a count plus
    // the float32 rounding of the floating frame (|z| < 10, so < 1e-5 counts x 3000).
    if (std::abs(counts[2 * i] - scale * z[i].real()) > 0.51 || std::abs(counts[2 * i + 1] - scale * z[i].imag()) > 0.51)
      ++mismatches;
  }
  CHECK(mismatches == 0);
  CHECK(integer.clipped_samples() == 0);
}

TEST_CASE("speckle is reproducible from its seed and adds fresh noise per frame at the given SNR", "[speckle]") {
  SpeckleParams p = float_iq(test::fresh_seed());
  p.snr_db = 20;
  p.frames = 2;
  SpeckleGenerator a(p), b(p);
  CHECK(a.frame(1) == b.frame(1));
  SpeckleParams clean_params = p;
  clean_params.snr_db = std::numeric_limits<double>::infinity();
  SpeckleGenerator clean(clean_params);
  const auto noisy = as_complex(a.frame(0)), noise_free = as_complex(clean.frame(0));
  double noise_power = 0;
  for (std::size_t i = 0; i < noisy.size(); ++i) noise_power += std::norm(noisy[i] - noise_free[i]);
  // 20 dB below unit rms: noise power 0.01; 16k complex samples estimate it to ~1 %, allow 5 %.
  CHECK(noise_power / static_cast<double>(noisy.size()) == Approx(0.01).epsilon(0.05));
  CHECK(a.frame(0) != a.frame(1));  // without motion, frames differ by their noise alone
}

TEST_CASE("speckle refuses parameters that cannot make a valid frame", "[speckle]") {
  SpeckleParams p;
  p.kind = FrameKind::rf;
  p.sampling_frequency_hz = 10e6;  // 5 MHz pulse, 60 % bandwidth reaches 6.5 MHz: aliased
  CHECK_THROWS_WITH(SpeckleGenerator(p), Catch::Contains("aliases"));
  p = SpeckleParams{};
  p.shape = {2, 2, 2, 2};
  CHECK_THROWS_AS(SpeckleGenerator(p), std::invalid_argument);
  p.shape = {0, 16};
  CHECK_THROWS_AS(SpeckleGenerator(p), std::invalid_argument);
}

TEST_CASE("sonopipe-sim speckle writes a recording with frames and shift truth", "[speckle]") {
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("speckle-command-" + std::to_string(::getpid()) + ".h5")).string();
  const std::string command = test::binary_path("tools/sim/sonopipe-sim") +
                              " speckle --frames 4 --shape 3x8x64 --kind rf --type int16 --seed 11"
                              " --velocity-mm-s 2 --frame-rate-hz 50 --stream-id 5 --out " + out + " > /dev/null";
  REQUIRE(std::system(command.c_str()) == 0);
  recording::Reader reader(out);
  CHECK(reader.attribute("seed") == "11");
  CHECK(reader.streams() == std::vector<std::uint32_t>{5});
  REQUIRE(reader.frame_count(5) == 4);
  recording::Frame frame = reader.read_frame(5, 3);
  CHECK(frame.meta.payload.shape_string() == "int16[plane=3, line=8, sample=64]");
  CHECK(frame.meta.kind == FrameKind::rf);
  CHECK(frame.meta.acquisition_time_ns == 60'000'000);
  // The file holds exactly what the generator makes for the same seed.
  SpeckleParams p;
  p.kind = FrameKind::rf;
  p.shape = {3, 8, 64};
  p.seed = 11;
  p.frames = 4;
  p.frame_rate_hz = 50;
  p.axial_velocity_m_per_s = 2e-3;
  p.stream_id = 5;
  CHECK(frame.payload == SpeckleGenerator(p).frame(3));
  recording::Truth truth = reader.read_truth("axial_shift_m");
  CHECK(truth.stream_id == 5);
  CHECK(truth.values == std::vector<double>{0.0, 40e-6, 80e-6, 120e-6});
  std::filesystem::remove(out);
}
