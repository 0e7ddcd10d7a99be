// sonopipe-record: writes the daemon's results (and optionally raw frames) to an HDF5 recording.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <iostream>

#include "tools/common/curve_options.h"
#include "tools/common/stop_signal.h"
#include "tools/record/recorder.h"
#include "wire/version.h"

using namespace sonopipe;

int main(int argc, char** argv) {
  CLI::App app{"sonopipe-record: subscribe to sonopipe results (and raw frames) and write them to HDF5"};
  app.set_version_flag("--version", version_line("sonopipe-record"));
  record::RecorderOptions options;
  std::string endpoint = "tcp://127.0.0.1:5556";
  std::vector<std::string> from;
  bool no_results = false;
  double max_frame_mb = 1024;
  std::vector<std::string> topics;
  app.add_option("--out", options.out, "recording to create (HDF5)")->required();
  auto* endpoint_option = app.add_option("--endpoint", endpoint, "the daemon's publish endpoint; shm://<name>: its "
                                         "publish.shm pool, results read in place (see --result-mode)")
                              ->capture_default_str();
  app.add_option("--from", from, "publish endpoint of one of several daemons (repeat; one SUB connects to all)")
      ->excludes(endpoint_option);
  app.add_option("--topic", topics, "topic prefix to record (repeatable; default result/; 'status' keeps the last Status)");
  app.add_flag("--bind", options.bind, "bind the result endpoint instead of connecting");
  sonopipe::tools::add_curve_options(app, options.curve);
  app.add_option("--result-mode", options.result_mode, "shm:// results: lossless (every result; the daemon waits for "
                 "the recorder in a lossless pool) | live (newest first, misses counted; a live pool is always live)")
      ->capture_default_str()->check(CLI::IsMember({"lossless", "live"}));
  app.add_flag("--no-results", no_results, "record no results (raw frames only)");
  app.add_option("--raw-endpoint", options.raw_endpoint, "also record raw frames [FrameHeader][payload] from here; shm://<name>: the "
                 "daemon's shared ingest pool, read in place at the acquisition rate (--raw-pattern pull: "
                 "every frame, the producer waits for the recorder too; sub: newest only)");
  app.add_option("--raw-pattern", options.raw_pattern, "pull | sub")->capture_default_str()
      ->check(CLI::IsMember({"pull", "sub"}));
  app.add_flag("--raw-bind", options.raw_bind, "bind the raw endpoint (be the frame sink) instead of connecting");
  app.add_option("--count", options.result_count, "stop after this many results (0: no limit)")->capture_default_str();
  app.add_option("--raw-count", options.raw_count, "stop after this many raw frames (0: no limit)")->capture_default_str();
  app.add_option("--duration", options.duration_s, "stop after this many seconds (0: no limit)")->capture_default_str();
  app.add_option("--idle-timeout", options.idle_timeout_s,
                 "stop when nothing arrived for this many seconds after the first message (0: never)")
      ->capture_default_str();
  app.add_option("--max-frame-mb", max_frame_mb, "largest raw frame accepted")->capture_default_str();
  app.add_option("--ready-file", options.ready_file, "file created once the sockets are attached and subscribed");
  app.add_option("--hwm", options.receive_high_water_mark, "messages queued per socket while writing")
      ->capture_default_str()->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  options.endpoints = from.empty() ? std::vector<std::string>{endpoint} : from;
  if (no_results) options.endpoints.clear();
  if (!topics.empty()) options.topics = topics;
  options.max_frame_bytes = static_cast<std::size_t>(max_frame_mb * 1e6);
  try {
    tools::install_stop_handlers();
    const record::RecorderReport report = record::run_recorder(options);
    std::cout << record::describe(report, options) << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "sonopipe-record: " << e.what() << "\n";
    return 1;
  }
}
