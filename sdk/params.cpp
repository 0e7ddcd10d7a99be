#include "sdk/params.h"

#include <charconv>
#include <cmath>
#include <sstream>

namespace sonopipe {

std::string_view param_type_name(ParamType type) {
  switch (type) {
    case ParamType::integer: return "integer";
    case ParamType::real: return "real";
    case ParamType::boolean: return "boolean";
    case ParamType::choice: return "choice";
    case ParamType::text: return "text";
    case ParamType::integer_list: return "integer list";
    case ParamType::real_list: return "real list";
  }
  return "unknown";
}

std::string format_number(double number) {
  if (std::isfinite(number) && number == std::trunc(number) && std::fabs(number) < 1e15)
    return std::to_string(static_cast<std::int64_t>(number));
  char text[64];
  auto [end, ec] = std::to_chars(text, text + sizeof text, number);
  return ec == std::errc() ? std::string(text, end) : std::to_string(number);
}

namespace {

std::string rule_text(const ParamDecl& decl) {
  bool has_min = std::isfinite(decl.min), has_max = std::isfinite(decl.max);
  if (has_min && has_max) return " in [" + format_number(decl.min) + ", " + format_number(decl.max) + "]";
  if (has_min) return " >= " + format_number(decl.min);
  if (has_max) return " <= " + format_number(decl.max);
  return "";
}

std::string expected_text(const ParamDecl& decl) {
  std::string text = "expected ";
  switch (decl.type) {
    case ParamType::integer: text += "an integer"; break;
    case ParamType::real: text += "a number"; break;
    case ParamType::boolean: return text + "true or false";
    case ParamType::text: return text + "a string";
    case ParamType::integer_list: text += "a list of integers"; break;
    case ParamType::real_list: text += "a list of numbers"; break;
    case ParamType::choice: {
      text += "one of";
      for (std::size_t i = 0; i < decl.choices.size(); ++i)
        text += (i ? ", " : " ") + decl.choices[i];
      return text;
    }
  }
  text += rule_text(decl);
  if (!decl.unit.empty()) text += " (" + decl.unit + ")";
  return text;
}

bool parse_integer(const std::string& text, std::int64_t& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool parse_real(const std::string& text, double& out) {
  if (text.empty()) return false;
  std::size_t used = 0;
  try {
    out = std::stod(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  return used == text.size() && std::isfinite(out);
}

// Splits "[1, 2, 3]" (a default written as a YAML flow list) into items.
RawParam raw_from_default(const ParamDecl& decl) {
  RawParam raw;
  std::string text = decl.default_value;
  if (decl.type == ParamType::integer_list || decl.type == ParamType::real_list) {
    raw.is_list = true;
    std::string inner = text;
    if (!inner.empty() && inner.front() == '[') inner = inner.substr(1);
    if (!inner.empty() && inner.back() == ']') inner.pop_back();
    std::stringstream stream(inner);
    std::string item;
    while (std::getline(stream, item, ',')) {
      auto first = item.find_first_not_of(" \t");
      auto last = item.find_last_not_of(" \t");
      if (first != std::string::npos) raw.items.push_back(item.substr(first, last - first + 1));
    }
  } else {
    raw.items.push_back(text);
  }
  return raw;
}

ParamValues::Value convert(const ParamDecl& decl, const RawParam& raw) {
  ParamValues::Value value;
  value.type = decl.type;
  const bool wants_list = decl.type == ParamType::integer_list || decl.type == ParamType::real_list;
  if (wants_list != raw.is_list || (!wants_list && raw.items.size() != 1))
    throw ParamError(decl.key, expected_text(decl), raw.line);

  auto check_range = [&](double number) {
    if (number < decl.min || number > decl.max)
      throw ParamError(decl.key, expected_text(decl), raw.line);
  };
  for (const std::string& item : raw.items) {
    switch (decl.type) {
      case ParamType::integer:
      case ParamType::integer_list: {
        std::int64_t whole = 0;
        if (!parse_integer(item, whole)) throw ParamError(decl.key, expected_text(decl), raw.line);
        check_range(static_cast<double>(whole));
        value.whole.push_back(whole);
        value.numbers.push_back(static_cast<double>(whole));
        break;
      }
      case ParamType::real:
      case ParamType::real_list: {
        double number = 0;
        if (!parse_real(item, number)) throw ParamError(decl.key, expected_text(decl), raw.line);
        check_range(number);
        value.numbers.push_back(number);
        break;
      }
      case ParamType::boolean:
        if (item == "true") value.numbers.push_back(1);
        else if (item == "false") value.numbers.push_back(0);
        else throw ParamError(decl.key, expected_text(decl), raw.line);
        break;
      case ParamType::choice: {
        bool known = false;
        for (const std::string& choice : decl.choices) known = known || choice == item;
        if (!known) throw ParamError(decl.key, expected_text(decl), raw.line);
        value.text = item;
        break;
      }
      case ParamType::text:
        value.text = item;
        break;
    }
  }
  return value;
}

}  // namespace

std::string param_expected_text(const ParamDecl& decl) { return expected_text(decl); }

std::string format_param_value(const ParamValues::Value& value) {
  switch (value.type) {
    case ParamType::integer: return std::to_string(value.whole.at(0));
    case ParamType::real: return format_number(value.numbers.at(0));
    case ParamType::boolean: return value.numbers.at(0) != 0.0 ? "true" : "false";
    case ParamType::choice:
    case ParamType::text: return value.text;
    case ParamType::integer_list:
    case ParamType::real_list: {
      std::string text = "[";
      for (std::size_t i = 0; i < value.numbers.size(); ++i)
        text += (i ? ", " : "") + (value.type == ParamType::integer_list ? std::to_string(value.whole[i])
                                                                         : format_number(value.numbers[i]));
      return text + "]";
    }
  }
  return "";
}

const ParamValues::Value& ParamValues::at(const std::string& key,
                                          std::initializer_list<ParamType> allowed) const {
  auto it = values.find(key);
  if (it == values.end()) throw std::logic_error("parameter not declared: " + key);
  for (ParamType type : allowed)
    if (it->second.type == type) return it->second;
  throw std::logic_error("parameter read with the wrong type: " + key);
}

std::int64_t ParamValues::integer(const std::string& key) const {
  return at(key, {ParamType::integer}).whole.at(0);
}
double ParamValues::real(const std::string& key) const {
  return at(key, {ParamType::real, ParamType::integer}).numbers.at(0);
}
bool ParamValues::boolean(const std::string& key) const {
  return at(key, {ParamType::boolean}).numbers.at(0) != 0.0;
}
const std::string& ParamValues::text(const std::string& key) const {
  return at(key, {ParamType::choice, ParamType::text}).text;
}
const std::vector<std::int64_t>& ParamValues::integers(const std::string& key) const {
  return at(key, {ParamType::integer_list}).whole;
}
const std::vector<double>& ParamValues::reals(const std::string& key) const {
  return at(key, {ParamType::real_list, ParamType::integer_list}).numbers;
}
bool ParamValues::was_given(const std::string& key) const {
  auto it = values.find(key);
  return it != values.end() && it->second.given;
}

ParamValues validate_params(const std::vector<ParamDecl>& decls,
                            const std::map<std::string, RawParam>& given) {
  for (const auto& [key, raw] : given) {
    bool declared = false;
    for (const ParamDecl& decl : decls) declared = declared || decl.key == key;
    if (!declared) {
      std::string known = "unknown parameter; expected one of";
      for (std::size_t i = 0; i < decls.size(); ++i) known += (i ? ", " : " ") + decls[i].key;
      if (decls.empty()) known = "unknown parameter; this stage takes none";
      throw ParamError(key, known, raw.line);
    }
  }
  ParamValues result;
  for (const ParamDecl& decl : decls) {
    auto it = given.find(decl.key);
    if (it != given.end()) {
      result.values[decl.key] = convert(decl, it->second);
      result.values[decl.key].given = true;
    } else {
      result.values[decl.key] = convert(decl, raw_from_default(decl));
    }
  }
  return result;
}

ParamValues default_params(const std::vector<ParamDecl>& decls) {
  return validate_params(decls, {});
}

}  // namespace sonopipe
