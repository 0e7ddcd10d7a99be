// The beamform stage on the channel simulator (tools/sim/channel_sim.h, whose echoes carry the exact
// two-way delays): point targets land at their true positions for every wave type and steering sign,
// the point-spread function has the width the aperture predicts, compounding raises a cyst's
// contrast, an independent numpy DAS gives the same image, and the CUDA kernel equals the CPU
// reference on random data.
#include "stages/beamform/beamform/beamform.h"

#include <complex>
#include <cstdlib>
#include <fstream>
#include <numbers>
#include <random>

#include "sdk/thread_pool.h"
#include "stages/beamform/channel_conventions.h"
#include "stages/beamform/beamform/das.h"
#include "tests/stages/common/python_reference.h"
#include "tests/stages/common/stage_runner.h"
#include "tests/support/test_support.h"
#include "tools/sim/channel_sim.h"
#include "tools/sim/speckle_sim.h"

#ifdef SONOPIPE_WITH_CUDA
#include "stages/beamform/beamform/beamform.cuh"
#endif

using namespace sonopipe;

namespace {

constexpr double kPi = std::numbers::pi;

struct Image {
  std::vector<double> envelope;  // [lateral, depth]
  std::int64_t lateral, depth;
  double x0, dx, z0, dz;
  double at(std::int64_t i, std::int64_t j) const { return envelope[i * depth + j]; }
};

// Beamforms `channel` on a linear grid with the CPU reference; envelope = |IQ| or |RF|.
Image beamform_cpu(const sim::ChannelSimResult& channel, BeamformParams params, ThreadPool& pool) {
  BeamformStage stage(params);
  const test::StageRun run = test::run_stage_cpu(stage, channel.meta, channel.meta.payload, channel.data(), pool);
  const TensorSpec& out = run.plan.outputs[0].spec;
  Image image{{}, out.axes[0].size, out.axes[1].size, out.axes[0].origin, out.axes[0].spacing, out.axes[1].origin,
              out.axes[1].spacing};
  const std::int64_t n = image.lateral * image.depth;
  for (std::int64_t k = 0; k < n; ++k)
    image.envelope.push_back(out.dtype == DType::complex64 ? std::abs(run.as<std::complex<float>>()[k])
                                                           : std::abs(double(run.as<float>()[k])));
  return image;
}

// Sub-pixel peak: parabola through the maximum and its neighbours along each axis.
void peak(const Image& im, double& x, double& z) {
  std::int64_t bi = 1, bj = 1;
  for (std::int64_t i = 1; i + 1 < im.lateral; ++i)
    for (std::int64_t j = 1; j + 1 < im.depth; ++j)
      if (im.at(i, j) > im.at(bi, bj)) bi = i, bj = j;
  auto vertex = [](double a, double b, double c) { return 0.5 * (a - c) / (a - 2 * b + c); };
  x = im.x0 + (bi + vertex(im.at(bi - 1, bj), im.at(bi, bj), im.at(bi + 1, bj))) * im.dx;
  z = im.z0 + (bj + vertex(im.at(bi, bj - 1), im.at(bi, bj), im.at(bi, bj + 1))) * im.dz;
}

// Full width at half maximum of a profile sampled every `step` through its maximum.
double fwhm(const std::vector<double>& profile, double step) {
  std::size_t top = 0;
  for (std::size_t k = 0; k < profile.size(); ++k)
    if (profile[k] > profile[top]) top = k;
  const double half = profile[top] / 2;
  std::size_t left = top, right = top;
  while (left > 0 && profile[left] > half) --left;
  while (right + 1 < profile.size() && profile[right] > half) ++right;
  const double l = left + (half - profile[left]) / (profile[left + 1] - profile[left]);
  const double r = right - 1 + (profile[right - 1] - half) / (profile[right - 1] - profile[right]);
  return (r - l) * step;
}

sim::ChannelSimConfig array_config(bool iq) {
  sim::ChannelSimConfig c;
  c.iq = iq;
  c.sampling_frequency_hz = iq ? 2 * c.center_frequency_hz : 4 * c.center_frequency_hz;
  return c;
}

BeamformParams window_around(double x, double z, double half_width_m, double pitch_m) {
  BeamformParams p;
  p.x_min_m = x - half_width_m;
  p.x_max_m = x + half_width_m;
  p.z_min_m = z - half_width_m;
  p.z_max_m = z + half_width_m;
  p.lateral_pixels = static_cast<std::int64_t>(std::lround(2 * half_width_m / pitch_m)) + 1;
  p.depth_pixels = p.lateral_pixels;
  return p;
}

}  // namespace

