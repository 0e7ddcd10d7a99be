// sonopipe-run: runs a daemon config's pipelines over recordings in process, as fast as the backend
// allows, writing <out>/<input stem>.h5 per input and <out>/summary.csv.
// Exit code: the number of inputs that failed (capped at kMaxFailureCode); kCouldNotRun when
// nothing could run (bad flags, config error, backend unavailable, output folder not writable).
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "stages/registry.h"
#include "sdk/thread_pool.h"
#include "daemon/backend_choice.h"
#include "daemon/config.h"
#include "tools/common/stop_signal.h"
#include "tools/run/batch_runner.h"
#include "tools/run/progress_display.h"
#include "tools/run/run_summary.h"

using namespace sonopipe;

namespace {

constexpr int kMaxFailureCode = 125;
constexpr int kCouldNotRun = 126;

// Written beside its final name and renamed, like the result recordings.
void write_summary(const std::filesystem::path& path, const std::vector<run::InputOutcome>& outcomes) {
  const std::filesystem::path temporary = path.parent_path() / ("." + path.filename().string() + ".partial");
  {
    std::ofstream file(temporary);
    file << run::summary_csv(outcomes);
    if (!file) throw std::runtime_error("cannot write " + temporary.string());
  }
  std::filesystem::rename(temporary, path);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sonopipe-run: run a sonopiped config's pipelines over recordings, in process, without sockets"};
  std::string config_path, out_dir, summary_path, log_level = "warn", backend_flag;
  std::vector<std::string> inputs;
  app.add_option("--config", config_path, "YAML configuration of sonopiped (its pipelines, backend, slots)")
      ->required();
  app.add_option("inputs", inputs, "recordings to process (sonopipe HDF5; UFF/.mat once tools/formats reads them)")
      ->required();
  app.add_option("--out", out_dir, "folder for <input stem>.h5 result recordings and summary.csv (created)")
      ->required();
  app.add_option("--summary", summary_path, "where the summary CSV goes (default <out>/summary.csv)");
  app.add_option("--backend", backend_flag, "auto|cuda|cpu (overrides the config)")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off (stderr)")
      ->capture_default_str()->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kCouldNotRun;  // the failure count owns 1..125
  }
  // stdout carries the per-input lines; the log goes to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("sonopipe-run"));
  spdlog::set_level(spdlog::level::from_str(log_level));

  DaemonConfig config;
  BackendSelection backend;
  try {
    config = load_config_file(config_path, builtin_stages());
    if (!backend_flag.empty()) parse_backend_choice(backend_flag, config.backend);
    if (config.overflow != OverflowPolicy::block)
      spdlog::info("sonopipe-run: overflow {} in {} ignored: a batch run never drops frames",
                   overflow_policy_name(config.overflow), config_path);
    backend = choose_backend(config.backend, config.device, config.cpu_threads);
    std::filesystem::create_directories(out_dir);
    if (summary_path.empty()) summary_path = (std::filesystem::path(out_dir) / run::kSummaryFileName).string();
  } catch (const std::exception& e) {
    std::cerr << "sonopipe-run: " << e.what() << "\n";
    return kCouldNotRun;
  }
  spdlog::info("sonopipe-run: backend {} ({}), {} pipeline(s), {} input(s)", backend_name(backend.backend),
               backend.reason, config.pipelines.size(), inputs.size());
  run::BatchRunner runner(config, backend);
  tools::install_stop_handlers();

  run::ProgressDisplay progress(stderr, isatty(STDERR_FILENO) == 1, inputs.size());
  std::vector<run::InputOutcome> outcomes;
  std::map<std::string, std::string> output_owner;  // output path -> the input that writes it
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string& input = inputs[i];
    const std::string output = run::output_path_for(input, out_dir);
    run::InputOutcome outcome;
    if (auto [owner, fresh] = output_owner.emplace(output, input); !fresh) {
      outcome = {.input = input, .error = input + ": its output " + output + " is already written for " + owner->second};
    } else if (tools::stop_requested()) {
      outcome = {.input = input, .error = input + ": not run (interrupted)"};
    } else {
      progress.start_input(i + 1, input);
      outcome = runner.run(input, output, [&](std::size_t done, std::size_t total) { progress.frames(done, total); },
                           [] { return tools::stop_requested(); });
      progress.clear();
    }
    std::cout << run::summary_line(outcome) << std::endl;
    outcomes.push_back(std::move(outcome));
  }
  const auto failed = static_cast<int>(std::count_if(outcomes.begin(), outcomes.end(), [](const auto& o) { return !o.ok; }));
  try {
    write_summary(summary_path, outcomes);
  } catch (const std::exception& e) {
    std::cerr << "sonopipe-run: " << e.what() << "\n";
    return kCouldNotRun;
  }
  std::cout << "sonopipe-run: " << outcomes.size() - static_cast<std::size_t>(failed) << " of " << outcomes.size()
            << " inputs ok, " << failed << " failed; summary in " << summary_path << std::endl;
  return std::min(failed, kMaxFailureCode);
}
