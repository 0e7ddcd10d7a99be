#include "sdk/registry.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace sonopipe {

void StageRegistry::add(StageInfo info) {
  if (find(info.name)) throw std::logic_error("stage registered twice: " + info.name);
  stages_.push_back(std::move(info));
}

const StageInfo* StageRegistry::find(const std::string& name) const {
  for (const StageInfo& info : stages_)
    if (info.name == name) return &info;
  return nullptr;
}

std::string StageRegistry::describe() const {
  std::ostringstream out;
  for (const StageInfo& info : stages_) {
    out << info.name << " — " << info.doc << "\n";
    for (const ParamDecl& p : info.params) {
      out << "    " << p.key << " (" << param_type_name(p.type);
      if (p.type == ParamType::choice) {
        out << ":";
        for (std::size_t i = 0; i < p.choices.size(); ++i) out << (i ? "|" : " ") << p.choices[i];
      }
      out << ", default " << (p.default_value.empty() ? "\"\"" : p.default_value);
      if (std::isfinite(p.min) || std::isfinite(p.max)) {
        out << ", range [" << (std::isfinite(p.min) ? std::to_string(p.min) : "-inf") << ", "
            << (std::isfinite(p.max) ? std::to_string(p.max) : "inf") << "]";
      }
      if (!p.unit.empty()) out << ", unit " << p.unit;
      out << ") " << p.doc << "\n";
    }
  }
  return out.str();
}

}  // namespace sonopipe
