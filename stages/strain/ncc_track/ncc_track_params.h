// Conventions and shared math of the `ncc_track` stage: ONE place for every convention, used by the
// CPU reference (stages/strain/ncc_track/ncc_reference.cpp), the CUDA kernels (ncc_*.cu here), the tests, the
// simulator and the benchmark. C++17 (nvcc compiles it too).
//
// Frames (after `convert`): float32 RF, C order with the axial axis fastest:
//   2-D  [lateral, axial]                 (axis names "lateral", "axial" as the simulator writes)
//   3-D  [elevational, lateral, axial]    ("elevational", "lateral", "axial")
// The stage identifies axes by position (the last axis is axial), names are not checked.
// Inside the stage every frame is 3-D with dimension index d = 0 axial, 1 lateral, 2 elevational;
// a 2-D frame has one elevational plane. Every per-axis list parameter is written in the same
// order, [axial, lateral, elevational] (the papers' "69 x 9 x 3" order); a 2-D config gives two
// items, a missing third item means kernel 1, search 0, step 1, one point.
//
// Pairs: reference f = frame i - lag (pre-deformation), target g = frame i. Every frame is scaled
// to unit mean square before use (simulator data near 1e-22 would underflow float32 when squared;
// NCC itself is scale-invariant).
//
// NCC (peng2019 3-D eq. (1), 2-D eq. (1)), not mean-subtracted (OpenCV TM_CCORR_NORMED):
//   R(tau) = sum_m f(m) g(m + tau) / sqrt(sum_m f(m)^2 * sum_m g(m + tau)^2),  m over the window.
// The sign follows the 3-D paper's eqs. (5)-(6) and the 2-D paper's eq. (1): g is read at m + tau
// (the 3-D paper's eq. (1) writes m - tau; eqs. (5)-(6) and the sum-tables use m + tau). So the
// displacement at a window is the tau of the peak: the tissue seen at m in f is seen at m + tau in g.
// Positive axial displacement = moving deeper (away from the probe).
// zero_mean: true gives the Pearson form (window means removed from both signals).
// Guard: a window energy E (after mean removal for Pearson) counts as zero when
//   E <= kEnergyGuard * (window element count)   [frames have unit mean square, so this is
//   relative to the energy of an average window, never an absolute epsilon]. A zero-energy
//   reference window gives correlation 0 at every shift and flag kFlagNoReferenceEnergy; a zero-energy
//   target window gives correlation 0 at that shift (flag kFlagNoTargetEnergy).
//
// Estimation grid: point p along d has its reference window at [start_d + p*step_d, + W_d) and its
// displacement is reported at the window centre start_d + p*step_d + (W_d - 1)/2 (samples).
// Search: tau_d in [search_min_d, search_max_d], every target window must lie inside the frame.
// NCC map of one point: shifts in order (elevational, lateral, axial) with axial fastest:
//   index = ((tau_e - min_e) * S_l + (tau_l - min_l)) * S_a + (tau_a - min_a).
//
// Peak: integer argmax over the map (first in map order on ties), then sub-sample refinement:
//   parabola           separable 3-point fit per axis: delta = (y- - y+) / (2 (y- - 2 y0 + y+))
//   quadratic_surface  least-squares quadratic on the 3x3 (2-D) or 3x3x3 (3-D) neighbourhood
//                      (peng2019 3-D section 2.1 step 3; Azar et al. 2010), stationary point solved.
// Axes with one shift are not refined. A peak on the search border of an axis is not refined on
// that axis (kFlagBorderPeak); quadratic_surface then fits the remaining interior axes (a parabola
// when only one remains). A fit
// that is not a maximum or moves by more than half a sample keeps the integer peak on that axis
// (kFlagFitRejected).
//
// Outputs (grid axes in frame order, last axis "component" in [axial, lateral, elevational] order):
//   displacement          float32 [grid..., component] in metres (axis spacing x samples; an axis
//                         whose frame spacing is 0 stays in samples and the unit says so)
//   displacement_samples  float32 [grid..., component] in samples
//   correlation           float32 [grid...]  NCC at the integer peak (quality map)
//   flags                 uint8   [grid...]  bit set of kFlag*
//
// Methods: standard sums eq. (1) directly (on the GPU the window energies are also summed
// directly, once per window position, and shared by the points and shifts that read that window);
// lewis: numerator by FFT cross-correlation (cuFFT on the GPU), energies from sum-tables; luo:
// numerator and energies from sum-tables, one cross-product table per shift (on the GPU built in
// batches of shifts bounded by batch_mb). auto: each method timed once at configure, fastest kept.
//
// Sum-tables (lewis, luo) are built in DOUBLE on CPU and GPU: a float32 prefix sum over the few
// thousand samples of an RF frame loses ~1e-5 relative (documented by a test in
// tests/stages/strain/ncc_track/ncc_track_test.cpp), which would leave correlations outside 1e-5 of the reference.
// Double tables cost memory bandwidth, not accuracy; the H100 does FP64 at half the FP32 rate.
#pragma once

