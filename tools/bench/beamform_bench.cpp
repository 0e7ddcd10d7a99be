// `sonopipe-bench beamform`: the beamform stage's CUDA path on (a) a PICMUS-sized frame, 11 plane
// waves x 128 elements x 2048 samples -> a 256 x 1024 pixel image (IQ and RF, linear and cubic
// interpolation), and (b) 192 focused lines with 64-element receive apertures -> 192 x 1024, with
// the work counted first: terms = (pixel, transmit, element) triples inside the receive aperture,
// FP32 flops per term (IQ: sample position 2 FMA + complex lerp 4 FMA + phasor MAC 4 FMA = 20 flops;
// RF: 2 + 2 + 1 FMA = 10 flops) and the bytes that must cross device memory (channel data in, image
// out). GPU time: median of CUDA events around the stage's run_cuda (geometry upload included).
// Not a floor of METHOD's but the ceiling of a gathering kernel: "gather ms" is the time the SMs'
// load path takes to deliver each linear term's two interpolation inputs (a sample and its slope,
// C floats each: 16 bytes IQ, 8 RF) at the measured shared-memory gather rate.
// tools/bench/beamform_torch.py is the PyTorch peer (gather + sum) on the same cases.
// Ensemble cases (tools/bench/ensemble_workloads.h): pwi_disk_ensemble, mach's benchmark shape
// (32 frames of one plane wave, [frame, transmit, element, sample] -> [frame, lateral, axial]);
// pwi_disk_compound, the same samples as 32 compounded transmits of one frame (the tiled kernel);
// fus_ensemble, 200 frames -> 256 x 256. An ensemble term is (pixel, transmit, element, frame): FP32
// flops per term 16 IQ (complex lerp 4 FMA + weighted-phasor MAC 4 FMA; the sample position and the
// phasor are per (pixel, transmit, element), shared by the frames) or 6 RF. tools/bench/mach_bench.sh
// times mach's kernel on the same pwi_disk data.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <numbers>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "sdk/thread_pool.h"
#include "stages/beamform/beamform/beamform.h"
#include "tools/bench/commands.h"
#include "tools/bench/device_ceilings.h"
#include "tools/bench/ensemble_frame.h"
#include "tools/bench/ensemble_workloads.h"
#include "tools/sim/channel_sim.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>

#include "stages/common/cuda_check.h"
#endif

