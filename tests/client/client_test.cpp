// libsonopipe-client against the real sonopiped: a plain C program (client_program.c, linked to
// the library alone) sends frames through sp_send and reads results through sp_subscriber_*,
// checking them byte for byte against its own `convert` reference and every error path. Here: it
// exits 0, and the daemon saw no refused frame (the library stopped every bad one before the wire).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/daemon/daemon_harness.h"

namespace sonopipe::test {
namespace {

// Each pipeline one `convert`; a scale that is not a power of two makes the float32 product round,
// so the program's reference must round exactly as the stage does.
constexpr const char* kScale = "0.37";

int run_program(const std::vector<std::string>& args, const std::string& output_path) {
  std::string command = binary_path("tests/client_program");
  for (const std::string& arg : args) command += " '" + arg + "'";
  command += " > '" + output_path + "' 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string text_of(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("a C program sends through libsonopipe-client, gets convert's results byte for byte, and every bad "
          "frame is refused before the wire", "[client][daemon]") {
  DaemonHarness daemon(std::string("backend: cpu\ncpu_threads: 2\nqueue_depth: 16\noverflow: block\npipelines:\n") +
                       "  - {name: iq, match: {kinds: [iq]}, stages: [{type: convert, params: {scale: " + kScale + "}}]}\n" +
                       "  - {name: rf, match: {kinds: [rf]}, stages: [{type: convert, params: {scale: " + kScale + "}}]}\n");
  daemon.start();
  const std::uint64_t seed = fresh_seed();
  const std::string output = (std::filesystem::path(daemon.config_path()).parent_path() / "client_program.out").string();
  const int exit_code = run_program({daemon.endpoint("ingest"), daemon.endpoint("publish"), kScale,
                                     std::to_string(seed), daemon.endpoint("nobody-listens")},
                                    output);
  const std::string printed = text_of(output);
  INFO(printed);
  REQUIRE(exit_code == 0);
  CHECK(printed.find("client_program: ok") != std::string::npos);
  const v1::Status status = daemon.wait_for_status([](const v1::Status& s) { return s.frames_processed() >= 7; });
  INFO(daemon.log());
  CHECK(status.frames_rejected() == 0);
  CHECK(status.frames_missing() == 0);  // sequence numbers without gaps per stream
  CHECK(status.frames_received() >= 7);  // at least one warm-up, five RF, one IQ
}

}  // namespace sonopipe::test
