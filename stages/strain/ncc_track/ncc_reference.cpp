#include "stages/strain/ncc_track/ncc_reference.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

#include "sdk/thread_pool.h"

namespace sonopipe::ncc {
namespace {

int next_power_of_two(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

// In-place radix-2 FFT of the n values data[0], data[stride], ... (n a power of two).
// Unnormalised both ways; `twiddle[k]` = exp(-2 pi i k / n) for k < n/2.
void fft_strided(std::complex<double>* data, int n, std::size_t stride,
                 const std::vector<std::complex<double>>& twiddle, bool inverse) {
  for (int i = 1, j = 0; i < n; ++i) {
    int bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(data[i * stride], data[j * stride]);
  }
  for (int len = 2; len <= n; len <<= 1) {
    const int step = n / len;
    for (int i = 0; i < n; i += len) {
      for (int k = 0; k < len / 2; ++k) {
        std::complex<double> w = twiddle[k * step];
        if (inverse) w = std::conj(w);
        std::complex<double>& x = data[(i + k) * stride];
        std::complex<double>& y = data[(i + k + len / 2) * stride];
        const std::complex<double> t = w * y;
        y = x - t;
        x += t;
      }
    }
  }
}

// FFT along every dimension of a P[0] x P[1] x P[2] array (dimension 0 fastest).
void fft_3d(std::vector<std::complex<double>>& buffer, const int size[kDims],
            const std::vector<std::vector<std::complex<double>>>& twiddles, bool inverse) {
  const std::size_t stride[kDims] = {1, static_cast<std::size_t>(size[0]),
                                     static_cast<std::size_t>(size[0]) * size[1]};
  const std::size_t total = stride[2] * size[2];
  for (int d = 0; d < kDims; ++d) {
    if (size[d] < 2) continue;
    for (std::size_t base = 0; base < total; ++base) {
      // `base` starts a line along d when its coordinate along d is zero.
      if ((base / stride[d]) % size[d] != 0) continue;
      fft_strided(buffer.data() + base, size[d], stride[d], twiddles[d], inverse);
    }
  }
}

}  // namespace

double normalisation_scale(const float* frame, std::size_t count, ThreadPool& pool) {
  constexpr int kMaxChunks = 64;  // fixed partial sums: no allocation per frame
  const int chunks = std::clamp(pool.size(), 1, kMaxChunks);
  std::array<double, kMaxChunks> partial{};
  const std::size_t per = (count + chunks - 1) / chunks;
  pool.parallel_for(static_cast<std::size_t>(chunks), [&](std::size_t begin, std::size_t end) {
    for (std::size_t c = begin; c < end; ++c) {
      double sum = 0.0;
      for (std::size_t i = c * per; i < std::min(count, (c + 1) * per); ++i)
        sum += static_cast<double>(frame[i]) * frame[i];
      partial[c] = sum;
    }
  });
  double sum = 0.0;
  for (double p : partial) sum += p;
  if (!(sum > 0.0) || count == 0) return 1.0;
  return 1.0 / std::sqrt(sum / static_cast<double>(count));
}

void scale_frame(const float* in, float* out, std::size_t count, float scale, ThreadPool& pool) {
  pool.parallel_for(count, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) out[i] = in[i] * scale;
  }, 1 << 15);
}

void SumTable::resize(const int extent[kDims]) {
  for (int d = 0; d < kDims; ++d) extent_[d] = extent[d];
  table_.assign(static_cast<std::size_t>(extent[0] + 1) * (extent[1] + 1) * (extent[2] + 1), 0.0);
}

double SumTable::window_sum(const int lo[kDims], const int size[kDims]) const {
  const int a0 = lo[0], a1 = lo[0] + size[0];
  const int l0 = lo[1], l1 = lo[1] + size[1];
  const int e0 = lo[2], e1 = lo[2] + size[2];
  // peng2019 eqs. (4)-(6): eight corners, exclusive table so no "-1" indices.
  return at(a1, l1, e1) - at(a1, l1, e0) - at(a1, l0, e1) - at(a0, l1, e1) + at(a0, l0, e1) +
         at(a0, l1, e0) + at(a1, l0, e0) - at(a0, l0, e0);
}

