// Typed parameter declarations (sdk/param_spec.h): the type follows from the bound member, the
// default from the struct's initialiser, and validated values land in the members; a rule across
// parameters is a ParamError naming its key.
#include "sdk/registry.h"

#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

enum class Shape { round, square };

struct ToyParams {
  std::int64_t count = 4;
  int small = 2;
  double gain = 1.5;
  bool enabled = true;
  Shape shape = Shape::square;
  std::string label = "toy";
  std::vector<int> shifts = {1, -2};
  std::vector<double> weights = {0.5, 1e-8};
};

class ToyStage final : public Stage {
 public:
  using Params = ToyParams;
  static void declare(ParamSpec<Params>& spec) {
    spec.param(&Params::count, "count", {.min = 1, .max = 1000000, .unit = "samples", .doc = "how many"});
    spec.param(&Params::small, "small", {.min = 0});
    spec.param(&Params::gain, "gain", {.min = 0, .doc = "a gain"});
    spec.param(&Params::enabled, "enabled");
    spec.choice(&Params::shape, "shape", {{"round", Shape::round}, {"square", Shape::square}});
    spec.param(&Params::label, "label");
    spec.param(&Params::shifts, "shifts", {.min = -5, .max = 5});
    spec.param(&Params::weights, "weights");
    spec.rule([](const Params& p) {
      if (p.small >= p.count) throw ParamError("small", "expected less than count", 0);
    });
  }
  explicit ToyStage(const Params& params) : params(params) {}
  StagePlan configure(const FrameMeta&, const TensorSpec& input, Backend) override { return {{{"out", input}}}; }
  bool run_cpu(const StageIo&) override { return true; }
  Params params;
};

RawParam scalar(std::string value, int line = 3) { return RawParam{{std::move(value)}, false, line}; }
RawParam list(std::vector<std::string> items, int line = 3) { return RawParam{std::move(items), true, line}; }

}  // namespace

TEST_CASE("a declaration takes its type from the member and its default from the initialiser", "[params]") {
  const StageInfo info = make_stage_info<ToyStage>("toy", "a toy");
  REQUIRE(info.params.size() == 8);
  auto decl = [&](const std::string& key) {
    for (const ParamDecl& d : info.params)
      if (d.key == key) return d;
    FAIL("no declaration " << key);
    return ParamDecl{};
  };
  CHECK(decl("count").type == ParamType::integer);
  CHECK(decl("count").default_value == "4");
  CHECK(decl("count").max == 1000000);
  CHECK(decl("count").unit == "samples");
  CHECK(decl("count").doc == "how many");
  CHECK(decl("small").type == ParamType::integer);
  CHECK(decl("gain").type == ParamType::real);
  CHECK(decl("gain").default_value == "1.5");
  CHECK(decl("enabled").type == ParamType::boolean);
  CHECK(decl("enabled").default_value == "true");
  CHECK(decl("shape").type == ParamType::choice);
  CHECK(decl("shape").choices == std::vector<std::string>{"round", "square"});
  CHECK(decl("shape").default_value == "square");
  CHECK(decl("label").type == ParamType::text);
  CHECK(decl("label").default_value == "toy");
  CHECK(decl("shifts").type == ParamType::integer_list);
  CHECK(decl("shifts").default_value == "[1, -2]");
  CHECK(decl("weights").type == ParamType::real_list);
  CHECK(decl("weights").default_value == "[0.5, 1e-08]");
  // Every default validates against its own declaration (what the config loader does with none given).
  CHECK_NOTHROW(info.validate({}));
}

TEST_CASE("validated values are bound into the members, defaults where none was given", "[params]") {
  const ToyParams p = bind_params<ToyStage>({{"count", scalar("12")}, {"shape", scalar("round")},
                                             {"shifts", list({"5", "-5", "0"})}, {"enabled", scalar("false")},
                                             {"weights", list({"2e-3"})}, {"label", scalar("x")}});
  CHECK(p.count == 12);
  CHECK(p.small == 2);
  CHECK(p.gain == 1.5);
  CHECK_FALSE(p.enabled);
  CHECK(p.shape == Shape::round);
  CHECK(p.label == "x");
  CHECK(p.shifts == std::vector<int>{5, -5, 0});
  CHECK(p.weights == std::vector<double>{2e-3});

  const StageInfo info = make_stage_info<ToyStage>("toy", "a toy");
  auto stage = info.create(info.validate({{"gain", scalar("3.25")}}));
  CHECK(dynamic_cast<ToyStage&>(*stage).params.gain == 3.25);
}

TEST_CASE("a rule across parameters and a value its member cannot hold are ParamErrors with the line", "[params]") {
  const StageInfo info = make_stage_info<ToyStage>("toy", "a toy");
  try {
    info.validate({{"small", scalar("9", 7)}, {"count", scalar("9", 6)}});
    FAIL("no error");
  } catch (const ParamError& e) {
    CHECK(e.key == "small");
    CHECK(e.expected == "expected less than count");
    CHECK(e.line == 7);  // the rule gave no line: the given key's line
  }
  try {
    info.validate({{"small", scalar("4294967296")}, {"count", scalar("1000000")}});
    FAIL("no error");
  } catch (const ParamError& e) {
    CHECK(e.key == "small");
    CHECK(e.expected == "expected an integer that fits in 32 bits");
  }
  CHECK_THROWS_AS(info.validate({{"shifts", list({"6"})}}), ParamError);
}

TEST_CASE("a choice whose default is not among its names and a key declared twice are refused", "[params]") {
  struct Broken {
    Shape shape = Shape::square;
    int a = 0;
  };
  ParamSpec<Broken> spec;
  CHECK_THROWS_AS(spec.choice(&Broken::shape, "shape", {{"round", Shape::round}}), std::logic_error);
  spec.param(&Broken::a, "a");
  CHECK_THROWS_AS(spec.param(&Broken::a, "a"), std::logic_error);
}

TEST_CASE("ranges and defaults print whole numbers as integers", "[params]") {
  StageRegistry registry;
  registry.add(make_stage_info<ToyStage>("toy", "a toy"));
  const std::string listed = registry.describe();
  CHECK_THAT(listed, Catch::Contains("count (integer, default 4, range [1, 1000000], unit samples) how many"));
  CHECK_THAT(listed, Catch::Contains("small (integer, default 2, range [0, inf])"));
  CHECK_THAT(listed, Catch::Contains("shape (choice: round|square, default square)"));
  CHECK(listed.find(".000000") == std::string::npos);
  const std::string markdown = registry.describe_markdown();
  CHECK_THAT(markdown, Catch::Contains("| `count` | integer | `4` | [1, 1000000] | samples |  | how many |"));
  CHECK(format_number(1e6) == "1000000");
  CHECK(format_number(-0.019) == "-0.019");
  CHECK(format_number(0.1) == "0.1");
  CHECK(format_number(1e300) == "1e+300");
}
