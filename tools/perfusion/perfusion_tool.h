// sonopipe-perfusion's work, callable from tests: read a 4-D DCE series, an optional mask and the
// arterial and portal input curves; fit every masked voxel (CPU or CUDA); write one NIfTI map per
// parameter plus cost and iteration maps with the input's geometry.
//
// Outputs, under <output_prefix>: k_a, k_p, k_l (ml/100g/min), tau_a, tau_p (s), cost (mM^2),
// iterations (int32), converged (uint8 as int32: 1 when the cost tolerance stopped the search).
// Voxels outside the mask are 0 in every map.
#pragma once

#include <functional>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

#include "stages/perfusion/perfusion_fit/perfusion_fit_params.h"
#include "stages/perfusion/perfusion_fit/perfusion_fit_gpu.h"

namespace sonopipe::perfusion_tool {

// One-line reason for refusing the inputs or options.
struct ToolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ToolOptions {
  std::string input;           // 4-D NIfTI concentration series (mM)
  std::string mask;            // optional 3-D NIfTI; voxels != 0 are fitted
  std::string arterial;        // CSV time_s,value
  std::string portal;          // CSV time_s,value
  std::string output_prefix;   // maps go to <prefix>k_a.nii.gz, ...
  std::string backend = "auto";  // auto | cpu | cuda
  int device = -1;               // CUDA device, -1 = all visible
  std::string gpu_layout = "thread";  // thread | block (block: fft only)
  int threads = 0;               // CPU threads, 0 = all
  perfusion::FitSettings fit;
  bool progress = true;
};

struct ToolSummary {
  std::size_t voxels_fitted = 0;
  std::size_t voxels_converged = 0;
  std::string backend;
  double seconds = 0;
  std::vector<std::string> written;  // map paths
};

inline const std::vector<std::string>& map_names() {
  static const std::vector<std::string> names = {"k_a", "k_p", "k_l", "tau_a", "tau_p",
                                                 "cost", "iterations", "converged"};
  return names;
}

// Throws ToolError (bad inputs/options) or nifti::NiftiError (unreadable files). Progress and
// warnings go to `log`.
ToolSummary run(const ToolOptions& options, std::ostream& log);

}  // namespace sonopipe::perfusion_tool
