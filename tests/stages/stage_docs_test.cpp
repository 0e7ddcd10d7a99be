// docs/stages.md is generated from the stages' parameter declarations (`sonopiped --list-stages
// --markdown > docs/stages.md`): this test fails when the committed file and the declarations differ.
#include <fstream>
#include <sstream>

#include "stages/registry.h"
#include "tests/support/test_support.h"

using namespace sonopipe;

TEST_CASE("docs/stages.md is the Markdown of the built-in stages' declarations", "[stages][docs]") {
  std::ifstream file(test::source_path("docs/stages.md"));
  REQUIRE(file.good());
  std::stringstream committed;
  committed << file.rdbuf();
  const std::string generated = builtin_stages().describe_markdown();
  if (committed.str() != generated)
    FAIL("docs/stages.md is out of date: run `build/daemon/sonopiped --list-stages --markdown > docs/stages.md`");
  for (const StageInfo& info : builtin_stages().all()) {
    CHECK(generated.find("\n## " + info.name + "\n") != std::string::npos);
    for (const ParamDecl& param : info.params) CHECK(generated.find("| `" + param.key + "` |") != std::string::npos);
  }
}
