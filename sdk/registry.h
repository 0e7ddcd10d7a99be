// Stages by name. Each stage declares itself in one StageInfo (name, doc, parameters, factory),
// usually through make_stage_info(); stages/registry.cpp adds every built-in stage with one line each.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sdk/param_spec.h"
#include "sdk/params.h"
#include "sdk/stage.h"

namespace sonopipe {

struct StageInfo {
  std::string name;
  std::string doc;                  // one line
  std::vector<ParamDecl> params;
  // Rules across parameters on values validated against `params`: throws ParamError naming a key.
  // Empty: none.
  std::function<void(const ParamValues&)> check;
  std::function<std::unique_ptr<Stage>(const ParamValues&)> create;

  // validate_params() against `params`, then `check`; a ParamError without a line gets the line of
  // its key where it was given.
  ParamValues validate(const std::map<std::string, RawParam>& given) const;
};

// The StageInfo of a stage with typed parameters: `StageT::Params` is a plain struct whose member
// initialisers are the defaults, `StageT::declare(ParamSpec<Params>&)` declares every parameter once
// (sdk/param_spec.h) and `StageT(const Params&)` builds the stage. `defaults` replaces Params{} where
// two stages share one struct (loupas and kasai differ in a member that is no parameter).
template <class StageT, class Params = typename StageT::Params>
StageInfo make_stage_info(std::string name, std::string doc, Params defaults = Params{}) {
  auto spec = std::make_shared<ParamSpec<Params>>(std::move(defaults));
  StageT::declare(*spec);
  StageInfo info{.name = std::move(name), .doc = std::move(doc), .params = spec->decls()};
  info.check = [spec](const ParamValues& values) { spec->bind(values); };
  info.create = [spec](const ParamValues& values) -> std::unique_ptr<Stage> {
    return std::make_unique<StageT>(spec->bind(values));
  };
  return info;
}

// The typed parameters of a stage from values as a config gives them (defaults for the rest):
// validation and rules as at config load, ParamError on a bad value. For tests and tools.
template <class StageT, class Params = typename StageT::Params>
Params bind_params(const std::map<std::string, RawParam>& given = {}, Params defaults = Params{}) {
  ParamSpec<Params> spec(std::move(defaults));
  StageT::declare(spec);
  return spec.bind(validate_params(spec.decls(), given));
}

class StageRegistry {
 public:
  void add(StageInfo info);  // throws std::logic_error on a duplicate name
  const StageInfo* find(const std::string& name) const;
  const std::vector<StageInfo>& all() const { return stages_; }
  // The table `sonopiped --list-stages` prints.
  std::string describe() const;
  // The same as Markdown (`sonopiped --list-stages --markdown`; docs/stages.md).
  std::string describe_markdown() const;

 private:
  std::vector<StageInfo> stages_;
};

}  // namespace sonopipe
