// sonopipe-sim perfusion: a simulated DCE liver series with ground truth (wang2012 section 2.4.1):
// Parker arterial input, portal input = arterial delayed and dispersed, tissue curves from known
// parameters (optionally varied per voxel), Gaussian noise at a CNR. Writes into --output:
//   dce.nii.gz               4-D series [nx, ny, nz, N_t], mM, pixdim[4] = dt (s)
//   arterial.csv, portal.csv time_s,value (mM), the (noisy) inputs the fit should use
//   mask.nii.gz              ellipsoid covering the central part of the volume
//   truth_<param>.nii.gz     per-voxel truth (k_* ml/100g/min, tau_* s)
//   truth.csv                the settings and noise levels used
// and with --recording, an HDF5 recording (tools/common/recording.h) for sonopipe-replay: stream 0
// holds the volume as DCE batches (kind dce, float64 [voxel, time], vectors time_s,
// arterial_input, portal_input: what the perfusion_fit stage takes), /truth/<param> [frame, voxel].
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>

#include "stages/perfusion/perfusion_fit/perfusion_fit.h"
#include "stages/perfusion/perfusion_fit/perfusion_fit_params.h"
#include "tools/common/recording.h"
#include "tools/perfusion/curve_csv.h"
#include "tools/perfusion/nifti_volume.h"
#include "tools/sim/commands.h"
#include "tools/sim/perfusion_sim.h"

