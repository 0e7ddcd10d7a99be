// Stages by name. Each stage declares itself in one StageInfo (name, doc, parameters, factory);
// stages/registry.cpp adds every built-in stage with one line each.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sdk/params.h"
#include "sdk/stage.h"

namespace sonopipe {

struct StageInfo {
  std::string name;
  std::string doc;                  // one line
  std::vector<ParamDecl> params;
  std::function<std::unique_ptr<Stage>(const ParamValues&)> create;
};

class StageRegistry {
 public:
  void add(StageInfo info);  // throws std::logic_error on a duplicate name
  const StageInfo* find(const std::string& name) const;
  const std::vector<StageInfo>& all() const { return stages_; }
  // The table `sonopiped --list-stages` prints.
  std::string describe() const;

 private:
  std::vector<StageInfo> stages_;
};

}  // namespace sonopipe
