// Real data: PyMUST's rotating-disk recording (tests/data/pymust-pwi-disk/, LGPL-2.1, see its README)
// read by the MUST reader (tools/formats/must_reader.h: demodulated at f_c), beamformed frame by frame
// on the CPU (the beamform stage), then clutter_filter and doppler. The velocity inside the disk must
// be that of a rigid rotation: v_axial = omega (x - x0), opposite signs on either side of the centre.
// The figures are stated in docs/doppler.md. On CUDA, each eigenvector route against the CPU reference.
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include <Eigen/Dense>

#include "stages/beamform/beamform/beamform.h"
#include "stages/doppler/doppler_conventions.h"
#include "tests/stages/doppler/flow_chain.h"
#include "tests/support/test_support.h"
#include "tools/formats/must_reader.h"

using namespace sonopipe;

namespace {

struct DiskEnsemble {
  FrameMeta meta;                          // iq [frame, lateral, axial]
  std::vector<std::complex<float>> iq;
  std::vector<double> x_m, z_m;            // pixel positions
};

// PyMUST's grid (x -12.5..12.5 mm, z 10..35 mm) at 0.2 mm, F-number 1 (as PyMUST's example).
DiskEnsemble beamform_disk(ThreadPool& pool) {
  const std::string path = test::source_path("tests/data/pymust-pwi-disk/PWI_disk.mat");
  auto reader = formats::open_must(path, formats::ImportOptions{});
  REQUIRE(reader->frame_count() == 32);
  BeamformParams params;
  params.x_min_m = -12.5e-3;
  params.x_max_m = 12.5e-3;
  params.z_min_m = 10e-3;
  params.z_max_m = 35e-3;
  params.lateral_pixels = 126;
  params.depth_pixels = 126;
  params.f_number = 1.0;
  DiskEnsemble out;
  for (std::size_t f = 0; f < reader->frame_count(); ++f) {
    const recording::Frame frame = reader->read_frame(f);
    BeamformStage beamform(params);
    const auto run = test::run_stage_cpu(beamform, frame.meta, frame.meta.payload, frame.payload.data(), pool);
    const TensorSpec& image = run.plan.outputs[0].spec;
    const auto* pixels = run.as<std::complex<float>>();
    out.iq.insert(out.iq.end(), pixels, pixels + image.element_count());
    if (f == 0) {
      out.meta = frame.meta;
      out.meta.kind = FrameKind::iq;
      out.meta.payload = image;
      out.meta.payload.axes.insert(out.meta.payload.axes.begin(), Axis{doppler::kFrameAxis, 32, 1e-4, "s", 0.0});
      std::vector<double> times(32);
      for (int n = 0; n < 32; ++n) times[n] = n * 1e-4;  // PRF 10 kHz (param.PRF)
      out.meta.vectors = {{doppler::kEnsembleTimeVector, times}};
      for (std::int64_t i = 0; i < image.axes[0].size; ++i)
        for (std::int64_t j = 0; j < image.axes[1].size; ++j) {
          double x = 0, z = 0;
          beamform.pixel_position(i, j, x, z);
          out.x_m.push_back(x);
          out.z_m.push_back(z);
        }
    }
  }
  return out;
}

struct RotationFit {
  double omega_rad_per_s = 0, x0_m = 0, residual_rms_m_per_s = 0, peak_m_per_s = 0;
  double left_mean = 0, right_mean = 0;  // mean velocity left / right of x0
  double disk_x_m = 0, disk_z_m = 0, disk_radius_m = 0;  // from the power image
  std::size_t pixels = 0;
};

// The disk: pixels whose power (unfiltered, mean |x|^2) is within 20 dB of the 99th percentile, as the
// water around it echoes nothing; its centroid and equivalent radius. The fit uses the pixels within
// 0.8 of that radius (the rim mixes disk and water in the PSF).
RotationFit fit_rotation(const DiskEnsemble& disk, const std::vector<float>& velocity) {
  const std::size_t pixels = disk.x_m.size();
  const std::size_t frames = disk.iq.size() / pixels;
  std::vector<double> power(pixels, 0.0);
  for (std::size_t n = 0; n < frames; ++n)
    for (std::size_t p = 0; p < pixels; ++p) power[p] += std::norm(std::complex<double>(disk.iq[n * pixels + p]));
  std::vector<double> sorted = power;
  std::sort(sorted.begin(), sorted.end());
  const double reference = sorted[static_cast<std::size_t>(0.99 * static_cast<double>(pixels))];
  RotationFit fit;
  double sx = 0, sz = 0, count = 0;
  for (std::size_t p = 0; p < pixels; ++p)
    if (power[p] > reference * 1e-2) {
      sx += disk.x_m[p];
      sz += disk.z_m[p];
      ++count;
    }
  fit.disk_x_m = sx / count;
  fit.disk_z_m = sz / count;
  const double pixel_area = (disk.x_m[126] - disk.x_m[0]) * (disk.z_m[1] - disk.z_m[0]);
  fit.disk_radius_m = std::sqrt(count * pixel_area / std::numbers::pi);
  // Least squares v = a x + b over the disk's inner part.
  double n = 0, mx = 0, mv = 0, mxx = 0, mxv = 0;
  std::vector<std::size_t> used;
  for (std::size_t p = 0; p < pixels; ++p) {
    if (std::hypot(disk.x_m[p] - fit.disk_x_m, disk.z_m[p] - fit.disk_z_m) > 0.8 * fit.disk_radius_m) continue;
    if (std::isnan(velocity[p])) continue;
    used.push_back(p);
    n += 1;
    mx += disk.x_m[p];
    mv += velocity[p];
    mxx += disk.x_m[p] * disk.x_m[p];
    mxv += disk.x_m[p] * velocity[p];
  }
  mx /= n;
  mv /= n;
  const double a = (mxv / n - mx * mv) / (mxx / n - mx * mx), b = mv - a * mx;
  fit.omega_rad_per_s = a;
  fit.x0_m = -b / a;
  double squared = 0, left = 0, right = 0, left_n = 0, right_n = 0;
  for (std::size_t p : used) {
    const double r = velocity[p] - (a * disk.x_m[p] + b);
    squared += r * r;
    fit.peak_m_per_s = std::max(fit.peak_m_per_s, std::abs(a * (disk.x_m[p] - fit.x0_m)));
    if (disk.x_m[p] < fit.x0_m) {
      left += velocity[p];
      ++left_n;
    } else {
      right += velocity[p];
      ++right_n;
    }
  }
  fit.residual_rms_m_per_s = std::sqrt(squared / n);
  fit.left_mean = left / left_n;
  fit.right_mean = right / right_n;
  fit.pixels = used.size();
  return fit;
}

// The recording's Gram spectrum: the largest eigenvalues of S^H S relative to the first (printed:
// why the clutter filter's small eigensolver is the Jacobi kernel, which needs no gap, rather than
// an iteration for the dominant eigenvector alone).
void print_gram_spectrum(const DiskEnsemble& disk) {
  const std::size_t pixels = disk.x_m.size(), frames = disk.iq.size() / pixels;
  Eigen::MatrixXcd s(pixels, frames);
  for (std::size_t n = 0; n < frames; ++n)
    for (std::size_t p = 0; p < pixels; ++p) s(p, n) = std::complex<double>(disk.iq[n * pixels + p]);
  const Eigen::VectorXd lambda = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXcd>(s.adjoint() * s).eigenvalues();
  std::printf("disk Gram eigenvalues / the largest:");
  for (int i = 0; i < 6; ++i) std::printf(" %.3g", lambda(frames - 1 - i) / lambda(frames - 1));
  std::printf("\n");
}

}  // namespace

