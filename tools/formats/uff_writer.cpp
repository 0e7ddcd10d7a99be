#include "tools/formats/uff_writer.h"

#include <cmath>
#include <stdexcept>

#include "tools/common/hdf5_util.h"
#include "tools/formats/uff_names.h"

namespace sonopipe::formats {

namespace {

namespace hdf5 = recording::hdf5;
using hdf5::check;
using hdf5::Id;

// MATLAB's h5writeatt stores text as a fixed-length string; USTB's reader switches on it.
void write_fixed_string(hid_t object, const std::string& name, const std::string& value) {
  Id type(check(H5Tcopy(H5T_C_S1), "H5Tcopy"), H5Tclose);
  check(H5Tset_size(type.get(), value.empty() ? 1 : value.size()), "H5Tset_size");
  check(H5Tset_strpad(type.get(), H5T_STR_NULLTERM), "H5Tset_strpad");
  Id space(check(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
  if (H5Aexists(object, name.c_str()) > 0) H5Adelete(object, name.c_str());
  Id attribute(check(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), name),
               H5Aclose);
  check(H5Awrite(attribute.get(), type.get(), value.c_str()), name);
}

void write_number_attribute(hid_t object, const std::string& name, double value) {
  hdf5::write_double_list_attribute(object, name, {value});
}

// A UFF object: a group with class, name, size [1 1] and array 0 (an array of objects: array 1).
Id object_group(hid_t parent, const std::string& name, const std::string& class_name, std::size_t count = 1) {
  Id group(check(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create " + name), H5Gclose);
  write_fixed_string(group.get(), "class", class_name);
  write_fixed_string(group.get(), "name", name);
  hdf5::write_double_list_attribute(group.get(), "size", {1.0, static_cast<double>(count)});
  write_number_attribute(group.get(), "array", count > 1 ? 1.0 : 0.0);
  return group;
}

// A numeric property with MATLAB size [rows x columns], stored (columns, rows); values in MATLAB
// (column-major) order, i.e. C order of the stored array.
void number(hid_t parent, const std::string& name, const std::vector<double>& values, hsize_t rows, hsize_t columns,
            const std::string& class_name = "double") {
  const hsize_t dims[2] = {columns, rows};
  Id space(check(H5Screate_simple(2, dims, nullptr), "H5Screate_simple"), H5Sclose);
  Id dataset(check(H5Dcreate2(parent, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                   "create " + name),
             H5Dclose);
  check(H5Dwrite(dataset.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), "write " + name);
  write_fixed_string(dataset.get(), "class", class_name);
  write_fixed_string(dataset.get(), "name", name);
  write_number_attribute(dataset.get(), "complex", 0);
}

void scalar(hid_t parent, const std::string& name, double value, const std::string& class_name = "double") {
  number(parent, name, {value}, 1, 1, class_name);
}

void column(hid_t parent, const std::string& name, const std::vector<double>& values) {
  number(parent, name, values, values.size(), 1);
}

// A uff.point from Cartesian x, z (y = 0): distance, azimuth (atan2(x, z)), elevation.
void point(hid_t parent, const std::string& name, double x, double z) {
  Id group = object_group(parent, name, uff_names::point_class);
  scalar(group.get(), "distance", std::hypot(x, z));
  scalar(group.get(), "azimuth", std::atan2(x, z));
  scalar(group.get(), "elevation", 0.0);
}

double at(const std::vector<double>& values, std::size_t i) { return i < values.size() ? values[i] : 0.0; }

}  // namespace

struct UffWriter::Impl {
  std::string path;
  Id file, object, real, imag;
  Id memory_type;
  bool complex = false;
  std::vector<hsize_t> frame_dims;  // HDF5 dims of one frame, without the frame axis
  std::size_t frames = 0, written = 0;
  std::vector<std::int64_t> times;
  std::vector<std::uint64_t> sequences;

  void open(const std::string& path_, const std::string& object_name, const std::string& class_name) {
    hdf5::quiet_errors();
    path = path_;
    file = Id(check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "cannot create '" + path + "'"),
              H5Fclose);
    hdf5::write_string_attribute(file.get(), "version", uff_names::written_version);
    object = object_group(file.get(), object_name, class_name);
  }

  // `data` [frames, frame_dims...] (MATLAB [..., frames] reversed), one frame per chunk.
  void create_data(bool complex_, const std::vector<hsize_t>& dims, std::size_t frames_, bool double_precision) {
    complex = complex_;
    frame_dims = dims;
    frames = frames_;
    std::vector<hsize_t> all{frames};
    all.insert(all.end(), dims.begin(), dims.end());
    std::vector<hsize_t> chunk = all;
    chunk[0] = 1;
    Id space(check(H5Screate_simple(static_cast<int>(all.size()), all.data(), nullptr), "H5Screate_simple"), H5Sclose);
    Id properties(check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"), H5Pclose);
    if (frames > 0) check(H5Pset_chunk(properties.get(), static_cast<int>(chunk.size()), chunk.data()), "H5Pset_chunk");
    const hid_t file_type = double_precision ? H5T_IEEE_F64LE : H5T_IEEE_F32LE;
    const std::string class_name = double_precision ? "double" : "single";
    auto dataset = [&](hid_t parent, const char* name, int imaginary) {
      Id d(check(H5Dcreate2(parent, name, file_type, space.get(), H5P_DEFAULT, properties.get(), H5P_DEFAULT),
                 std::string("create ") + name),
           H5Dclose);
      write_fixed_string(d.get(), "class", class_name);
      write_fixed_string(d.get(), "name", "data");
      if (imaginary >= 0) write_number_attribute(d.get(), "imaginary", imaginary);
      return d;
    };
    if (complex) {
      Id group(check(H5Gcreate2(object.get(), "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create data"), H5Gclose);
      write_fixed_string(group.get(), "class", class_name);
      write_fixed_string(group.get(), "name", "data");
      write_number_attribute(group.get(), "complex", 1);
      real = dataset(group.get(), "real", 0);
      imag = dataset(group.get(), "imag", 1);
    } else {
      real = dataset(object.get(), "data", -1);
      write_number_attribute(real.get(), "complex", 0);
    }
  }

  std::size_t frame_size() const {
    std::size_t n = 1;
    for (hsize_t d : frame_dims) n *= d;
    return n;
  }

  void write(hid_t dataset, const std::vector<double>& values) {
    std::vector<hsize_t> start(frame_dims.size() + 1, 0), count{1};
    start[0] = written;
    count.insert(count.end(), frame_dims.begin(), frame_dims.end());
    Id file_space(check(H5Dget_space(dataset), "H5Dget_space"), H5Sclose);
    check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
          "H5Sselect_hyperslab");
    Id memory_space(check(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), "H5Screate_simple"),
                    H5Sclose);
    check(H5Dwrite(dataset, H5T_NATIVE_DOUBLE, memory_space.get(), file_space.get(), H5P_DEFAULT, values.data()),
          "write data of '" + path + "'");
  }
};

UffWriter::UffWriter(const std::string& path, const UffChannelLayout& layout, std::size_t frames, bool double_precision)
    : impl_(std::make_unique<Impl>()) {
  impl_->open(path, "channel_data", uff_names::channel_data_class);
  const hid_t data_object = impl_->object.get();
  scalar(data_object, "sampling_frequency", layout.sampling_frequency_hz);
  scalar(data_object, "initial_time", layout.initial_time_s);
  scalar(data_object, "sound_speed", layout.sound_speed_m_per_s);
  scalar(data_object, "modulation_frequency", layout.modulation_frequency_hz);
  {
    Id probe = object_group(data_object, "probe", uff_names::probe_class);
    // geometry [elements x 7]: x y z theta phi width height (MATLAB column-major)
    std::vector<double> geometry(layout.elements * 7, 0.0);
    for (std::size_t e = 0; e < layout.elements; ++e) {
      geometry[0 * layout.elements + e] = at(layout.element_x_m, e);
      geometry[1 * layout.elements + e] = at(layout.element_y_m, e);
      geometry[2 * layout.elements + e] = at(layout.element_z_m, e);
    }
    number(probe.get(), "geometry", geometry, layout.elements, 7);
  }
  {
    // USTB names the members sequence_0001, ...; one wave is the object itself.
    Id array =
        layout.transmits > 1 ? object_group(data_object, "sequence", uff_names::wave_class, layout.transmits) : Id();
    for (std::size_t t = 0; t < layout.transmits; ++t) {
      char member[32];
      std::snprintf(member, sizeof member, "sequence_%04zu", t + 1);
      Id wave = object_group(layout.transmits > 1 ? array.get() : data_object,
                             layout.transmits > 1 ? member : "sequence", uff_names::wave_class);
      const double wavefront = at(layout.wavefront, t);
      scalar(wave.get(), "wavefront", wavefront, uff_names::wavefront_class);
      if (wavefront == 0) {  // plane: the direction only (distance infinite, as USTB sets it)
        Id source = object_group(wave.get(), "source", uff_names::point_class);
        scalar(source.get(), "distance", INFINITY);
        scalar(source.get(), "azimuth", at(layout.angle_rad, t));
        scalar(source.get(), "elevation", 0.0);
      } else {
        point(wave.get(), "source", at(layout.source_x_m, t), at(layout.source_z_m, t));
      }
      point(wave.get(), "origin", 0.0, 0.0);
      scalar(wave.get(), "delay", at(layout.delay_s, t));
      scalar(wave.get(), "sound_speed", layout.sound_speed_m_per_s);
    }
  }
  if (layout.center_frequency_hz > 0) {
    Id pulse = object_group(data_object, "pulse", uff_names::pulse_class);
    scalar(pulse.get(), "center_frequency", layout.center_frequency_hz);
  }
  impl_->create_data(layout.complex, {layout.transmits, layout.elements, layout.samples}, frames, double_precision);
}

UffWriter::UffWriter(const std::string& path, const UffBeamformedLayout& layout, std::size_t frames,
                     bool double_precision)
    : impl_(std::make_unique<Impl>()) {
  impl_->open(path, "beamformed_data", uff_names::beamformed_data_class);
  const hid_t data_object = impl_->object.get();
  {
    Id scan =
        object_group(data_object, "scan", layout.sector ? uff_names::sector_scan_class : uff_names::linear_scan_class);
    column(scan.get(), layout.sector ? "azimuth_axis" : "x_axis", layout.lateral);
    column(scan.get(), layout.sector ? "depth_axis" : "z_axis", layout.axial);
    if (layout.sector) point(scan.get(), "origin", 0.0, 0.0);
  }
  if (layout.sampling_frequency_hz > 0) scalar(data_object, "sampling_frequency", layout.sampling_frequency_hz);
  scalar(data_object, "modulation_frequency", layout.modulation_frequency_hz);
  if (layout.center_frequency_hz > 0) {
    Id pulse = object_group(data_object, "pulse", uff_names::pulse_class);
    scalar(pulse.get(), "center_frequency", layout.center_frequency_hz);
  }
  // [pixels x 1 x 1 x frames] reversed
  impl_->create_data(layout.complex, {1, 1, layout.lateral.size() * layout.axial.size()}, frames, double_precision);
}

UffWriter::~UffWriter() = default;

std::size_t UffWriter::frame_size() const { return impl_->frame_size(); }

void UffWriter::append_frame(const std::vector<double>& real, const std::vector<double>& imag,
                             std::int64_t acquisition_time_ns, std::uint64_t sequence) {
  if (impl_->written >= impl_->frames)
    throw std::logic_error("UFF writer: more frames than the " + std::to_string(impl_->frames) + " announced");
  if (real.size() != frame_size() || (impl_->complex && imag.size() != frame_size()))
    throw std::logic_error("UFF writer: a frame of " + std::to_string(real.size()) + " values, the object holds " +
                           std::to_string(frame_size()));
  impl_->write(impl_->real.get(), real);
  if (impl_->complex) impl_->write(impl_->imag.get(), imag);
  impl_->times.push_back(acquisition_time_ns);
  impl_->sequences.push_back(sequence);
  ++impl_->written;
}

void UffWriter::finish(const UffSonopipeAttributes& extra) {
  const hid_t data_object = impl_->object.get();
  const std::string prefix = uff_names::sonopipe_prefix;
  write_number_attribute(data_object, prefix + uff_names::stream_id_key, extra.stream_id);
  write_number_attribute(data_object, prefix + uff_names::sound_speed_key, extra.sound_speed_m_per_s);
  write_number_attribute(data_object, prefix + uff_names::center_frequency_key, extra.center_frequency_hz);
  write_number_attribute(data_object, prefix + uff_names::ensemble_key, static_cast<double>(extra.ensemble));
  // ns since the epoch stay exact in a double up to 2^53 ns (104 days after 1970): stored as int64.
  {
    const hsize_t count = impl_->times.size();
    Id space(check(H5Screate_simple(1, &count, nullptr), "H5Screate_simple"), H5Sclose);
    auto write_int = [&](const std::string& name, hid_t file_type, hid_t memory_type, const void* values) {
      Id attribute(check(H5Acreate2(data_object, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), name),
                   H5Aclose);
      if (count > 0) check(H5Awrite(attribute.get(), memory_type, values), name);
    };
    write_int(prefix + uff_names::acquisition_time_key, H5T_STD_I64LE, H5T_NATIVE_INT64, impl_->times.data());
    write_int(prefix + uff_names::sequence_key, H5T_STD_U64LE, H5T_NATIVE_UINT64, impl_->sequences.data());
  }
  for (const auto& [name, values] : extra.vectors)
    hdf5::write_double_list_attribute(data_object, prefix + uff_names::vector_prefix + name, values);
  for (const auto& [key, value] : extra.attributes)
    hdf5::write_string_attribute(data_object, prefix + uff_names::attribute_prefix + key, value);
  if (impl_->written != impl_->frames)
    throw std::logic_error("UFF writer: " + std::to_string(impl_->written) + " frames written of " +
                           std::to_string(impl_->frames));
  impl_->real.reset();
  impl_->imag.reset();
  impl_->object.reset();
  check(H5Fflush(impl_->file.get(), H5F_SCOPE_GLOBAL), "flush '" + impl_->path + "'");
  impl_->file.reset();
}

}  // namespace sonopipe::formats
