#include "tools/igtl/image_layout.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>

namespace sonopipe::igtl_bridge {

namespace {

enum class Role { depth, lateral, elevation, time, other };

// The role directions, in the order an unnamed axis takes the free ones.
constexpr Vector3 kDepthDirection{0, 0, -1};      // -S
constexpr Vector3 kLateralDirection{-1, 0, 0};    // +L
constexpr Vector3 kElevationDirection{0, 1, 0};   // +A
constexpr std::array<Vector3, 3> kFreeOrder{kDepthDirection, kLateralDirection, kElevationDirection};

bool named(const std::string& name, std::initializer_list<const char*> names) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* candidate : names)
    if (lower == candidate) return true;
  return false;
}

// The axis names of the chains, as tools/python/sonopipe/view/units.py knows them.
Role role_of(const std::string& name) {
  if (named(name, {"depth", "sample", "axial", "z", "range"})) return Role::depth;
  if (named(name, {"location", "lateral", "line", "x", "element", "beam", "column"})) return Role::lateral;
  if (named(name, {"elevation", "elevational", "plane", "y", "slice"})) return Role::elevation;
  if (named(name, {"track", "time", "ensemble", "frame"})) return Role::time;
  return Role::other;
}

std::size_t element_bytes(v1::ElementType type) {
  switch (type) {
    case v1::ELEMENT_TYPE_FLOAT32: return 4;
    case v1::ELEMENT_TYPE_FLOAT64: return 8;
    case v1::ELEMENT_TYPE_INT16: return 2;
    case v1::ELEMENT_TYPE_UINT8: return 1;
    default: return 0;
  }
}

// One pass over the payload in memory order (the cache-friendly order for large volumes): element
// e goes to pixel `out` of its component's image, kept when it is the larger finite one on a
// slow-time axis (out_stride 0 there), copied otherwise.
template <typename T>
void scatter(const void* payload, const std::vector<std::uint64_t>& sizes, const std::vector<std::size_t>& out_stride,
             bool has_components, bool peak, std::vector<Image>& images) {
  const int rank = static_cast<int>(sizes.size());
  std::size_t count = 1;
  for (std::uint64_t size : sizes) count *= size;
  const auto* bytes = static_cast<const unsigned char*>(payload);
  std::vector<std::uint64_t> index(rank, 0);
  std::size_t out = 0;
  for (std::size_t e = 0; e < count; ++e) {
    T element;
    std::memcpy(&element, bytes + e * sizeof(T), sizeof(T));  // the payload need not be aligned
    const float v = static_cast<float>(element);
    float& pixel = images[has_components ? index[rank - 1] : 0].values[out];
    if (!peak)
      pixel = v;
    else if (std::isfinite(v) && !(v <= pixel))  // !(v <= NaN) holds: the first finite value replaces NaN
      pixel = v;
    for (int a = rank - 1; a >= 0; --a) {  // C order: the last axis fastest
      out += out_stride[a];
      if (++index[a] < sizes[a]) break;
      out -= out_stride[a] * sizes[a];
      index[a] = 0;
    }
  }
}

