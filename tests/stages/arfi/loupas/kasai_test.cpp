// Kasai's 1-D autocorrelator uses f_dem where Loupas measures f_mean: on the same simulated set its
// displacement is scaled by f_mean / f_dem (the bias the issue asks the tests to show).
#include "tests/stages/arfi/arfi_chain.h"
#include "tests/support/test_support.h"

using namespace sonopipe;

TEST_CASE("kasai is biased by f_mean / f_dem where loupas is not, on the same simulated set", "[kasai][sim]") {
  ThreadPool pool(2);
  sim::ArfiSimConfig config = test::small_push_set(6.0, 40);
  config.demodulation_frequency_hz = 4.6e6;
  const auto set = sim::simulate_arfi(config, &pool);
  const double expected_gain = set.mean_frequency_hz / config.demodulation_frequency_hz;
  REQUIRE(expected_gain > 1.1);  // f_mean ~ 5.33 MHz vs f_dem 4.6 MHz: a bias no test can miss

  const auto loupas = test::compare_with_truth(test::run_arfi_chain(set, "loupas", pool), set.displacement_um, config, 0.5);
  const auto kasai = test::compare_with_truth(test::run_arfi_chain(set, "kasai", pool), set.displacement_um, config, 0.5);
  INFO("f_mean " << set.mean_frequency_hz << " Hz, f_dem " << config.demodulation_frequency_hz << " Hz: expected kasai gain "
                 << expected_gain << "; measured loupas " << loupas.ratio << ", kasai " << kasai.ratio << " (seed "
                 << config.seed << ")");
  CHECK(loupas.ratio == Approx(1.0).margin(0.02));
  // Kasai's gain is the local mean frequency of each 1.5-wavelength speckle window over f_dem; those
  // scatter about the pulse's f_mean and the atan of short sums averages them slightly low (measured
  // 1.126-1.146 against 1.158 over seeds): 4 % covers it, and it stays far from Loupas' 1.
  CHECK(kasai.ratio == Approx(expected_gain).epsilon(0.04));
  CHECK(kasai.ratio > 1.08);
  CHECK(kasai.bias_um > 0.05 * config.peak_um);
}

TEST_CASE("loupas stays unbiased when f_dem varies with depth (per-depth vector)", "[loupas][kasai][sim]") {
  ThreadPool pool(2);
  sim::ArfiSimConfig config = test::small_push_set(-4.0, 40);
  config.demodulation_frequency_hz = 4.4e6;
  config.demodulation_frequency_end_hz = 5.2e6;
  const auto set = sim::simulate_arfi(config, &pool);
  REQUIRE(set.meta.vector(arfi::kDemodulationVector) != nullptr);
  const auto loupas = test::compare_with_truth(test::run_arfi_chain(set, "loupas", pool), set.displacement_um, config, 0.5);
  INFO("loupas gain " << loupas.ratio << ", bias " << loupas.bias_um << " um (seed " << config.seed << ")");
  CHECK(loupas.ratio == Approx(1.0).margin(0.02));
  CHECK(std::abs(loupas.bias_um) < 0.02 * std::abs(config.peak_um));
}
