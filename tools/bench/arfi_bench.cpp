// `sonopipe-bench arfi`: the ARFI chain (convert -> upsample -> loupas -> motion_filter) on the
// paper's set (52 locations x 81 lines x 493 IQ samples, int16), through the stage interface:
// per-stage GPU time, H2D/D2H, one set end to end, sustained sets/s with several sets in flight,
// the CPU backend with all cores, the transfer and HBM floors, rosenzweig2011's figures, and the
// spline subset error for k = 1..4 and the default.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "runtime/gpu_device.h"
#include "sdk/thread_pool.h"
#include "stages/common/convert/convert.h"
#include "stages/arfi/loupas/loupas.h"
#include "stages/arfi/motion_filter/motion_filter.h"
#include "stages/arfi/upsample/upsample.h"
#include "tools/bench/commands.h"
#include "tools/sim/arfi_sim.h"

#ifdef SONOPIPE_WITH_CUDA
#include <cuda_runtime_api.h>
#include "stages/common/cuda_check.h"
#endif

namespace sonopipe::bench {
namespace {

constexpr double kPaperGpuMs = 267;   // rosenzweig2011 sec. V: load + GPU + copies, one set
constexpr double kPaperCppMs = 7255;  // same operations in C++ on one CPU core
constexpr double kPaperSplineRmsPercent[] = {0.33, 0.15, 0.12, 0.12};  // k = 1..4

struct Options {
  int repeats = 30;
  int cpu_repeats = 3;
  int threads = 0;
  int in_flight = 3;
  int sustained_sets = 60;
  int batch_sets = 32;
  std::uint64_t seed = 1;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The chain as stage objects, with the parameters of config/arfi.yaml unless overridden.
struct Chain {
  std::vector<std::string> names;
  std::vector<std::unique_ptr<Stage>> stages;
};

Chain make_chain(bool compact_output) {
  Chain c;
  auto add = [&](const StageInfo& info, std::map<std::string, RawParam> given = {}) {
    c.names.push_back(info.name);
    c.stages.push_back(info.create(validate_params(info.params, given)));
  };
  add(ConvertStage::info());
  add(UpsampleStage::info());
  if (compact_output) {  // the copy-cutting options: display grid (every 5th depth) and float16
    add(LoupasStage::info(), {{"output_step", RawParam{{"5"}}}, {"output_dtype", RawParam{{"float16"}}}});
    add(MotionFilterStage::info(), {{"output_dtype", RawParam{{"float16"}}}});
  } else {
    add(LoupasStage::info());
    add(MotionFilterStage::info());
  }
  return c;
}

struct Configured {
  std::vector<TensorSpec> inputs;  // per stage
  std::vector<StagePlan> plans;
};

Configured configure_chain(Chain& chain, const FrameMeta& frame, Backend backend) {
  Configured c;
  TensorSpec spec = frame.payload;
  for (auto& stage : chain.stages) {
    c.inputs.push_back(spec);
    c.plans.push_back(stage->configure(frame, spec, backend));
    spec = c.plans.back().outputs[0].spec;
  }
  return c;
}

void print_row(const std::string& what, const std::string& size, double ms, const std::string& rate,
               const std::string& note) {
  std::printf("| %-34s | %-26s | %10.3f | %-18s | %s\n", what.c_str(), size.c_str(), ms, rate.c_str(), note.c_str());
}

std::string gbps(double bytes, double ms) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f GB/s", bytes / (ms * 1e-3) / 1e9);
  return text;
}

// ---------------------------------------------------------------- CPU backend
double run_cpu_backend(const sim::ArfiSimResult& set, ThreadPool& pool, const Options& o) {
  Chain chain = make_chain(false);
  Configured cfg = configure_chain(chain, set.meta, Backend::cpu);
  std::vector<std::vector<std::vector<std::byte>>> outputs(chain.stages.size());
  std::vector<std::vector<std::byte>> workspaces, stagings;
  for (std::size_t i = 0; i < chain.stages.size(); ++i) {
    for (const StageOutput& out : cfg.plans[i].outputs) outputs[i].emplace_back(out.spec.byte_size());
    workspaces.emplace_back(cfg.plans[i].workspace_bytes);
    stagings.emplace_back(cfg.plans[i].host_staging_bytes);
  }
  std::vector<std::vector<double>> stage_ms(chain.stages.size());
  std::vector<double> total_ms;
  for (int r = 0; r < o.cpu_repeats + 1; ++r) {  // first run warms the per-thread buffers
    const auto t_total = std::chrono::steady_clock::now();
    const void* input = set.payload.data();
    for (std::size_t i = 0; i < chain.stages.size(); ++i) {
      std::vector<void*> pointers;
      for (auto& b : outputs[i]) pointers.push_back(b.data());
      StageIo io{.frame = set.meta, .input_spec = cfg.inputs[i], .input = input, .outputs = pointers,
                 .workspace = workspaces[i].data(), .host_staging = stagings[i].data(), .pool = &pool};
      const auto t0 = std::chrono::steady_clock::now();
      chain.stages[i]->run_cpu(io);
      if (r > 0) stage_ms[i].push_back(seconds_since(t0) * 1e3);
      input = outputs[i][0].data();
    }
    if (r > 0) total_ms.push_back(seconds_since(t_total) * 1e3);
  }
  std::printf("\nCPU backend (%d threads), median of %d sets:\n", pool.size(), o.cpu_repeats);
  std::printf("| %-34s | %-26s | %10s | %-18s | %s\n", "stage", "output", "ms", "rate", "note");
  for (std::size_t i = 0; i < chain.stages.size(); ++i)
    print_row("cpu " + chain.names[i], cfg.plans[i].outputs[0].spec.shape_string().substr(0, 26), median(stage_ms[i]), "", "");
  const double total = median(total_ms);
  char note[128];
  std::snprintf(note, sizeof note, "paper C++ %.0f ms: %.1fx faster", kPaperCppMs, kPaperCppMs / total);
  print_row("cpu chain, one set", "", total, "", note);
  return total;
}

// ---------------------------------------------------------------- spline error
void print_spline_errors(const sim::ArfiSimResult& set) {
  // Lines of the set as converted (int16 counts), I and Q separately, rms over everything.
  const std::int64_t samples = set.meta.payload.axes[2].size;
  const std::size_t lines = set.payload.size() / (2 * samples);
  auto rms_error = [&](const UpsampleParams& subsets) {
    UpsampleParams exact = subsets;
    exact.exact = true;
    std::vector<double> y(samples), a, b;
    UpsampleStage::SplineScratch scratch;
    const std::int64_t out_length = spline::output_length(samples, subsets.factor, subsets.factor_denominator);
    a.resize(out_length);
    b.resize(out_length);
    double err = 0, ref = 0;
    for (std::size_t line = 0; line < lines; ++line)
      for (int c = 0; c < 2; ++c) {
        for (std::int64_t i = 0; i < samples; ++i) y[i] = set.payload[(line * samples + i) * 2 + c];
        UpsampleStage::upsample_line(y.data(), samples, exact, a.data(), scratch);
        UpsampleStage::upsample_line(y.data(), samples, subsets, b.data(), scratch);
        for (std::int64_t j = 0; j < out_length; ++j) {
          err += (a[j] - b[j]) * (a[j] - b[j]);
          ref += a[j] * a[j];
        }
      }
    return 100 * std::sqrt(err / ref);
  };
  std::printf("\nSpline subsets vs exact (natural), rms error %% of the signal rms, on the simulated set:\n");
  std::printf("| k | ours, n = 16 | ours, paper's n + 2k + 1 = 15 | paper (max rms over sets) |\n");
  for (int k = 1; k <= 4; ++k) {
    UpsampleParams p;
    p.overlap = k;
    const double ours16 = rms_error(p);
    p.subset_knots = 14 - 2 * k;
    const double ours15 = rms_error(p);
    std::printf("| %d | %.2e %% | %.2e %% | %.2f %% |\n", k, ours16, ours15, kPaperSplineRmsPercent[k - 1]);
  }
  UpsampleParams d;
  std::printf("| %lld (default) | %.2e %% | | |\n", static_cast<long long>(d.overlap), rms_error(d));
}

#ifdef SONOPIPE_WITH_CUDA
// ---------------------------------------------------------------- GPU
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { SONOPIPE_CUDA_CHECK(cudaMalloc(&ptr, bytes ? bytes : 1)); }
  ~DeviceBuffer() { cudaFree(ptr); }
};
struct PinnedBuffer {
  void* ptr = nullptr;
  explicit PinnedBuffer(std::size_t bytes) { SONOPIPE_CUDA_CHECK(cudaMallocHost(&ptr, bytes ? bytes : 1)); }
  ~PinnedBuffer() { cudaFreeHost(ptr); }
};

float event_ms(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  SONOPIPE_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

// One chain instance on the GPU: its own stream, pinned input/output, device buffers and events.
struct GpuChain {
  Chain chain;
  Configured cfg;
  cudaStream_t stream{};
  std::unique_ptr<PinnedBuffer> host_in, host_out;
  std::unique_ptr<DeviceBuffer> device_in;
  std::vector<std::vector<std::unique_ptr<DeviceBuffer>>> outputs;
  std::vector<std::unique_ptr<DeviceBuffer>> workspaces;
  std::vector<std::unique_ptr<PinnedBuffer>> stagings;
  std::vector<cudaEvent_t> marks;  // before H2D, after H2D, after each stage, after D2H
  std::size_t in_bytes = 0, out_bytes = 0;
  const FrameMeta* frame = nullptr;

  GpuChain(const sim::ArfiSimResult& set, bool compact) : chain(make_chain(compact)) {
    frame = &set.meta;
    cfg = configure_chain(chain, set.meta, Backend::cuda);
    SONOPIPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    in_bytes = set.meta.payload.byte_size();
    out_bytes = cfg.plans.back().outputs[0].spec.byte_size();
    host_in = std::make_unique<PinnedBuffer>(in_bytes);
    std::memcpy(host_in->ptr, set.payload.data(), in_bytes);
    host_out = std::make_unique<PinnedBuffer>(out_bytes);
    device_in = std::make_unique<DeviceBuffer>(in_bytes);
    outputs.resize(chain.stages.size());
    for (std::size_t i = 0; i < chain.stages.size(); ++i) {
      for (const StageOutput& out : cfg.plans[i].outputs) outputs[i].push_back(std::make_unique<DeviceBuffer>(out.spec.byte_size()));
      workspaces.push_back(std::make_unique<DeviceBuffer>(cfg.plans[i].workspace_bytes));
      stagings.push_back(std::make_unique<PinnedBuffer>(cfg.plans[i].host_staging_bytes));
    }
    marks.resize(chain.stages.size() + 3);
    for (auto& e : marks) SONOPIPE_CUDA_CHECK(cudaEventCreate(&e));
  }
  ~GpuChain() {
    for (auto& e : marks) cudaEventDestroy(e);
    cudaStreamDestroy(stream);
  }

  void run_stage(std::size_t i) {
    std::vector<void*> pointers;
    for (auto& b : outputs[i]) pointers.push_back(b->ptr);
    const void* input = i == 0 ? device_in->ptr : outputs[i - 1][0]->ptr;
    StageIo io{.frame = *frame, .input_spec = cfg.inputs[i], .input = input, .outputs = pointers,
               .workspace = workspaces[i]->ptr, .host_staging = stagings[i]->ptr, .stream = stream};
    chain.stages[i]->run_cuda(io);
  }

  // H2D, every stage, D2H of the last stage's first output; events between the steps.
  void enqueue_set() {
    SONOPIPE_CUDA_CHECK(cudaEventRecord(marks[0], stream));
    SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(device_in->ptr, host_in->ptr, in_bytes, cudaMemcpyHostToDevice, stream));
    SONOPIPE_CUDA_CHECK(cudaEventRecord(marks[1], stream));
    for (std::size_t i = 0; i < chain.stages.size(); ++i) {
      run_stage(i);
      SONOPIPE_CUDA_CHECK(cudaEventRecord(marks[2 + i], stream));
    }
    SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(host_out->ptr, outputs.back()[0]->ptr, out_bytes, cudaMemcpyDeviceToHost, stream));
    SONOPIPE_CUDA_CHECK(cudaEventRecord(marks.back(), stream));
  }
};