TEST_CASE("beamform: point targets land at their true positions for every wave type and steering sign",
          "[beamform]") {
  ThreadPool pool(2);
  struct Case {
    const char* name;
    std::vector<sim::ChannelTransmit> transmits;
    bool iq;
    double initial_time_s;
  };
  const double degree = kPi / 180;
  sim::ChannelSimConfig base = array_config(true);
  const std::vector<Case> cases = {
      {"plane +10 deg, IQ", {sim::ChannelTransmit::plane(10 * degree)}, true, 0.0},
      {"plane -10 deg, RF", {sim::ChannelTransmit::plane(-10 * degree)}, false, 0.0},
      {"5 plane waves, IQ, first sample at 4 us", sim::plane_wave_sequence(5, 8 * degree), true, 4e-6},
      {"diverging waves, IQ", {sim::ChannelTransmit::diverging(3e-3, -15e-3), sim::ChannelTransmit::diverging(-3e-3, -15e-3)}, true, 0.0},
      {"focused at 20 mm (targets before and beyond), RF", {sim::ChannelTransmit::focused(0.0, 20e-3, 32, 64)}, false, 0.0},
  };
  // Off-axis targets expose a wrong steering sign (error 2 x sin a); targets at two depths around the
  // focus expose a wrong before/after-focus rule; the first-sample time exposes a wrong time zero.
  const std::vector<sim::Scatterer> targets = {{-6e-3, 15e-3, 1.0}, {5e-3, 28e-3, 1.0}, {0.5e-3, 12e-3, 1.0}, {-1e-3, 30e-3, 1.0}};
  for (const Case& c : cases) {
    sim::ChannelSimConfig config = array_config(c.iq);
    config.transmits = c.transmits;
    config.initial_time_s = c.initial_time_s;
    config.scatterers = targets;
    const auto channel = sim::simulate_channel(config, &pool);
    for (const auto& target : targets) {
      bool reached = true;
      for (const auto& t : c.transmits) reached = reached && sim::insonified(t, config, target.x_m, target.z_m);
      if (!reached) continue;
      INFO(c.name << ": target (" << target.x_m * 1e3 << ", " << target.z_m * 1e3 << ") mm");
      BeamformParams params = window_around(target.x_m, target.z_m, 1.0e-3, 0.02e-3);
      params.f_number = 1.0;
      const Image image = beamform_cpu(channel, params, pool);
      double x, z;
      peak(image, x, z);
      // A fraction of a wavelength: the simulated delays are exact, so the peak sits on the target up
      // to the parabolic fit and the interpolation of the channel samples (a tenth of lambda = 30 um).
      CHECK(std::abs(x - target.x_m) < channel.wavelength_m / 10);
      CHECK(std::abs(z - target.z_m) < channel.wavelength_m / 10);
    }
  }
}