#include <cmath>
#include <cstdint>

#include "stages/common/host_device.h"

namespace sonopipe::ncc {

enum class Method : std::uint8_t { standard, lewis, luo, auto_select };
enum class Fit : std::uint8_t { parabola, quadratic_surface };

constexpr int kDims = 3;          // axial, lateral, elevational
constexpr int kAxial = 0, kLateral = 1, kElevational = 2;
constexpr double kEnergyGuard = 1e-9;

// Flags per estimation point (output `flags`).
constexpr std::uint8_t kFlagNoReferenceEnergy = 1u << 0;
constexpr std::uint8_t kFlagBorderPeak = 1u << 1;
constexpr std::uint8_t kFlagFitRejected = 1u << 2;
constexpr std::uint8_t kFlagNoTargetEnergy = 1u << 3;

// Geometry of one tracking configuration in frame samples, dimension order [axial, lateral,
// elevational]. Plain data: passed by value to kernels.
struct Geometry {
  int frame[kDims];       // frame size per dimension (elevational 1 for 2-D)
  int start[kDims];       // first sample of the first reference window
  int step[kDims];        // grid step in samples
  int points[kDims];      // estimation points
  int kernel[kDims];      // window size W
  int search_min[kDims];  // smallest shift tau
  int search_max[kDims];  // largest shift tau
  bool zero_mean;
  Fit fit;

