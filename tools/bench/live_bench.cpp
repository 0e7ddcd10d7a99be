// `sonopipe-bench live`: how soon a live parameter change reaches the frames (issue 22's speed
// goals; docs/live-parameters.md). One pipeline convert -> upsample on one device, IQ frames paced at
// --rate (default 1 kHz); every --every frames a change goes in from another thread:
//   scale    convert's scale (same shapes: the new instance is configured, buffers stay)
//   factor   upsample's factor, alternating 4 and 5 (a shape change: buffers re-planned)
// Per kind the table gives, over the changes, the delay from the set (update_stage returning) to the
// compute start of the first frame carrying the new generation, against the goal "one frame
// interval + 1 ms", and the latency (received -> published) of that first frame against the median
// of the others (the goal for a re-plan: at most one frame's latency more). Not a test: it prints.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "runtime/pipeline_executor.h"
#include "sdk/thread_pool.h"
#include "stages/registry.h"
#include "tools/bench/commands.h"

#ifdef SONOPIPE_WITH_CUDA
#include "runtime/gpu_device.h"
#endif

namespace sonopipe::bench {
namespace {

struct LiveOptions {
  std::string backend = "cpu";
  double rate_hz = 1000;
  int frames = 4000;
  int every = 50;
  std::int64_t lines = 64, samples = 256;
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<std::size_t>(p * static_cast<double>(values.size() - 1))];
}

void run_kind(const LiveOptions& options, const std::string& kind) {
  const StageRegistry& registry = builtin_stages();
  const StageInfo& convert = *registry.find("convert");
  const StageInfo& upsample = *registry.find("upsample");
  auto params = [](const StageInfo& info, const std::string& key, const std::string& value) {
    return info.validate({{key, RawParam{{value}}}});
  };
  const Backend backend = options.backend == "cuda" ? Backend::cuda : Backend::cpu;
  ThreadPool pool(2);
  std::mutex mutex;
  std::map<std::uint64_t, std::int64_t> set_ns;        // generation -> when its set returned
  std::map<std::uint64_t, std::int64_t> first_start;   // generation -> compute start of its first frame
  std::map<std::uint64_t, double> first_latency_ms;    // generation -> latency of that frame
  std::vector<double> latencies_ms;
  ExecutorCallbacks callbacks{
      .publish = [&](const PublishedResult& r) {
        std::lock_guard lock(mutex);
        const double latency = (now_ns() - r.timing.received_ns) * 1e-6;
        if (!first_start.contains(r.param_generation)) {
          first_start[r.param_generation] = r.timing.compute_start_ns;
          first_latency_ms[r.param_generation] = latency;
        } else {
          latencies_ms.push_back(latency);
        }
      },
      .stage_error = [](const FrameMeta&, const std::string&, const std::string& why) {
        std::fprintf(stderr, "stage error: %s\n", why.c_str());
      }};
  PipelineExecutor executor(
      "live", {0},
      [&] {
        std::vector<PipelineStage> stages;
        stages.push_back({.label = "convert", .stage = convert.create(params(convert, "scale", "1"))});
        stages.push_back({.label = "upsample", .stage = upsample.create(params(upsample, "factor", "4")), .publish = true});
        return stages;
      },
      {.backend = backend, .slots = 3, .queue_depth = 64, .pool = &pool}, callbacks);
  InputFrame input;
  input.meta.kind = FrameKind::iq;
  input.meta.payload.dtype = DType::int16;
  input.meta.payload.axes = {{"line", options.lines}, {"sample", options.samples}, {"iq", 2}};
  auto payload = std::make_shared<std::vector<std::int16_t>>(options.lines * options.samples * 2);
  std::mt19937 rng(7);
  for (auto& v : *payload) v = static_cast<std::int16_t>(rng() % 2000) - 1000;
  input.payload = std::shared_ptr<const std::byte>(payload, reinterpret_cast<const std::byte*>(payload->data()));
  input.payload_bytes = payload->size() * sizeof(std::int16_t);

  const auto interval = std::chrono::nanoseconds(static_cast<std::int64_t>(1e9 / options.rate_hz));
  auto next = std::chrono::steady_clock::now();
  std::uint64_t generation = 0;
  for (int n = 0; n < options.frames; ++n) {
    std::this_thread::sleep_until(next);
    next += interval;
    InputFrame frame = input;
    frame.meta.sequence = static_cast<std::uint64_t>(n);
    frame.received_ns = now_ns();
    executor.submit(std::move(frame));
    if (n > 100 && n % options.every == options.every / 2) {  // between two frames, off the frame clock
      std::this_thread::sleep_for(interval / 3);
      ++generation;
      if (kind == "scale") {
        const ParamValues values = params(convert, "scale", std::to_string(1 + generation % 7));
        executor.update_stage(0, [&] { return convert.create(values); }, generation);
      } else {
        const ParamValues values = params(upsample, "factor", generation % 2 ? "5" : "4");
        executor.update_stage(1, [&] { return upsample.create(values); }, generation);
      }
      std::lock_guard lock(mutex);
      set_ns[generation] = now_ns();
    }
  }
  executor.drain();
  std::vector<double> delays_ms, first_ms;
  for (const auto& [g, t] : set_ns) {
    if (!first_start.contains(g)) continue;
    delays_ms.push_back((first_start[g] - t) * 1e-6);
    first_ms.push_back(first_latency_ms[g]);
  }
  const double goal_ms = 1e3 / options.rate_hz + 1.0;
  const double median_latency = percentile(latencies_ms, 0.5);
  std::printf("%-7s %7zu %10.3f %10.3f %10.3f %9.3f | %11.3f %11.3f %11.3f\n", kind.c_str(), delays_ms.size(),
              percentile(delays_ms, 0.5), percentile(delays_ms, 0.99),
              delays_ms.empty() ? 0.0 : *std::max_element(delays_ms.begin(), delays_ms.end()), goal_ms,
              median_latency, percentile(first_ms, 0.5), percentile(first_ms, 0.99));
  std::printf("        set -> first frame within goal: %s; first frame's extra latency p99 %.3f ms (goal <= %.3f ms, "
              "one frame's latency)\n",
              percentile(delays_ms, 0.99) <= goal_ms ? "yes (p99)" : "NO (p99)",
              percentile(first_ms, 0.99) - median_latency, median_latency);
}

}  // namespace

void add_live_bench(CLI::App& app) {
  auto options = std::make_shared<LiveOptions>();
  CLI::App* command = app.add_subcommand("live", "live parameter changes: set -> next frame, re-plan cost");
  command->add_option("--backend", options->backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  command->add_option("--rate", options->rate_hz, "frames per second")->capture_default_str();
  command->add_option("--frames", options->frames, "frames per kind")->capture_default_str();
  command->add_option("--every", options->every, "frames between two changes")->capture_default_str();
  command->add_option("--lines", options->lines, "IQ lines per frame")->capture_default_str();
  command->add_option("--samples", options->samples, "IQ samples per line")->capture_default_str();
  command->callback([options] {
    std::printf("live parameters, %s backend, %.0f frames/s, %lld x %lld IQ, convert -> upsample\n",
                options->backend.c_str(), options->rate_hz, static_cast<long long>(options->lines),
                static_cast<long long>(options->samples));
    std::printf("%-7s %7s %10s %10s %10s %9s | %11s %11s %11s\n", "change", "changes", "delay p50", "delay p99",
                "delay max", "goal ms", "latency p50", "first p50", "first p99");
    run_kind(*options, "scale");
    run_kind(*options, "factor");
  });
}

}  // namespace sonopipe::bench