TEST_CASE("beamform: lateral and axial widths of the point-spread function match the aperture and the pulse",
          "[beamform]") {
  ThreadPool pool(2);
  sim::ChannelSimConfig config = array_config(true);
  config.sampling_frequency_hz = 4 * config.center_frequency_hz;  // widths from the pulse, not the sampling
  config.transmits = {sim::ChannelTransmit::plane(0.0)};
  config.scatterers = {{0.0, 25e-3, 1.0}};
  const auto channel = sim::simulate_channel(config, &pool);
  const double lambda = channel.wavelength_m, f_number = 2.0;
  BeamformParams params = window_around(0.0, 25e-3, 1.5e-3, 0.01e-3);
  params.window = beamform::Window::boxcar;
  params.f_number = f_number;
  params.cubic = true;  // linear interpolation of the samples would itself widen the pulse
  const Image image = beamform_cpu(channel, params, pool);
  const std::int64_t centre_i = image.lateral / 2, centre_j = image.depth / 2;
  std::vector<double> lateral, axial;
  for (std::int64_t i = 0; i < image.lateral; ++i) lateral.push_back(image.at(i, centre_j));
  for (std::int64_t j = 0; j < image.depth; ++j) axial.push_back(image.at(centre_i, j));
  // Receive-only focusing through a uniform aperture D = z / F#: amplitude sinc(x D / (lambda z)),
  // half amplitude at |u| = 0.603, FWHM = 1.207 lambda F# (at f_c; the band averages around it).
  const double lateral_theory = 1.2067 * lambda * f_number;
  CHECK(fwhm(lateral, image.dx) == Approx(lateral_theory).epsilon(0.10));
  // Axially the image is the two-way pulse envelope over depth: FWHM = c * (2 sigma sqrt(2 ln 2)) / 2.
  const double sigma_s = sim::SpeckleGenerator::envelope_sigma_s(config.center_frequency_hz, config.fractional_bandwidth);
  const double axial_theory = config.speed_of_sound_m_per_s * sigma_s * std::sqrt(2 * std::log(2.0));
  CHECK(fwhm(axial, image.dz) == Approx(axial_theory).epsilon(0.05));
  // Side lobes, measured with a narrow-band pulse (10 %), whose lateral profile approaches the
  // continuous-wave sinc: boxcar's first lobe at -13.3 dB; Hann lowers it by more than 10 dB.
  config.fractional_bandwidth = 0.1;
  const auto narrow_band = sim::simulate_channel(config, &pool);
  auto side_lobe_db = [&](const Image& im) {
    std::vector<double> row;
    for (std::int64_t i = 0; i < im.lateral; ++i) row.push_back(im.at(i, im.depth / 2));
    const double top = *std::max_element(row.begin(), row.end());
    const std::size_t mid = row.size() / 2;
    std::size_t k = mid;
    while (k + 1 < row.size() && row[k + 1] < row[k]) ++k;  // first minimum right of the peak
    return 20 * std::log10(*std::max_element(row.begin() + static_cast<std::ptrdiff_t>(k), row.end()) / top);
  };
  params = window_around(0.0, 25e-3, 3e-3, 0.01e-3);
  params.window = beamform::Window::boxcar;
  params.f_number = f_number;
  const double boxcar_db = side_lobe_db(beamform_cpu(narrow_band, params, pool));
  params.window = beamform::Window::hann;
  const double hann_db = side_lobe_db(beamform_cpu(narrow_band, params, pool));
  INFO("side lobes: boxcar " << boxcar_db << " dB, hann " << hann_db << " dB");
  CHECK(boxcar_db == Approx(-13.3).margin(1.5));
  CHECK(hann_db < boxcar_db - 10.0);
}

