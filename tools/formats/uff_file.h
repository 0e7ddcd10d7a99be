// Reading the values of a USTB UFF file (HDF5 written by MATLAB): every array's dimensions are
// reversed (MATLAB's [samples x channels x waves x frames] reads as [frames, waves, channels,
// samples]) and trailing MATLAB singletons are missing (so leading ones here), scalars are 1x1,
// complex arrays are a group {real, imag}, objects are groups with a `class` attribute
// ("uff.channel_data", ...), arrays of objects are groups of `<name>_0001`, `<name>_0002`, ...
// Every problem is a FormatError "<file>: <object>: <what was expected>".
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "sdk/tensor.h"
#include "tools/common/hdf5_util.h"
#include "tools/formats/acquisition_reader.h"

namespace sonopipe::formats::uff {

class UffFile {
 public:
  explicit UffFile(const std::string& path);  // FormatError when it is no readable HDF5 file

  const std::string& path() const { return path_; }
  hid_t id() const { return file_.get(); }
  [[noreturn]] void fail(const std::string& object, const std::string& reason) const;

  bool exists(const std::string& object) const;
  bool is_group(const std::string& object) const;
  std::string class_of(const std::string& object) const;  // "" without a `class` attribute
  std::string string_attribute(const std::string& object, const std::string& name) const;  // "" when absent
  std::vector<std::string> attribute_names(const std::string& object) const;
  std::vector<double> double_list_attribute(const std::string& object, const std::string& name) const;
  std::vector<std::string> children(const std::string& group) const;  // sorted by name

  // A numeric dataset's values as double, in HDF5 (C) order; `dims` receives its HDF5 dimensions.
  std::vector<double> values(const std::string& dataset, std::vector<hsize_t>* dims = nullptr) const;
  double scalar(const std::string& dataset) const;  // exactly one element (MATLAB writes 1x1)
  std::optional<double> optional_scalar(const std::string& dataset) const;
  // A MATLAB char array (UTF-16 codes in a numeric dataset) or a cell of them ("; "-joined).
  std::string text(const std::string& object) const;

 private:
  std::string path_;
  recording::hdf5::Id file_;
};

// The `data` of a channel_data or beamformed_data object (a real dataset or a complex group),
// read a few frames at a time by hyperslab.
class DataArray {
 public:
  // real_only: read only `real` of a complex group (PICMUS RF files store an all-zero `imag`).
  DataArray(const UffFile& file, const std::string& path, bool real_only = false);

  bool is_complex() const { return complex_; }
  // MATLAB's 4 dimensions reversed, leading singletons restored: [frame, wave, channel, sample or pixel].
  const std::array<hsize_t, 4>& dims() const { return dims_; }
  // Element type of the frames read: float32/float64/int16 for real data; complex64 for complex
  // float32 (exact) or float64 (narrowed, see narrowed()); int16 pairs (I, Q) for complex int16.
  DType element_type() const { return element_type_; }
  bool narrowed() const { return narrowed_; }
  std::size_t element_bytes() const;  // bytes per element of the read frames (an int16 I/Q pair: 4)
  const std::string& stored_type() const { return stored_type_; }  // "float32", "float64", "int16"

  // Frames [first, first + count) as one contiguous C-ordered block [count, wave, channel, sample].
  std::vector<std::byte> read(hsize_t first, hsize_t count) const;

 private:
  const UffFile& file_;
  std::string path_;
  bool complex_ = false;
  std::size_t rank_ = 0;
  std::array<hsize_t, 4> dims_{1, 1, 1, 1};
  DType element_type_ = DType::float32;
  bool narrowed_ = false;
  std::string stored_type_;

  void read_part(const std::string& dataset, hsize_t first, hsize_t count, hid_t memory_type, void* out) const;
};

}  // namespace sonopipe::formats::uff
