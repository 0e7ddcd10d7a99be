// CUDA path of the `ncc_track` stage (stages/strain/ncc_track/ncc_track.h): device scratch and the launch sequence
// of the three NCC methods, the peak search and the frame normalisation. Takes device pointers
// and a stream; knows nothing of the pipeline. Conventions: stages/strain/ncc_track/ncc_track_params.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <cuda_runtime_api.h>

#include "stages/strain/ncc_track/ncc_track_params.h"

namespace sonopipe::cuda {

class NccTracker {
 public:
  // Allocates the buffers of `method` (configure time; auto_select: of every method, for
  // fastest_method()). `batch_bytes` bounds the lewis spectra and the luo cross tables processed at
  // once. lewis' cuFFT plans come from a process-wide cache of plans by shape (ncc_track.cu).
  NccTracker(const ncc::Geometry& geometry, std::size_t batch_bytes,
             ncc::Method method = ncc::Method::auto_select);
  // Only once the work issued with it has finished, as the host has seen (an event or stream
  // synchronised after it; a device lane frees a replaced stage after its frames): its memory goes
  // back to a stream-ordered pool without waiting for the device (ncc_track.cu, TrackerMemory).
  ~NccTracker();
  NccTracker(const NccTracker&) = delete;
  NccTracker& operator=(const NccTracker&) = delete;

  // out = in / rms(in) (unit mean square), no host sync.
  void normalise(const float* in, float* out, std::size_t count, cudaStream_t stream);
  // NCC maps (points x shifts, device) for the pair f (reference) -> g (target).
  void correlate(ncc::Method method, const float* f, const float* g, cudaStream_t stream);
  // Peaks of the last maps into the stage outputs ([grid..., rank] displacements; spacing per
  // dimension in metres, 1 for samples).
  void find_peaks(int rank, const float spacing[ncc::kDims], float* displacement,
                  float* displacement_samples, float* correlation, std::uint8_t* flags,
                  cudaStream_t stream);

  // Times every method once on random frames (synchronises; configure time) and returns the
  // fastest; `why` gets the times.
  ncc::Method fastest_method(std::string& why);

  const float* maps() const;                       // device, points x shifts
  std::size_t device_bytes(ncc::Method method) const;  // peak scratch of that method
  int luo_shifts_per_batch() const;
  int lewis_points_per_batch() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  ncc::Method method_;
};

}  // namespace sonopipe::cuda
