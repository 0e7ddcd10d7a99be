// The rate at which an SM's load path delivers data-dependent 16-byte shared-memory reads to its
// threads (bytes per second over the device): the ceiling of any kernel whose inner step is a gather
// from a shared-memory tile, such as the beamformer's interpolation (one 16-byte entry per IQ term).
#pragma once

namespace sonopipe::bench {

// Measured on device 0 now (CUDA builds with a device); 0 otherwise.
double measure_shared_gather_gb_per_s();

}  // namespace sonopipe::bench
