// Benchmark suites of sonopipe-bench, one per chain; each adds itself to the app (see main.cpp).
#pragma once

#include <CLI/CLI.hpp>

namespace sonopipe::bench {

void add_core_bench(CLI::App& app);   // core_bench.cpp: daemon throughput/latency, ZeroMQ baseline
void add_perfusion_bench(CLI::App& app);  // perfusion_bench.cpp: wang2012 Tables 2 and 3, whole liver
void add_arfi_bench(CLI::App& app);   // arfi_bench.cpp: ARFI chain vs the paper, floors
void add_strain_bench(CLI::App& app); // strain_bench.cpp: ncc_track methods vs the peng2019 papers
void add_beamform_bench(CLI::App& app);  // beamform_bench.cpp: PICMUS-sized frame, focused lines, floors
void add_devices_bench(CLI::App& app);   // devices_bench.cpp: a pipeline on 1, 2, ... GPUs (multi-device executor)
void add_doppler_bench(CLI::App& app);  // doppler_bench.cpp: clutter_filter and doppler at fUS scale
void add_doppler_daemon_bench(CLI::App& app);  // doppler_daemon_bench.cpp: the chain through sonopiped at acquisition rate
void add_soak_bench(CLI::App& app);     // soak_bench.cpp: lossless soak through convert with a checker
void add_shm_transport_bench(CLI::App& app);  // shm_transport_bench.cpp: shm:// vs ZeroMQ ipc on the CPU
void add_live_bench(CLI::App& app);       // live_bench.cpp: live parameter changes, set -> next frame
void add_acknowledgement_bench(CLI::App& app);  // acknowledgement_bench.cpp: delivery acknowledgement's cost (CPU)
void add_host_copy_bench(CLI::App& app);  // host_copy_bench.cpp: one thread's copy of a result into a socket, by its memory (CUDA)

}  // namespace sonopipe::bench
