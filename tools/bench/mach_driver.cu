// mach_driver: times mach's delay-and-sum kernel (github.com/Forest-Neurotech/mach, BSD-3-Clear,
// src/mach/kernel.cu) on the ensemble workloads of tools/bench/ensemble_workloads.h, the same data
// `sonopipe-bench beamform --case pwi_disk_ensemble` beamforms, so the two can be compared in one run
// on one GPU. Built only by tools/bench/mach_bench.sh from a mach checkout the user gives (never part
// of sonopipe's build, nothing of mach is copied into this tree): the script writes the part of
// kernel.cu before its Python binding (the kernel, its helpers and its launch function
// _beamform_impl, unchanged; the nanobind includes dropped) to mach_kernel_part.cuh in its build
// folder, which this file includes and calls.
//
// mach's interface (kernel.cu): channel data [element, sample, frame] (frames fastest), receive
// element positions float3, output points float3, the transmit arrival time of each point (s), output
// [point, frame] accumulated with atomicAdd (so zeroed before each call), f-number, rx_start_s (time
// of sample 0), f_s, c, modulation frequency (IQ phase exp(+j 2 pi f_mod tau)), Tukey alpha, linear
// interpolation. Its conventions are ours (stages/beamform/beamform_conventions.h): tau = transmit
// arrival + |p - e| / c, aperture |x_e - x| <= z / (2 F#), the same Tukey window; it skips a sample
// position outside [0, samples - 1] where ours interpolates towards 0 within one sample of the ends.
//
// Timing: CUDA events around _beamform_impl on the legacy default stream (its launch checks the
// device attributes and sets the cache configuration on the host before each launch, and it
// synchronises the device at its end), median over --repeats calls after 3 warm-ups; the output is
// zeroed before each call, outside the timed span. The event time includes mach's host-side work
// between the events; ncu gives the kernel alone (tools/bench/mach_bench.sh prints the command).
// Check: a few pixels of frames 0 and F-1 against the sonopipe CPU reference (stages/beamform/beamform/das.h,
// double) on the same data: the largest difference relative to the largest value.
#include <algorithm>
#include <chrono>
#include <complex>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