TEST_CASE("beamform: compounding plane waves raises the contrast of an anechoic cyst", "[beamform]") {
  ThreadPool pool(2);
  const std::uint64_t seed = test::fresh_seed();
  sim::ChannelSimConfig config = array_config(true);
  config.elements = 96;
  const sim::Cyst cyst{0.0, 20e-3, 1.5e-3};
  config.scatterers = sim::speckle_phantom(-7e-3, 7e-3, 13e-3, 27e-3, 0.296e-3, config.pitch_m, 2.0, {cyst}, seed);
  BeamformParams params;
  params.x_min_m = -6e-3;
  params.x_max_m = 6e-3;
  params.z_min_m = 14e-3;
  params.z_max_m = 26e-3;
  params.lateral_pixels = 61;
  params.depth_pixels = 161;
  // CNR of the log-compressed image (what a display shows): |mean_in - mean_out| / sqrt(var_in +
  // var_out) of 20 log10(envelope), inside 0.6 R and in a ring 1.3 R .. 2.2 R around the cyst.
  // Log-compressed speckle has a fixed spread (5.6 dB), so this CNR follows the cyst's contrast.
  auto cnr = [&](int angles, double& contrast_db) {
    config.transmits = sim::plane_wave_sequence(angles, 12 * kPi / 180);
    params.f_number = 3.0;
    const Image im = beamform_cpu(sim::simulate_channel(config, &pool), params, pool);
    double in_sum = 0, in_sq = 0, out_sum = 0, out_sq = 0, in_n = 0, out_n = 0;
    for (std::int64_t i = 0; i < im.lateral; ++i)
      for (std::int64_t j = 0; j < im.depth; ++j) {
        const double r = std::hypot(im.x0 + i * im.dx - cyst.x_m, im.z0 + j * im.dz - cyst.z_m);
        const double v = 20 * std::log10(im.at(i, j) + 1e-30);
        if (r < 0.6 * cyst.radius_m) in_sum += v, in_sq += v * v, in_n += 1;
        else if (r > 1.3 * cyst.radius_m && r < 2.2 * cyst.radius_m) out_sum += v, out_sq += v * v, out_n += 1;
      }
    const double mi = in_sum / in_n, mo = out_sum / out_n;
    contrast_db = mi - mo;
    return std::abs(mo - mi) / std::sqrt(in_sq / in_n - mi * mi + out_sq / out_n - mo * mo);
  };
  double single_db = 0, compounded_db = 0;
  const double single = cnr(1, single_db), compounded = cnr(11, compounded_db);
  INFO("1 plane wave: CNR " << single << ", contrast " << single_db << " dB; 11 plane waves: CNR " << compounded
                            << ", contrast " << compounded_db << " dB");
  // One plane wave focuses on receive only: its side lobes fill the cyst with the speckle around it.
  // Eleven angles over +-12 deg add a synthetic transmit focus (seen here: 10-13 dB deeper cysts,
  // CNR up by 60-95 % over eight seeds).
  CHECK(compounded_db < single_db - 6.0);
  CHECK(compounded > single * 1.25);
}

