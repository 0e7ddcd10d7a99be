#include "tools/igtl/display_window.h"

#include <algorithm>
#include <cmath>

namespace sonopipe::igtl_bridge {

namespace {

// Nearest rank, as if `values` were sorted (selection in linear time: volumes can be large).
double percentile(std::vector<float>& values, double percent) {
  const auto rank = static_cast<std::ptrdiff_t>(std::lround(percent / 100.0 * static_cast<double>(values.size() - 1)));
  std::nth_element(values.begin(), values.begin() + rank, values.end());
  return values[static_cast<std::size_t>(rank)];
}

}  // namespace

DisplayWindow window_for(const std::vector<float>& values, const std::optional<DisplayWindow>& fixed) {
  if (fixed) return *fixed;
  std::vector<float> finite;
  finite.reserve(values.size());
  for (float v : values)
    if (std::isfinite(v)) finite.push_back(v);
  if (finite.empty()) return {0, 0};
  return {percentile(finite, kAutoWindowLowPercentile), percentile(finite, kAutoWindowHighPercentile)};
}

DisplayWindow nyquist_window(double nyquist_velocity_m_per_s) {
  return {-nyquist_velocity_m_per_s, nyquist_velocity_m_per_s, true};
}

DisplayWindow bmode_window(const std::vector<float>& values_db) {
  bool any = false;
  double top = 0;
  for (float v : values_db)
    if (std::isfinite(v) && (!any || v > top)) {
      top = v;
      any = true;
    }
  if (!any) return {0, 0};
  return {top - kBmodeDynamicRangeDb, top};
}

std::vector<std::uint8_t> to_display_uint8(const std::vector<float>& values, const DisplayWindow& window) {
  std::vector<std::uint8_t> out(values.size(), 0);
  const double width = window.high - window.low;
  if (!(width > 0)) return out;
  const double first = window.zero_means_no_value ? 1.0 : 0.0;  // code of the window's low end
  for (std::size_t n = 0; n < values.size(); ++n) {
    if (!std::isfinite(values[n])) continue;
    const double scaled = std::clamp((values[n] - window.low) / width, 0.0, 1.0);
    out[n] = static_cast<std::uint8_t>(first + std::lround((255.0 - first) * scaled));
  }
  return out;
}

}  // namespace sonopipe::igtl_bridge