struct Bandwidths {
  double hbm_gbps = 0, h2d_gbps = 0, d2h_gbps = 0;
};

Bandwidths measure_bandwidths() {
  Bandwidths b;
  cudaEvent_t e0, e1;
  SONOPIPE_CUDA_CHECK(cudaEventCreate(&e0));
  SONOPIPE_CUDA_CHECK(cudaEventCreate(&e1));
  const std::size_t big = std::size_t(1) << 30, pcie = std::size_t(64) << 20;
  DeviceBuffer a(big), c(big);
  SONOPIPE_CUDA_CHECK(cudaMemset(a.ptr, 1, big));
  std::vector<double> ms;
  for (int r = 0; r < 6; ++r) {
    SONOPIPE_CUDA_CHECK(cudaEventRecord(e0));
    SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(c.ptr, a.ptr, big, cudaMemcpyDeviceToDevice));
    SONOPIPE_CUDA_CHECK(cudaEventRecord(e1));
    SONOPIPE_CUDA_CHECK(cudaEventSynchronize(e1));
    if (r) ms.push_back(event_ms(e0, e1));
  }
  b.hbm_gbps = 2.0 * big / (median(ms) * 1e-3) / 1e9;  // read + write
  PinnedBuffer host(pcie);
  std::memset(host.ptr, 1, pcie);
  for (int dir = 0; dir < 2; ++dir) {
    ms.clear();
    for (int r = 0; r < 6; ++r) {
      SONOPIPE_CUDA_CHECK(cudaEventRecord(e0));
      if (dir == 0) SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(a.ptr, host.ptr, pcie, cudaMemcpyHostToDevice));
      else SONOPIPE_CUDA_CHECK(cudaMemcpyAsync(host.ptr, a.ptr, pcie, cudaMemcpyDeviceToHost));
      SONOPIPE_CUDA_CHECK(cudaEventRecord(e1));
      SONOPIPE_CUDA_CHECK(cudaEventSynchronize(e1));
      if (r) ms.push_back(event_ms(e0, e1));
    }
    (dir == 0 ? b.h2d_gbps : b.d2h_gbps) = pcie / (median(ms) * 1e-3) / 1e9;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return b;
}