TEST_CASE("beamform: an independent numpy delay-and-sum gives the same image", "[beamform]") {
  const std::string python = test::python_with_scipy();
  if (python.empty()) {
    WARN("skipped: no python3 with numpy on PATH");
    return;
  }
  ThreadPool pool(2);
  std::mt19937_64 rng(test::fresh_seed());
  sim::ChannelSimConfig config = array_config(true);
  config.elements = 32;
  config.initial_time_s = 3e-6;
  config.transmits = sim::plane_wave_sequence(3, 0.1);
  std::uniform_real_distribution<double> x(-3e-3, 3e-3), z(10e-3, 16e-3);
  for (int k = 0; k < 6; ++k) config.scatterers.push_back({x(rng), z(rng), 1.0});
  const auto channel = sim::simulate_channel(config, &pool);
  BeamformParams params;
  params.x_min_m = -3e-3, params.x_max_m = 3e-3, params.z_min_m = 10e-3, params.z_max_m = 16e-3;
  params.lateral_pixels = 25, params.depth_pixels = 61;
  params.window = beamform::Window::hann;
  params.f_number = 1.5;
  BeamformStage stage(params);
  const test::StageRun run = test::run_stage_cpu(stage, channel.meta, channel.meta.payload, channel.data(), pool);

  char dir_template[] = "/tmp/sonopipe_das_XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  {
    std::ofstream data(dir + "/channel.bin", std::ios::binary);
    data.write(static_cast<const char*>(channel.data()), static_cast<std::streamsize>(channel.bytes()));
    std::ofstream script(dir + "/das.py");
    // Written from the conventions, not from the stage's code: USTB plane-wave delays, Hann receive
    // apodisation over |x_e - x| <= z / (2 F#), np.interp over each line continued by a zero sample
    // at both ends (linear, 0 beyond), carrier restored.
    script << "import numpy as np, sys\n"
           << "T, E, S = " << config.transmits.size() << ", " << config.elements << ", " << channel.meta.payload.axes[2].size << "\n"
           << "fs, f0, t0, c, pitch, F = " << config.sampling_frequency_hz << ", " << config.center_frequency_hz << ", "
           << config.initial_time_s << ", " << config.speed_of_sound_m_per_s << ", " << config.pitch_m << ", 1.5\n"
           << "angles = np.linspace(-0.1, 0.1, T)\n"
           << "data = np.fromfile(sys.argv[1], dtype=np.complex64).reshape(T, E, S).astype(np.complex128)\n"
           << "xe = (np.arange(E) - (E - 1) / 2) * pitch\n"
           << "X, Z = np.meshgrid(np.linspace(-3e-3, 3e-3, 25), np.linspace(10e-3, 16e-3, 61), indexing='ij')\n"
           << "ts = t0 + np.arange(-1, S + 1) / fs\n"
           << "data = np.concatenate([np.zeros((T, E, 1)), data, np.zeros((T, E, 1))], axis=2)\n"
           << "img = np.zeros(X.shape, complex)\n"
           << "for t in range(T):\n"
           << "  ttx = (X * np.sin(angles[t]) + Z * np.cos(angles[t])) / c\n"
           << "  for e in range(E):\n"
           << "    r = np.abs(xe[e] - X) / (Z / (2 * F))\n"
           << "    w = np.where(r <= 1, 0.5 * (1 + np.cos(np.pi * r)), 0.0)\n"
           << "    tau = ttx + np.hypot(X - xe[e], Z) / c\n"
           << "    v = np.interp(tau, ts, data[t, e].real, left=0, right=0) + 1j * np.interp(tau, ts, data[t, e].imag, left=0, right=0)\n"
           << "    img += w * v * np.exp(2j * np.pi * f0 * tau)\n"
           << "img.astype(np.complex64).tofile(sys.argv[2])\n";
  }
  REQUIRE(std::system(("'" + python + "' " + dir + "/das.py " + dir + "/channel.bin " + dir + "/image.bin").c_str()) == 0);
  std::vector<std::complex<float>> reference(25 * 61);
  std::ifstream(dir + "/image.bin", std::ios::binary)
      .read(reinterpret_cast<char*>(reference.data()), static_cast<std::streamsize>(reference.size() * 8));
  std::system(("rm -rf " + dir).c_str());
  double peak_value = 0, worst = 0;
  for (std::size_t k = 0; k < reference.size(); ++k) {
    peak_value = std::max(peak_value, double(std::abs(reference[k])));
    worst = std::max(worst, double(std::abs(reference[k] - run.as<std::complex<float>>()[k])));
  }
  REQUIRE(peak_value > 0);
  // Both sum the same terms in double; the outputs are float32 (relative rounding 6e-8 per value).
  CHECK(worst < 1e-5 * peak_value);
}

TEST_CASE("beamform: linear interpolation runs through zeros beyond both ends of a line", "[beamform]") {
  // beamform_conventions.h: within one sample outside the line the value falls linearly to 0, so a
  // pixel's sum does not jump when a delay crosses the end of the recording (float and double agree).
  const std::vector<float> y = {1.0f, 2.0f, 4.0f};
  const beamform::Line<double, 1> line{y.data(), nullptr};
  auto linear = [&](double position) { return beamform::interpolate<double, 1>(line, 3, position, false).v[0]; };
  CHECK(linear(-1.5) == 0.0);
  CHECK(linear(-1.0) == 0.0);
  CHECK(linear(-0.25) == Approx(0.75));  // three quarters of the way from the zero before y0
  CHECK(linear(0.0) == 1.0);
  CHECK(linear(1.5) == Approx(3.0));
  CHECK(linear(2.0) == 4.0);
  CHECK(linear(2.25) == Approx(3.0));  // a quarter of the way to the zero after the last sample
  CHECK(linear(3.0) == 0.0);
  CHECK(linear(std::nan("")) == 0.0);
  CHECK(linear(2.0 + 1e-9) == Approx(linear(2.0 - 1e-9)).margin(1e-7));
}