TEST_CASE("rotating disk (PyMUST, real Verasonics data): the velocity field is a rigid rotation",
          "[doppler][clutter_filter][real]") {
  ThreadPool pool(2);
  const DiskEnsemble disk = beamform_disk(pool);
  print_gram_spectrum(disk);
  ClutterFilterParams filter;
  filter.tissue_rank = 1;  // the stationary echoes (the disk's own signal is the flow here)
  DopplerParams estimator;
  estimator.average_lateral = 5;  // 1 x 1 mm box: the disk's field is linear, the box costs no bias
  estimator.average_axial = 5;
  const auto images = test::run_doppler_chain(disk.meta, disk.iq, filter, estimator, pool);
  const double nyquist = std::stod(images.specs.at(0).attributes.at(doppler::kNyquistAttribute));
  const RotationFit fit = fit_rotation(disk, images.velocity);
  INFO("disk centre (" << fit.disk_x_m * 1e3 << ", " << fit.disk_z_m * 1e3 << ") mm, radius " << fit.disk_radius_m * 1e3
                       << " mm; omega " << fit.omega_rad_per_s << " rad/s, x0 " << fit.x0_m * 1e3 << " mm, residual rms "
                       << fit.residual_rms_m_per_s << " m/s, peak " << fit.peak_m_per_s << " m/s (v_N " << nyquist
                       << " m/s); mean left of x0 " << fit.left_mean << ", right " << fit.right_mean << " m/s over "
                       << fit.pixels << " pixels");
  CHECK(nyquist == Approx(1480.0 * 1e4 / (4 * 5e6)).epsilon(1e-9));  // c PRF / (4 f_c) = 0.74 m/s
  REQUIRE(fit.pixels > 4000);
  // Measured (docs/doppler.md): omega 61.07 rad/s (9.7 turns/s; the right half moves away from the
  // probe), x0 -0.74 mm, residual 0.011 m/s = 2.2 % of the 0.50 m/s peak; the disk's centroid in the
  // power image (-0.69, 22.7) mm, radius 10.4 mm. Ranks 0-3 give omega 60.85-61.07 and x0 -0.74..-0.77.
  CHECK(fit.omega_rad_per_s == Approx(61.07).epsilon(0.01));
  CHECK(fit.x0_m == Approx(-0.74e-3).margin(0.1e-3));
  CHECK(std::abs(fit.x0_m - fit.disk_x_m) < 0.3e-3);  // the velocity's centre is the disk's
  CHECK(fit.residual_rms_m_per_s < 0.04 * fit.peak_m_per_s);
  CHECK(fit.left_mean < -0.15);  // opposite signs on either side of the centre
  CHECK(fit.right_mean > 0.15);
  CHECK(fit.peak_m_per_s < nyquist);  // no aliasing inside the fitted region
  // docs/doppler.md's figure: SONOPIPE_DOPPLER_FIGURES=<folder> writes the images as float32
  // [lateral, axial] (docs/doppler_disk.py draws them).
  if (const char* folder = std::getenv("SONOPIPE_DOPPLER_FIGURES")) {
    auto write = [&](const char* name, const std::vector<float>& values) {
      std::ofstream(std::string(folder) + "/" + name, std::ios::binary)
          .write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
    };
    write("disk_velocity.f32", images.velocity);
    write("disk_power_db.f32", images.power_db);
    std::ofstream(std::string(folder) + "/disk_fit.txt")
        << fit.omega_rad_per_s << " " << fit.x0_m << " " << fit.residual_rms_m_per_s << " " << fit.disk_x_m << " "
        << fit.disk_z_m << " " << fit.disk_radius_m << "\n";
  }
}