CpuTracker::CpuTracker(const Geometry& geometry, int lanes)
    : geometry_(geometry), lanes_(std::max(1, lanes)) {
  const Geometry& g = geometry_;
  maps_.assign(static_cast<std::size_t>(g.point_count()) * g.shift_count(), 0.0);
  energy_flags_.assign(static_cast<std::size_t>(g.point_count()), 0);
  peaks_.resize(static_cast<std::size_t>(g.point_count()));
  int reference_extent[kDims], target_extent[kDims];
  for (int d = 0; d < kDims; ++d) {
    reference_extent[d] = g.reference_extent(d);
    target_extent[d] = g.target_extent(d);
    fft_size_[d] = next_power_of_two(g.kernel[d] + g.shifts(d) - 1);
  }
  f2_.resize(reference_extent);
  f1_.resize(reference_extent);
  g2_.resize(target_extent);
  g1_.resize(target_extent);
  lane_tables_.resize(static_cast<std::size_t>(lanes_));
  lane_flags_.assign(static_cast<std::size_t>(lanes_), std::vector<std::uint8_t>(g.point_count(), 0));
  for (auto& table : lane_tables_) table.resize(reference_extent);
  const std::size_t fft_total = static_cast<std::size_t>(fft_size_[0]) * fft_size_[1] * fft_size_[2];
  lane_fft_a_.assign(static_cast<std::size_t>(lanes_), std::vector<std::complex<double>>(fft_total));
  lane_fft_b_.assign(static_cast<std::size_t>(lanes_), std::vector<std::complex<double>>(fft_total));
  twiddles_.resize(kDims);
  for (int d = 0; d < kDims; ++d) {
    const int n = fft_size_[d];
    twiddles_[d].resize(static_cast<std::size_t>(std::max(1, n / 2)));
    for (int k = 0; k < n / 2; ++k)
      twiddles_[d][k] = std::polar(1.0, -2.0 * std::numbers::pi * k / n);
  }
}

void CpuTracker::correlate(Method method, const float* f, const float* g, ThreadPool& pool) {
  switch (method) {
    case Method::standard: correlate_standard(f, g, pool); break;
    case Method::lewis: correlate_lewis(f, g, pool); break;
    case Method::luo: correlate_luo(f, g, pool); break;
    case Method::auto_select: correlate_luo(f, g, pool); break;  // the stage resolves auto first
  }
}

// peng2019 eq. (1) summed directly for every point and shift.
void CpuTracker::correlate_standard(const float* f, const float* g, ThreadPool& pool) {
  const Geometry& geo = geometry_;
  const int shift_count = geo.shift_count();
  const double count = geo.window_count();
  const double floor = geo.energy_floor();
  pool.parallel_for(static_cast<std::size_t>(geo.point_count()), [&](std::size_t begin, std::size_t end) {
    for (std::size_t p = begin; p < end; ++p) {
      int c[kDims], o[kDims];
      geo.point_coords(static_cast<int>(p), c);
      for (int d = 0; d < kDims; ++d) o[d] = geo.start[d] + c[d] * geo.step[d];
      double energy_f = 0.0, sum_f = 0.0;
      for (int e = 0; e < geo.kernel[2]; ++e)
        for (int l = 0; l < geo.kernel[1]; ++l)
          for (int a = 0; a < geo.kernel[0]; ++a) {
            const double v = f[geo.frame_index(o[0] + a, o[1] + l, o[2] + e)];
            energy_f += v * v;
            sum_f += v;
          }
      std::uint8_t flags = 0;
      if (!reference_has_energy(energy_f, sum_f, geo.zero_mean, count, floor))
        flags |= kFlagNoReferenceEnergy;
      double* map = maps_.data() + p * shift_count;
      for (int s = 0; s < shift_count; ++s) {
        int t[kDims];
        geo.shift_coords(s, t);
        double sum_fg = 0.0, energy_g = 0.0, sum_g = 0.0;
        for (int e = 0; e < geo.kernel[2]; ++e)
          for (int l = 0; l < geo.kernel[1]; ++l)
            for (int a = 0; a < geo.kernel[0]; ++a) {
              const double fv = f[geo.frame_index(o[0] + a, o[1] + l, o[2] + e)];
              const double gv = g[geo.frame_index(o[0] + a + t[0], o[1] + l + t[1], o[2] + e + t[2])];
              sum_fg += fv * gv;
              energy_g += gv * gv;
              sum_g += gv;
            }
        bool target_empty = false;
        map[s] = ncc_value(sum_fg, energy_f, energy_g, sum_f, sum_g, geo.zero_mean, count, floor,
                           &target_empty);
        if (target_empty) flags |= kFlagNoTargetEnergy;
      }
      energy_flags_[p] = flags;
    }
  });
}