TEST_CASE("beamform: the frame's description is checked", "[beamform]") {
  ThreadPool pool(1);
  sim::ChannelSimConfig config = array_config(false);
  config.elements = 8;
  config.scatterers = {{0.0, 10e-3, 1.0}};
  auto channel = sim::simulate_channel(config, &pool);
  BeamformStage stage{BeamformParams{}};
  FrameMeta frame = channel.meta;
  frame.kind = FrameKind::rf;
  CHECK_THROWS_WITH(stage.configure(frame, frame.payload, Backend::cpu), Catch::Contains("expected channel_rf or channel_iq"));
  frame = channel.meta;
  frame.vectors.erase(std::string(channel::element_x_m));
  CHECK_THROWS_WITH(stage.configure(frame, frame.payload, Backend::cpu), Catch::Contains("no vector 'element_x_m'"));
  frame = channel.meta;
  frame.vectors[std::string(channel::transmit_wavefront)] = {0.0, 0.0};
  CHECK_THROWS_WITH(stage.configure(frame, frame.payload, Backend::cpu),
                    Catch::Contains("'transmit_wavefront' has 2 values, expected one per transmit (1)"));
  BeamformParams lines;
  lines.output = BeamformParams::Output::lines;
  BeamformStage line_stage(lines);
  CHECK_THROWS_WITH(line_stage.configure(channel.meta, channel.meta.payload, Backend::cpu),
                    Catch::Contains("needs spherical (focused) transmits"));
}

#ifdef SONOPIPE_WITH_CUDA
// Which GPU kernel an image case reaches (stages/beamform/beamform/beamform.cuh): a focused transmit or cubic
// interpolation -> the per-pixel kernel; plane and diverging waves -> the tiled kernel, which on a
// coarse grid (a block's samples do not fit its window) sums each pixel the per-pixel way, and on a
// fine grid stages samples in shared memory (13 transmits: two passes of 12). tiled_fine_cut: the
// recording ends inside the image, so some blocks' windows reach past its last sample (the staging
// path that checks every sample) while shallower blocks stay inside it (the path that does not),
// and every element of a 96-element array is in the aperture (F# 0): two chunks of the block's
// element table (kTileChunk).
enum class Path { per_pixel, tiled_coarse, tiled_fine, tiled_fine_cut };

