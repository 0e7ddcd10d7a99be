// Thin C++ helpers over the HDF5 C API used by recording.cpp: owned ids, checked calls whose
// errors carry HDF5's own message, string and numeric attributes, and the element types of the
// recording format (complex64 as compound {r, i}, float16 as an IEEE binary16 float type).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sdk/tensor.h"

namespace sonopipe::recording::hdf5 {

// Owns an HDF5 id and closes it with the matching H5?close on destruction.
class Id {
 public:
  using Closer = herr_t (*)(hid_t);
  Id() = default;
  Id(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Id() { reset(); }
  Id(Id&& other) noexcept : id_(other.id_), closer_(other.closer_) { other.id_ = -1; }
  Id& operator=(Id&& other) noexcept;
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

// Silences HDF5's automatic error printing (errors become exceptions instead); idempotent.
void quiet_errors();
// Throws RecordingError("<what>: <HDF5's innermost message>") when `status` is negative.
hid_t check(hid_t status, const std::string& what);

bool link_exists(hid_t location, const std::string& path);  // every component checked
Id open_group(hid_t location, const std::string& path);
Id create_group(hid_t location, const std::string& path);   // intermediate groups created
Id open_or_create_group(hid_t location, const std::string& path);
std::vector<std::string> child_names(hid_t group);          // in creation/name order

// Attributes (created or replaced).
void write_string_attribute(hid_t object, const std::string& name, const std::string& value);
void write_string_list_attribute(hid_t object, const std::string& name,
                                 const std::vector<std::string>& values);
void write_double_list_attribute(hid_t object, const std::string& name, const std::vector<double>& values);
void write_int64_attribute(hid_t object, const std::string& name, std::int64_t value);
bool has_attribute(hid_t object, const std::string& name);
std::string read_string_attribute(hid_t object, const std::string& name);  // fixed or variable length
std::vector<std::string> read_string_list_attribute(hid_t object, const std::string& name);
std::vector<double> read_double_list_attribute(hid_t object, const std::string& name);
std::int64_t read_int64_attribute(hid_t object, const std::string& name);

// Element types: the type a payload of `dtype` has in the file (little-endian) and in memory.
Id file_type(DType dtype);
Id memory_type(DType dtype);
Id variable_bytes_type();  // variable-length sequence of uint8 (serialized protobuf headers)

}  // namespace sonopipe::recording::hdf5
