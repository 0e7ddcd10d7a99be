// Kernel of the `loupas` and `kasai` stages (stages/arfi/loupas/loupas.h): one thread per output depth of one
// (location, track) pair; window sums in float, final step shared with the CPU reference
// (stages/arfi/arfi_conventions.h).
#pragma once

#include <cuda_runtime.h>

#include "stages/arfi/loupas/loupas_params.h"

namespace sonopipe::cuda {

// in: complex64 [location, ensemble, sample]; f_dem_hz: one float per output depth (device);
// displacement/quality: [location, track, depth] of float or __half per shape.output_half.
void loupas(const float2* in, const float* f_dem_hz, const LoupasShape& shape, void* displacement,
            void* quality, cudaStream_t stream);

}  // namespace sonopipe::cuda
