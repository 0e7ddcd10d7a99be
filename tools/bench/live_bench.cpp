// `sonopipe-bench live`: how soon a live parameter change reaches the frames, and what it costs them
// (issue 22's speed goals; docs/live-parameters.md). One pipeline `live` (convert -> upsample) on one
// device, IQ frames paced at --rate (default 1 kHz); every --every frames a `set` goes in from another
// thread through the daemon's own LiveParameters (parse, validate, build, try on the frames, prepare
// the lane: everything `sonopipe-ctl set` does but the control socket's round trip):
//   none     no change (the latencies to compare with)
//   scale    live.convert.scale (same shapes)
//   factor   live.upsample.factor, alternating 4 and 5 (a shape change: buffers re-planned)
// A second pipeline `bystander` (the same stages, its own executor on the same device) takes the same
// frames and is never changed: its latency shows whether a change holds up other pipelines.
// Per kind, over the changes:
//   set ms          the set call itself (on the calling thread, off the frame path)
//   to frame        from the set call to the compute start of the first frame with the new
//                   generation: goal A, p99 <= one frame interval + 1 ms
//   to result       from the set call to that frame's result published
//   first extra     that frame's latency (received -> published) minus the median of the others':
//                   goal B, p99 <= one frame's latency (the median)
//   bystander       the other pipeline's latency p99 / max
// Not a test: it prints.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <spdlog/spdlog.h>

#include "daemon/live_params.h"
#include "runtime/pipeline_executor.h"
#include "sdk/thread_pool.h"
#include "stages/registry.h"
#include "tools/bench/commands.h"

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
double maximum(const std::vector<double>& values) {
  return values.empty() ? 0.0 : *std::max_element(values.begin(), values.end());
}

PipelineConfig live_pipeline(const StageRegistry& registry, const std::string& name) {
  auto stage = [&](const std::string& type, const std::string& key, const std::string& value, bool publish) {
    StageConfig config{.type = type, .publish = publish};
    config.params = registry.find(type)->validate({{key, RawParam{{value}}}});
    return config;
  };
  PipelineConfig pipeline{.name = name};
  pipeline.stages.push_back(stage("convert", "scale", "1", false));
  pipeline.stages.push_back(stage("upsample", "factor", "4", true));
  return pipeline;
}

struct Timings {
  std::mutex mutex;
  std::map<std::uint64_t, std::int64_t> first_start_ns, first_published_ns;  // per generation
  std::map<std::uint64_t, double> first_latency_ms;
  std::vector<double> latencies_ms;  // every other frame's

  ExecutorCallbacks callbacks() {
    return {.publish =
                [this](const PublishedResult& r) {
                  const std::int64_t now = now_ns();
                  const double latency = (now - r.timing.received_ns) * 1e-6;
                  std::lock_guard lock(mutex);
                  if (first_start_ns.contains(r.param_generation)) {
                    latencies_ms.push_back(latency);
                    return;
                  }
                  first_start_ns[r.param_generation] = r.timing.compute_start_ns;
                  first_published_ns[r.param_generation] = now;
                  first_latency_ms[r.param_generation] = latency;
                },
            .stage_error = [](const FrameMeta&, const std::string&, const std::string& why) {
              std::fprintf(stderr, "stage error: %s\n", why.c_str());
            }};
  }
};