// Bytes each stage must move through device memory at least (inputs read once, outputs written once).
std::size_t stage_bytes(const GpuChain& g, std::size_t i) {
  std::size_t bytes = g.cfg.inputs[i].byte_size();
  for (const StageOutput& out : g.cfg.plans[i].outputs) bytes += out.spec.byte_size();
  return bytes;
}

void run_gpu(const sim::ArfiSimResult& set, const Options& o, double cpu_total_ms) {
  const GpuProbe probe = probe_gpu(0);
  if (!probe.available) {
    std::printf("\nGPU: %s — GPU rows skipped\n", probe.reason.c_str());
    return;
  }
  const Bandwidths bw = measure_bandwidths();
  std::printf("\nGPU %s: measured HBM %.0f GB/s (device copy, read + write), H2D %.1f GB/s, D2H %.1f GB/s (pinned, 64 MB)\n",
              probe.name.c_str(), bw.hbm_gbps, bw.h2d_gbps, bw.d2h_gbps);

  for (bool compact : {false, true}) {
    GpuChain g(set, compact);
    std::printf("\nGPU chain%s, median of %d sets:\n",
                compact ? " with loupas output_step 5 + float16 (display grid)" : " (full-resolution float32 output)", o.repeats);
    std::printf("| %-34s | %-26s | %10s | %-18s | %s\n", "step", "size", "ms", "rate", "floor / note");
    std::vector<std::vector<double>> step_ms(g.chain.stages.size() + 3);
    for (int r = 0; r < o.repeats + 2; ++r) {
      g.enqueue_set();
      SONOPIPE_CUDA_CHECK(cudaStreamSynchronize(g.stream));
      if (r < 2) continue;  // warm-up
      step_ms[0].push_back(event_ms(g.marks[0], g.marks[1]));
      for (std::size_t i = 0; i < g.chain.stages.size(); ++i) step_ms[1 + i].push_back(event_ms(g.marks[1 + i], g.marks[2 + i]));
      step_ms[g.chain.stages.size() + 1].push_back(event_ms(g.marks[g.marks.size() - 2], g.marks.back()));
      step_ms[g.chain.stages.size() + 2].push_back(event_ms(g.marks[0], g.marks.back()));
    }
    char note[160];
    const double h2d = median(step_ms[0]);
    std::snprintf(note, sizeof note, "floor %.3f ms", g.in_bytes / (bw.h2d_gbps * 1e9) * 1e3);
    print_row("H2D int16 set", std::to_string(g.in_bytes) + " B", h2d, gbps(g.in_bytes, h2d), note);
    double stages_total = 0;
    for (std::size_t i = 0; i < g.chain.stages.size(); ++i) {
      const double ms = median(step_ms[1 + i]);
      stages_total += ms;
      const std::size_t bytes = stage_bytes(g, i);
      std::snprintf(note, sizeof note, "HBM floor %.3f ms (%.0f %% of it)", bytes / (bw.hbm_gbps * 1e9) * 1e3,
                    100 * bytes / (bw.hbm_gbps * 1e9) * 1e3 / ms);
      print_row("gpu " + g.chain.names[i], g.cfg.plans[i].outputs[0].spec.shape_string().substr(0, 26), ms, gbps(bytes, ms), note);
    }
    const double d2h = median(step_ms[g.chain.stages.size() + 1]);
    std::snprintf(note, sizeof note, "floor %.3f ms", g.out_bytes / (bw.d2h_gbps * 1e9) * 1e3);
    print_row("D2H result", std::to_string(g.out_bytes) + " B", d2h, gbps(g.out_bytes, d2h), note);
    const double e2e = median(step_ms.back());
    const double transfer_floor = (g.in_bytes / (bw.h2d_gbps * 1e9) + g.out_bytes / (bw.d2h_gbps * 1e9)) * 1e3;
    std::snprintf(note, sizeof note, "transfer floor %.3f ms: %.2fx; paper %.0f ms: %.0fx; CPU backend %.1fx", transfer_floor,
                  e2e / transfer_floor, kPaperGpuMs, kPaperGpuMs / e2e, cpu_total_ms / e2e);
    print_row("end to end, one set", "", e2e, "", note);
    print_row("stages only (sum)", "", stages_total, "", "goal <= 1 ms per stage");

    // Sustained: several chains in flight, each on its own stream (copies overlap kernels).
    std::vector<std::unique_ptr<GpuChain>> ring;
    for (int s = 0; s < o.in_flight; ++s) ring.push_back(std::make_unique<GpuChain>(set, compact));
    for (auto& c : ring) c->enqueue_set();
    for (auto& c : ring) SONOPIPE_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    const auto t0 = std::chrono::steady_clock::now();
    for (int n = 0; n < o.sustained_sets; ++n) {
      GpuChain& c = *ring[n % o.in_flight];
      SONOPIPE_CUDA_CHECK(cudaEventSynchronize(c.marks.back()));  // the slot's previous set is done
      c.enqueue_set();
    }
    for (auto& c : ring) SONOPIPE_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    const double wall = seconds_since(t0);
    const double per_set_ms = wall * 1e3 / o.sustained_sets;
    const double pcie_floor = std::max(g.in_bytes / (bw.h2d_gbps * 1e9), g.out_bytes / (bw.d2h_gbps * 1e9)) * 1e3;
    std::snprintf(note, sizeof note, "%.0f sets/s; %d in flight; overlapped floor %.3f ms/set (%.2fx)",
                  1e3 / per_set_ms, o.in_flight, std::max(pcie_floor, stages_total), per_set_ms / std::max(pcie_floor, stages_total));
    print_row("sustained, per set", std::to_string(o.sustained_sets) + " sets", per_set_ms, "", note);
  }

  // Spline kernel on a large batch (HBM-bound): o.batch_sets sets of converted lines at once.
  {
    const std::int64_t lines = set.meta.payload.axes[0].size * set.meta.payload.axes[1].size * o.batch_sets;
    const std::int64_t samples = set.meta.payload.axes[2].size;
    FrameMeta frame = set.meta;
    TensorSpec spec{.dtype = DType::complex64, .axes = {{"line", lines}, {"sample", samples, 1 / frame.sampling_frequency_hz, "s"}}};
    UpsampleStage stage(default_params(UpsampleStage::info().params));
    StagePlan plan = stage.configure(frame, spec, Backend::cuda);
    DeviceBuffer in(spec.byte_size()), out(plan.outputs[0].spec.byte_size());
    SONOPIPE_CUDA_CHECK(cudaMemset(in.ptr, 0, spec.byte_size()));
    {  // random-ish content (not zeros): the converted set repeated
      std::vector<float> host(static_cast<std::size_t>(lines * samples * 2));
      for (std::size_t i = 0; i < host.size(); ++i) host[i] = set.payload[i % set.payload.size()];
      SONOPIPE_CUDA_CHECK(cudaMemcpy(in.ptr, host.data(), spec.byte_size(), cudaMemcpyHostToDevice));
    }
    cudaStream_t stream;
    SONOPIPE_CUDA_CHECK(cudaStreamCreate(&stream));
    cudaEvent_t e0, e1;
    SONOPIPE_CUDA_CHECK(cudaEventCreate(&e0));
    SONOPIPE_CUDA_CHECK(cudaEventCreate(&e1));
    void* outputs[] = {out.ptr};
    StageIo io{.frame = frame, .input_spec = spec, .input = in.ptr, .outputs = outputs, .stream = stream};
    std::vector<double> ms;
    for (int r = 0; r < 12; ++r) {
      SONOPIPE_CUDA_CHECK(cudaEventRecord(e0, stream));
      stage.run_cuda(io);
      SONOPIPE_CUDA_CHECK(cudaEventRecord(e1, stream));
      SONOPIPE_CUDA_CHECK(cudaEventSynchronize(e1));
      if (r >= 2) ms.push_back(event_ms(e0, e1));
    }
    const double t = median(ms);
    const double bytes = double(spec.byte_size() + plan.outputs[0].spec.byte_size());
    char note[128];
    std::snprintf(note, sizeof note, "%.0f %% of measured HBM (goal >= 70 %%)", 100 * bytes / (t * 1e-3) / 1e9 / bw.hbm_gbps);
    std::printf("\nSpline kernel on a large batch (%d sets):\n", o.batch_sets);
    print_row("gpu upsample (subsets n16 k12)", std::to_string(lines) + " lines x " + std::to_string(samples), t, gbps(bytes, t), note);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(stream);
  }
}
#endif