#ifdef SONOPIPE_WITH_CUDA
TEST_CASE("rotating disk (real data) on CUDA: each eigenvector route filters as the CPU reference and gives its "
          "rotation",
          "[doppler][clutter_filter][real][cuda]") {
  SONOPIPE_REQUIRE_CUDA();
  ThreadPool pool(2);
  const DiskEnsemble disk = beamform_disk(pool);
  DopplerParams estimator;
  estimator.average_lateral = 5;
  estimator.average_axial = 5;
  for (std::int64_t tissue : {1, 4}) {
    ClutterFilterParams filter;
    filter.tissue_rank = tissue;
    const auto cpu = test::run_doppler_chain(disk.meta, disk.iq, filter, estimator, pool);
    const RotationFit cpu_fit = fit_rotation(disk, cpu.velocity);
    // auto (the dominant route at a fixed rank of 1 or 4, 32 frames: the Jacobi kernel after it where
    // its test fails), jacobi (every eigenvector) and full (cuSOLVER's batched solver, the route before).
    for (const auto& [eigensolver, label] : {std::pair{ClutterFilterParams::Eigensolver::automatic, "auto"},
                                             std::pair{ClutterFilterParams::Eigensolver::jacobi, "jacobi"},
                                             std::pair{ClutterFilterParams::Eigensolver::full, "full"}}) {
      INFO("tissue rank " << tissue << ", eigensolver " << label);
      filter.eigensolver = eigensolver;
      const auto gpu = test::run_doppler_chain(disk.meta, disk.iq, filter, estimator, pool, true);
      double difference = 0, norm = 0;
      for (std::size_t i = 0; i < cpu.filtered.size(); ++i) {
        difference += std::norm(std::complex<double>(cpu.filtered[i]) - std::complex<double>(gpu.filtered[i]));
        norm += std::norm(std::complex<double>(cpu.filtered[i]));
      }
      const double relative = std::sqrt(difference / norm);
      const RotationFit fit = fit_rotation(disk, gpu.velocity);
      std::printf("disk on CUDA (%s), tissue rank %lld: filtered vs CPU %.2e, omega %.3f rad/s (CPU %.3f); dominant "
                  "route: %lld solves, %lld fallbacks, %lld squarings, %lld iterations, %lld bound squarings\n",
                  label, static_cast<long long>(tissue), relative, fit.omega_rad_per_s, cpu_fit.omega_rad_per_s,
                  static_cast<long long>(gpu.dominant.solves), static_cast<long long>(gpu.dominant.fallbacks),
                  static_cast<long long>(gpu.dominant.squarings), static_cast<long long>(gpu.dominant.iterations),
                  static_cast<long long>(gpu.dominant.bound_squarings));
      if (eigensolver == ClutterFilterParams::Eigensolver::automatic) {
        CHECK(gpu.route.kind == EigenRoute::Kind::dominant);
        CHECK(gpu.dominant.solves == 1);  // converged or not (then the Jacobi kernel ran), the output below
      }
      // The eigenvectors are double (exact at float scale unless lambda_1 / (lambda_k - lambda_k+1)
      // exceeds ~1e8, which this recording's spectrum does not reach: every route agrees); the float
      // projection rounds by sqrt(N) eps ||S|| / ||S_f|| ~ 3e-7 ||S|| / ||S_f||. 1e-4 leaves room for
      // ||S|| / ||S_f|| up to ~300, far above a rank-1 to rank-4 filter of this recording.
      CHECK(relative < 1e-4);
      CHECK(fit.omega_rad_per_s == Approx(cpu_fit.omega_rad_per_s).epsilon(1e-3));
      CHECK(fit.x0_m == Approx(cpu_fit.x0_m).margin(0.01e-3));
    }
  }
}
#endif
