#include "runtime/host_path_switches.h"

#include <charconv>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string_view>

namespace sonopipe {
namespace {

constexpr const char* kStaging = "SONOPIPE_STAGING";
constexpr const char* kPublishCopy = "SONOPIPE_PUBLISH_COPY";
constexpr const char* kPublishTouch = "SONOPIPE_PUBLISH_TOUCH";
constexpr const char* kCopyHugePages = "SONOPIPE_COPY_HUGE_PAGES";
constexpr const char* kPinnedPool = "SONOPIPE_PINNED_POOL";
constexpr const char* kMaxSpareResults = "SONOPIPE_MAX_SPARE_RESULTS";
constexpr const char* kMaxSpareBytes = "SONOPIPE_MAX_SPARE_BYTES";
constexpr const char* kSpareWaitUs = "SONOPIPE_SPARE_WAIT_US";
constexpr const char* kAll[] = {kStaging,       kPublishCopy,     kPublishTouch,  kCopyHugePages,
                                kPinnedPool,    kMaxSpareResults, kMaxSpareBytes, kSpareWaitUs};

// The switch's value; nothing when unset or empty (as unset).
std::optional<std::string_view> value_of(const char* name) {
  const char* text = std::getenv(name);
  if (!text || !*text) return std::nullopt;
  return std::string_view(text);
}

[[noreturn]] void refuse(const char* name, std::string_view value, std::string_view takes) {
  throw std::invalid_argument(std::string(name) + "=" + std::string(value) + ": takes " + std::string(takes) +
                              " (an experiment switch, docs/host-path.md)");
}

// One of `choices`' names, as its value; anything else is refused.
template <typename Value, std::size_t N>
Value choice(const char* name, Value fallback, const std::pair<std::string_view, Value> (&choices)[N],
             std::string_view takes) {
  const auto value = value_of(name);
  if (!value) return fallback;
  for (const auto& [text, choice] : choices)
    if (*value == text) return choice;
  refuse(name, *value, takes);
}

// A whole number (no sign, unit or trailing text, at most INT64_MAX).
std::optional<std::uint64_t> whole_number(const char* name) {
  const auto value = value_of(name);
  if (!value) return std::nullopt;
  std::uint64_t number = 0;
  const auto [end, error] = std::from_chars(value->data(), value->data() + value->size(), number);
  if (error != std::errc{} || end != value->data() + value->size() ||
      number > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    refuse(name, *value, "a whole number");
  return number;
}

}  // namespace

HostPathSwitches host_path_switches_from_environment() {
  using Staging = HostPathSwitches::Staging;
  using PublishCopy = HostPathSwitches::PublishCopy;
  HostPathSwitches switches;
  switches.staging = choice(kStaging, Staging::driver, {{"driver", Staging::driver}, {"slot", Staging::slot}},
                            "driver or slot");
  switches.publish_copy = choice(kPublishCopy, PublishCopy::when_needed,
                                 {{"all", PublishCopy::all}, {"fresh", PublishCopy::fresh}}, "all or fresh");
  switches.publish_touch = choice(kPublishTouch, true, {{"0", false}, {"1", true}}, "0 or 1");
  switches.copy_huge_pages = choice(kCopyHugePages, false, {{"0", false}, {"1", true}}, "0 or 1");
  switches.pinned_pool = choice(kPinnedPool, true, {{"0", false}, {"1", true}}, "0 or 1");
  switches.max_spare_results = whole_number(kMaxSpareResults);
  switches.max_spare_bytes = whole_number(kMaxSpareBytes);
  switches.spare_wait_us = whole_number(kSpareWaitUs);
  return switches;
}

std::span<const char* const> host_path_switch_names() { return kAll; }

std::vector<std::string> host_path_switches_set() {
  std::vector<std::string> set;
  for (const char* name : kAll)
    if (const auto value = value_of(name)) set.push_back(std::string(name) + "=" + std::string(*value));
  return set;
}

}  // namespace sonopipe