void CpuTracker::build_energy_tables(const float* f, const float* g, ThreadPool& pool) {
  const Geometry& geo = geometry_;
  auto at_reference = [&](const float* x, int a, int l, int e) {
    return static_cast<double>(
        x[geo.frame_index(geo.start[0] + a, geo.start[1] + l, geo.start[2] + e)]);
  };
  auto at_target = [&](const float* x, int a, int l, int e) {
    return static_cast<double>(x[geo.frame_index(geo.target_origin(0) + a,
                                                 geo.target_origin(1) + l,
                                                 geo.target_origin(2) + e)]);
  };
  // Four independent tables: one per worker.
  pool.parallel_for(4, [&](std::size_t begin, std::size_t end) {
    for (std::size_t which = begin; which < end; ++which) {
      if (which == 0) f2_.build([&](int a, int l, int e) { double v = at_reference(f, a, l, e); return v * v; });
      if (which == 1 && geo.zero_mean) f1_.build([&](int a, int l, int e) { return at_reference(f, a, l, e); });
      if (which == 2) g2_.build([&](int a, int l, int e) { double v = at_target(g, a, l, e); return v * v; });
      if (which == 3 && geo.zero_mean) g1_.build([&](int a, int l, int e) { return at_target(g, a, l, e); });
    }
  });
}

// Numerators of every shift of point p -> NCC with the table energies (lewis and luo share it).
// numerator(s) gives the cross sum of shift s.
template <typename Numerator>
static void fill_point(const Geometry& geo, int p, const SumTable& f2, const SumTable& f1,
                       const SumTable& g2, const SumTable& g1, Numerator numerator,
                       int s_begin, int s_end, double* map, std::uint8_t& flags) {
  int c[kDims], lo_f[kDims];
  geo.point_coords(p, c);
  for (int d = 0; d < kDims; ++d) lo_f[d] = c[d] * geo.step[d];
  const double count = geo.window_count();
  const double floor = geo.energy_floor();
  const double energy_f = f2.window_sum(lo_f, geo.kernel);  // peng2019 eq. (4)
  const double sum_f = geo.zero_mean ? f1.window_sum(lo_f, geo.kernel) : 0.0;
  if (!reference_has_energy(energy_f, sum_f, geo.zero_mean, count, floor)) flags |= kFlagNoReferenceEnergy;
  for (int s = s_begin; s < s_end; ++s) {
    int t[kDims], lo_g[kDims];
    geo.shift_coords(s, t);
    for (int d = 0; d < kDims; ++d) lo_g[d] = lo_f[d] + t[d] - geo.search_min[d];
    const double energy_g = g2.window_sum(lo_g, geo.kernel);  // peng2019 eq. (5)
    const double sum_g = geo.zero_mean ? g1.window_sum(lo_g, geo.kernel) : 0.0;
    bool target_empty = false;
    map[s] = ncc_value(numerator(s), energy_f, energy_g, sum_f, sum_g, geo.zero_mean, count, floor,
                       &target_empty);
    if (target_empty) flags |= kFlagNoTargetEnergy;
  }
}

