// SONOPIPE_HD marks inline math that compiles for the CPU and for CUDA kernels alike, so the CPU
// reference and the kernels share one implementation of the kernel math.
#pragma once

#if defined(__CUDACC__)
#define SONOPIPE_HD __host__ __device__
#else
#define SONOPIPE_HD
#endif