void run_kind(const LiveOptions& options, const std::string& kind) {
  const StageRegistry& registry = builtin_stages();
  const Backend backend = options.backend == "cuda" ? Backend::cuda : Backend::cpu;
  ThreadPool pool(2), bystander_pool(2);
  Timings live, bystander;
  const ExecutorOptions executor_options{.backend = backend, .slots = 3, .queue_depth = 64, .pool = &pool};
  const PipelineConfig config = live_pipeline(registry, "live");
  PipelineExecutor executor("live", {0}, [&] { return build_stages(config, registry); }, executor_options,
                            live.callbacks());
  ExecutorOptions bystander_options = executor_options;
  bystander_options.pool = &bystander_pool;
  const PipelineConfig bystander_config = live_pipeline(registry, "bystander");
  PipelineExecutor other("bystander", {0}, [&] { return build_stages(bystander_config, registry); },
                         bystander_options, bystander.callbacks());
  LiveParameters parameters(
      {config}, registry,
      [&](std::size_t, std::size_t stage, const std::function<std::unique_ptr<Stage>()>& make,
          std::uint64_t generation) { executor.update_stage(stage, make, generation); },
      [&](std::size_t, std::size_t stage, Stage& candidate) { executor.check_stage(stage, candidate); });

  InputFrame input;
  input.meta.kind = FrameKind::iq;
  input.meta.payload.dtype = DType::int16;
  input.meta.payload.axes = {{"line", options.lines}, {"sample", options.samples}, {"iq", 2}};
  auto payload = std::make_shared<std::vector<std::int16_t>>(options.lines * options.samples * 2);
  std::mt19937 rng(7);
  for (auto& v : *payload) v = static_cast<std::int16_t>(rng() % 2000) - 1000;
  input.payload = std::shared_ptr<const std::byte>(payload, reinterpret_cast<const std::byte*>(payload->data()));
  input.payload_bytes = payload->size() * sizeof(std::int16_t);

  std::map<std::uint64_t, std::int64_t> set_called_ns;
  std::vector<double> set_ms;
  const auto interval = std::chrono::nanoseconds(static_cast<std::int64_t>(1e9 / options.rate_hz));
  auto next = std::chrono::steady_clock::now();
  int changes = 0;
  for (int n = 0; n < options.frames; ++n) {
    std::this_thread::sleep_until(next);
    next += interval;
    InputFrame frame = input;
    frame.meta.sequence = static_cast<std::uint64_t>(n);
    frame.received_ns = now_ns();
    other.submit(frame);
    executor.submit(std::move(frame));
    if (kind == "none" || n <= 100 || n % options.every != options.every / 2) continue;
    std::this_thread::sleep_for(interval / 3);  // between two frames, off the frame clock
    ++changes;
    const bool scale = kind == "scale";
    const std::string name = scale ? "live.convert.scale" : "live.upsample.factor";
    const std::string value = scale ? std::to_string(1 + changes % 7) : (changes % 2 ? "5" : "4");
    const std::int64_t called = now_ns();
    const LiveParameters::Outcome outcome = parameters.set(name, value, "bench");
    set_ms.push_back((now_ns() - called) * 1e-6);
    if (!outcome.ok) {
      std::fprintf(stderr, "set %s %s refused: %s\n", name.c_str(), value.c_str(), outcome.error.c_str());
      continue;
    }
    set_called_ns[outcome.generation] = called;
  }
  executor.drain();
  other.drain();

  std::vector<double> to_frame_ms, to_result_ms, extra_ms;
  const double median_latency = percentile(live.latencies_ms, 0.5);
  for (const auto& [generation, called] : set_called_ns) {
    if (!live.first_start_ns.contains(generation)) continue;  // superseded before a frame ran it
    to_frame_ms.push_back((live.first_start_ns[generation] - called) * 1e-6);
    to_result_ms.push_back((live.first_published_ns[generation] - called) * 1e-6);
    extra_ms.push_back(live.first_latency_ms[generation] - median_latency);
  }
  std::printf("%-7s %4zu | %6.3f %6.3f | %6.3f %6.3f %6.3f | %6.3f %6.3f | %7.3f %7.3f %7.3f | %7.3f | %6.3f %6.3f\n",
              kind.c_str(), to_frame_ms.size(), percentile(set_ms, 0.5), percentile(set_ms, 0.99),
              percentile(to_frame_ms, 0.5), percentile(to_frame_ms, 0.99), maximum(to_frame_ms),
              percentile(to_result_ms, 0.5), percentile(to_result_ms, 0.99), percentile(extra_ms, 0.5),
              percentile(extra_ms, 0.99), maximum(extra_ms), median_latency,
              percentile(bystander.latencies_ms, 0.99), maximum(bystander.latencies_ms));
  if (kind == "none") return;
  const double goal_a_ms = 1e3 / options.rate_hz + 1.0;
  const double goal_b_ms = median_latency;
  std::printf("        goal A, set -> next frame p99 %.3f ms <= %.3f ms (one frame interval + 1 ms): %s\n",
              percentile(to_frame_ms, 0.99), goal_a_ms, percentile(to_frame_ms, 0.99) <= goal_a_ms ? "met" : "NOT met");
  std::printf("        goal B, first frame's extra latency p99 %.3f ms <= %.3f ms (one frame's latency): %s\n",
              percentile(extra_ms, 0.99), goal_b_ms, percentile(extra_ms, 0.99) <= goal_b_ms ? "met" : "NOT met");
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
    spdlog::set_level(spdlog::level::warn);  // not a line per change
    std::printf("live parameters, %s backend, %.0f frames/s, %lld x %lld IQ, convert -> upsample; times in ms\n",
                options->backend.c_str(), options->rate_hz, static_cast<long long>(options->lines),
                static_cast<long long>(options->samples));
    std::printf("%-7s %4s | %13s | %20s | %13s | %23s | %7s | %13s\n", "change", "n", "set call", "to frame (A)",
                "to result", "first extra (B)", "latency", "bystander");
    std::printf("%-7s %4s | %6s %6s | %6s %6s %6s | %6s %6s | %7s %7s %7s | %7s | %6s %6s\n", "", "", "p50", "p99",
                "p50", "p99", "max", "p50", "p99", "p50", "p99", "max", "p50", "p99", "max");
    for (const char* kind : {"none", "scale", "factor"}) run_kind(*options, kind);
  });
}

}  // namespace sonopipe::bench
