#include "tools/sim/channel_sim.h"

#include <cmath>
#include <complex>
#include <numbers>
#include <random>

#include "sdk/thread_pool.h"
#include "stages/beamform/channel_conventions.h"
#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

constexpr double kPi = std::numbers::pi;

sim::ChannelSimConfig small_config(bool iq) {
  sim::ChannelSimConfig c;
  c.elements = 32;
  c.iq = iq;
  c.sampling_frequency_hz = 4 * c.center_frequency_hz;  // fine grid: echo peaks resolved to << a sample
  c.demodulation_frequency_hz = iq ? c.center_frequency_hz : 0.0;
  return c;
}

// Time of the envelope peak of one channel line (parabola through the three largest |IQ| samples).
double envelope_peak_s(const sim::ChannelSimResult& r, std::size_t transmit, std::size_t element) {
  const auto& axes = r.meta.payload.axes;
  const std::size_t samples = static_cast<std::size_t>(axes[2].size);
  const std::complex<float>* line = &r.iq[(transmit * static_cast<std::size_t>(axes[1].size) + element) * samples];
  std::size_t best = 1;
  for (std::size_t i = 1; i + 1 < samples; ++i)
    if (std::abs(line[i]) > std::abs(line[best])) best = i;
  const double a = std::log(std::abs(line[best - 1])), b = std::log(std::abs(line[best])),
               c = std::log(std::abs(line[best + 1]));
  const double offset = 0.5 * (a - c) / (a - 2 * b + c);  // exact for a Gaussian envelope
  return axes[2].origin + (static_cast<double>(best) + offset) * axes[2].spacing;
}

}  // namespace

TEST_CASE("channel simulator writes the channel-data contract (kinds, axes, geometry vectors)", "[sim][channel]") {
  auto c = small_config(false);
  c.transmits = sim::plane_wave_sequence(3, 0.1);
  c.scatterers = {{0.0, 0.02, 1.0}};
  c.initial_time_s = 2e-6;
  const auto r = sim::simulate_channel(c);
  const FrameMeta& m = r.meta;
  CHECK(m.kind == FrameKind::channel_rf);
  CHECK(m.payload.dtype == DType::float32);
  REQUIRE(m.payload.axes.size() == 3);
  CHECK(m.payload.axes[0].name == channel::transmit_axis);
  CHECK(m.payload.axes[0].size == 3);
  CHECK(m.payload.axes[1].name == channel::element_axis);
  CHECK(m.payload.axes[1].size == 32);
  CHECK(m.payload.axes[2].name == channel::sample_axis);
  CHECK(m.payload.axes[2].unit == "s");
  CHECK(m.payload.axes[2].origin == 2e-6);
  CHECK(m.payload.axes[2].spacing == Approx(1.0 / c.sampling_frequency_hz));
  CHECK(m.payload.byte_size() == r.bytes());
  const auto* x = m.vector(std::string(channel::element_x_m));
  REQUIRE(x);
  REQUIRE(x->size() == 32);
  CHECK((*x)[0] == Approx(-15.5 * c.pitch_m));  // centred array
  CHECK((*x)[31] == Approx(15.5 * c.pitch_m));
  const auto* angles = m.vector(std::string(channel::transmit_angle_rad));
  REQUIRE(angles);
  CHECK((*angles)[0] == Approx(-0.1));
  CHECK((*angles)[2] == Approx(0.1));
  const auto* wavefront = m.vector(std::string(channel::transmit_wavefront));
  REQUIRE(wavefront);
  CHECK((*wavefront)[1] == channel::wavefront_plane);
}

