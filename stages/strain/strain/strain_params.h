// Conventions and shared math of the `strain` stage (stages/strain/strain/strain.h), used by the CPU reference,
// stages/strain/strain/strain.cu and the tests. C++17 (nvcc compiles it too).
//
// Input: the displacement field of ncc_track, float32 [grid..., component], grid axes in frame
// order (axial fastest) with their spacing, component order [axial, lateral, elevational]; the
// displacement unit and the grid spacing unit must agree (both metres, or both samples).
// Output `strain`: float32 [grid..., component], unit 1, component c = du_c / dx_c (normal strains:
// axial, lateral, elevational). Compression gives NEGATIVE axial strain (positive displacement is
// deeper, so a probe pressing down makes displacement fall with depth).
//
// Least-squares differentiator (issue 4): slope of a straight line fitted over N = 2h+1 grid points,
//   eps[j] = (1/dx) * sum_{k=-h..h} k u[j+k] * 3 / (h (h+1) (2h+1)),
// dx = the grid spacing (the tracking step, not the RF sample spacing).
// Edge policy: near the ends the window shrinks symmetrically, h_j = min(h, j, n-1-j); the two end
// points (h_j = 0) use the one-sided difference with their neighbour; an axis with one point gives 0.
// Optional median pre-filter of each displacement component over a window of `median` points per
// axis (odd; 1 = off), clipped at the grid edges; the median of an even count is the lower middle.
#pragma once

#include "stages/common/host_device.h"

namespace sonopipe::strain {

constexpr int kMaxMedianCount = 49;  // window points of the median (e.g. 7x7, 5x5, 3x3x5)

// du/dx at index j of a line of n values u[0], u[stride], ... with half window h, per the policy
// above. Returns the slope per grid step; the caller divides by the spacing.
template <typename T, typename U>
SONOPIPE_HD inline T slope_per_step(const U* u, long long stride, int j, int n, int h) {
  if (n < 2) return T(0);
  int hj = h;
  if (j < hj) hj = j;
  if (n - 1 - j < hj) hj = n - 1 - j;
  if (hj == 0) {
    if (j == 0) return T(u[stride]) - T(u[0]);
    return T(u[j * stride]) - T(u[(j - 1) * stride]);
  }
  T sum = 0;
  for (int k = -hj; k <= hj; ++k) sum += T(k) * T(u[(j + k) * stride]);
  return sum * T(3) / (T(hj) * T(hj + 1) * T(2 * hj + 1));  // least-squares slope (issue 4)
}

// Lower-middle median of `count` values (insertion sort; count <= kMaxMedianCount).
template <typename T>
SONOPIPE_HD inline T median_of(T* values, int count) {
  for (int i = 1; i < count; ++i) {
    const T v = values[i];
    int j = i - 1;
    while (j >= 0 && values[j] > v) {
      values[j + 1] = values[j];
      --j;
    }
    values[j + 1] = v;
  }
  return values[(count - 1) / 2];
}

}  // namespace sonopipe::strain