// mach's driver and compute-capability checks (called only from its Python module's init, which is
// not part of this build) warn through Python's C API; here a warning goes to stderr.
#define PyExc_RuntimeWarning nullptr
inline int PyErr_WarnEx(const void*, const char* message, int) {
  std::fprintf(stderr, "mach warning: %s\n", message);
  return 0;
}
#include "mach_kernel_part.cuh"
#include "stages/beamform/beamform/das.h"
#include "tools/bench/ensemble_workloads.h"

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "mach_driver: %s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using sonopipe::bench::EnsembleWorkload;
  int repeats = 30;
  const EnsembleWorkload* workload = &sonopipe::bench::kPwiDisk;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--repeats" && a + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++a]));
    } else if (arg == "--workload" && a + 1 < argc) {
      const std::string name = argv[++a];
      if (name == "pwi_disk") workload = &sonopipe::bench::kPwiDisk;
      else if (name == "fus") workload = &sonopipe::bench::kFus;
      else return std::fprintf(stderr, "mach_driver: unknown workload '%s' (pwi_disk, fus)\n", name.c_str()), 2;
    } else {
      std::fprintf(stderr, "usage: mach_driver [--repeats N] [--workload pwi_disk|fus]\n");
      return 2;
    }
  }
  const EnsembleWorkload& w = *workload;
  const int F = w.frames, E = w.elements, S = w.samples;
  const int P = w.lateral_pixels * w.depth_pixels;

  // The shared samples [frame, element, sample] -> mach's [element, sample, frame].
  const std::vector<float> ours = sonopipe::bench::ensemble_samples(w);
  std::vector<float2> channel(static_cast<std::size_t>(E) * S * F);
  for (int f = 0; f < F; ++f)
    for (int e = 0; e < E; ++e)
      for (int s = 0; s < S; ++s) {
        const std::size_t from = ((static_cast<std::size_t>(f) * E + e) * S + s) * 2;
        channel[(static_cast<std::size_t>(e) * S + s) * F + f] = make_float2(ours[from], ours[from + 1]);
      }
  std::vector<float3> elements(E), points(P);
  std::vector<float> arrivals(P);
  for (int e = 0; e < E; ++e) elements[e] = make_float3(float(w.element_x_m(e)), 0.0f, 0.0f);
  for (int i = 0; i < w.lateral_pixels; ++i)
    for (int j = 0; j < w.depth_pixels; ++j) {
      const int p = i * w.depth_pixels + j;
      points[p] = make_float3(float(w.pixel_x_m(i)), 0.0f, float(w.pixel_z_m(j)));
      arrivals[p] = float(w.pixel_z_m(j) / w.speed_of_sound_m_per_s);  // 0-degree plane wave
    }

  float2 *d_channel, *d_out;
  float3 *d_elements, *d_points;
  float* d_arrivals;
  check(cudaMalloc(&d_channel, channel.size() * sizeof(float2)), "cudaMalloc");
  check(cudaMalloc(&d_out, static_cast<std::size_t>(P) * F * sizeof(float2)), "cudaMalloc");
  check(cudaMalloc(&d_elements, E * sizeof(float3)), "cudaMalloc");
  check(cudaMalloc(&d_points, P * sizeof(float3)), "cudaMalloc");
  check(cudaMalloc(&d_arrivals, P * sizeof(float)), "cudaMalloc");
  check(cudaMemcpy(d_channel, channel.data(), channel.size() * sizeof(float2), cudaMemcpyHostToDevice), "copy");
  check(cudaMemcpy(d_elements, elements.data(), E * sizeof(float3), cudaMemcpyHostToDevice), "copy");
  check(cudaMemcpy(d_points, points.data(), P * sizeof(float3), cudaMemcpyHostToDevice), "copy");
  check(cudaMemcpy(d_arrivals, arrivals.data(), P * sizeof(float), cudaMemcpyHostToDevice), "copy");

  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  std::vector<float> times;
  std::vector<double> wall;
  for (int r = 0; r < repeats + 3; ++r) {
    check(cudaMemset(d_out, 0, static_cast<std::size_t>(P) * F * sizeof(float2)), "memset");
    check(cudaDeviceSynchronize(), "sync");
    const auto t0 = std::chrono::steady_clock::now();
    check(cudaEventRecord(start), "record");
    _beamform_impl<float2>(d_channel, d_elements, d_points, d_arrivals, d_out, E, S, P, F, float(w.f_number),
                           float(w.first_sample_s), float(w.sampling_frequency_hz), float(w.speed_of_sound_m_per_s),
                           float(w.center_frequency_hz), float(w.tukey_alpha), InterpolationType::Linear);
    check(cudaEventRecord(stop), "record");
    check(cudaEventSynchronize(stop), "sync");
    const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    if (r >= 3) times.push_back(ms), wall.push_back(wall_ms);
  }
  check(cudaGetLastError(), "mach kernel");
  std::sort(times.begin(), times.end());
  std::sort(wall.begin(), wall.end());

  // Check against sonopipe's CPU reference at a few pixels of the first and last frame.
  std::vector<float2> out(static_cast<std::size_t>(P) * F);
  check(cudaMemcpy(out.data(), d_out, out.size() * sizeof(float2), cudaMemcpyDeviceToHost), "copy");
  namespace bf = sonopipe::beamform;
  const bf::Transmit<double> plane{bf::Wave::plane, 0.0, 0.0, 0.0, 0.0};
  std::vector<double> element_x(E), zeros(E, 0.0);
  for (int e = 0; e < E; ++e) element_x[e] = w.element_x_m(e);
  const bf::DasSetup<double> setup{&plane, element_x.data(), zeros.data(), zeros.data(), E, S,
                                   1.0 / w.speed_of_sound_m_per_s, w.sampling_frequency_hz, w.first_sample_s,
                                   w.center_frequency_hz, bf::Window::tukey, w.tukey_alpha, w.f_number, false};
  double largest = 0, worst = 0;
  for (int f : {0, F - 1})
    for (int k = 0; k < 25; ++k) {
      const int i = (k % 5) * (w.lateral_pixels - 1) / 4, j = (k / 5) * (w.depth_pixels - 1) / 4;
      const auto v = bf::das_pixel<double, 2>(setup, w.pixel_x_m(i), w.pixel_z_m(j), 0, 1, [&](int, int e) {
        return bf::Line<double, 2>{ours.data() + (static_cast<std::size_t>(f) * E + e) * S * 2, nullptr};
      });
      const float2 m = out[static_cast<std::size_t>(i * w.depth_pixels + j) * F + f];
      largest = std::max(largest, std::abs(std::complex<double>(v.v[0], v.v[1])));
      worst = std::max(worst, std::abs(std::complex<double>(v.v[0] - m.x, v.v[1] - m.y)));
    }
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("mach kernel on %s, workload %s: IQ %d elements x %d samples x %d frames -> %d x %d pixels, F# %.1f, "
              "Tukey %.2f, linear\n",
              prop.name, w.name, E, S, F, w.lateral_pixels, w.depth_pixels, w.f_number, w.tukey_alpha);
  std::printf("mach event ms (median of %d, launch checks included): %.3f  (min %.3f, max %.3f); host wall ms %.3f\n",
              repeats, times[times.size() / 2], times.front(), times.back(), wall[wall.size() / 2]);
  std::printf("check vs sonopipe CPU reference at 50 pixels: max |difference| %.3g of max |value| %.3g (%.2g)\n", worst,
              largest, largest > 0 ? worst / largest : 0.0);
  cudaFree(d_channel), cudaFree(d_out), cudaFree(d_elements), cudaFree(d_points), cudaFree(d_arrivals);
  return 0;
}