TEST_CASE("channel simulator: echoes arrive at the transmit time plus the receive path, for every wave type",
          "[sim][channel]") {
  // The expected delays are written here from geometry, independently of the simulator:
  // plane wave fired by the delay law x_e sin(a) / c reaches (x, z) at (x sin a + z cos a) / c;
  // a converging wave fired by |s|/c - |e - s|/c reaches r before the focus at (|s| - |r - s|) / c;
  // a diverging wave fired by |e - s|/c - |s|/c reaches r at (|r - s| - |s|) / c.
  std::mt19937_64 rng(test::fresh_seed());
  std::uniform_real_distribution<double> lateral(-2e-3, 2e-3), depth(15e-3, 25e-3);
  const double x = lateral(rng), z = depth(rng);
  auto c = small_config(true);
  c.elements = 128;  // wide enough that the steered plane waves reach the point
  c.scatterers = {{x, z, 1.0}};
  const double angle = 12.0 * kPi / 180.0;  // positive: towards +x
  const double focus_x = 1e-3, focus_z = 40e-3, source_x = -2e-3, source_z = -10e-3;
  c.transmits = {sim::ChannelTransmit::plane(angle), sim::ChannelTransmit::plane(-angle),
                 sim::ChannelTransmit::focused(focus_x, focus_z, 32, 64),  // reaches every x in [-2, 2] mm
                 sim::ChannelTransmit::diverging(source_x, source_z)};
  ThreadPool pool(2);
  const auto r = sim::simulate_channel(c, &pool);
  const double cs = c.speed_of_sound_m_per_s;
  const double expected_tx[] = {
      (x * std::sin(angle) + z * std::cos(angle)) / cs,
      (x * std::sin(-angle) + z * std::cos(-angle)) / cs,
      (std::hypot(focus_x, focus_z) - std::hypot(x - focus_x, z - focus_z)) / cs,
      (std::hypot(x - source_x, z - source_z) - std::hypot(source_x, source_z)) / cs,
  };
  const double sample_s = 1.0 / c.sampling_frequency_hz;
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t e : {0u, 61u, 127u}) {
      const double receive = std::hypot(x - r.element_x_m[e], z) / cs;
      INFO("transmit " << t << " element " << e);
      // The Gaussian envelope's log is a parabola: the 3-point fit finds the peak to rounding.
      CHECK(std::abs(envelope_peak_s(r, t, e) - (expected_tx[t] + receive)) < 0.01 * sample_s);
    }
}

TEST_CASE("channel simulator: IQ is the analytic RF demodulated by exp(-j 2 pi f_dem t)", "[sim][channel]") {
  std::mt19937_64 rng(test::fresh_seed());
  std::uniform_real_distribution<double> lateral(-3e-3, 3e-3), depth(8e-3, 20e-3);
  auto rf_config = small_config(false);
  for (int i = 0; i < 5; ++i) rf_config.scatterers.push_back({lateral(rng), depth(rng), 1.0});
  rf_config.initial_time_s = 1e-6;
  auto iq_config = rf_config;
  iq_config.iq = true;
  iq_config.demodulation_frequency_hz = 0.9 * rf_config.center_frequency_hz;
  const auto rf = sim::simulate_channel(rf_config);
  const auto iq = sim::simulate_channel(iq_config);
  REQUIRE(rf.rf.size() == iq.iq.size());
  const auto& sample_axis = rf.meta.payload.axes[2];
  double worst = 0, peak = 0;
  for (std::size_t i = 0; i < rf.rf.size(); ++i) {
    const double t = sample_axis.origin + static_cast<double>(i % sample_axis.size) * sample_axis.spacing;
    const std::complex<double> remodulated =
        std::complex<double>(iq.iq[i]) * std::polar(1.0, 2 * kPi * iq_config.demodulation_frequency_hz * t);
    worst = std::max(worst, std::abs(remodulated.real() - rf.rf[i]));
    peak = std::max(peak, std::abs(double(rf.rf[i])));
  }
  REQUIRE(peak > 0.5);
  CHECK(worst < 1e-5 * peak);  // float32 rounding of both outputs
}

TEST_CASE("channel simulator: a focused line insonifies its beam, not the far side of the array", "[sim][channel]") {
  auto c = small_config(true);
  c.transmits = {sim::ChannelTransmit::focused(-3e-3, 20e-3, 0, 12)};  // left end of the array
  CHECK(sim::insonified(c.transmits[0], c, -3e-3, 20e-3));             // focus
  CHECK(sim::insonified(c.transmits[0], c, -3e-3, 10e-3));             // on the axis, before
  CHECK_FALSE(sim::insonified(c.transmits[0], c, 4e-3, 20e-3));        // far to the side
  c.scatterers = {{4e-3, 20e-3, 1.0}};
  const auto r = sim::simulate_channel(c);
  double energy = 0;
  for (auto v : r.iq) energy += std::norm(v);
  CHECK(energy == 0.0);
}

TEST_CASE("channel simulator: speckle phantom leaves the cysts empty at the requested density", "[sim][channel]") {
  const sim::Cyst cyst{0.0, 20e-3, 3e-3};
  const auto scatterers = sim::speckle_phantom(-5e-3, 5e-3, 10e-3, 30e-3, 0.3e-3, 0.3e-3, 2.0, {cyst}, test::fresh_seed());
  const double cell = 0.15e-3 * 0.3e-3, area = 10e-3 * 20e-3 - kPi * 3e-3 * 3e-3;
  CHECK(static_cast<double>(scatterers.size()) == Approx(2.0 * area / cell).epsilon(0.05));
  for (const auto& s : scatterers) CHECK(std::hypot(s.x_m - cyst.x_m, s.z_m - cyst.z_m) >= cyst.radius_m);
}
