#include "tools/sim/strain_sim.h"

#include <cmath>

#include "tests/support/test_support.h"

using namespace sonopipe;

TEST_CASE("strain sim: truth strain is the depth derivative of the truth displacement", "[sim]") {
  sim::StrainSimConfig config;
  config.stiffness_ratio = 5.0;
  const sim::StrainField field(config);
  CHECK(field.strain_ratio() == Approx(2.0 / 6.0));  // Eshelby circle, incompressible
  const double h = 1e-7;
  for (double z : {2e-3, 15e-3, 20e-3, 22e-3, 30e-3})
    for (double x : {-8e-3, -2e-3, 0.0, 4e-3}) {
      double up[3], down[3];
      field.displacement(1, z + h, x, 0.0, up);
      field.displacement(1, z - h, x, 0.0, down);
      REQUIRE((up[0] - down[0]) / (2 * h) == Approx(field.axial_strain(1, z, x, 0.0)).margin(1e-7));
    }
  // Inside: ratio x background compression; far outside: the background compression.
  CHECK(field.axial_strain(1, field.centre_depth(), 0.0, 0.0) == Approx(-0.01 * 2.0 / 6.0).margin(1e-6));
  CHECK(field.axial_strain(1, 3e-3, 15e-3, 0.0) == Approx(-0.01));
  // The inclusion centre does not move axially; lateral expansion grows with x.
  double u[3];
  field.displacement(2, field.centre_depth(), 10e-3, 0.0, u);
  CHECK(u[0] == Approx(0.0).margin(1e-15));
  CHECK(u[1] == Approx(0.5 * 0.02 * 10e-3));
  sim::StrainSimConfig sphere = config;
  sphere.dims = 3;
  CHECK(sim::StrainField(sphere).strain_ratio() == Approx(5.0 / 13.0));
}

TEST_CASE("strain sim: frames have the documented layout, amplitude and SNR", "[sim]") {
  sim::StrainSimConfig config;
  config.axial_samples = 300;
  config.lateral_lines = 20;
  config.frames = 2;
  config.strain_per_frame = 0.0;
  config.amplitude = 1e-22;
  config.seed = test::fresh_seed();
  auto noisy = sim::simulate_strain(config);
  REQUIRE(noisy.frames.size() == 2);
  REQUIRE(noisy.frame_spec.axes.size() == 2);
  CHECK(noisy.frame_spec.axes[1].name == "axial");
  CHECK(noisy.frame_spec.axes[1].spacing == Approx(1540.0 / 80e6));
  double power = 0;
  for (float v : noisy.frames[0]) power += double(v) * v;
  // Signal and noise are scaled to 1e-22 rms together, but their cross term 2 mean(s n) varies from
  // frame to frame: sd sqrt(P_n / N_eff) ~ 4e-4 of the rms for 6000 samples, more as speckle
  // samples correlate (1e-3 failed about 1 % of seeds); 5e-3 still catches any scaling error.
  CHECK(std::sqrt(power / noisy.frames[0].size()) == Approx(1e-22).epsilon(5e-3));
  // No motion: the two frames differ only by noise, so their difference has power
  // 2 * noise power = 2 / (1 + 10^(SNR/10)) of a frame's.
  double diff = 0, total = 0;
  for (std::size_t i = 0; i < noisy.frames[0].size(); ++i) {
    const double d = (double(noisy.frames[0][i]) - noisy.frames[1][i]) / 1e-22;
    diff += d * d;
    total += double(noisy.frames[0][i]) * noisy.frames[0][i] / 1e-44;
  }
  CHECK(diff / total == Approx(2.0 / (1.0 + std::pow(10.0, 3.0))).epsilon(0.15));
}
