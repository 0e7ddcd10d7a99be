// CPU reference of the `ncc_track` stage in double: the three ways of evaluating peng2019 eq. (1)
// over a search range (standard, Lewis, Luo-Konofagou), the peak search and the frame
// normalisation. Multi-threaded over a ThreadPool. All conventions: stages/strain/ncc_track/ncc_track_params.h.
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

#include "stages/strain/ncc_track/ncc_track_params.h"

namespace sonopipe {
class ThreadPool;
}

namespace sonopipe::ncc {

// 1 / sqrt(mean square) of `count` values (1 when all are zero): the per-frame normalisation.
double normalisation_scale(const float* frame, std::size_t count, ThreadPool& pool);
void scale_frame(const float* in, float* out, std::size_t count, float scale, ThreadPool& pool);

// Exclusive 3-D prefix sum ("sum-table", peng2019 appendix A, eqs. (A1)-(A4)) over a box of the
// frame: table(i, j, k) = sum of value(m) over box-local a < i, l < j, e < k, so a window sum is
// eight look-ups with no boundary cases (eqs. (4)-(6)).
class SumTable {
 public:
  void resize(const int extent[kDims]);
  // value(a, l, e) in box-local coordinates.
  template <typename Value>
  void build(Value value);
  // Sum over the box-local window [lo, lo + size) per dimension.
  double window_sum(const int lo[kDims], const int size[kDims]) const;
  double at(int i, int j, int k) const { return table_[index(i, j, k)]; }

 private:
  std::size_t index(int i, int j, int k) const {
    return (static_cast<std::size_t>(k) * (extent_[1] + 1) + j) * (extent_[0] + 1) + i;
  }
  int extent_[kDims] = {0, 0, 0};
  std::vector<double> table_;
};

// Fills the NCC maps (points x shifts, map order of ncc_track_params.h) for one frame pair and the
// per-point energy flags. f, g: normalised frames of geometry.frame size.
class CpuTracker {
 public:
  // Allocates the scratch for `lanes` concurrent workers (configure time).
  CpuTracker(const Geometry& geometry, int lanes);

  void correlate(Method method, const float* f, const float* g, ThreadPool& pool);
  // Steps 2-3 on the maps of the last correlate().
  void find_peaks(ThreadPool& pool);

  const Geometry& geometry() const { return geometry_; }
  const std::vector<double>& maps() const { return maps_; }
  const std::vector<std::uint8_t>& energy_flags() const { return energy_flags_; }
  const std::vector<PeakResult<double>>& peaks() const { return peaks_; }
  // FFT size per dimension used by `lewis` (powers of two >= W + S - 1).
  const int* fft_size() const { return fft_size_; }

 private:
  void correlate_standard(const float* f, const float* g, ThreadPool& pool);
  void correlate_lewis(const float* f, const float* g, ThreadPool& pool);
  void correlate_luo(const float* f, const float* g, ThreadPool& pool);
  // Reference energies (and sums for Pearson) from tables over the reference box; target ones
  // over the target box. Used by lewis and luo.
  void build_energy_tables(const float* f, const float* g, ThreadPool& pool);

  Geometry geometry_;
  int lanes_;
  std::vector<double> maps_;
  std::vector<std::uint8_t> energy_flags_;
  std::vector<PeakResult<double>> peaks_;
  // Sum-tables: f^2 and f over the reference box, g^2 and g over the target box.
  SumTable f2_, f1_, g2_, g1_;
  std::vector<SumTable> lane_tables_;                           // luo: one cross table per lane
  std::vector<std::vector<std::uint8_t>> lane_flags_;          // luo: target flags per lane
  int fft_size_[kDims] = {1, 1, 1};
  std::vector<std::vector<std::complex<double>>> lane_fft_a_, lane_fft_b_;  // lewis
  std::vector<std::vector<std::complex<double>>> twiddles_;     // per dimension
};

template <typename Value>
void SumTable::build(Value value) {
  const int na = extent_[0], nl = extent_[1], ne = extent_[2];
  // Zero first row/column/plane; then the three passes of peng2019 eqs. (A2)-(A4): along
  // axial, lateral, elevational.
  for (int k = 0; k <= ne; ++k)
    for (int j = 0; j <= nl; ++j)
      for (int i = 0; i <= na; ++i)
        table_[index(i, j, k)] =
            (i == 0 || j == 0 || k == 0) ? 0.0 : static_cast<double>(value(i - 1, j - 1, k - 1));
  for (int k = 1; k <= ne; ++k)
    for (int j = 1; j <= nl; ++j)
      for (int i = 1; i <= na; ++i) table_[index(i, j, k)] += table_[index(i - 1, j, k)];
  for (int k = 1; k <= ne; ++k)
    for (int j = 1; j <= nl; ++j)
      for (int i = 1; i <= na; ++i) table_[index(i, j, k)] += table_[index(i, j - 1, k)];
  for (int k = 1; k <= ne; ++k)
    for (int j = 1; j <= nl; ++j)
      for (int i = 1; i <= na; ++i) table_[index(i, j, k)] += table_[index(i, j, k - 1)];
}

}  // namespace sonopipe::ncc
