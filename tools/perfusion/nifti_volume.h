// NIfTI volumes as the perfusion tools use them: values converted to double (scl_slope/inter
// applied), the geometry kept so that maps are written with the input's header.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace sonopipe::nifti {

struct NiftiError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Volume {
  std::array<std::int64_t, 4> shape{1, 1, 1, 1};  // nx, ny, nz, nt (1 when absent)
  std::array<double, 4> spacing{0, 0, 0, 0};       // pixdim[1..4]; spacing[3] = dt in s (0 if unset)
  double time_offset_s = 0;                        // toffset in s
  std::vector<double> values;                      // x fastest, then y, z, t (NIfTI order)
  std::shared_ptr<void> header;  // the nifti_image header (an anonymous struct in nifti2_io.h)

  std::int64_t voxels() const { return shape[0] * shape[1] * shape[2]; }
  std::int64_t samples() const { return shape[3]; }
};

// Reads a .nii / .nii.gz (NIfTI-1 or -2). Throws NiftiError naming the file and the reason
// (missing, unreadable, more than 4 dimensions, unsupported data type).
Volume read_volume(const std::string& path);

enum class MapType { float32, float64, int32 };

// A 3-D map (voxels() values, NIfTI order) with the geometry of `like` (a read Volume).
void write_map(const Volume& like, const std::string& path, const std::vector<double>& values,
               MapType type);

// A new 3-D or 4-D volume with isotropic spacing (simulator output).
void write_new_volume(const std::string& path, std::array<std::int64_t, 4> shape,
                      std::array<double, 4> spacing, const std::vector<double>& values,
                      MapType type);

}  // namespace sonopipe::nifti