TEST_CASE("beamform CUDA equals the CPU reference on random channel data", "[beamform][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  ThreadPool pool(2);
  std::mt19937_64 rng(test::fresh_seed());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const bool iq : {false, true})
    for (const bool cubic : {false, true})
      for (const auto output : {BeamformParams::Output::image, BeamformParams::Output::lines})
        for (const auto grid : {BeamformParams::Grid::linear, BeamformParams::Grid::sector})
          for (const Path path : {Path::per_pixel, Path::tiled_coarse, Path::tiled_fine, Path::tiled_fine_cut}) {
            if (output == BeamformParams::Output::lines && grid == BeamformParams::Grid::sector) continue;
            if ((output == BeamformParams::Output::lines || cubic) && path != Path::per_pixel) continue;
            INFO("iq " << iq << " cubic " << cubic << " lines " << (output == BeamformParams::Output::lines) << " sector "
                       << (grid == BeamformParams::Grid::sector) << " path " << int(path));
            sim::ChannelSimConfig config = array_config(iq);
            config.elements = path == Path::tiled_fine_cut ? 96 : 48;
            config.initial_time_s = 1e-6;
            if (output == BeamformParams::Output::lines) {
              config.transmits = sim::focused_line_sequence(config, 7, 20e-3, 24);
            } else if (path == Path::per_pixel) {
              config.transmits = {sim::ChannelTransmit::plane(0.05), sim::ChannelTransmit::diverging(1e-3, -10e-3),
                                  sim::ChannelTransmit::focused(-1e-3, 18e-3, 8, 24)};
            } else if (path == Path::tiled_coarse) {
              config.transmits = {sim::ChannelTransmit::plane(0.05), sim::ChannelTransmit::diverging(1e-3, -10e-3)};
            } else {
              config.transmits = sim::plane_wave_sequence(12, 0.2);
              config.transmits.push_back(sim::ChannelTransmit::diverging(-2e-3, -12e-3));
            }
            config.samples = 700;
            // Echoes from 10-12 mm arrive at samples ~120-160 (IQ) or ~240-320 (RF).
            if (path == Path::tiled_fine_cut) config.samples = iq ? 140 : 280;
            sim::ChannelSimResult channel = sim::simulate_channel(config, &pool);  // geometry; data replaced:
            for (auto& v : channel.rf) v = normal(rng);
            for (auto& v : channel.iq) v = {normal(rng), normal(rng)};
            BeamformParams params;
            params.grid = grid;
            params.output = output;
            params.cubic = cubic;
            params.window = beamform::Window::tukey;
            params.x_min_m = -5e-3, params.x_max_m = 5e-3, params.z_min_m = 8e-3, params.z_max_m = 30e-3;
            if (path == Path::tiled_fine || path == Path::tiled_fine_cut) {
              // 0.075 x 0.021 mm pixels: a block's window is ~54 of 64 samples (RF)
              params.x_min_m = -1.2e-3, params.x_max_m = 1.2e-3, params.z_min_m = 10e-3, params.z_max_m = 12e-3;
              params.angle_min_deg = -7, params.angle_max_deg = 7;  // sector: 0.44 degrees = 0.09 mm at 12 mm
            }
            params.lateral_pixels = 33, params.depth_pixels = 97;
            if (path == Path::tiled_fine_cut) params.f_number = 0;
          if (output == BeamformParams::Output::image && !cubic && path != Path::per_pixel) {
            // The case reaches the path it names: a full block's reach (its corner from its centre
            // pixel, kTileLateral / 2 and kTileDepth / 2 pixels away) fits the window on the fine grid only.
            const double lateral_step = grid == BeamformParams::Grid::sector
                                            ? params.z_max_m * (params.angle_max_deg - params.angle_min_deg) *
                                                  std::numbers::pi / 180 / (params.lateral_pixels - 1)
                                            : (params.x_max_m - params.x_min_m) / (params.lateral_pixels - 1);
            const double depth_step = (params.z_max_m - params.z_min_m) / (params.depth_pixels - 1);
            const double reach = std::hypot(cuda::kTileLateral / 2 * lateral_step, cuda::kTileDepth / 2 * depth_step);
            const float span = cuda::tile_half_span(float(reach), float(1 / config.speed_of_sound_m_per_s),
                                                    float(config.sampling_frequency_hz));
            CHECK((2 * span + 2 <= cuda::kTileSamples) == (path != Path::tiled_coarse));
            if (path == Path::tiled_fine_cut) CHECK(config.elements > cuda::kTileChunk);
          }
            BeamformStage cpu(params), gpu(params);
            const auto a = test::run_stage_cpu(cpu, channel.meta, channel.meta.payload, channel.data(), pool);
            const auto b = test::run_stage_cuda(gpu, channel.meta, channel.meta.payload, channel.data());
            const std::size_t n = a.outputs[0].size() / sizeof(float);
            double scale = 0, worst = 0;
            std::size_t worst_at = 0;
            for (std::size_t k = 0; k < n; ++k) {
              scale = std::max(scale, double(std::abs(a.as<float>()[k])));
              const double error = std::abs(a.as<float>()[k] - b.as<float>()[k]);
              if (error > worst) worst = error, worst_at = k;
            }
            const std::size_t channels = iq ? 2 : 1, worst_pixel = worst_at / channels;
            INFO("worst at lateral " << worst_pixel / params.depth_pixels << ", depth " << worst_pixel % params.depth_pixels
                                     << ": CPU " << a.as<float>()[worst_at] << ", GPU " << b.as<float>()[worst_at]);
            // float delays on the GPU: ~1e-11 s of rounding moves a sample ~2e-4 samples; on white-noise
            // lines that changes each of the ~48 x 3 terms by ~2e-4 of a sample's size, far below 1e-3
            // of the largest output (which sums many such terms).
            CHECK(worst < 1e-3 * scale);
          }
}
#endif
