#include "sdk/tensor.h"

#include <stdexcept>

namespace sonopipe {

std::size_t dtype_size(DType type) {
  switch (type) {
    case DType::int16: return 2;
    case DType::float16: return 2;
    case DType::float32: return 4;
    case DType::complex64: return 8;
    case DType::float64: return 8;
    case DType::uint8: return 1;
  }
  throw std::logic_error("dtype_size: unknown DType");
}

std::string_view dtype_name(DType type) {
  switch (type) {
    case DType::int16: return "int16";
    case DType::float16: return "float16";
    case DType::float32: return "float32";
    case DType::complex64: return "complex64";
    case DType::float64: return "float64";
    case DType::uint8: return "uint8";
  }
  return "unknown";
}

bool parse_dtype(std::string_view name, DType& out) {
  for (DType t : {DType::int16, DType::float16, DType::float32, DType::complex64, DType::float64,
                  DType::uint8}) {
    if (dtype_name(t) == name) {
      out = t;
      return true;
    }
  }
  return false;
}

bool dtype_is_floating(DType type) {
  return type == DType::float16 || type == DType::float32 || type == DType::complex64 ||
         type == DType::float64;
}

std::int64_t TensorSpec::element_count() const {
  std::int64_t count = 1;
  for (const Axis& axis : axes) count *= axis.size;
  return axes.empty() ? 0 : count;
}

std::size_t TensorSpec::byte_size() const {
  return static_cast<std::size_t>(element_count()) * dtype_size(dtype);
}

int TensorSpec::axis_index(std::string_view name) const {
  for (std::size_t i = 0; i < axes.size(); ++i)
    if (axes[i].name == name) return static_cast<int>(i);
  return -1;
}

std::string TensorSpec::shape_string() const {
  std::string text(dtype_name(dtype));
  text += "[";
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (i) text += ", ";
    text += axes[i].name + "=" + std::to_string(axes[i].size);
  }
  return text + "]";
}

}  // namespace sonopipe
