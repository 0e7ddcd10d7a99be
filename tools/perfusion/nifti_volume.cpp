#include "tools/perfusion/nifti_volume.h"

#include <nifti2_io.h>

#include <cmath>
#include <cstring>
#include <filesystem>

namespace sonopipe::nifti {
namespace {

std::shared_ptr<nifti_image> own(nifti_image* image) {
  return std::shared_ptr<nifti_image>(image, [](nifti_image* p) { nifti_image_free(p); });
}

template <class T>
void convert(const void* data, std::size_t count, double slope, double inter, std::vector<double>& out) {
  const T* typed = static_cast<const T*>(data);
  out.resize(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<double>(typed[i]) * slope + inter;
}

double time_unit_to_seconds(int units) {
  switch (XYZT_TO_TIME(units)) {
    case NIFTI_UNITS_MSEC: return 1e-3;
    case NIFTI_UNITS_USEC: return 1e-6;
    default: return 1.0;  // NIFTI_UNITS_SEC or unset: seconds
  }
}

int nifti_datatype(MapType type) {
  switch (type) {
    case MapType::float64: return NIFTI_TYPE_FLOAT64;
    case MapType::int32: return NIFTI_TYPE_INT32;
    default: return NIFTI_TYPE_FLOAT32;
  }
}

void fill(nifti_image* image, const std::vector<double>& values, MapType type) {
  if (static_cast<std::size_t>(image->nvox) != values.size())
    throw NiftiError("internal: map has " + std::to_string(values.size()) + " values for " +
                     std::to_string(image->nvox) + " voxels");
  for (std::size_t i = 0; i < values.size(); ++i) {
    switch (type) {
      case MapType::float64: static_cast<double*>(image->data)[i] = values[i]; break;
      case MapType::float32: static_cast<float*>(image->data)[i] = static_cast<float>(values[i]); break;
      case MapType::int32:
        static_cast<std::int32_t*>(image->data)[i] =
            std::isfinite(values[i]) ? static_cast<std::int32_t>(values[i]) : 0;
        break;
    }
  }
}

void write(nifti_image* image, const std::string& path) {
  if (nifti_set_filenames(image, path.c_str(), 0, 1) != 0)
    throw NiftiError(path + ": not a NIfTI file name (use .nii or .nii.gz)");
  image->nifti_type = NIFTI_FTYPE_NIFTI1_1;  // single-file NIfTI-1: what most viewers read
  nifti_image_write(image);
  if (!std::filesystem::exists(path)) throw NiftiError(path + ": could not be written");
}

// The image data as stored. libnifti's own loader replaces NaN and infinite floats by 0
// (nifti_read_buffer), which would hide bad data from the NaN check: read the bytes through znz.
std::vector<unsigned char> read_raw_data(const std::string& path, const nifti_image& image) {
  char* data_name = nifti_findimgname(path.c_str(), image.nifti_type);
  if (!data_name) throw NiftiError(path + ": image data file not found");
  const std::string data_path = data_name;
  free(data_name);
  znzFile file = znzopen(data_path.c_str(), "rb", nifti_is_gzfile(data_path.c_str()));
  if (znz_isnull(file)) throw NiftiError(data_path + ": cannot be opened");
  const std::size_t bytes = static_cast<std::size_t>(image.nvox) * static_cast<std::size_t>(image.nbyper);
  std::vector<unsigned char> raw(bytes);
  const bool ok = znzseek(file, image.iname_offset, SEEK_SET) >= 0 &&
                  znzread(raw.data(), 1, bytes, file) == bytes;
  znzclose(file);
  if (!ok) throw NiftiError(path + ": image data is truncated");
  if (image.byteorder != nifti_short_order() && image.swapsize > 1)
    nifti_swap_Nbytes(image.nvox, image.swapsize, raw.data());
  return raw;
}

}  // namespace

Volume read_volume(const std::string& path) {
  if (!std::filesystem::exists(path)) throw NiftiError(path + ": no such file");
  nifti_set_debug_level(0);
  auto image = own(nifti_image_read(path.c_str(), 0));  // header only
  if (!image) throw NiftiError(path + ": not a readable NIfTI image");
  if (image->ndim > 4)
    throw NiftiError(path + ": " + std::to_string(image->ndim) + " dimensions, expected at most 4");
  Volume v;
  for (int d = 0; d < 4; ++d) {
    v.shape[d] = d < image->ndim ? std::max<std::int64_t>(1, image->dim[d + 1]) : 1;
    v.spacing[d] = d < image->ndim ? image->pixdim[d + 1] : 0.0;
  }
  const double to_s = time_unit_to_seconds(image->time_units);
  v.spacing[3] *= to_s;
  v.time_offset_s = image->toffset * to_s;
  const double slope = image->scl_slope != 0 && std::isfinite(image->scl_slope) ? image->scl_slope : 1.0;
  const double inter = slope != 1.0 || image->scl_inter != 0 ? image->scl_inter : 0.0;
  const std::size_t count = static_cast<std::size_t>(image->nvox);
  const std::vector<unsigned char> raw = read_raw_data(path, *image);
  const void* data = raw.data();
  switch (image->datatype) {
    case NIFTI_TYPE_UINT8: convert<std::uint8_t>(data, count, slope, inter, v.values); break;
    case NIFTI_TYPE_INT8: convert<std::int8_t>(data, count, slope, inter, v.values); break;
    case NIFTI_TYPE_INT16: convert<std::int16_t>(data, count, slope, inter, v.values); break;
    case NIFTI_TYPE_UINT16: convert<std::uint16_t>(data, count, slope, inter, v.values); break;
    case NIFTI_TYPE_INT32: convert<std::int32_t>(data, count, slope, inter, v.values); break;
    case NIFTI_TYPE_UINT32: convert<std::uint32_t>(data, count, slope, inter, v.values); break;
    case NIFTI_TYPE_FLOAT32: convert<float>(data, count, slope, inter, v.values); break;
    case NIFTI_TYPE_FLOAT64: convert<double>(data, count, slope, inter, v.values); break;
    default:
      throw NiftiError(path + ": unsupported NIfTI data type " + nifti_datatype_string(image->datatype));
  }
  v.header = image;  // header only: the maps reuse its geometry
  return v;
}

void write_map(const Volume& like, const std::string& path, const std::vector<double>& values,
               MapType type) {
  nifti_image* copy = nifti_copy_nim_info(static_cast<const nifti_image*>(like.header.get()));
  if (!copy) throw NiftiError(path + ": could not copy the input header");
  auto image = own(copy);
  image->ndim = image->dim[0] = 3;
  image->nt = image->dim[4] = 1;
  image->nu = image->nv = image->nw = image->dim[5] = image->dim[6] = image->dim[7] = 1;
  image->nvox = like.voxels();
  image->datatype = nifti_datatype(type);
  nifti_datatype_sizes(image->datatype, &image->nbyper, &image->swapsize);
  image->scl_slope = 1.0;
  image->scl_inter = 0.0;
  image->cal_min = image->cal_max = 0;
  image->data = calloc(static_cast<std::size_t>(image->nvox), static_cast<std::size_t>(image->nbyper));
  fill(image.get(), values, type);
  write(image.get(), path);
}

void write_new_volume(const std::string& path, std::array<std::int64_t, 4> shape,
                      std::array<double, 4> spacing, const std::vector<double>& values, MapType type) {
  const int ndim = shape[3] > 1 ? 4 : 3;
  const std::int64_t dims[8] = {ndim, shape[0], shape[1], shape[2], shape[3], 1, 1, 1};
  auto image = own(nifti_make_new_nim(dims, nifti_datatype(type), 1));
  if (!image) throw NiftiError(path + ": could not create the image");
  for (int d = 0; d < 4; ++d) image->pixdim[d + 1] = spacing[d];
  image->dx = spacing[0];
  image->dy = spacing[1];
  image->dz = spacing[2];
  image->dt = spacing[3];
  image->xyz_units = NIFTI_UNITS_MM;
  image->time_units = NIFTI_UNITS_SEC;
  fill(image.get(), values, type);
  write(image.get(), path);
}

}  // namespace sonopipe::nifti
