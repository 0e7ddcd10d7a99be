// The FFT box of ncc_track's lewis method, per axis: the smallest size >= kernel + shifts - 1 with
// no prime factor above 7 (sizes cuFFT handles fastest). Shared by the CUDA tracker and the live
// bench, which plans the same boxes apart.
#pragma once

#include <algorithm>

namespace sonopipe::ncc {

inline int good_fft_size(int m) {
  for (int n = std::max(1, m);; ++n) {
    int r = n;
    for (int p : {2, 3, 5, 7})
      while (r % p == 0) r /= p;
    if (r == 1) return n;
  }
}

}  // namespace sonopipe::ncc
