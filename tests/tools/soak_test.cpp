// The short version of `sonopipe-bench soak` (the long one is 1,000,000 frames, see
// docs/benchmarks.md, "Soak"): 20,000 small frames from 4 interleaved streams through a real
// sonopiped's convert stage, every result checked by the bench's checker subscriber (lost,
// duplicated, reordered, checksum of the recomputed payload). The bench exits 1 on any miss.
#include "tests/tools/tool_test_support.h"

using namespace sonopipe;

TEST_CASE("soak: 20,000 frames through convert arrive once each, in order, byte-exact", "[soak][daemon]") {
  const test::ToolRun run = test::run_tool({test::binary_path("tools/bench/sonopipe-bench"), "soak", "--frames", "20000",
                                            "--warmup", "500", "--streams", "4", "--cpu-threads", "1"},
                                           std::chrono::seconds(600));
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(run.output.find("results 20500, lost 0, duplicated 0, reordered 0, corrupted 0") != std::string::npos);
  CHECK(run.output.find("soak: PASS") != std::string::npos);
}
