// Shared by the tool tests: temporary paths, waiting for a child's ready file, running a tool
// binary from the build tree with its output captured.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/test_support.h"
#include "tools/common/child_process.h"
#include "tools/common/recording.h"

namespace sonopipe::test {

// A unique path in the temp folder (files) or an ipc endpoint; removed when the object dies.
struct TempPath {
  std::string path;
  explicit TempPath(const std::string& name, const std::string& suffix = ".h5") {
    static int counter = 0;
    const auto dir = std::filesystem::temp_directory_path() / "sonopipe-tests";
    std::filesystem::create_directories(dir);
    path = (dir / (name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + suffix)).string();
    std::filesystem::remove(path);
  }
  ~TempPath() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
  std::string ipc() const { return "ipc://" + path; }
};

// A fresh folder in the temp folder, removed with everything in it when the object dies.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& prefix = "sonopipe-tools") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

inline bool wait_for_file(const std::string& path, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::filesystem::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Path of a tool built in this tree, e.g. tool("replay") -> <build>/tools/replay/sonopipe-replay.
inline std::string tool(const std::string& name) { return binary_path("tools/" + name + "/sonopipe-" + name); }

struct ToolRun {
  int exit_code = -1;
  std::string output;
};

// Runs a tool to completion (killed after `timeout`), capturing stdout and stderr.
inline ToolRun run_tool(std::vector<std::string> argv, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  TempPath log("tool-output", ".log");
  tools::ChildProcess child(argv, log.path);
  ToolRun run;
  auto status = child.wait(timeout);
  run.exit_code = status ? *status : -1;
  run.output = tools::read_text_file(log.path);
  return run;
}

// Results of pipeline/output a reader finds in a recording a live recorder is writing, once there
// are `count` of them or the timeout passed (the recorder flushes about once a second; between
// flushes the file may not open).
inline std::size_t wait_for_recorded_results(const std::string& path, const std::string& pipeline,
                                             const std::string& output, std::size_t count,
                                             std::chrono::milliseconds timeout) {
  std::size_t found = 0;
  for (auto deadline = std::chrono::steady_clock::now() + timeout;
       found < count && std::chrono::steady_clock::now() < deadline;) {
    try {
      found = recording::Reader(path).result_count(pipeline, output);
    } catch (const std::exception&) {
      // the writer is between flushes: try again
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return found;
}

}  // namespace sonopipe::test
