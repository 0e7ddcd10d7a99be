// The host path's experiment switches (runtime/host_path_switches.h): each keeps its default unset
// or empty, takes its values, and refuses anything else with the variable and what it takes named.
#include "runtime/host_path_switches.h"

#include <catch2/catch.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/test_support.h"

using namespace sonopipe;
using test::ScopedEnv;

namespace {

// Every switch unset for the scope, whatever the environment the tests run in holds.
struct NoSwitches {
  std::vector<std::unique_ptr<ScopedEnv>> unset;
  NoSwitches() {
    for (const char* name : host_path_switch_names()) unset.push_back(std::make_unique<ScopedEnv>(name, nullptr));
  }
};

std::string refusal(const char* name, const char* value) {
  const ScopedEnv set(name, value);
  try {
    host_path_switches_from_environment();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("unset or empty, every switch keeps the daemon's default", "[switches]") {
  const NoSwitches none;
  for (const char* value : {static_cast<const char*>(nullptr), ""}) {
    std::vector<std::unique_ptr<ScopedEnv>> set;
    for (const char* name : host_path_switch_names()) set.push_back(std::make_unique<ScopedEnv>(name, value));
    const HostPathSwitches switches = host_path_switches_from_environment();
    CHECK(switches.staging == HostPathSwitches::Staging::driver);
    CHECK(switches.publish_copy == HostPathSwitches::PublishCopy::when_needed);
    CHECK(switches.publish_touch);
    CHECK_FALSE(switches.copy_huge_pages);
    CHECK(switches.pinned_pool);
    CHECK_FALSE(switches.max_spare_results);
    CHECK_FALSE(switches.max_spare_bytes);
    CHECK_FALSE(switches.spare_wait_us);
    CHECK(host_path_switches_set().empty());  // an empty one is as unset, and not named
  }
}

TEST_CASE("each switch takes its values", "[switches]") {
  const NoSwitches none;
  const ScopedEnv staging("SONOPIPE_STAGING", "slot"), copy("SONOPIPE_PUBLISH_COPY", "fresh"),
      touch("SONOPIPE_PUBLISH_TOUCH", "0"), huge("SONOPIPE_COPY_HUGE_PAGES", "1"), pool("SONOPIPE_PINNED_POOL", "0"),
      results("SONOPIPE_MAX_SPARE_RESULTS", "0"), bytes("SONOPIPE_MAX_SPARE_BYTES", "33554432"),
      wait("SONOPIPE_SPARE_WAIT_US", "9223372036854775807");  // INT64_MAX, the largest taken
  const HostPathSwitches switches = host_path_switches_from_environment();
  CHECK(switches.staging == HostPathSwitches::Staging::slot);
  CHECK(switches.publish_copy == HostPathSwitches::PublishCopy::fresh);
  CHECK_FALSE(switches.publish_touch);
  CHECK(switches.copy_huge_pages);
  CHECK_FALSE(switches.pinned_pool);
  CHECK(switches.max_spare_results == 0u);
  CHECK(switches.max_spare_bytes == 33554432u);
  CHECK(switches.spare_wait_us == 9223372036854775807u);
  CHECK(host_path_switches_set() ==
        std::vector<std::string>{"SONOPIPE_STAGING=slot", "SONOPIPE_PUBLISH_COPY=fresh", "SONOPIPE_PUBLISH_TOUCH=0",
                                 "SONOPIPE_COPY_HUGE_PAGES=1", "SONOPIPE_PINNED_POOL=0",
                                 "SONOPIPE_MAX_SPARE_RESULTS=0", "SONOPIPE_MAX_SPARE_BYTES=33554432",
                                 "SONOPIPE_SPARE_WAIT_US=9223372036854775807"});
  {
    const ScopedEnv other_staging("SONOPIPE_STAGING", "driver"), other_copy("SONOPIPE_PUBLISH_COPY", "all"),
        other_touch("SONOPIPE_PUBLISH_TOUCH", "1"), other_pool("SONOPIPE_PINNED_POOL", "1");
    const HostPathSwitches others = host_path_switches_from_environment();
    CHECK(others.staging == HostPathSwitches::Staging::driver);
    CHECK(others.publish_copy == HostPathSwitches::PublishCopy::all);
    CHECK(others.publish_touch);
    CHECK(others.pinned_pool);
  }
}

TEST_CASE("a value a switch does not take is refused, naming the variable and what it takes", "[switches]") {
  const NoSwitches none;
  // Names: a near miss, another case, a space, a value of another switch.
  CHECK(refusal("SONOPIPE_STAGING", "sideways") ==
        "SONOPIPE_STAGING=sideways: takes driver or slot (an experiment switch, docs/host-path.md)");
  CHECK(refusal("SONOPIPE_STAGING", "Slot") != "accepted");
  CHECK(refusal("SONOPIPE_PUBLISH_COPY", "al") != "accepted");
  CHECK(refusal("SONOPIPE_PUBLISH_COPY", "fresh ") != "accepted");
  CHECK(refusal("SONOPIPE_PUBLISH_COPY", "1") != "accepted");
  // Flags: what once read as "not 0" (on) or "not 1" (off) is refused now.
  for (const char* name : {"SONOPIPE_PUBLISH_TOUCH", "SONOPIPE_COPY_HUGE_PAGES", "SONOPIPE_PINNED_POOL"})
    for (const char* value : {"yes", "off", "true", "00", "2"}) {
      INFO(name << "=" << value);
      CHECK_THAT(refusal(name, value), Catch::StartsWith(std::string(name) + "=" + value + ": takes 0 or 1"));
    }
  // Whole numbers: a sign, a unit, another base, a space, an exponent, past INT64_MAX, words.
  for (const char* name : {"SONOPIPE_MAX_SPARE_RESULTS", "SONOPIPE_MAX_SPARE_BYTES", "SONOPIPE_SPARE_WAIT_US"})
    for (const char* value : {"12abc", "-1", "+1", "0x10", " 5", "1e3", "32MiB", "9223372036854775808",
                              "99999999999999999999", "abc"}) {
      INFO(name << "=" << value);
      CHECK_THAT(refusal(name, value), Catch::StartsWith(std::string(name) + "=" + value + ": takes a whole number"));
    }
}
