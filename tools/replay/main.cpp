// sonopipe-replay: sends a recording's frames to the daemon (or any [FrameHeader][payload]
// receiver) with original timing, a speed factor, a fixed rate or as fast as possible, once,
// N times or until stopped, and reports what it sent and how late.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <iostream>

#include "tools/common/curve_options.h"
#include "tools/common/stop_signal.h"
#include "tools/replay/player.h"
#include "wire/version.h"

using namespace sonopipe;

int main(int argc, char** argv) {
  CLI::App app{"sonopipe-replay: send a recording's frames to a sonopipe ingest endpoint"};
  app.set_version_flag("--version", version_line("sonopipe-replay"));
  std::string path;
  replay::PlayerOptions options;
  std::string endpoint = "tcp://127.0.0.1:5555";
  std::vector<std::string> routed_endpoints;
  bool route = false;
  double speed = 1.0, rate_hz = 0.0, connect_timeout_s = 10.0, preload_mb = 2048.0;
  bool as_fast_as_possible = false;
  std::vector<std::uint32_t> streams;
  formats::ImportOptions import_options;
  app.add_option("recording", path,
                 "recorded acquisition: sonopipe recording (sonopipe-sim, sonopipe-record), USTB UFF or Verasonics .mat "
                 "(detected from the contents)")
      ->required()->check(CLI::ExistingFile);
  app.add_option("--object", import_options.object, "UFF/.mat: the object to replay (default: the first channel or "
                                                     "beamformed data)");
  app.add_option("--ensemble", import_options.ensemble,
                 "UFF/.mat: group this many acquisition frames into one ARFI set (0 = one frame each)")
      ->capture_default_str();
  app.add_option("--stream-id", import_options.stream_id, "UFF/.mat: stream id of the replayed frames")
      ->capture_default_str();
  auto* endpoint_option =
      app.add_option("--endpoint", endpoint, "ingest endpoint of the receiver (tcp://, ipc://, or shm://<name> on the daemon's "
                     "host: frames written into its shared pool, delivery acknowledged; exit code 3 when "
                     "frames were not delivered)")->capture_default_str();
  auto* to_option = app.add_option("--to", routed_endpoints,
                                   "with --route: ingest endpoint of one receiver (repeat: one socket per daemon)");
  app.add_flag("--route", route, "spread streams over the --to endpoints: stream s goes to endpoint s mod N")
      ->needs(to_option);
  to_option->excludes(endpoint_option);
  app.add_flag("--bind", options.bind, "bind the endpoint instead of connecting to it");
  sonopipe::tools::add_curve_options(app, options.curve);
  app.add_flag("--lossless", options.lossless,
               "PUSH and block when the receiver is busy (daemon ingest.pattern: pull); default PUB, drop and count "
               "(ingest.pattern: sub)");
  auto* ack_option = app.add_option("--ack-endpoint", options.ack_endpoint,
                 "the daemon's ingest.ack_endpoint (with --lossless): number the frames and read its "
                 "acknowledgements; the report names frames not delivered (exit code 3)");
  app.add_flag("--resend", options.resend,
               "with --ack-endpoint: when the daemon comes back (within --connect-timeout-s), send the frames it "
               "did not acknowledge again, before the rest")->needs(ack_option);
  auto* speed_option = app.add_option("--speed", speed, "original timing scaled: 2 = twice as fast")->capture_default_str();
  auto* rate_option = app.add_option("--rate", rate_hz, "fixed frame rate in frames/s instead of the recorded timing");
  auto* max_option = app.add_flag("--max", as_fast_as_possible, "as fast as the receiver takes them (no timing)");
  speed_option->excludes(rate_option)->excludes(max_option);
  rate_option->excludes(max_option);
  app.add_option("--loop", options.loops, "number of passes over the recording, 0 = until SIGINT/SIGTERM")
      ->capture_default_str();
  app.add_flag("--keep-headers", options.keep_headers,
               "send headers unchanged in every loop (default: sequence and time continue across loops)");
  app.add_option("--stream", streams, "replay only these stream ids (repeatable; default all)");
  app.add_option("--late-ms", options.late_threshold_ms, "a send starting later than this is counted late")
      ->capture_default_str();
  app.add_option("--connect-timeout-s", connect_timeout_s, "how long to wait for a receiver")->capture_default_str();
  app.add_option("--hwm", options.send_high_water_mark, "frames queued per receiver before blocking/dropping")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--preload-mb", preload_mb, "hold the frames in memory when one pass fits (0: read each frame from file)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (!routed_endpoints.empty() && !route) {
    std::cerr << "sonopipe-replay: --to needs --route (frames of stream s go to --to endpoint s mod N)\n";
    return 1;
  }
  options.endpoints = route ? routed_endpoints : std::vector<std::string>{endpoint};

  try {
    tools::install_stop_handlers();
    options.connect_timeout = std::chrono::milliseconds(static_cast<long>(connect_timeout_s * 1000));
    replay::Timing timing;
    if (as_fast_as_possible)
      timing.mode = replay::TimingMode::max;
    else if (*rate_option)
      timing = {.mode = replay::TimingMode::fixed_rate, .rate_hz = rate_hz};
    else
      timing = {.mode = replay::TimingMode::original, .speed = speed};
    replay::FrameSource source(path, streams, static_cast<std::size_t>(preload_mb * 1e6), import_options);
    spdlog::info("sonopipe-replay: {} is a {}", path, source.description());
    if (source.size() == 0) {
      std::cerr << "sonopipe-replay: " << path << " holds no frames to replay\n";
      return 1;
    }
    replay::Schedule schedule(source.times_ns(), timing);
    if (timing.mode == replay::TimingMode::original && schedule.recorded_span_ns() == 0 && source.size() > 1)
      spdlog::warn("sonopipe-replay: all frames share one acquisition time; original timing sends them back to "
                   "back (use --rate)");
    const replay::PlayerReport report = replay::play(source, schedule, options);
    std::cout << replay::describe(report, schedule, options, source) << std::endl;
    // shm:// or --ack-endpoint: frames the daemon never took, or never sent because it was gone.
    return report.frames_not_delivered > 0 || report.frames_not_sent > 0 ? 3 : 0;
  } catch (const std::exception& e) {
    std::cerr << "sonopipe-replay: " << e.what() << "\n";
    return 1;
  }
}
