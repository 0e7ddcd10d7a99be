#include "tools/perfusion/perfusion_tool.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "sdk/backend.h"
#include "sdk/thread_pool.h"
#include "stages/perfusion/perfusion_fit/perfusion_fitter.h"
#include "tools/perfusion/curve_csv.h"
#include "tools/perfusion/nifti_volume.h"

namespace sonopipe::perfusion_tool {
namespace {

using Clock = std::chrono::steady_clock;

nifti::Curve read_input_curve(const std::string& path, const char* which) {
  if (path.empty()) throw ToolError(std::string("--") + which + " is required");
  try {
    return nifti::read_curve_csv(path);
  } catch (const std::runtime_error& e) {
    throw ToolError(std::string(which) + " input: " + e.what());
  }
}

// The sample times: the curves' time column, checked against each other and against the
// series' time axis (dim[4] samples, pixdim[4] spacing when set).
std::vector<double> common_time_axis(const nifti::Volume& series, const nifti::Curve& arterial,
                                     const nifti::Curve& portal) {
  const std::size_t n = static_cast<std::size_t>(series.samples());
  if (n < 3) throw ToolError("input series has " + std::to_string(n) + " time points; expected a 4-D series with at least 3");
  if (arterial.time_s.size() != n)
    throw ToolError("arterial input has " + std::to_string(arterial.time_s.size()) +
                    " samples, the series has " + std::to_string(n) + " time points");
  if (portal.time_s.size() != n)
    throw ToolError("portal input has " + std::to_string(portal.time_s.size()) +
                    " samples, the series has " + std::to_string(n) + " time points");
  double dt = 0;
  try {
    dt = perfusion::uniform_spacing_s(arterial.time_s);
  } catch (const perfusion::InputError& e) {
    throw ToolError(std::string("arterial input ") + e.what());
  }
  for (std::size_t i = 0; i < n; ++i)
    if (std::abs(arterial.time_s[i] - portal.time_s[i]) > perfusion::kUniformTimeTolerance * dt)
      throw ToolError("arterial and portal inputs differ in sample time at row " + std::to_string(i + 1) +
                      " (" + std::to_string(arterial.time_s[i]) + " s vs " +
                      std::to_string(portal.time_s[i]) + " s)");
  const double series_dt = series.spacing[3];
  if (series_dt > 0 && std::abs(series_dt - dt) > 1e-3 * dt)
    throw ToolError("time axes differ: the series samples every " + std::to_string(series_dt) +
                    " s (pixdim[4]), the input curves every " + std::to_string(dt) + " s");
  return arterial.time_s;
}

std::vector<unsigned char> read_mask(const std::string& path, const nifti::Volume& series) {
  std::vector<unsigned char> mask(static_cast<std::size_t>(series.voxels()), 1);
  if (path.empty()) return mask;
  const nifti::Volume m = nifti::read_volume(path);
  if (m.samples() != 1 || m.shape[0] != series.shape[0] || m.shape[1] != series.shape[1] ||
      m.shape[2] != series.shape[2])
    throw ToolError("mask dimensions " + std::to_string(m.shape[0]) + "x" + std::to_string(m.shape[1]) +
                    "x" + std::to_string(m.shape[2]) + "x" + std::to_string(m.shape[3]) +
                    " do not match the series' " + std::to_string(series.shape[0]) + "x" +
                    std::to_string(series.shape[1]) + "x" + std::to_string(series.shape[2]));
  for (std::size_t v = 0; v < mask.size(); ++v) mask[v] = m.values[v] != 0 && !std::isnan(m.values[v]);
  return mask;
}

class ProgressBar {
 public:
  ProgressBar(std::ostream& log, bool enabled) : log_(log), enabled_(enabled), start_(Clock::now()) {}
  void update(std::size_t done, std::size_t total) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const int width = 40;
    const int filled = total ? static_cast<int>(width * done / total) : width;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    char line[160];
    std::snprintf(line, sizeof line, "\r[%s%s] %3d%% %zu/%zu voxels %.1f s", std::string(filled, '#').c_str(),
                  std::string(width - filled, '.').c_str(),
                  total ? static_cast<int>(100 * done / total) : 100, done, total, elapsed);
    log_ << line << (done >= total ? "\n" : "") << std::flush;
  }

 private:
  std::ostream& log_;
  bool enabled_;
  Clock::time_point start_, last_{};
};

}  // namespace

