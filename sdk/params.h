// Stage parameters: each stage declares its parameters once (key, type, default, range, unit,
// one-line doc); the config loader hands raw values in, validate_params() checks them against the
// declarations and yields typed values. `sonopiped --list-stages` prints the declarations.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace sonopipe {

enum class ParamType { integer, real, boolean, choice, text, integer_list, real_list };

std::string_view param_type_name(ParamType type);

struct ParamDecl {
  std::string key;
  ParamType type = ParamType::real;
  std::string default_value;  // as written in YAML: "12", "1.5", "true", "natural", "[1, 2]"
  double min = -std::numeric_limits<double>::infinity();  // inclusive, for numbers and list items
  double max = std::numeric_limits<double>::infinity();
  std::vector<std::string> choices;  // for ParamType::choice
  std::string unit;                  // "samples", "um", "ml/100g/min", ...
  std::string doc;                   // one line
};

// A value as written in the config, before validation.
struct RawParam {
  std::vector<std::string> items;  // one item for a scalar
  bool is_list = false;
  int line = 0;                    // 1-based line in the config file, 0 if unknown
};

// Raised for a bad parameter; `key` and `expected` let the caller build "file:line: key: expected".
struct ParamError : std::runtime_error {
  ParamError(std::string key_, std::string expected_, int line_)
      : std::runtime_error(key_ + ": " + expected_), key(std::move(key_)),
        expected(std::move(expected_)), line(line_) {}
  std::string key;
  std::string expected;
  int line;
};

// Validated, typed parameter values. Every declared key is present (given or default).
class ParamValues {
 public:
  std::int64_t integer(const std::string& key) const;
  double real(const std::string& key) const;  // integers read as reals too
  bool boolean(const std::string& key) const;
  const std::string& text(const std::string& key) const;  // choice and text
  const std::vector<std::int64_t>& integers(const std::string& key) const;
  const std::vector<double>& reals(const std::string& key) const;
  bool was_given(const std::string& key) const;  // false when the default was used

  struct Value {
    ParamType type;
    std::vector<double> numbers;        // integer/real/boolean/lists
    std::vector<std::int64_t> whole;    // integer and integer_list
    std::string text;                   // choice/text
    bool given = false;
  };
  std::map<std::string, Value> values;

 private:
  const Value& at(const std::string& key, std::initializer_list<ParamType> allowed) const;
};

// Checks `given` against `decls`: unknown keys, wrong types, out-of-range values and invalid
// choices raise ParamError naming the key and what was expected.
ParamValues validate_params(const std::vector<ParamDecl>& decls,
                            const std::map<std::string, RawParam>& given);

// Defaults only (for tests and tools).
ParamValues default_params(const std::vector<ParamDecl>& decls);

}  // namespace sonopipe
