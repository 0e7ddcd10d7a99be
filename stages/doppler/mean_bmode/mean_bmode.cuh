// Kernel of the `mean_bmode` stage (stages/doppler/mean_bmode/mean_bmode.h): one thread per pixel
// sums the ensemble's frames (float) and writes the B-mode in dB.
#pragma once

#include <cuda_runtime.h>

#include "stages/doppler/mean_bmode/mean_bmode_params.h"

namespace sonopipe::cuda {

// ensemble: complex64 [frame, lateral, axial]; bmode_db: float [lateral, axial].
void mean_bmode(const float2* ensemble, const MeanBmodeShape& shape, float* bmode_db, cudaStream_t stream);

}  // namespace sonopipe::cuda