namespace sonopipe::bench {
namespace {

struct BeamformBenchOptions {
  std::vector<std::string> cases;  // empty: all
  int repeats = 30;
  bool cpu = false;
  int threads = 0;
  double peak_tflops = 0.0, peak_gb_per_s = 0.0;
};

struct Case {
  std::string name;
  bool iq;
  bool cubic;
  bool focused;  // 192 focused lines (output lines) instead of 11 plane waves (image)
  const EnsembleWorkload* workload = nullptr;  // an ensemble workload instead of the PICMUS-sized frame
  bool compound = false;                       // the workload's frames as compounded transmits of one frame
};

sim::ChannelSimResult channel_frame(const Case& c) {
  sim::ChannelSimConfig config;
  config.iq = c.iq;
  config.center_frequency_hz = 5.208e6;
  config.sampling_frequency_hz = c.iq ? 2 * config.center_frequency_hz : 4 * config.center_frequency_hz;
  config.samples = 2048;
  config.transmits = c.focused ? sim::focused_line_sequence(config, 192, 25e-3, 64)
                               : sim::plane_wave_sequence(11, 16 * std::numbers::pi / 180);
  sim::ChannelSimResult frame = sim::simulate_channel(config);  // geometry; no scatterers: data below
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : frame.rf) v = normal(rng);
  for (auto& v : frame.iq) v = {normal(rng), normal(rng)};
  return frame;
}

BeamformParams params_of(const Case& c) {
  BeamformParams p;
  if (c.workload) return ensemble_beamform_params(*c.workload);
  p.x_min_m = -19e-3, p.x_max_m = 19e-3, p.z_min_m = 5e-3, p.z_max_m = 50e-3;
  p.lateral_pixels = 256;
  p.depth_pixels = 1024;
  p.cubic = c.cubic;
  p.window = beamform::Window::hann;
  p.f_number = 1.5;
  if (c.focused) {
    p.output = BeamformParams::Output::lines;
    p.f_number = p.z_max_m / (64 * 0.3e-3);  // 64 elements at the deepest line point
  }
  return p;
}

void run_beamform_bench(const BeamformBenchOptions& options) {
  const DeviceCeilings ceilings = device_ceilings(options.peak_tflops, options.peak_gb_per_s);
  std::printf("%s\n", ceilings.description.c_str());
  std::printf("%-22s %9s %9s %9s %8s %8s %9s %7s %10s %9s\n", "case", "GPU ms", "frames/s", "Gterms", "GFLOP", "MB",
              "floor ms", "gap x", "gather ms", "CPU ms");
  ThreadPool pool(options.threads);
  const std::vector<Case> all_cases = {{"picmus-iq-linear", true, false, false},
                                       {"picmus-iq-cubic", true, true, false},
                                       {"picmus-rf-linear", false, false, false},
                                       {"focused192-rf-linear", false, false, true},
                                       {"pwi_disk_ensemble", true, false, false, &kPwiDisk},
                                       {"pwi_disk_compound", true, false, false, &kPwiDisk, true},
                                       {"fus_ensemble", true, false, false, &kFus}};
  for (const std::string& name : options.cases)
    if (std::none_of(all_cases.begin(), all_cases.end(), [&](const Case& c) { return c.name == name; }))
      throw std::runtime_error("beamform bench: no case '" + name + "'");
  for (const Case& c : all_cases) {
    if (!options.cases.empty() && std::find(options.cases.begin(), options.cases.end(), c.name) == options.cases.end())
      continue;
    BenchFrame frame;
    if (c.workload) {
      frame = ensemble_frame(*c.workload, c.compound);
    } else {
      sim::ChannelSimResult simulated = channel_frame(c);
      frame.meta = simulated.meta;
      frame.element_x_m = simulated.element_x_m;
      const auto* floats = static_cast<const float*>(simulated.data());
      frame.data.assign(floats, floats + simulated.bytes() / sizeof(float));
    }
    const BeamformParams p = params_of(c);
    BeamformStage stage(p);
    const TensorSpec& in_spec = frame.meta.payload;
    StagePlan plan = stage.configure(frame.meta, in_spec, Backend::cpu);
    const TensorSpec out_spec = plan.outputs[0].spec;
    const std::size_t image_axis = out_spec.axes.size() - 2;
    const double terms =
        count_terms(stage, frame, p, out_spec.axes[image_axis].size, out_spec.axes[image_axis + 1].size);
    const bool ensemble = frame.frames > 1;
    const double gflop = terms * (ensemble ? (c.iq ? 16.0 : 6.0) : (c.iq ? 20.0 : 10.0)) * 1e-9;
    const double megabytes = double(in_spec.byte_size() + out_spec.byte_size()) * 1e-6;
    const double floor_ms = std::max(gflop / ceilings.fp32_tflops, megabytes * 1e-3 / ceilings.copy_gb_per_s * 1e3);
    const double gather_bytes = terms * 2 * (c.iq ? 2 : 1) * sizeof(float);
    const double gather_ms = c.cubic || ceilings.shared_gather_gb_per_s <= 0
                                 ? -1.0
                                 : gather_bytes / (ceilings.shared_gather_gb_per_s * 1e9) * 1e3;
    double cpu_ms = -1;
    if (options.cpu) {
      std::vector<std::byte> out(out_spec.byte_size()), workspace(plan.workspace_bytes);
      void* outputs[] = {out.data()};
      const StageIo io{.frame = frame.meta, .input_spec = in_spec, .input = frame.data.data(), .outputs = outputs,
                       .workspace = workspace.data(), .pool = &pool};
      const auto t0 = std::chrono::steady_clock::now();
      stage.run_cpu(io);
      cpu_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    double gpu_ms = -1;
#ifdef SONOPIPE_WITH_CUDA
    int devices = 0;
    if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
      plan = stage.configure(frame.meta, in_spec, Backend::cuda);
      void *input = nullptr, *output = nullptr, *workspace = nullptr, *staging = nullptr;
      SONOPIPE_CUDA_CHECK(cudaMalloc(&input, in_spec.byte_size()));
      SONOPIPE_CUDA_CHECK(cudaMalloc(&output, out_spec.byte_size()));
      SONOPIPE_CUDA_CHECK(cudaMalloc(&workspace, plan.workspace_bytes));
      SONOPIPE_CUDA_CHECK(cudaMallocHost(&staging, plan.host_staging_bytes));
      SONOPIPE_CUDA_CHECK(cudaMemcpy(input, frame.data.data(), in_spec.byte_size(), cudaMemcpyHostToDevice));
      cudaStream_t stream;
      SONOPIPE_CUDA_CHECK(cudaStreamCreate(&stream));
      cudaEvent_t start, stop;
      SONOPIPE_CUDA_CHECK(cudaEventCreate(&start));
      SONOPIPE_CUDA_CHECK(cudaEventCreate(&stop));
      void* outputs[] = {output};
      const StageIo io{.frame = frame.meta, .input_spec = in_spec, .input = input, .outputs = outputs,
                       .workspace = workspace, .host_staging = staging, .stream = stream};
      std::vector<float> times;
      for (int r = 0; r < options.repeats + 3; ++r) {  // three warm-ups
        SONOPIPE_CUDA_CHECK(cudaEventRecord(start, stream));
        stage.run_cuda(io);
        SONOPIPE_CUDA_CHECK(cudaEventRecord(stop, stream));
        SONOPIPE_CUDA_CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        SONOPIPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        if (r >= 3) times.push_back(ms);
      }
      std::sort(times.begin(), times.end());
      gpu_ms = times[times.size() / 2];
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
      cudaStreamDestroy(stream);
      cudaFree(input);
      cudaFree(output);
      cudaFree(workspace);
      cudaFreeHost(staging);
    }
#endif
    std::printf("%-22s %9.3f %9.0f %9.3f %8.2f %8.1f %9.3f %7.2f %10.3f %9.1f\n", c.name.c_str(), gpu_ms,
                gpu_ms > 0 ? 1e3 / gpu_ms : 0.0, terms * 1e-9, gflop, megabytes, floor_ms,
                gpu_ms > 0 ? gpu_ms / floor_ms : 0.0, gather_ms, cpu_ms);
  }
}

}  // namespace

void add_beamform_bench(CLI::App& app) {
  auto options = std::make_shared<BeamformBenchOptions>();
  CLI::App* command = app.add_subcommand(
      "beamform", "beamform stage: PICMUS-sized plane-wave frame, 192 focused lines, ensembles (pwi_disk, fus)");
  command->add_option("--case", options->cases,
                      "cases to run (repeatable; default all): picmus-iq-linear, picmus-iq-cubic, picmus-rf-linear, "
                      "focused192-rf-linear, pwi_disk_ensemble, pwi_disk_compound, fus_ensemble");
  command->add_option("--repeats", options->repeats, "GPU repetitions (median)")->capture_default_str();
  command->add_flag("--cpu", options->cpu, "also time the CPU reference once per case (slow)");
  command->add_option("--threads", options->threads, "CPU threads (0: all)")->capture_default_str();
  command->add_option("--peak-tflops", options->peak_tflops, "FP32 ceiling for the floor (0: from the device)");
  command->add_option("--peak-gb-s", options->peak_gb_per_s, "memory ceiling for the floor (0: measured copy)");
  command->callback([options] { run_beamform_bench(*options); });
}

}  // namespace sonopipe::bench