ToolSummary run(const ToolOptions& options, std::ostream& log) {
  if (options.input.empty()) throw ToolError("--input is required");
  if (options.output_prefix.empty()) throw ToolError("--output is required");
  if (options.backend != "auto" && options.backend != "cpu" && options.backend != "cuda")
    throw ToolError("--backend: expected auto, cpu or cuda, got '" + options.backend + "'");
  if (options.gpu_layout != "thread" && options.gpu_layout != "block")
    throw ToolError("--gpu-layout: expected thread or block, got '" + options.gpu_layout + "'");
  if (options.gpu_layout == "block" && options.fit.convolution != perfusion::Convolution::fft)
    throw ToolError("--gpu-layout block implements --convolution fft only");
  for (const auto& w : perfusion::start_warnings(options.fit)) log << "warning: " << w << "\n";

  // Everything is read and checked before any fitting starts.
  const nifti::Volume series = nifti::read_volume(options.input);
  const nifti::Curve arterial = read_input_curve(options.arterial, "arterial");
  const nifti::Curve portal = read_input_curve(options.portal, "portal");
  const std::vector<double> time_s = common_time_axis(series, arterial, portal);
  const std::vector<unsigned char> mask = read_mask(options.mask, series);
  const perfusion::FitProblem problem(time_s, arterial.values, portal.values);

  // Masked curves, voxel-major (NIfTI stores x fastest and time slowest).
  const std::size_t voxels = static_cast<std::size_t>(series.voxels());
  const std::size_t samples = static_cast<std::size_t>(series.samples());
  std::vector<std::size_t> fitted;
  for (std::size_t v = 0; v < voxels; ++v)
    if (mask[v]) fitted.push_back(v);
  std::vector<double> curves(fitted.size() * samples);
  std::size_t nan_voxels = 0, first_nan = 0;
  for (std::size_t k = 0; k < fitted.size(); ++k) {
    bool bad = false;
    for (std::size_t i = 0; i < samples; ++i) {
      const double c = series.values[i * voxels + fitted[k]];
      bad |= !std::isfinite(c);
      curves[k * samples + i] = c;
    }
    if (bad && nan_voxels++ == 0) first_nan = fitted[k];
  }
  if (nan_voxels > 0) {
    const std::size_t nx = series.shape[0], ny = series.shape[1];
    throw ToolError("input series has NaN or infinite values in " + std::to_string(nan_voxels) +
                    " masked voxel(s), first at (x, y, z) = (" + std::to_string(first_nan % nx) + ", " +
                    std::to_string(first_nan / nx % ny) + ", " + std::to_string(first_nan / (nx * ny)) +
                    "); mask them out or fix the data");
  }

  ToolSummary summary;
  const bool gpu_available = perfusion::visible_gpu_count() > 0;
  if (options.backend == "cuda" && !gpu_available)
    throw ToolError(!built_with_cuda()
                        ? "--backend cuda: this build has no CUDA"
                        : "--backend cuda: no GPU visible");
  const bool use_gpu = options.backend == "cuda" || (options.backend == "auto" && gpu_available);
  summary.backend = use_gpu ? "cuda" : "cpu";
  log << "sonopipe-perfusion: " << fitted.size() << " of " << voxels << " voxels, " << samples
      << " samples every " << problem.dt_s() << " s, " << perfusion::convolution_name(options.fit.convolution)
      << " convolution, backend " << summary.backend << "\n";

  std::vector<perfusion::VoxelFit> fits(fitted.size());
  ProgressBar bar(log, options.progress);
  auto progress = [&](std::size_t done, std::size_t total) { bar.update(done, total); };
  const auto start = Clock::now();
  if (use_gpu) {
    perfusion::GpuOptions gpu;
    if (options.device >= 0) gpu.devices = {options.device};
    gpu.layout = options.gpu_layout == "block" ? perfusion::GpuLayout::block_per_voxel
                                               : perfusion::GpuLayout::thread_per_voxel;
    try {
      perfusion::fit_voxels_gpu(problem, options.fit, curves.data(), fitted.size(), fits.data(), gpu, progress);
    } catch (const std::invalid_argument& e) {
      throw ToolError(std::string("--device: ") + e.what());
    }
  } else {
    ThreadPool pool(options.threads);
    perfusion::fit_voxels_cpu(problem, options.fit, curves.data(), fitted.size(), fits.data(), pool, progress);
  }
  summary.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (fitted.empty()) bar.update(0, 0);

  // One map per quantity, zero outside the mask.
  const auto& names = map_names();
  std::vector<std::vector<double>> maps(names.size(), std::vector<double>(voxels, 0.0));
  for (std::size_t k = 0; k < fitted.size(); ++k) {
    const auto& f = fits[k];
    for (int j = 0; j < perfusion::kParameterCount; ++j) maps[j][fitted[k]] = f.parameters[j];
    maps[5][fitted[k]] = f.cost;
    maps[6][fitted[k]] = f.iterations;
    maps[7][fitted[k]] = f.stop == 0 ? 1 : 0;
    summary.voxels_converged += f.stop == 0;
  }
  summary.voxels_fitted = fitted.size();
  for (std::size_t m = 0; m < names.size(); ++m) {
    const std::string path = options.output_prefix + names[m] + ".nii.gz";
    nifti::write_map(series, path, maps[m], m >= 6 ? nifti::MapType::int32 : nifti::MapType::float64);
    summary.written.push_back(path);
  }
  log << "sonopipe-perfusion: fitted " << summary.voxels_fitted << " voxels in " << summary.seconds
      << " s (" << summary.voxels_converged << " converged within the cost tolerance), wrote "
      << summary.written.size() << " maps to " << options.output_prefix << "*.nii.gz\n";
  return summary;
}

}  // namespace sonopipe::perfusion_tool
