// libsonopipe-client over shm:// against the real sonopiped: the plain C program
// client_shm_program.c writes frames in place into the daemon's ingest pool and reads convert's
// results in place from its publish pool, byte for byte, with the delivery acknowledgement.
#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "shm/layout.h"
#include "tests/daemon/daemon_harness.h"

namespace sonopipe::test {

TEST_CASE("a C program sends over shm:// in place and reads results in place, byte for byte", "[client][daemon][shm]") {
  const std::string tag = std::to_string(getpid());
  const std::string ingest = "shm://client-in-" + tag, publish = "shm://client-out-" + tag;
  DaemonHarness daemon("backend: cpu\ncpu_threads: 2\nmax_frame_bytes: 1048576\npipelines:\n"
                       "  - {name: rf, match: {kinds: [rf]}, stages: [{type: convert, params: {scale: 0.5}}]}\n",
                       "{endpoint: \"" + ingest + "\"}");
  {  // publish.shm beside the harness's ZeroMQ publisher
    std::ifstream in(daemon.config_path());
    std::stringstream text;
    text << in.rdbuf();
    std::string config = text.str();
    const std::string key = "status_interval_s: 0.1";
    config.insert(config.find(key) + key.size(), ", shm: {endpoint: \"" + publish + "\", slots: 8}");
    std::ofstream(daemon.config_path()) << config;
  }
  daemon.start();
  const std::string output = (std::filesystem::path(daemon.config_path()).parent_path() / "shm_program.out").string();
  const std::string command = binary_path("tests/client_shm_program") + " '" + ingest + "' '" + publish + "' " +
                              std::to_string(fresh_seed()) + " 'shm://nobody-" + tag + "' > '" + output + "' 2>&1";
  const int status_code = std::system(command.c_str());
  std::ifstream file(output);
  std::stringstream printed;
  printed << file.rdbuf();
  INFO(printed.str());
  CHECK(WIFEXITED(status_code));
  CHECK(WEXITSTATUS(status_code) == 0);
  CHECK(printed.str().find("client_shm_program: ok") != std::string::npos);
  const v1::Status status = daemon.wait_for_status([](const v1::Status& s) { return s.frames_processed() >= 6; });
  CHECK(status.frames_rejected() == 0);
  shm_unlink(shm::object_name(ingest).c_str());
  shm_unlink(shm::object_name(publish).c_str());
}

}  // namespace sonopipe::test
