// sonopipe-perfusion: voxelwise dual-input single-compartment perfusion maps (wang2012) from a
// 4-D NIfTI concentration series and arterial / portal input curves (CSV time_s,value).
#include <CLI/CLI.hpp>

#include <iostream>

#include "tools/perfusion/nifti_volume.h"
#include "tools/perfusion/perfusion_tool.h"
#include "wire/version.h"

int main(int argc, char** argv) {
  using namespace sonopipe;
  perfusion_tool::ToolOptions o;
  std::string convolution = "recursive";
  std::vector<double> start(o.fit.start.begin(), o.fit.start.end());
  bool quiet = false;
  std::string initialiser = "fixed";
  CLI::App app{"sonopipe-perfusion: voxelwise liver perfusion maps (k_a, k_p, k_l in ml/100g/min, "
               "tau_a, tau_p in s) by Nelder-Mead, as wang2012"};
  app.set_version_flag("--version", version_line("sonopipe-perfusion"));
  app.add_option("--input,-i", o.input, "4-D NIfTI concentration series (mM)")->required();
  app.add_option("--arterial,-a", o.arterial, "arterial input CSV: time_s,value")->required();
  app.add_option("--portal,-p", o.portal, "portal-venous input CSV: time_s,value")->required();
  app.add_option("--output,-o", o.output_prefix, "output prefix; maps go to <prefix>k_a.nii.gz, ...")->required();
  app.add_option("--mask,-m", o.mask, "3-D NIfTI mask: voxels != 0 are fitted");
  app.add_option("--backend", o.backend, "auto | cpu | cuda")->capture_default_str();
  app.add_option("--device", o.device, "CUDA device (-1: all visible GPUs)")->capture_default_str();
  app.add_option("--gpu-layout", o.gpu_layout, "thread (per voxel) | block (per voxel, wang2012; fft only)")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads (0: all)")->capture_default_str();
  app.add_option("--convolution", convolution, "recursive | fft")->capture_default_str();
  app.add_option("--max-iter", o.fit.optimiser.max_iterations, "Nelder-Mead iterations (wang2012: 600)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--max-evaluations", o.fit.optimiser.max_evaluations, "cost evaluations")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--tol", o.fit.optimiser.cost_tolerance, "stop when max - min simplex cost <= tol (mM^2)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--xtol", o.fit.optimiser.parameter_tolerance, "also require max |x_i - x_0| <= xtol (SI)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--start", start, "k_a,k_p,k_l (ml/100g/min),tau_a,tau_p (s)")->delimiter(',')
      ->expected(5)->capture_default_str();
  app.add_option("--initialiser", initialiser, "fixed (every voxel from --start, wang2012) | linear "
                 "(per-voxel linear least-squares start)")->capture_default_str()
      ->check(CLI::IsMember({"fixed", "linear"}));
  app.add_flag("--quiet,-q", quiet, "no progress bar");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    o.fit.convolution = perfusion::parse_convolution(convolution);
    std::copy(start.begin(), start.end(), o.fit.start.begin());
    o.progress = !quiet;
    o.fit.linear_start = initialiser == "linear";
    perfusion_tool::run(o, std::cerr);
  } catch (const std::exception& e) {
    std::cerr << "sonopipe-perfusion: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
