// `sonopipe-bench devices`: a config's first pipeline, assembled as the daemon does
// (daemon/pipeline_set.h) on 1, 2, ... GPUs, in process (no sockets): frames/s
// sustained, per-device frames and busy time. Inputs by the pipeline's frame kind: `iq` = the
// ARFI simulator's set (the paper's 52 x 81 x 493 int16 IQ), `rf` = random int16 RF volumes of
// --rf-shape (default the 3-D strain volume 8 x 128 x 1024), spread over --streams stream ids in
// turn (a stateful pipeline keeps each stream on one device, so it needs as many streams as GPUs).
//   sonopipe-bench devices --config config/arfi.yaml --config config/strain3d.yaml
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/gpu_device.h"
#include "sdk/thread_pool.h"
#include "daemon/config.h"
#include "daemon/pipeline_set.h"
#include "tools/bench/commands.h"
#include "tools/sim/arfi_sim.h"
#include "stages/registry.h"

namespace sonopipe::bench {
namespace {

struct DevicesOptions {
  std::vector<std::string> configs;
  int frames = 200;
  int warmup = 10;
  int streams = 2;
  int max_devices = 0;  // 0: every visible GPU
  std::vector<std::int64_t> rf_shape = {8, 128, 1024};
  int slots = 3;
};

struct Input {
  FrameMeta meta;
  std::shared_ptr<std::vector<std::byte>> payload;
};

Input make_input(const PipelineConfig& pipeline, const DevicesOptions& options, ThreadPool& pool) {
  const bool wants_iq = pipeline.match.kinds.empty() ||
                        std::find(pipeline.match.kinds.begin(), pipeline.match.kinds.end(), FrameKind::iq) !=
                            pipeline.match.kinds.end();
  Input input;
  if (wants_iq) {
    sim::ArfiSimResult set = sim::simulate_arfi(sim::ArfiSimConfig{}, &pool);
    input.meta = set.meta;
    const auto* bytes = reinterpret_cast<const std::byte*>(set.payload.data());
    input.payload = std::make_shared<std::vector<std::byte>>(bytes, bytes + set.meta.payload.byte_size());
    return input;
  }
  input.meta.kind = FrameKind::rf;
  input.meta.payload.dtype = DType::int16;
  const char* names[] = {"elevational", "lateral", "axial"};
  const std::size_t first = 3 - std::min<std::size_t>(3, options.rf_shape.size());
  for (std::size_t a = 0; a < options.rf_shape.size() && a < 3; ++a)
    input.meta.payload.axes.push_back({names[first + a], options.rf_shape[a], 1e-4, "m"});
  input.meta.sampling_frequency_hz = 40e6;
  input.meta.center_frequency_hz = 5e6;
  input.payload = std::make_shared<std::vector<std::byte>>(input.meta.payload.byte_size());
  std::mt19937 rng(7);  // random, never zeros: they can take faster paths than real data
  std::normal_distribution<float> normal(0.0f, 3000.0f);
  auto* values = reinterpret_cast<std::int16_t*>(input.payload->data());
  for (std::size_t i = 0; i < input.payload->size() / 2; ++i)
    values[i] = static_cast<std::int16_t>(std::clamp(normal(rng), -32767.0f, 32767.0f));
  return input;
}

InputFrame frame_of(const Input& input, std::uint32_t stream, std::uint64_t sequence) {
  InputFrame frame;
  frame.meta = input.meta;
  frame.meta.stream_id = stream;
  frame.meta.sequence = sequence;
  frame.payload = std::shared_ptr<const std::byte>(input.payload, input.payload->data());
  frame.payload_bytes = input.payload->size();
  frame.received_ns = 1;
  return frame;
}

struct Measured {
  double frames_per_s = 0;
  PipelineStats stats;
};

// The config's first pipeline on `devices`, assembled as the daemon assembles it.
Measured measure(const DaemonConfig& loaded, const std::vector<int>& devices, const Input& input,
                 const DevicesOptions& options) {
  DaemonConfig config = loaded;
  config.pipelines.resize(1);
  config.pipelines[0].devices = {.all = false, .ids = devices};
  config.slots = options.slots;
  std::atomic<std::uint64_t> frames_out{0};
  std::atomic<std::int64_t> last_ns{0};
  std::uint64_t last_sequence_seen = 0;
  ExecutorCallbacks callbacks{
      .publish = [&](const PublishedResult& r) {
        if (r.frame.sequence == last_sequence_seen) return;  // one count per frame, not per output
        last_sequence_seen = r.frame.sequence;
        frames_out.fetch_add(1);
        last_ns.store(std::chrono::steady_clock::now().time_since_epoch().count());
      },
      .stage_error = [](const FrameMeta&, const std::string&, const std::string& why) {
        std::fprintf(stderr, "stage error: %s\n", why.c_str());
      }};
  PipelineSet pipelines(config, {.backend = Backend::cuda}, callbacks, {.log = false});
  PipelineExecutor& executor = pipelines.executor(0);
  std::uint64_t sequence = 1;  // 0 is the callback's "none yet"
  // Warm-up: every device configures its stages (plans, buffers) on its first frames.
  const int warmup = options.warmup * static_cast<int>(devices.size());
  for (int n = 0; n < warmup; ++n, ++sequence)
    executor.submit(frame_of(input, static_cast<std::uint32_t>(n % options.streams), sequence));
  // A stateful stage publishes nothing for each stream's first frame.
  const auto expected = static_cast<std::uint64_t>(warmup - std::min(warmup, options.streams));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (frames_out.load() < expected && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::uint64_t before = frames_out.load();
  const auto start = std::chrono::steady_clock::now();
  for (int n = 0; n < options.frames; ++n, ++sequence)
    executor.submit(frame_of(input, static_cast<std::uint32_t>(n % options.streams), sequence));
  executor.drain();
  const double seconds =
      (last_ns.load() - start.time_since_epoch().count()) * 1e-9;
  Measured m;
  m.frames_per_s = static_cast<double>(frames_out.load() - before) / seconds;
  m.stats = executor.stats();
  return m;
}

void run(const DevicesOptions& options) {
  const int visible = probe_gpu(0).device_count;
  if (visible == 0) {
    std::printf("sonopipe-bench devices: no CUDA device visible; nothing to measure\n");
    return;
  }
  const int most = options.max_devices > 0 ? std::min(options.max_devices, visible) : visible;
  ThreadPool pool(0);
  std::printf("sonopipe-bench devices: %d visible GPU(s) (%s), %d frames per point after %d warm-up frames per "
              "device, %d streams, %d slots per device\n",
              visible, probe_gpu(0).name.c_str(), options.frames, options.warmup, options.streams, options.slots);
  std::printf("| %-10s | %-28s | %-7s | %10s | %7s | %s\n", "pipeline", "input", "devices", "frames/s", "scaling",
              "per device: frames, busy ms/frame");
  for (const std::string& path : options.configs) {
    DaemonConfig config = load_config_file(path, builtin_stages());
    const PipelineConfig& pipeline = config.pipelines.at(0);
    const Input input = make_input(pipeline, options, pool);
    double single = 0;
    for (int count = 1; count <= most; ++count) {
      std::vector<int> devices;
      for (int d = 0; d < count; ++d) devices.push_back(d);
      const Measured m = measure(config, devices, input, options);
      if (count == 1) single = m.frames_per_s;
      std::string per_device;
      for (const DeviceStats& d : m.stats.devices) {
        char text[96];
        std::snprintf(text, sizeof text, "%sGPU %d: %llu, %.3f", per_device.empty() ? "" : "; ", d.device,
                      static_cast<unsigned long long>(d.processed),
                      d.processed ? d.busy_ms_total / static_cast<double>(d.processed) : 0.0);
        per_device += text;
      }
      std::printf("| %-10s | %-28s | %-7d | %10.1f | %6.2fx | %s\n", pipeline.name.c_str(),
                  input.meta.payload.shape_string().substr(0, 28).c_str(), count, m.frames_per_s,
                  m.frames_per_s / single, per_device.c_str());
    }
  }
}

}  // namespace

void add_devices_bench(CLI::App& app) {
  auto o = std::make_shared<DevicesOptions>();
  CLI::App* cmd = app.add_subcommand("devices", "a config's first pipeline on 1, 2, ... GPUs through the executor");
  cmd->add_option("--config", o->configs, "daemon config(s); the first pipeline of each is measured")->required();
  cmd->add_option("--frames", o->frames, "frames per point")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "warm-up frames per device")->capture_default_str();
  cmd->add_option("--streams", o->streams, "stream ids the frames take in turn")->capture_default_str();
  cmd->add_option("--max-devices", o->max_devices, "most GPUs to use (0: all visible)")->capture_default_str();
  cmd->add_option("--rf-shape", o->rf_shape, "rf input axes, outermost first")->capture_default_str();
  cmd->add_option("--slots", o->slots, "slots per device")->capture_default_str();
  cmd->callback([o] { run(*o); });
}

}  // namespace sonopipe::bench
