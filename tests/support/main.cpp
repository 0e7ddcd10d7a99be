// The main() of every C++ test program: Catch2's session, plus the honest [cuda] skip.
//
// tests/CMakeLists.txt gives a program with [cuda] cases two CTest entries: <name> runs '~[cuda]'
// and <name>_cuda runs '[cuda]' with SKIP_RETURN_CODE 77. When the test cases selected are all
// [cuda] and no CUDA device is usable, the program runs none of them and exits with
// kSkipReturnCode, so CTest reports the entry as skipped rather than passed.
//
// Under CTest (SONOPIPE_CTEST set by tests/CMakeLists.txt) two selections mean that the entries
// were made from an older version of the source (the [cuda] tags are read when CMake configures):
// a mix of [cuda] and other cases, whose [cuda] half would pass by warning, and an empty one. Both
// fail with "re-run cmake" instead of passing.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "tests/support/test_support.h"

namespace {

bool is_cuda_case(const Catch::TestCase& test_case) {
  const std::vector<std::string>& tags = test_case.lcaseTags;
  return std::find(tags.begin(), tags.end(), "cuda") != tags.end();
}

bool only_listing(const Catch::Config& config) {
  return config.showHelp() || config.listTests() || config.listTestNamesOnly() || config.listTags() ||
         config.listReporters();
}

}  // namespace

int main(int argc, char* argv[]) {
  Catch::Session session;
  if (int status = session.applyCommandLine(argc, argv); status != 0) return status;
  const Catch::Config& config = session.config();
  if (only_listing(config)) return session.run();

  const std::vector<Catch::TestCase> selected =
      Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config);
  const auto cuda_cases = static_cast<std::size_t>(std::count_if(selected.begin(), selected.end(), is_cuda_case));
  const bool under_ctest = std::getenv("SONOPIPE_CTEST") != nullptr;
  const char* program = argc > 0 ? argv[0] : "test program";

  if (under_ctest && selected.empty()) {
    std::cerr << program << ": no test case matches the selection; the CTest entries were made from an older "
              << "version of this program's source: re-run cmake\n";
    return 1;
  }
  if (under_ctest && cuda_cases > 0 && cuda_cases < selected.size()) {
    std::cerr << program << ": " << cuda_cases << " [cuda] cases are selected with " << selected.size() - cuda_cases
              << " others; CTest runs [cuda] cases in an entry of their own (<name>_cuda), made when CMake "
              << "found the tag in the source: re-run cmake\n";
    return 1;
  }
  if (!selected.empty() && cuda_cases == selected.size() && !sonopipe::test::cuda_device_present()) {
    std::cout << "skipped: no CUDA device; " << cuda_cases << " [cuda] test cases not run:\n";
    for (const Catch::TestCase& test_case : selected) std::cout << "  " << test_case.name << '\n';
    return sonopipe::test::kSkipReturnCode;
  }
  return session.run();
}
