// Typed parameter declarations: a stage keeps its parameters in a plain struct whose member
// initialisers are the defaults, and declares each parameter once, bound to its member:
//
//   struct GainParams { double gain = 1.0; Mode mode = Mode::fast; };
//   static void declare(ParamSpec<GainParams>& spec) {
//     spec.param(&GainParams::gain, "gain", {.min = 0, .max = 10, .unit = "1", .doc = "multiplier"});
//     spec.choice(&GainParams::mode, "mode", {{"fast", Mode::fast}, {"exact", Mode::exact}}, {.doc = "..."});
//     spec.rule([](const GainParams& p) { if (...) throw ParamError("gain", "...", 0); });
//   }
//
// The type of a parameter follows from its member: integral -> integer, floating -> real, bool ->
// boolean, std::string -> text, std::vector of integral / floating -> integer / real list, and
// choice() maps names onto any member type. The declarations (ParamDecl: key, type, default rendered
// from the struct's initialisers, range, unit, doc) feed the config validation, `sonopiped
// --list-stages` and docs/stages.md; bind() turns validated values into the struct, so stage code
// never reads a parameter by its name. make_stage_info() (sdk/registry.h) puts it together.
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sdk/params.h"

namespace sonopipe {

// What a declaration says besides its key and type. Ranges are inclusive and apply to list items too.
struct ParamOptions {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  std::string unit;
  std::string doc;  // one line
  bool live = false;  // may change while frames flow (ParamDecl::live)
};

namespace param_detail {

template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};

template <class T>
constexpr ParamType type_of() {
  if constexpr (std::is_same_v<T, bool>) return ParamType::boolean;
  else if constexpr (std::is_integral_v<T>) return ParamType::integer;
  else if constexpr (std::is_floating_point_v<T>) return ParamType::real;
  else if constexpr (std::is_same_v<T, std::string>) return ParamType::text;
  else if constexpr (is_vector<T>::value) {
    using Item = typename T::value_type;
    static_assert(std::is_arithmetic_v<Item> && !std::is_same_v<Item, bool>,
                  "list parameters hold integers or reals");
    return std::is_integral_v<Item> ? ParamType::integer_list : ParamType::real_list;
  } else {
    static_assert(is_vector<T>::value, "unsupported parameter member type: use choice() for enums");
    return ParamType::text;
  }
}

template <class T>
std::string render(const T& value) {
  if constexpr (std::is_same_v<T, bool>) return value ? "true" : "false";
  else if constexpr (std::is_integral_v<T>) return std::to_string(value);
  else if constexpr (std::is_floating_point_v<T>) return format_number(static_cast<double>(value));
  else if constexpr (std::is_same_v<T, std::string>) return value;
  else {
    std::string text = "[";
    for (std::size_t i = 0; i < value.size(); ++i) text += (i ? ", " : "") + render(value[i]);
    return text + "]";
  }
}

// An integer member narrower than 64 bits: a value it cannot hold is refused, never wrapped.
template <class T>
T narrow(std::int64_t whole) {
  if (whole < static_cast<std::int64_t>(std::numeric_limits<T>::lowest()) ||
      (whole > 0 && static_cast<std::uint64_t>(whole) > static_cast<std::uint64_t>(std::numeric_limits<T>::max())))
    throw std::out_of_range("an integer that fits in " + std::to_string(8 * sizeof(T)) + " bits");
  return static_cast<T>(whole);
}

template <class T>
T from_value(const ParamValues::Value& value) {
  if constexpr (std::is_same_v<T, bool>) return value.numbers.at(0) != 0.0;
  else if constexpr (std::is_integral_v<T>) return narrow<T>(value.whole.at(0));
  else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(value.numbers.at(0));
  else if constexpr (std::is_same_v<T, std::string>) return value.text;
  else {
    using Item = typename T::value_type;
    T items;
    if constexpr (std::is_integral_v<Item>)
      for (std::int64_t whole : value.whole) items.push_back(narrow<Item>(whole));
    else
      for (double number : value.numbers) items.push_back(static_cast<Item>(number));
    return items;
  }
}

}  // namespace param_detail

template <class Params>
class ParamSpec {
 public:
  // `defaults`: the struct whose members give every declared default (usually Params{}).
  explicit ParamSpec(Params defaults = Params{}) : defaults_(std::move(defaults)) {}

  template <class T>
  void param(T Params::*member, std::string key, ParamOptions options = {}) {
    constexpr ParamType type = param_detail::type_of<T>();
    ParamDecl decl{.key = std::move(key), .type = type,
                   .default_value = param_detail::render(defaults_.*member), .min = options.min,
                   .max = options.max, .unit = std::move(options.unit), .doc = std::move(options.doc),
                   .live = options.live};
    std::string name = decl.key;
    add(std::move(decl), [member, name](Params& params, const ParamValues::Value& value) {
      try {
        params.*member = param_detail::from_value<T>(value);
      } catch (const std::out_of_range& e) {
        throw ParamError(name, std::string("expected ") + e.what(), 0);
      }
    });
  }

  // A named choice onto any member type (an enum, a bool, ...); the default is the name of the
  // default member's value, which must be one of the choices.
  template <class T>
  void choice(T Params::*member, std::string key, std::vector<std::pair<std::string, T>> choices,
              ParamOptions options = {}) {
    ParamDecl decl{.key = std::move(key), .type = ParamType::choice, .unit = std::move(options.unit),
                   .doc = std::move(options.doc), .live = options.live};
    bool has_default = false;
    for (const auto& [name, value] : choices) {
      decl.choices.push_back(name);
      if (!has_default && value == defaults_.*member) {
        decl.default_value = name;
        has_default = true;
      }
    }
    if (!has_default) throw std::logic_error("parameter " + decl.key + ": the default is none of its choices");
    add(std::move(decl), [member, choices](Params& params, const ParamValues::Value& value) {
      for (const auto& [name, item] : choices)
        if (name == value.text) params.*member = item;
    });
  }

  // A rule across parameters, checked after every bind(): throws ParamError naming a key.
  void rule(std::function<void(const Params&)> check) { rules_.push_back(std::move(check)); }

  const std::vector<ParamDecl>& decls() const { return decls_; }

  // Validated values (validate_params against decls()) -> the struct; runs the rules.
  Params bind(const ParamValues& values) const {
    Params params = defaults_;
    for (std::size_t i = 0; i < decls_.size(); ++i) {
      auto it = values.values.find(decls_[i].key);
      if (it == values.values.end()) throw std::logic_error("parameter not validated: " + decls_[i].key);
      assigns_[i](params, it->second);
    }
    for (const auto& check : rules_) check(params);
    return params;
  }

 private:
  void add(ParamDecl decl, std::function<void(Params&, const ParamValues::Value&)> assign) {
    for (const ParamDecl& earlier : decls_)
      if (earlier.key == decl.key) throw std::logic_error("parameter declared twice: " + decl.key);
    decls_.push_back(std::move(decl));
    assigns_.push_back(std::move(assign));
  }

  Params defaults_;
  std::vector<ParamDecl> decls_;
  std::vector<std::function<void(Params&, const ParamValues::Value&)>> assigns_;
  std::vector<std::function<void(const Params&)>> rules_;
};

}  // namespace sonopipe