// Lewis: numerator by FFT cross-correlation of each reference window with its target region
// (peng2019 eq. (3)), denominators from the sum-tables.
void CpuTracker::correlate_lewis(const float* f, const float* g, ThreadPool& pool) {
  const Geometry& geo = geometry_;
  build_energy_tables(f, g, pool);
  const int shift_count = geo.shift_count();
  const int* size = fft_size_;
  const std::size_t total = static_cast<std::size_t>(size[0]) * size[1] * size[2];
  const double inverse_total = 1.0 / static_cast<double>(total);
  auto buffer_index = [&](int a, int l, int e) {
    return (static_cast<std::size_t>(e) * size[1] + l) * size[0] + a;
  };
  pool.parallel_for(static_cast<std::size_t>(lanes_), [&](std::size_t lane_begin, std::size_t lane_end) {
    for (std::size_t lane = lane_begin; lane < lane_end; ++lane) {
      auto& window = lane_fft_a_[lane];
      auto& region = lane_fft_b_[lane];
      for (int p = static_cast<int>(lane); p < geo.point_count(); p += lanes_) {
        int c[kDims], o[kDims];
        geo.point_coords(p, c);
        for (int d = 0; d < kDims; ++d) o[d] = geo.start[d] + c[d] * geo.step[d];
        std::fill(window.begin(), window.end(), std::complex<double>(0.0));
        std::fill(region.begin(), region.end(), std::complex<double>(0.0));
        for (int e = 0; e < geo.kernel[2]; ++e)
          for (int l = 0; l < geo.kernel[1]; ++l)
            for (int a = 0; a < geo.kernel[0]; ++a)
              window[buffer_index(a, l, e)] = f[geo.frame_index(o[0] + a, o[1] + l, o[2] + e)];
        for (int e = 0; e < geo.kernel[2] + geo.shifts(2) - 1; ++e)
          for (int l = 0; l < geo.kernel[1] + geo.shifts(1) - 1; ++l)
            for (int a = 0; a < geo.kernel[0] + geo.shifts(0) - 1; ++a)
              region[buffer_index(a, l, e)] =
                  g[geo.frame_index(o[0] + geo.search_min[0] + a, o[1] + geo.search_min[1] + l,
                                    o[2] + geo.search_min[2] + e)];
        fft_3d(window, size, twiddles_, false);
        fft_3d(region, size, twiddles_, false);
        for (std::size_t i = 0; i < total; ++i) region[i] *= std::conj(window[i]);
        fft_3d(region, size, twiddles_, true);  // region[tau - min] = sum_m f(m) g(m + tau)
        auto numerator = [&](int s) {
          int t[kDims];
          geo.shift_coords(s, t);
          return region[buffer_index(t[0] - geo.search_min[0], t[1] - geo.search_min[1],
                                     t[2] - geo.search_min[2])].real() * inverse_total;
        };
        std::uint8_t flags = 0;
        fill_point(geo, p, f2_, f1_, g2_, g1_, numerator, 0, shift_count,
                   maps_.data() + static_cast<std::size_t>(p) * shift_count, flags);
        energy_flags_[p] = flags;
      }
    }
  });
}

// Luo-Konofagou: one cross-product sum-table per shift (peng2019 eq. (6), (A4)); shifts are
// spread over the lanes, each lane reusing its own table.
void CpuTracker::correlate_luo(const float* f, const float* g, ThreadPool& pool) {
  const Geometry& geo = geometry_;
  build_energy_tables(f, g, pool);
  const int shift_count = geo.shift_count();
  const int point_count = geo.point_count();
  std::fill(energy_flags_.begin(), energy_flags_.end(), 0);
  // Energy flags and reference sums are per point: the first pass also sets the flags, so the
  // lanes write disjoint shift columns of the maps and flags are merged after.
  std::vector<std::uint8_t>& flags = energy_flags_;
  auto& lane_flags = lane_flags_;
  for (auto& lane : lane_flags) std::fill(lane.begin(), lane.end(), 0);
  pool.parallel_for(static_cast<std::size_t>(lanes_), [&](std::size_t lane_begin, std::size_t lane_end) {
    for (std::size_t lane = lane_begin; lane < lane_end; ++lane) {
      SumTable& cross = lane_tables_[lane];
      for (int s = static_cast<int>(lane); s < shift_count; s += lanes_) {
        int t[kDims];
        geo.shift_coords(s, t);
        cross.build([&](int a, int l, int e) {
          const int fa = geo.start[0] + a, fl = geo.start[1] + l, fe = geo.start[2] + e;
          return static_cast<double>(f[geo.frame_index(fa, fl, fe)]) *
                 g[geo.frame_index(fa + t[0], fl + t[1], fe + t[2])];
        });
        for (int p = 0; p < point_count; ++p) {
          int c[kDims], lo[kDims];
          geo.point_coords(p, c);
          for (int d = 0; d < kDims; ++d) lo[d] = c[d] * geo.step[d];
          const double numerator = cross.window_sum(lo, geo.kernel);
          fill_point(geo, p, f2_, f1_, g2_, g1_, [&](int) { return numerator; }, s, s + 1,
                     maps_.data() + static_cast<std::size_t>(p) * shift_count, lane_flags[lane][p]);
        }
      }
    }
  });
  for (int p = 0; p < point_count; ++p)
    for (int lane = 0; lane < lanes_; ++lane) flags[p] |= lane_flags[lane][p];
}

void CpuTracker::find_peaks(ThreadPool& pool) {
  const Geometry& geo = geometry_;
  const int shift_count = geo.shift_count();
  pool.parallel_for(static_cast<std::size_t>(geo.point_count()), [&](std::size_t begin, std::size_t end) {
    for (std::size_t p = begin; p < end; ++p)
      peaks_[p] = find_peak(maps_.data() + p * shift_count, geo, energy_flags_[p]);
  }, 64);
}

}  // namespace sonopipe::ncc
