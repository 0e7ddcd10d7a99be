// Parameter declarations validated at config load: every kind of mistake names the key and what
// was expected, and carries the config line.
#include "sdk/params.h"

#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

const std::vector<ParamDecl> kDecls = {
    {.key = "count", .type = ParamType::integer, .default_value = "4", .min = 1, .max = 16, .unit = "samples"},
    {.key = "gain", .type = ParamType::real, .default_value = "1.5", .min = 0},
    {.key = "enabled", .type = ParamType::boolean, .default_value = "true"},
    {.key = "mode", .type = ParamType::choice, .default_value = "exact", .choices = {"exact", "subsets"}},
    {.key = "label", .type = ParamType::text, .default_value = ""},
    {.key = "shifts", .type = ParamType::integer_list, .default_value = "[1, 2, 3]", .min = -5, .max = 5},
    {.key = "weights", .type = ParamType::real_list, .default_value = "[0.5]"},
};

RawParam scalar(std::string value, int line = 7) { return RawParam{{std::move(value)}, false, line}; }
RawParam list(std::vector<std::string> items, int line = 7) { return RawParam{std::move(items), true, line}; }

std::string error_of(const std::map<std::string, RawParam>& given) {
  try {
    validate_params(kDecls, given);
  } catch (const ParamError& e) {
    CHECK(e.line == 7);
    return e.key + ": " + e.expected;
  }
  return "no error";
}

}  // namespace

TEST_CASE("defaults fill every declared key, including lists", "[params]") {
  ParamValues values = default_params(kDecls);
  CHECK(values.integer("count") == 4);
  CHECK(values.real("gain") == 1.5);
  CHECK(values.real("count") == 4.0);  // integers read as reals
  CHECK(values.boolean("enabled"));
  CHECK(values.text("mode") == "exact");
  CHECK(values.integers("shifts") == std::vector<std::int64_t>{1, 2, 3});
  CHECK(values.reals("weights") == std::vector<double>{0.5});
  CHECK_FALSE(values.was_given("count"));
}

TEST_CASE("given values override defaults and are marked as given", "[params]") {
  ParamValues values = validate_params(kDecls, {{"count", scalar("16")}, {"mode", scalar("subsets")},
                                                {"shifts", list({"-5", "5"})}, {"gain", scalar("2e-3")}});
  CHECK(values.integer("count") == 16);
  CHECK(values.text("mode") == "subsets");
  CHECK(values.integers("shifts") == std::vector<std::int64_t>{-5, 5});
  CHECK(values.real("gain") == 2e-3);
  CHECK(values.was_given("count"));
}

TEST_CASE("every kind of bad parameter names the key and what was expected", "[params]") {
  CHECK(error_of({{"cuont", scalar("3")}}).find("cuont: unknown parameter; expected one of count, gain") == 0);
  CHECK(error_of({{"count", scalar("3.5")}}) == "count: expected an integer in [1, 16] (samples)");
  CHECK(error_of({{"count", scalar("17")}}) == "count: expected an integer in [1, 16] (samples)");
  CHECK(error_of({{"count", list({"1"})}}) == "count: expected an integer in [1, 16] (samples)");
  CHECK(error_of({{"gain", scalar("-1")}}) == "gain: expected a number >= 0");
  CHECK(error_of({{"gain", scalar("nan")}}) == "gain: expected a number >= 0");
  CHECK(error_of({{"gain", scalar("fast")}}) == "gain: expected a number >= 0");
  CHECK(error_of({{"enabled", scalar("yes")}}) == "enabled: expected true or false");
  CHECK(error_of({{"mode", scalar("fast")}}) == "mode: expected one of exact, subsets");
  CHECK(error_of({{"shifts", scalar("1")}}) == "shifts: expected a list of integers in [-5, 5]");
  CHECK(error_of({{"shifts", list({"1", "9"})}}) == "shifts: expected a list of integers in [-5, 5]");
  CHECK(error_of({{"weights", list({"1", "x"})}}) == "weights: expected a list of numbers");
}

TEST_CASE("a stage without parameters refuses any", "[params]") {
  try {
    validate_params({}, {{"scale", scalar("1")}});
    FAIL("no error");
  } catch (const ParamError& e) {
    CHECK(std::string(e.what()) == "scale: unknown parameter; this stage takes none");
  }
}
