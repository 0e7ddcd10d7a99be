// The uint8 display-ready variant of an image: values windowed linearly onto 0..255,
//   u8 = round(255 * clamp((v - low) / (high - low), 0, 1)),  NaN -> 0,
// with [low, high] either fixed by the user (in the result's unit) or, by default, the 0.5th and
// 99.5th percentiles of the image's finite values (nearest rank on the sorted values), recomputed
// for every image so a display needs no level setting. An empty or flat window gives 0 everywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace sonopipe::igtl_bridge {

struct DisplayWindow {
  double low = 0, high = 1;
};

constexpr double kAutoWindowLowPercentile = 0.5;
constexpr double kAutoWindowHighPercentile = 99.5;

// The window for `values`: `fixed` when given, else the percentile window (NaN-free; {0, 0} when no
// value is finite).
DisplayWindow window_for(const std::vector<float>& values, const std::optional<DisplayWindow>& fixed);

std::vector<std::uint8_t> to_display_uint8(const std::vector<float>& values, const DisplayWindow& window);

}  // namespace sonopipe::igtl_bridge
