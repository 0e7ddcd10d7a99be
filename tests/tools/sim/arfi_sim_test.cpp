#include "tools/sim/arfi_sim.h"

#include <cmath>
#include <complex>

#include "sdk/thread_pool.h"
#include "stages/arfi/arfi_conventions.h"
#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

sim::ArfiSimConfig small_config() {
  sim::ArfiSimConfig c;
  c.locations = 3;
  c.tracks = 6;
  c.samples = 240;
  c.focus_depth_m = 0.015;
  c.seed = test::fresh_seed();
  return c;
}

std::complex<double> sample(const sim::ArfiSimResult& r, std::size_t index) {
  return {double(r.payload[2 * index]), double(r.payload[2 * index + 1])};
}

}  // namespace

TEST_CASE("arfi simulator writes the documented frame layout and metadata", "[sim][arfi]") {
  ThreadPool pool(2);
  const auto c = small_config();
  const auto r = sim::simulate_arfi(c, &pool);
  const FrameMeta& m = r.meta;
  CHECK(m.kind == FrameKind::iq);
  CHECK(m.payload.dtype == DType::int16);
  REQUIRE(m.payload.axes.size() == 4);
  CHECK(m.payload.axes[0].name == "location");
  CHECK(m.payload.axes[1].name == "ensemble");
  CHECK(m.payload.axes[1].size == c.tracks + 1);
  CHECK(m.payload.axes[2].name == "sample");
  CHECK(m.payload.axes[3].name == "iq");
  CHECK(r.payload.size() == static_cast<std::size_t>(c.locations * (c.tracks + 1) * c.samples * 2));
  CHECK(m.sampling_frequency_hz == Approx(400e6 / 45));
  CHECK(m.center_frequency_hz == 5.33e6);
  CHECK(m.demodulation_frequency_hz == 4.8e6);
  const auto* times = m.vector(arfi::kEnsembleTimeVector);
  REQUIRE(times);
  REQUIRE(times->size() == static_cast<std::size_t>(c.tracks + 1));
  CHECK((*times)[0] < 0);  // the reference precedes the push
  for (std::size_t i = 2; i < times->size(); ++i) CHECK((*times)[i] - (*times)[i - 1] == Approx(1 / c.track_prf_hz));
  CHECK(r.scatterers_per_cell >= 10);
  // int16 without clipping: the largest component sits at the configured fraction of full scale.
  int peak = 0;
  for (std::int16_t v : r.payload) peak = std::max(peak, std::abs(int(v)));
  CHECK(peak == Approx(c.int16_peak_fraction * 32767).margin(1));
}

TEST_CASE("arfi simulator's IQ has the predicted mean frequency, different from f_dem", "[sim][arfi]") {
  ThreadPool pool(2);
  auto c = small_config();
  c.snr_db = std::numeric_limits<double>::infinity();
  c.locations = 16;  // independent speckle per location (the lines of one location share it):
  c.tracks = 1;      // 16 x 400 samples put the estimate's spread near 0.3 % (3 x 240: ~0.9 %)
  c.samples = 400;
  const auto r = sim::simulate_arfi(c, &pool);
  // Lag-one autocorrelation over every line: its phase is 2 pi (f_mean - f_dem) T_s for the IQ
  // convention analytic(rf) x exp(-j 2 pi f_dem t); a demodulation sign error would flip it.
  std::complex<double> lag1 = 0;
  const std::int64_t lines = c.locations * (c.tracks + 1);
  for (std::int64_t l = 0; l < lines; ++l)
    for (std::int64_t i = 0; i + 1 < c.samples; ++i)
      lag1 += sample(r, l * c.samples + i + 1) * std::conj(sample(r, l * c.samples + i));
  const double measured = c.demodulation_frequency_hz + std::arg(lag1) * c.iq_sampling_hz / (2 * arfi::kPi);
  INFO("measured f_mean " << measured << " Hz, predicted " << r.mean_frequency_hz << " Hz");
  CHECK(measured == Approx(r.mean_frequency_hz).epsilon(0.02));  // speckle: a few % per realisation
  CHECK(std::abs(r.mean_frequency_hz - c.demodulation_frequency_hz) > 0.05 * c.demodulation_frequency_hz);
}

TEST_CASE("arfi simulator adds noise at the requested SNR", "[sim][arfi]") {
  ThreadPool pool(2);
  auto c = small_config();
  c.snr_db = std::numeric_limits<double>::infinity();
  const auto clean = sim::simulate_arfi(c, &pool);
  c.snr_db = 20;
  const auto noisy = sim::simulate_arfi(c, &pool);  // same seed: same speckle, only noise added
  double cross = 0, power = 0;
  const std::size_t count = clean.payload.size() / 2;
  for (std::size_t i = 0; i < count; ++i) {
    cross += std::real(sample(noisy, i) * std::conj(sample(clean, i)));
    power += std::norm(sample(clean, i));
  }
  const double gain = cross / power;  // the int16 scales differ (the noisy peak is higher)
  double residual = 0;
  for (std::size_t i = 0; i < count; ++i) residual += std::norm(sample(noisy, i) - gain * sample(clean, i));
  const double snr_db = 10 * std::log10(gain * gain * power / residual);
  INFO("measured SNR " << snr_db << " dB");
  CHECK(snr_db == Approx(20).margin(0.3));  // 20k noise samples: the power estimate is within ~1 %
}

TEST_CASE("arfi simulator's truth peaks at the focus on the centre line and starts at zero", "[sim][arfi]") {
  ThreadPool pool(2);
  auto c = small_config();
  c.tracks = 40;
  c.drift_um_per_s = 100;
  const auto r = sim::simulate_arfi(c, &pool);
  double best = 0;
  std::int64_t best_sample = -1, best_location = -1;
  for (std::int64_t l = 0; l < c.locations; ++l)
    for (std::int64_t t = 0; t < c.tracks; ++t)
      for (std::int64_t i = 0; i < c.samples; ++i) {
        const double v = r.tissue_um[(l * c.tracks + t) * c.samples + i];
        if (v > best) best = v, best_sample = i, best_location = l;
      }
  CHECK(best == Approx(c.peak_um).epsilon(0.03));  // the track grid samples the peak time coarsely
  CHECK(best_location == 1);
  CHECK(r.depth_m[best_sample] == Approx(c.focus_depth_m).margin(1540 / (2 * c.iq_sampling_hz)));
  // drift: truth = tissue + rate x (t - t_ref)
  const auto& times = r.ensemble_time_s;
  const std::size_t at = (0 * c.tracks + 39) * c.samples + 5;
  CHECK(r.displacement_um[at] - r.tissue_um[at] == Approx(100 * (times[40] - times[0])));
}

TEST_CASE("arfi simulator refuses configs that break its physics", "[sim][arfi]") {
  auto c = small_config();
  c.scatterers_per_cell = 5;
  CHECK_THROWS_WITH(sim::simulate_arfi(c), Catch::Contains("scatterers per resolution cell"));
  c = small_config();
  c.rf_oversampling = 2;
  c.iq_sampling_hz = 5e6;
  CHECK_THROWS_WITH(sim::simulate_arfi(c), Catch::Contains("Nyquist"));
}
