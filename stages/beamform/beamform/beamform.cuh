// Kernels of the `beamform` stage (stages/beamform/beamform/beamform.h). Linear interpolation on a linear or
// sector image of plane and diverging waves: the tiled kernel (a block of pixels stages the samples
// it needs in shared memory, element by element), or for an ensemble (a frame axis) the ensemble
// kernel (the same staging with frames as rows; each pixel's delays and weights computed once for
// all its frames). Otherwise (cubic, focused transmits, one line per
// transmit): the natural spline of every channel line (one thread per line, cubic only), then one
// thread per output pixel summing every (transmit, element) pair with the per-pixel math shared with
// the CPU reference (stages/beamform/beamform/das.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "stages/beamform/beamform/das.h"

namespace sonopipe::cuda {

struct BeamformLaunch {
  const float* input;                  // [frame, transmit, element, sample] x channels floats
  int channels;                        // 1 RF, 2 IQ
  std::int64_t frames;                 // ensemble size (1: a single acquisition)
  std::int64_t transmits;
  beamform::DasSetup<float> setup;     // its pointers are device memory
  float* spline_m;                     // cubic: [line, sample] x channels; c: [line, sample] (line: frame, transmit, element)
  float* spline_c;
  enum class Grid { linear, sector, lines } grid;
  std::int64_t lateral, depth;
  float lateral_min, lateral_step;     // x in m (linear) or angle in rad (sector); unused for lines
  float depth_min_m, depth_step_m;     // depth (linear, lines) or radius (sector)
  void* output;                        // pixel (frame f, lateral i, depth j) at f frame_stride + i lateral_stride + j
  std::int64_t output_frame_stride, output_lateral_stride;  // in pixels
  float baseband_cycles_per_m;         // IQ: output times exp(-j 2 pi this depth); 0: carrier phase kept
  bool elements_ascending;             // element x sorted ascending: apertures found by bisection
  bool focused_transmits;              // any focused transmit (its arrival time jumps at the focal depth)
};

void beamform(const BeamformLaunch& launch, cudaStream_t stream);

// The tiled kernel's blocks (pixels: depth fastest) and the samples it stages per (transmit,
// element): a block sums in shared memory when 2 tile_half_span + 2 <= kTileSamples, else pixel by
// pixel. reach_m: the block's largest distance from its centre pixel (beamform.cu explains the bound).
constexpr int kTileLateral = 8, kTileDepth = 32, kTileSamples = 64;
constexpr int kTileChunk = 64;  // elements whose block-wide data sit in shared memory at once
// The ensemble kernel (inputs with a frame axis): blocks of kEnsembleLateral x kEnsembleDepth pixels
// and kEnsembleFrames frames, the same window of up to kTileSamples entries per (frame, element),
// kEnsembleStage elements staged per block barrier; rows of kEnsembleNarrowRow entries where every
// block's window fits them, else of kTileSamples.
constexpr int kEnsembleLateral = 16, kEnsembleDepth = 16, kEnsembleFrames = 16, kEnsembleStage = 2;
constexpr int kEnsembleNarrowRow = 32;
SONOPIPE_HD inline float tile_half_span(float reach_m, float inverse_c, float sampling_frequency_hz) {
  return ceilf(2.0f * reach_m * inverse_c * sampling_frequency_hz) + 2.0f;  // +2: rounding of float positions
}

}  // namespace sonopipe::cuda
