// sonopipe-replay: sends a recording's frames to the daemon (or any [FrameHeader][payload]
// receiver) with original timing, a speed factor, a fixed rate or as fast as possible, once,
// N times or until stopped, and reports what it sent and how late.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <iostream>

#include "tools/common/curve_options.h"
#include "tools/common/stop_signal.h"
#include "tools/replay/player.h"

using namespace sonopipe;

int main(int argc, char** argv) {
  CLI::App app{"sonopipe-replay: send a recording's frames to a sonopipe ingest endpoint"};
  std::string path;
  replay::PlayerOptions options;
  options.endpoint = "tcp://127.0.0.1:5555";
  double speed = 1.0, rate_hz = 0.0, connect_timeout_s = 10.0, preload_mb = 2048.0;
  bool as_fast_as_possible = false;
  std::vector<std::uint32_t> streams;
  app.add_option("recording", path, "HDF5 recording (sonopipe-sim, sonopipe-record)")->required()->check(CLI::ExistingFile);
  app.add_option("--endpoint", options.endpoint, "ingest endpoint of the receiver")->capture_default_str();
  app.add_flag("--bind", options.bind, "bind the endpoint instead of connecting to it");
  sonopipe::tools::add_curve_options(app, options.curve);
  app.add_flag("--lossless", options.lossless,
               "PUSH and block when the receiver is busy (daemon ingest.pattern: pull); default PUB, drop and count "
               "(ingest.pattern: sub)");
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
    replay::FrameSource source(path, streams, static_cast<std::size_t>(preload_mb * 1e6));
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
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "sonopipe-replay: " << e.what() << "\n";
    return 1;
  }
}
