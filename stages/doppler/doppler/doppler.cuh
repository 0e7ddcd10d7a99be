// Kernels of the `doppler` stage (stages/doppler/doppler/doppler.h): one thread per pixel sums |x|^2
// and R1 over the ensemble (float), a second applies the box, the power threshold and Kasai's
// estimate (stages/doppler/doppler_conventions.h, shared with the CPU reference).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "stages/doppler/doppler/doppler_params.h"

namespace sonopipe::cuda {

// Device workspace doppler() needs for a shape.
std::size_t doppler_workspace_bytes(const DopplerShape& shape);

// ensemble: complex64 [frame, lateral, axial]; velocity/power/power_db: float [lateral, axial].
void doppler(const float2* ensemble, const DopplerShape& shape, float* velocity, float* power, float* power_db,
             void* workspace, cudaStream_t stream);

}  // namespace sonopipe::cuda
