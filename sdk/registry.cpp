#include "sdk/registry.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace sonopipe {

ParamValues StageInfo::validate(const std::map<std::string, RawParam>& given) const {
  try {
    ParamValues values = validate_params(params, given);
    if (check) check(values);
    return values;
  } catch (ParamError& e) {
    auto it = given.find(e.key);
    if (e.line == 0 && it != given.end()) e.line = it->second.line;
    throw;
  }
}

void StageRegistry::add(StageInfo info) {
  if (find(info.name)) throw std::logic_error("stage registered twice: " + info.name);
  stages_.push_back(std::move(info));
}

const StageInfo* StageRegistry::find(const std::string& name) const {
  for (const StageInfo& info : stages_)
    if (info.name == name) return &info;
  return nullptr;
}

namespace {

std::string choices_text(const ParamDecl& p, const char* separator) {
  std::string text;
  for (std::size_t i = 0; i < p.choices.size(); ++i) text += (i ? separator : "") + p.choices[i];
  return text;
}

std::string interval_text(const ParamDecl& p) {
  if (!std::isfinite(p.min) && !std::isfinite(p.max)) return "";
  return "[" + (std::isfinite(p.min) ? format_number(p.min) : std::string("-inf")) + ", " +
         (std::isfinite(p.max) ? format_number(p.max) : std::string("inf")) + "]";
}

}  // namespace

std::string StageRegistry::describe() const {
  std::ostringstream out;
  for (const StageInfo& info : stages_) {
    out << info.name << " — " << info.doc << "\n";
    for (const ParamDecl& p : info.params) {
      out << "    " << p.key << " (" << param_type_name(p.type);
      if (p.type == ParamType::choice) out << ": " << choices_text(p, "|");
      out << ", default " << (p.default_value.empty() ? "\"\"" : p.default_value);
      if (!interval_text(p).empty()) out << ", range " << interval_text(p);
      if (!p.unit.empty()) out << ", unit " << p.unit;
      if (p.live) out << ", live";
      out << ") " << p.doc << "\n";
    }
  }
  return out.str();
}

std::string StageRegistry::describe_markdown() const {
  auto cell = [](std::string text) {  // a table cell: no line breaks, pipes escaped
    std::string out;
    for (char c : text) {
      if (c == '|') out += "\\|";
      else if (c == '\n') out += ' ';
      else out += c;
    }
    return out;
  };
  std::ostringstream out;
  out << "# Stages\n\n"
      << "Generated from the stages' parameter declarations by `sonopiped --list-stages --markdown`;\n"
      << "do not edit (tests/stages/stage_docs_test.cpp fails when this file and the declarations differ).\n"
      << "Ranges are inclusive and apply to every item of a list. Parameters marked live may change while\n"
      << "frames flow (`sonopipe-ctl set`, [live-parameters.md](live-parameters.md)); the others need a restart.\n";
  for (const StageInfo& info : stages_) {
    out << "\n## " << info.name << "\n\n" << info.doc << "\n";
    if (info.params.empty()) {
      out << "\nNo parameters.\n";
      continue;
    }
    out << "\n| parameter | type | default | range | unit | live | description |\n"
        << "|---|---|---|---|---|---|---|\n";
    for (const ParamDecl& p : info.params) {
      std::string type(param_type_name(p.type));
      if (p.type == ParamType::choice) type += ": " + choices_text(p, ", ");
      out << "| `" << p.key << "` | " << cell(type) << " | `"
          << (p.default_value.empty() ? "\"\"" : cell(p.default_value)) << "` | " << interval_text(p) << " | "
          << cell(p.unit) << " | " << (p.live ? "live" : "") << " | " << cell(p.doc) << " |\n";
    }
  }
  return out.str();
}

}  // namespace sonopipe