  SONOPIPE_HD int shifts(int d) const { return search_max[d] - search_min[d] + 1; }
  SONOPIPE_HD int shift_count() const { return shifts(0) * shifts(1) * shifts(2); }
  SONOPIPE_HD int point_count() const { return points[0] * points[1] * points[2]; }
  SONOPIPE_HD int window_count() const { return kernel[0] * kernel[1] * kernel[2]; }
  // Linear index of frame sample (a, l, e).
  SONOPIPE_HD long long frame_index(int a, int l, int e) const {
    return (static_cast<long long>(e) * frame[1] + l) * frame[0] + a;
  }
  // Point index p -> grid coordinates (axial fastest, like the frames).
  SONOPIPE_HD void point_coords(int p, int c[kDims]) const {
    c[0] = p % points[0];
    c[1] = (p / points[0]) % points[1];
    c[2] = p / (points[0] * points[1]);
  }
  SONOPIPE_HD void shift_coords(int s, int t[kDims]) const {
    t[0] = search_min[0] + s % shifts(0);
    t[1] = search_min[1] + (s / shifts(0)) % shifts(1);
    t[2] = search_min[2] + s / (shifts(0) * shifts(1));
  }
  // Union of the reference windows ("reference box") and of all target windows ("target box").
  SONOPIPE_HD int reference_extent(int d) const { return (points[d] - 1) * step[d] + kernel[d]; }
  SONOPIPE_HD int target_origin(int d) const { return start[d] + search_min[d]; }
  SONOPIPE_HD int target_extent(int d) const { return reference_extent(d) + shifts(d) - 1; }
  SONOPIPE_HD double energy_floor() const { return kEnergyGuard * window_count(); }
  // Where point `p` of axis d reports its displacement: its window's centre, in samples.
  SONOPIPE_HD double centre_samples(int d, int p) const { return start[d] + p * step[d] + 0.5 * (kernel[d] - 1); }
};

// NCC from the window sums (double or float). sum_f/sum_g are only used for the Pearson form.
// Returns 0 when either energy is under the guard; *target_empty tells which.
template <typename T>
SONOPIPE_HD T ncc_value(T sum_fg, T energy_f, T energy_g, T sum_f, T sum_g, bool zero_mean,
                        T window_count, T energy_floor, bool* target_empty) {
  if (zero_mean) {
    sum_fg -= sum_f * sum_g / window_count;
    energy_f -= sum_f * sum_f / window_count;
    energy_g -= sum_g * sum_g / window_count;
  }
  *target_empty = !(energy_g > energy_floor);
  if (!(energy_f > energy_floor) || *target_empty) return T(0);
  return sum_fg / sqrt(energy_f * energy_g);  // peng2019 eq. (1)
}

// Reference window energy (after mean removal for Pearson) above the guard?
template <typename T>
SONOPIPE_HD bool reference_has_energy(T energy_f, T sum_f, bool zero_mean, T window_count,
                                      T energy_floor) {
  if (zero_mean) energy_f -= sum_f * sum_f / window_count;
  return energy_f > energy_floor;
}

template <typename T>
struct PeakResult {
  T displacement[kDims];  // samples, [axial, lateral, elevational]
  T correlation;          // value at the integer peak
  std::uint8_t flags;
};

// 3-point parabola vertex offset; false when the three values do not bend down.
template <typename T>
SONOPIPE_HD bool parabola_offset(T below, T centre, T above, T* offset) {
  const T curvature = below - 2 * centre + above;
  if (!(curvature < 0)) return false;
  *offset = (below - above) / (2 * curvature);
  return fabs(*offset) <= T(0.5);
}

// Least-squares quadratic on the 3^n neighbourhood of the peak over n fitted axes (n = 2 or 3), closed form because the design is orthogonal on {-1,0,1}^n once x^2 is centred (x^2 - 2/3):
//   y = c + sum b_i x_i + sum a_ii x_i^2 + sum_{i<j} a_ij x_i x_j,
//   b_i = sum x_i y / (2 * 3^(n-1)),  a_ii = sum (x_i^2 - 2/3) y / ((2/3) * 3^(n-1)),
//   a_ij = sum x_i x_j y / (4 * 3^(n-2)).
// The stationary point solves H x = -b with H_ii = 2 a_ii, H_ij = a_ij. `value(dx)` returns the map
// value at the peak offset by dx (per fitted axis). False when H is not negative definite or the
// result leaves the [-0.5, 0.5] cube.
template <typename T, typename ValueAt>
SONOPIPE_HD bool quadratic_surface_offset(int n, ValueAt value, T offset[kDims]) {
  T b[kDims] = {0, 0, 0}, a[kDims][kDims] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
  for (int z = -1; z <= (n == 3 ? 1 : -1); ++z) {
    for (int y = -1; y <= 1; ++y) {
      for (int x = -1; x <= 1; ++x) {
        int dx[kDims] = {x, y, n == 3 ? z : 0};
        const T v = value(dx);
        for (int i = 0; i < n; ++i) {
          b[i] += dx[i] * v;
          a[i][i] += (dx[i] * dx[i] - T(2) / 3) * v;
          for (int j = i + 1; j < n; ++j) a[i][j] += dx[i] * dx[j] * v;
        }
      }
    }
  }
  const T cells = n == 3 ? T(9) : T(3);      // 3^(n-1)
  const T pair_cells = n == 3 ? T(3) : T(1);  // 3^(n-2)
  T h[kDims][kDims];
  for (int i = 0; i < n; ++i) {
    b[i] /= 2 * cells;
    h[i][i] = 2 * a[i][i] / (T(2) / 3 * cells);
    for (int j = i + 1; j < n; ++j) h[i][j] = h[j][i] = a[i][j] / (4 * pair_cells);
  }
  if (n == 2) {
    const T det = h[0][0] * h[1][1] - h[0][1] * h[1][0];
    if (!(h[0][0] < 0 && det > 0)) return false;  // negative definite
    offset[0] = (-b[0] * h[1][1] + b[1] * h[0][1]) / det;
    offset[1] = (-b[1] * h[0][0] + b[0] * h[1][0]) / det;
  } else {
    const T m00 = h[1][1] * h[2][2] - h[1][2] * h[2][1];
    const T m01 = h[1][0] * h[2][2] - h[1][2] * h[2][0];
    const T m02 = h[1][0] * h[2][1] - h[1][1] * h[2][0];
    const T det = h[0][0] * m00 - h[0][1] * m01 + h[0][2] * m02;
    const T det2 = h[0][0] * h[1][1] - h[0][1] * h[1][0];
    if (!(h[0][0] < 0 && det2 > 0 && det < 0)) return false;  // negative definite (Sylvester)
    // Cramer's rule for H x = -b.
    for (int k = 0; k < 3; ++k) {
      T m[3][3];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) m[i][j] = j == k ? -b[i] : h[i][j];
      const T dk = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                   m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                   m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
      offset[k] = dk / det;
    }
  }
  for (int i = 0; i < n; ++i)
    if (!(fabs(offset[i]) <= T(0.5))) return false;
  return true;
}