// v_N of a velocity result (unit m/s, attribute nyquist_velocity_m_per_s a positive number), else 0.
double nyquist_velocity_m_per_s(const v1::ResultHeader& header) {
  const auto found = header.attributes().find(kNyquistAttribute);
  if (header.unit() != kVelocityUnit || found == header.attributes().end()) return 0;
  try {
    const double value = std::stod(found->second);
    return value > 0 && std::isfinite(value) ? value : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

double speed_of_sound(const v1::ResultHeader& header) {
  const auto found = header.attributes().find("speed_of_sound_m_per_s");
  if (found == header.attributes().end()) return kDefaultSpeedOfSound_m_per_s;
  try {
    const double value = std::stod(found->second);
    return value > 0 && std::isfinite(value) ? value : kDefaultSpeedOfSound_m_per_s;
  } catch (const std::exception&) {
    return kDefaultSpeedOfSound_m_per_s;
  }
}

// Millimetres per unit of an axis's spacing and origin; 0 = an index grid.
double millimetres_per_unit(const v1::Axis& axis, Role role, double speed_of_sound_m_per_s) {
  if (axis.spacing() == 0 || !std::isfinite(axis.spacing()) || !std::isfinite(axis.origin())) return 0;
  if (axis.unit() == "m") return 1000.0;
  if (axis.unit() == "mm") return 1.0;
  if (axis.unit() == "s" && role == Role::depth) return speed_of_sound_m_per_s / 2 * 1000.0;  // two-way time
  return 0;
}

Vector3 direction_of(Role role) {
  switch (role) {
    case Role::depth: return kDepthDirection;
    case Role::lateral: return kLateralDirection;
    case Role::elevation: return kElevationDirection;
    default: return {0, 0, 0};
  }
}

}  // namespace

Vector3 Image::centre_mm() const {
  Vector3 centre = corner_mm;
  for (int d = 0; d < 3; ++d)
    for (int r = 0; r < 3; ++r) centre[r] += direction[d][r] * spacing_mm[d] * (size[d] - 1) / 2.0;
  return centre;
}

std::vector<Image> images_of_result(const v1::ResultHeader& header, const void* payload, std::size_t payload_bytes) {
  const std::string name = header.pipeline() + "/" + header.output();
  const int rank = header.axes_size();
  if (rank == 0) throw LayoutError(name + ": the result has no axes");
  const std::size_t bytes_per_element = element_bytes(header.element_type());
  if (bytes_per_element == 0)
    throw LayoutError(name + ": element type " + v1::ElementType_Name(header.element_type()) +
                      " is not shown (float32, float64, int16, uint8 are)");
  std::size_t count = 1;
  for (int a = rank - 1; a >= 0; --a) {
    const std::uint64_t size = header.axes(a).size();
    if (size == 0 || size > static_cast<std::uint64_t>(INT_MAX) || count > static_cast<std::size_t>(INT_MAX) / size)
      throw LayoutError(name + ": axis '" + header.axes(a).name() + "' has size " + std::to_string(size));
    count *= size;
  }
  if (count * bytes_per_element != payload_bytes)
    throw LayoutError(name + ": payload of " + std::to_string(payload_bytes) + " bytes, the axes say " +
                      std::to_string(count * bytes_per_element));

  // Component, slow-time and image axes.
  const bool has_components = header.axes(rank - 1).name() == kComponentAxis;
  const int components = has_components ? static_cast<int>(header.axes(rank - 1).size()) : 1;
  int time_axis = -1;
  std::vector<int> image_axes;
  for (int a = 0; a < rank - (has_components ? 1 : 0); ++a) {
    if (role_of(header.axes(a).name()) == Role::time) {
      if (time_axis >= 0) throw LayoutError(name + ": more than one slow-time axis");
      time_axis = a;
    } else {
      image_axes.push_back(a);
    }
  }
  if (image_axes.empty() || image_axes.size() > 3)
    throw LayoutError(name + ": " + std::to_string(image_axes.size()) +
                      " image axes after the component and slow-time axes; 1 to 3 are shown");

  // Geometry, shared by the images of this result: index d (i, j, k) is image axis n - 1 - d.
  Image geometry;
  const double c = speed_of_sound(header);
  const int dims = static_cast<int>(image_axes.size());
  std::array<bool, 3> placed{false, false, false};
  std::vector<Vector3> taken;
  auto is_taken = [&](const Vector3& v) { return std::find(taken.begin(), taken.end(), v) != taken.end(); };
  for (int pass = 0; pass < 2; ++pass) {  // named roles first, then the rest take the free directions
    for (int d = 0; d < 3; ++d) {
      if (placed[d]) continue;
      Vector3 direction{0, 0, 0};
      if (pass == 0 && d >= dims) continue;  // the missing k axis takes a free direction below
      if (d < dims) {
        const Role role = role_of(header.axes(image_axes[dims - 1 - d]).name());
        direction = direction_of(role);
        if (pass == 0 && (direction == Vector3{0, 0, 0} || is_taken(direction))) continue;
      }
      if (pass == 1) {
        for (const Vector3& free : kFreeOrder)
          if (!is_taken(free)) {
            direction = free;
            break;
          }
      }
      geometry.direction[d] = direction;
      taken.push_back(direction);
      placed[d] = true;
    }
  }
  for (int d = 0; d < dims; ++d) {
    const v1::Axis& axis = header.axes(image_axes[dims - 1 - d]);
    geometry.size[d] = static_cast<int>(axis.size());
    const double scale = millimetres_per_unit(axis, role_of(axis.name()), c);
    if (scale == 0) continue;  // index grid: 1 mm per sample, origin 0
    const double spacing_mm = axis.spacing() * scale;
    for (int r = 0; r < 3; ++r) geometry.corner_mm[r] += axis.origin() * scale * geometry.direction[d][r];
    geometry.spacing_mm[d] = std::fabs(spacing_mm);
    if (spacing_mm < 0)
      for (double& v : geometry.direction[d]) v = -v;
  }

  std::vector<Image> images;
  for (int component = 0; component < components; ++component) {
    Image image = geometry;
    image.key = name;
    if (has_components) {
      image.key += '/';
      image.key += components <= 3 ? std::string(kComponentNames[component]) : std::to_string(component);
    }
    if (time_axis >= 0) {
      image.key += '/';
      image.key += kPeakSuffix;
    }
    image.unit = header.unit();
    image.nyquist_velocity_m_per_s = nyquist_velocity_m_per_s(header);
    image.bmode = header.unit() == kDecibelUnit && header.attributes().count(kMeanOfFramesAttribute) > 0;
    image.acquisition_time_ns = header.acquisition_time_ns();
    image.input_sequence = header.input_sequence();
    image.values.assign(image.pixel_count(), std::numeric_limits<float>::quiet_NaN());
    images.push_back(std::move(image));
  }
  std::vector<std::uint64_t> sizes(rank);
  std::vector<std::size_t> out_stride(rank, 0);  // 0 on the component and slow-time axes
  for (int a = 0; a < rank; ++a) sizes[a] = header.axes(a).size();
  std::size_t stride = 1;
  for (int n = dims - 1; n >= 0; --n) {
    out_stride[image_axes[n]] = stride;
    stride *= sizes[image_axes[n]];
  }
  const bool peak = time_axis >= 0;
  switch (header.element_type()) {
    case v1::ELEMENT_TYPE_FLOAT32: scatter<float>(payload, sizes, out_stride, has_components, peak, images); break;
    case v1::ELEMENT_TYPE_FLOAT64: scatter<double>(payload, sizes, out_stride, has_components, peak, images); break;
    case v1::ELEMENT_TYPE_INT16: scatter<std::int16_t>(payload, sizes, out_stride, has_components, peak, images); break;
    case v1::ELEMENT_TYPE_UINT8: scatter<std::uint8_t>(payload, sizes, out_stride, has_components, peak, images); break;
    default: break;  // refused above
  }
  return images;
}

}  // namespace sonopipe::igtl_bridge
