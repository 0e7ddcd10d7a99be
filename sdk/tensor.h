// Plain description of an array: element type and named axes. The wire format (proto/) maps
// onto this at the door; sdk/, runtime/ and stages/ only see these structs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sonopipe {

enum class DType : std::uint8_t { int16, float16, float32, complex64, float64, uint8 };

std::size_t dtype_size(DType type);
std::string_view dtype_name(DType type);  // "int16", "float32", ...
bool parse_dtype(std::string_view name, DType& out);
bool dtype_is_floating(DType type);       // float16/32/64 and complex64

struct Axis {
  std::string name;        // "location", "ensemble", "sample", "voxel", "time", ...
  std::int64_t size = 0;
  double spacing = 0.0;    // physical step in `unit`; 0 when the axis has none
  std::string unit;        // "m", "s", ...
  double origin = 0.0;     // physical position of index 0

  bool operator==(const Axis&) const = default;
};

// C-ordered array description: the last axis varies fastest.
struct TensorSpec {
  DType dtype = DType::float32;
  std::vector<Axis> axes;
  std::string unit;        // unit of the values ("um", "1", "ml/100g/min"); empty = raw

  std::int64_t element_count() const;
  std::size_t byte_size() const;
  // Index of the axis called `name`, or -1.
  int axis_index(std::string_view name) const;
  std::string shape_string() const;  // "float32[location=52, ensemble=81, sample=493]"

  bool operator==(const TensorSpec&) const = default;
};

}  // namespace sonopipe