void run(const Options& o) {
  ThreadPool pool(o.threads);
  sim::ArfiSimConfig config;  // the paper's set
  config.seed = o.seed;
  const auto t0 = std::chrono::steady_clock::now();
  const sim::ArfiSimResult set = sim::simulate_arfi(config, &pool);
  std::printf("sonopipe-bench arfi: set %s (%zu bytes), simulated in %.2f s\n", set.meta.payload.shape_string().c_str(),
              set.meta.payload.byte_size(), seconds_since(t0));
  std::printf("paper (rosenzweig2011, Quadro FX 3700M / Core 2 Q9300): GPU incl. load and copies %.0f ms, C++ %.0f ms\n",
              kPaperGpuMs, kPaperCppMs);
  const double cpu_ms = run_cpu_backend(set, pool, o);
  print_spline_errors(set);
#ifdef SONOPIPE_WITH_CUDA
  run_gpu(set, o, cpu_ms);
#else
  (void)cpu_ms;
  std::printf("\nGPU: this build has no CUDA backend — GPU rows skipped\n");
#endif
}

}  // namespace

void add_arfi_bench(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("arfi", "ARFI chain on the paper's set: per-stage GPU/CPU times, floors, paper figures");
  cmd->add_option("--repeats", o->repeats, "timed GPU sets per measurement (median)")->capture_default_str();
  cmd->add_option("--cpu-repeats", o->cpu_repeats, "timed CPU sets (median)")->capture_default_str();
  cmd->add_option("--threads", o->threads, "CPU threads (0: all cores)")->capture_default_str();
  cmd->add_option("--in-flight", o->in_flight, "sets in flight for the sustained rate")->capture_default_str();
  cmd->add_option("--sustained-sets", o->sustained_sets, "sets for the sustained rate")->capture_default_str();
  cmd->add_option("--batch-sets", o->batch_sets, "sets batched for the spline bandwidth row")->capture_default_str();
  cmd->add_option("--seed", o->seed, "simulator seed")->capture_default_str();
  cmd->callback([o] { run(*o); });
}

}  // namespace sonopipe::bench
