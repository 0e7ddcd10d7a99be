// When `eigensolver: auto` tries the subspace route (EigenRoute::retry): host-side policy, no CUDA.
//
// The subspace route costs about half the full solver where the Gram matrix's spectrum has a gap at
// the tissue rank, and the full solver plus the iteration where it has none (the iteration's
// convergence test fails on the device and the full solver runs in a graph node: docs/doppler.md).
// A stream's spectrum changes slowly, so after a fallback the next frames go straight to the full
// solver and only then is the subspace route tried again; every fallback in a row doubles that
// wait (kSubspaceRetryFirst, 2x, 4x, ... up to kSubspaceRetryMax frames), and kSubspaceRetryFirst
// tries in a row without a new fallback bring it back to kSubspaceRetryFirst. On data with no gap
// the cost over the full solver is then one failed try per kSubspaceRetryMax frames.
//
// The fallback count comes from the device without a host wait: the kernel that counts a fallback
// also stores the count into mapped host memory, which the next frame's run() reads. It may lag by
// the frames in flight; a count that is not larger than the last one seen is no news.
#pragma once

#include <algorithm>
#include <cstdint>

namespace sonopipe {

inline constexpr int kSubspaceRetryFirst = 4;
inline constexpr int kSubspaceRetryMax = 128;

class SubspaceRetry {
 public:
  // `fallbacks`: the count already published before this stream starts (not news).
  explicit SubspaceRetry(std::uint64_t fallbacks = 0) : seen_(fallbacks) {}
  // Decides the next frame: true = try the subspace route, false = the full solver. `fallbacks` is
  // the device's count as last published (monotone; a stale smaller value is ignored).
  bool try_subspace(std::uint64_t fallbacks) {
    if (fallbacks > seen_) {
      seen_ = fallbacks;
      skip_ = wait_;
      wait_ = std::min(2 * wait_, kSubspaceRetryMax);
      tries_in_a_row_ = 0;
    }
    if (skip_ > 0) {
      --skip_;
      return false;
    }
    if (++tries_in_a_row_ >= kSubspaceRetryFirst) wait_ = kSubspaceRetryFirst;
    return true;
  }
  int next_wait() const { return wait_; }    // frames of full solver after the next fallback
  int frames_to_skip() const { return skip_; }  // full-solver frames left before the next try

 private:
  std::uint64_t seen_ = 0;
  int wait_ = kSubspaceRetryFirst;
  int skip_ = 0;
  int tries_in_a_row_ = 0;
};

}  // namespace sonopipe
