// The uint8 display-ready variant of an image: values windowed linearly onto 0..255,
//   u8 = round(255 * clamp((v - low) / (high - low), 0, 1)),  NaN -> 0,
// with [low, high] either fixed by the user (in the result's unit) or, by default, the 0.5th and
// 99.5th percentiles of the image's finite values (nearest rank on the sorted values), recomputed
// for every image so a display needs no level setting. An empty or flat window gives 0 everywhere.
// Velocity images (Image::nyquist_velocity_m_per_s = v_N > 0) without a fixed window get the Nyquist
// window, signed: [low, high] = [-v_N, +v_N] and code 0 kept for "no estimate" (NaN):
//   u8 = 1 + round(254 * clamp((v + v_N) / (2 v_N), 0, 1)),  so -v_N -> 1, 0 m/s -> 128, +v_N -> 255.
// B-mode images in dB (Image::bmode) without a fixed window get the viewers' B-mode window:
//   [max - kBmodeDynamicRangeDb, max] of the image's finite values (sonopipe.view.doppler).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace sonopipe::igtl_bridge {

struct DisplayWindow {
  double low = 0, high = 1;
  bool zero_means_no_value = false;  // codes 1..255 span the window, 0 only for NaN
};

// The Nyquist window of a velocity image aliasing at +-v_N (m/s).
DisplayWindow nyquist_window(double nyquist_velocity_m_per_s);

constexpr double kBmodeDynamicRangeDb = 50.0;
// The B-mode window of a dB image: the kBmodeDynamicRangeDb below its largest finite value ({0, 0}
// when none is finite).
DisplayWindow bmode_window(const std::vector<float>& values_db);

constexpr double kAutoWindowLowPercentile = 0.5;
constexpr double kAutoWindowHighPercentile = 99.5;

// The window for `values`: `fixed` when given, else the percentile window (NaN-free; {0, 0} when no
// value is finite).
DisplayWindow window_for(const std::vector<float>& values, const std::optional<DisplayWindow>& fixed);

std::vector<std::uint8_t> to_display_uint8(const std::vector<float>& values, const DisplayWindow& window);

}  // namespace sonopipe::igtl_bridge