// Step 2 of the papers: index of the largest value, the first one on ties.
template <typename T>
SONOPIPE_HD int argmax_first(const T* map, int count) {
  int best = 0;
  T best_value = map[0];
  for (int s = 1; s < count; ++s) {
    if (map[s] > best_value) {  // strict: the first maximum wins ties
      best_value = map[s];
      best = s;
    }
  }
  return best;
}

// Step 3 of the papers for one point: sub-sample refinement around the integer peak `best`.
// `flags_in` carries the energy flags.
template <typename T>
SONOPIPE_HD PeakResult<T> refine_peak(const T* map, const Geometry& g, int best, std::uint8_t flags_in) {
  PeakResult<T> out;
  out.flags = flags_in;
  const T best_value = map[best];
  int tau[kDims];
  g.shift_coords(best, tau);
  out.correlation = best_value;
  T offset[kDims] = {0, 0, 0};
  if (flags_in & kFlagNoReferenceEnergy) {
    for (int d = 0; d < kDims; ++d) out.displacement[d] = T(0);
    return out;
  }
  const int stride[kDims] = {1, g.shifts(0), g.shifts(0) * g.shifts(1)};
  // Which axes can be refined: more than one shift and the peak not on the search border.
  bool interior[kDims];
  int fit_axes[kDims];
  int n_fit = 0;
  for (int d = 0; d < kDims; ++d) {
    interior[d] = false;
    if (g.shifts(d) < 2) continue;
    if (tau[d] == g.search_min[d] || tau[d] == g.search_max[d]) {
      out.flags |= kFlagBorderPeak;
      continue;
    }
    interior[d] = true;
    fit_axes[n_fit++] = d;
  }
  bool surface_done = false;
  if (g.fit == Fit::quadratic_surface && n_fit >= 2) {
    auto value = [&](const int dx[kDims]) {
      int s = best;
      for (int i = 0; i < n_fit; ++i) s += dx[i] * stride[fit_axes[i]];
      return map[s];
    };
    T fitted[kDims] = {0, 0, 0};
    if (quadratic_surface_offset<T>(n_fit, value, fitted)) {
      for (int i = 0; i < n_fit; ++i) offset[fit_axes[i]] = fitted[i];
      surface_done = true;
    } else {
      out.flags |= kFlagFitRejected;  // falls back to the separable parabola below
    }
  }
  if (!surface_done) {
    for (int d = 0; d < kDims; ++d) {
      if (!interior[d]) continue;
      T delta = 0;
      if (parabola_offset<T>(map[best - stride[d]], best_value, map[best + stride[d]], &delta))
        offset[d] = delta;
      else
        out.flags |= kFlagFitRejected;
    }
  }
  for (int d = 0; d < kDims; ++d) out.displacement[d] = tau[d] + offset[d];
  return out;
}

// Steps 2 and 3 for one point: `map` holds shift_count values in map order.
template <typename T>
SONOPIPE_HD PeakResult<T> find_peak(const T* map, const Geometry& g, std::uint8_t flags_in) {
  return refine_peak(map, g, argmax_first(map, g.shift_count()), flags_in);
}

}  // namespace sonopipe::ncc