namespace sonopipe::sim {
namespace {

struct PerfusionCommandOptions {
  std::string output = "perfusion_sim";
  std::vector<std::int64_t> shape = {8, 8, 4};
  std::vector<double> truth = {20, 100, 400, 1, 2};
  std::string model = "recursive";
  double vary = 0.0;
  std::string phantom = "uniform";
  std::uint64_t seed = 0;
  std::string recording;        // optional HDF5 recording path
  std::size_t batch_voxels = 0; // voxels per DCE frame in the recording (0: all)
  PerfusionSimSettings settings;
};

void write_recording(const PerfusionCommandOptions& o, const PerfusionSimulation& sim,
                     const std::vector<double>& truths, std::uint64_t seed) {
  const std::size_t n = sim.time_s.size();
  const std::size_t voxels = sim.tissue.size() / n;
  const std::size_t batch = o.batch_voxels ? o.batch_voxels : voxels;
  if (voxels % batch != 0)
    throw std::invalid_argument("--batch-voxels: " + std::to_string(batch) + " does not divide the " +
                                std::to_string(voxels) + " voxels (all frames of a stream share one shape)");
  recording::Writer writer(o.recording);
  writer.set_attribute("created_by", "sonopipe-sim perfusion");
  writer.set_attribute("seed", std::to_string(seed));
  writer.set_attribute("model", o.model);
  const std::size_t frames = voxels / batch;
  for (std::size_t f = 0; f < frames; ++f) {
    FrameMeta meta;
    meta.stream_id = 0;
    meta.sequence = f;
    meta.acquisition_time_ns = static_cast<std::int64_t>(f) * 1000000;
    meta.kind = FrameKind::dce;
    meta.payload.dtype = DType::float64;
    meta.payload.unit = "mM";
    meta.payload.axes = {{"voxel", static_cast<std::int64_t>(batch)},
                         {"time", static_cast<std::int64_t>(n), sim.time_s[1] - sim.time_s[0], "s"}};
    meta.vectors[PerfusionFitStage::kTimeVector] = sim.time_s;
    meta.vectors[PerfusionFitStage::kArterialVector] = sim.arterial;
    meta.vectors[PerfusionFitStage::kPortalVector] = sim.portal;
    // Where the batch's voxels lie, for displays: rows x columns of a slice (voxels in NIfTI
    // order, x fastest) and, for a single slice, each voxel's flat index in it.
    meta.attributes["slice_shape"] = std::to_string(o.shape[1]) + "x" + std::to_string(o.shape[0]);
    if (o.shape[2] == 1) {
      std::vector<double>& voxel_index = meta.vectors["voxel_index"];
      for (std::size_t i = 0; i < batch; ++i) voxel_index.push_back(static_cast<double>(f * batch + i));
    }
    writer.append_frame(meta, sim.tissue.data() + f * batch * n, batch * n * sizeof(double));
  }
  for (int j = 0; j < perfusion::kParameterCount; ++j) {
    TensorSpec spec;
    spec.dtype = DType::float64;
    spec.unit = perfusion::kParameterUnits[j];
    spec.axes = {{"frame", static_cast<std::int64_t>(frames)}, {"voxel", static_cast<std::int64_t>(batch)}};
    std::vector<double> values(voxels);
    for (std::size_t v = 0; v < voxels; ++v) values[v] = truths[v * perfusion::kParameterCount + j];
    writer.write_truth(perfusion::kParameterNames[j], spec, values, 0);
  }
  writer.flush();
}

void run_perfusion(const PerfusionCommandOptions& o) {
  if (o.shape.size() != 3 || o.shape[0] < 1 || o.shape[1] < 1 || o.shape[2] < 1)
    throw std::invalid_argument("--shape: expected nx,ny,nz >= 1");
  if (o.truth.size() != 5) throw std::invalid_argument("--truth: expected k_a,k_p,k_l,tau_a,tau_p");
  if (o.settings.samples < 3) throw std::invalid_argument("--samples: expected >= 3");
  if (!(o.vary >= 0 && o.vary < 1)) throw std::invalid_argument("--vary: expected 0 <= vary < 1");
  PerfusionSimSettings s = o.settings;
  for (int j = 0; j < 5; ++j) s.truth[j] = o.truth[j];
  s.tissue_model = perfusion::parse_convolution(o.model);
  const std::uint64_t seed = resolve_seed(o.seed);
  Rng rng(seed);
  const std::size_t voxels = static_cast<std::size_t>(o.shape[0] * o.shape[1] * o.shape[2]);
  const std::size_t n = static_cast<std::size_t>(s.samples);
  if (o.phantom != "uniform" && o.phantom != "territories")
    throw std::invalid_argument("--phantom: expected uniform or territories");
  std::vector<double> truths;
  const PerfusionSimulation sim =
      o.phantom == "territories"
          ? simulate_voxels(s, truths = territory_truths(s, o.shape[0], o.shape[1], o.shape[2]), rng)
          : simulate_varied(s, voxels, o.vary, rng, truths);

  std::filesystem::create_directories(o.output);
  const std::string dir = o.output + "/";
  const double dt = sim.time_s[1] - sim.time_s[0];
  // NIfTI order: x fastest, time slowest.
  std::vector<double> series(voxels * n);
  for (std::size_t v = 0; v < voxels; ++v)
    for (std::size_t i = 0; i < n; ++i) series[i * voxels + v] = sim.tissue[v * n + i];
  const std::array<std::int64_t, 4> shape4 = {o.shape[0], o.shape[1], o.shape[2], static_cast<std::int64_t>(n)};
  const std::array<std::int64_t, 4> shape3 = {o.shape[0], o.shape[1], o.shape[2], 1};
  nifti::write_new_volume(dir + "dce.nii.gz", shape4, {2.0, 2.0, 2.0, dt}, series, nifti::MapType::float64);
  nifti::write_curve_csv(dir + "arterial.csv", sim.time_s, sim.arterial, "arterial_mM");
  nifti::write_curve_csv(dir + "portal.csv", sim.time_s, sim.portal, "portal_mM");
  std::vector<double> mask(voxels);
  for (std::int64_t z = 0; z < o.shape[2]; ++z)
    for (std::int64_t y = 0; y < o.shape[1]; ++y)
      for (std::int64_t x = 0; x < o.shape[0]; ++x) {
        auto r = [](std::int64_t i, std::int64_t size) { return (i + 0.5 - size / 2.0) / (size / 2.0); };
        const double d = r(x, o.shape[0]) * r(x, o.shape[0]) + r(y, o.shape[1]) * r(y, o.shape[1]) +
                         r(z, o.shape[2]) * r(z, o.shape[2]);
        mask[(z * o.shape[1] + y) * o.shape[0] + x] = d <= 1.0 ? 1.0 : 0.0;
      }
  nifti::write_new_volume(dir + "mask.nii.gz", shape3, {2.0, 2.0, 2.0, 0.0}, mask, nifti::MapType::int32);
  for (int j = 0; j < perfusion::kParameterCount; ++j) {
    std::vector<double> map(voxels);
    for (std::size_t v = 0; v < voxels; ++v) map[v] = truths[v * 5 + j];
    nifti::write_new_volume(dir + "truth_" + perfusion::kParameterNames[j] + ".nii.gz", shape3,
                            {2.0, 2.0, 2.0, 0.0}, map, nifti::MapType::float64);
  }
  std::ofstream truth(dir + "truth.csv");
  truth << std::setprecision(17) << "key,value\n"
        << "seed," << seed << "\nsamples," << n << "\ndt_s," << dt << "\nvoxels," << voxels
        << "\ntissue_model," << o.model << "\nvary," << o.vary << "\ncnr_tissue," << s.cnr_tissue
        << "\ncnr_arterial," << s.cnr_arterial << "\ncnr_portal," << s.cnr_portal
        << "\ntissue_noise_sd_mM," << sim.tissue_noise_sd << "\nbolus_arrival_s," << s.bolus_arrival_s
        << "\nportal_delay_s," << s.portal_delay_s << "\nportal_dispersion_s," << s.portal_dispersion_s;
  for (int j = 0; j < 5; ++j) truth << "\n" << perfusion::kParameterNames[j] << "," << s.truth[j];
  truth << "\n";
  if (!o.recording.empty()) write_recording(o, sim, truths, seed);
  std::cout << "sonopipe-sim perfusion: " << voxels << " voxels x " << n << " samples (dt " << dt
            << " s), seed " << seed << ", written to " << o.output << "/\n";
}

}  // namespace

void add_perfusion_command(CLI::App& app) {
  auto o = std::make_shared<PerfusionCommandOptions>();
  CLI::App* cmd = app.add_subcommand("perfusion", "DCE liver series with ground truth (wang2012 model)");
  cmd->add_option("--output,-o", o->output, "output folder")->capture_default_str();
  cmd->add_option("--shape", o->shape, "nx,ny,nz")->delimiter(',')->capture_default_str();
  cmd->add_option("--samples", o->settings.samples, "N_t (wang2012: 32..448)")->capture_default_str();
  cmd->add_option("--duration", o->settings.duration_s, "acquisition length in s (dt = duration / N_t)")
      ->capture_default_str();
  cmd->add_option("--truth", o->truth, "k_a,k_p,k_l (ml/100g/min),tau_a,tau_p (s)")->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--vary", o->vary, "per-voxel truth factor drawn from [1-vary, 1+vary]")->capture_default_str();
  cmd->add_option("--phantom", o->phantom,
                  "uniform (--truth, --vary) | territories (normal liver, arterial lesion, portal-occluded segment)")
      ->capture_default_str();
  cmd->add_option("--model", o->model, "tissue curves by the recursive or fft scheme")->capture_default_str();
  cmd->add_option("--cnr", o->settings.cnr_tissue, "tissue CNR (peak / noise SD); 0 = noise-free")
      ->capture_default_str();
  cmd->add_option("--cnr-arterial", o->settings.cnr_arterial, "arterial input CNR; 0 = noise-free")
      ->capture_default_str();
  cmd->add_option("--cnr-portal", o->settings.cnr_portal, "portal input CNR; 0 = noise-free")->capture_default_str();
  cmd->add_option("--bolus-arrival", o->settings.bolus_arrival_s, "s")->capture_default_str();
  cmd->add_option("--portal-delay", o->settings.portal_delay_s, "s")->capture_default_str();
  cmd->add_option("--portal-dispersion", o->settings.portal_dispersion_s, "s")->capture_default_str();
  cmd->add_option("--recording", o->recording, "also write an HDF5 recording of DCE batches for sonopipe-replay");
  cmd->add_option("--batch-voxels", o->batch_voxels, "voxels per DCE frame in the recording (0: all in one)");
  cmd->add_option("--seed", o->seed, "noise seed (0: from the clock; recorded in truth.csv)");
  cmd->callback([o] { run_perfusion(*o); });
}

}  // namespace sonopipe::sim
