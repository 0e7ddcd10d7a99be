#include "daemon/live_params.h"

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "wire/log_text.h"

namespace sonopipe {

bool raw_param_from_yaml(const std::string& text, RawParam& raw, std::string& error) {
  raw = RawParam{};
  try {
    const YAML::Node node = YAML::Load(text);
    if (node.IsScalar()) {
      raw.items.push_back(node.Scalar());
      return true;
    }
    if (node.IsSequence()) {
      raw.is_list = true;
      for (const YAML::Node& item : node) {
        if (!item.IsScalar()) {
          error = "expected a scalar or a flat list, e.g. 2.0 or [61, 11]";
          return false;
        }
        raw.items.push_back(item.Scalar());
      }
      return true;
    }
  } catch (const YAML::Exception& e) {
    error = "not YAML (" + std::string(e.what()) + ")";
    return false;
  }
  error = "expected a scalar or a flat list, e.g. 2.0 or [61, 11]";
  return false;
}

LiveParameters::LiveParameters(std::vector<PipelineConfig> pipelines, const StageRegistry& registry, Apply apply,
                               Check check)
    : pipelines_(std::move(pipelines)), apply_(std::move(apply)), check_(std::move(check)) {
  for (const PipelineConfig& pipeline : pipelines_) {
    labels_.push_back(stage_labels(pipeline));
    std::vector<const StageInfo*> infos;
    for (const StageConfig& stage : pipeline.stages) {
      const StageInfo* info = registry.find(stage.type);
      if (!info) throw std::invalid_argument("unknown stage type '" + stage.type + "'");
      infos.push_back(info);
    }
    infos_.push_back(std::move(infos));
    generations_.push_back(0);
    set_at_.emplace_back(pipeline.stages.size());
  }
}

bool LiveParameters::find(const std::string& name, Found& found, std::string& error) const {
  // "<pipeline>.<stage>.<parameter>": the pipeline up to the first dot, the parameter after the
  // last (stage labels may hold neither).
  const std::size_t first = name.find('.');
  const std::size_t last = name.rfind('.');
  const std::string quoted = "'" + log_safe(name, 128) + "'";
  if (first == std::string::npos || first == last) {
    error = quoted + ": expected <pipeline>.<stage>.<parameter> (sonopipe-ctl list shows them)";
    return false;
  }
  const std::string pipeline = name.substr(0, first);
  const std::string stage = name.substr(first + 1, last - first - 1);
  const std::string key = name.substr(last + 1);
  for (std::size_t p = 0; p < pipelines_.size(); ++p) {
    if (pipelines_[p].name != pipeline) continue;
    for (std::size_t s = 0; s < labels_[p].size(); ++s) {
      if (labels_[p][s] != stage) continue;
      for (const ParamDecl& decl : infos_[p][s]->params) {
        if (decl.key != key) continue;
        found = {p, s, infos_[p][s], &decl};
        return true;
      }
      std::string known;
      for (const ParamDecl& decl : infos_[p][s]->params) known += (known.empty() ? "" : ", ") + decl.key;
      error = quoted + ": unknown parameter; stage " + stage + " (" + infos_[p][s]->name + ") has " +
              (known.empty() ? "none" : known);
      return false;
    }
    std::string known;
    for (const std::string& label : labels_[p]) known += (known.empty() ? "" : ", ") + label;
    error = quoted + ": unknown stage; pipeline " + pipeline + " has " + known;
    return false;
  }
  std::string known;
  for (const PipelineConfig& p : pipelines_) known += (known.empty() ? "" : ", ") + p.name;
  error = quoted + ": unknown pipeline; expected one of " + known;
  return false;
}

LiveParameters::Entry LiveParameters::entry(std::size_t pipeline, std::size_t stage, const ParamDecl& decl) const {
  Entry e;
  e.name = pipelines_[pipeline].name + "." + labels_[pipeline][stage] + "." + decl.key;
  e.decl = decl;
  const ParamValues& values = pipelines_[pipeline].stages[stage].params;
  auto it = values.values.find(decl.key);
  e.value = it != values.values.end() ? format_param_value(it->second) : decl.default_value;
  const auto& set_at = set_at_[pipeline][stage];
  auto when = set_at.find(decl.key);
  e.generation = when != set_at.end() ? when->second : 0;
  return e;
}

LiveParameters::Outcome LiveParameters::get(const std::string& name) const {
  std::lock_guard lock(mutex_);
  Outcome out;
  Found found;
  if (!find(name, found, out.error)) return out;
  out.ok = true;
  out.entries.push_back(entry(found.pipeline, found.stage, *found.decl));
  out.generation = generations_[found.pipeline];
  return out;
}

LiveParameters::Outcome LiveParameters::list(const std::string& prefix) const {
  std::lock_guard lock(mutex_);
  Outcome out;
  for (std::size_t p = 0; p < pipelines_.size(); ++p)
    for (std::size_t s = 0; s < labels_[p].size(); ++s)
      for (const ParamDecl& decl : infos_[p][s]->params) {
        Entry e = entry(p, s, decl);
        if (prefix.empty() || e.name == prefix || e.name.rfind(prefix + ".", 0) == 0)
          out.entries.push_back(std::move(e));
      }
  if (out.entries.empty() && !prefix.empty()) {
    out.error = "'" + log_safe(prefix, 128) + "': no parameter starts with it (sonopipe-ctl list shows them all)";
    return out;
  }
  out.ok = true;
  return out;
}

LiveParameters::Outcome LiveParameters::set(const std::string& name, const std::string& value,
                                            const std::string& client) {
  std::lock_guard lock(mutex_);
  Outcome out;
  Found found;
  if (!find(name, found, out.error)) return out;
  const std::string& key = found.decl->key;
  if (!found.decl->live) {
    out.error = name + ": needs a restart: stage " + found.info->name +
                " reads it only when the pipeline starts (not declared live; edit the config and restart)";
    return out;
  }
  RawParam raw;
  std::string why;
  if (!raw_param_from_yaml(value, raw, why)) {
    out.error = name + ": " + why;
    return out;
  }
  // The values given so far plus the new one, validated and checked by the stage's rules as at
  // config load; the stage is built (its constructor may refuse too) before anything changes.
  StageConfig& stage = pipelines_[found.pipeline].stages[found.stage];
  std::map<std::string, RawParam> given;
  for (const auto& [k, v] : stage.params.values) {
    if (!v.given || k == key) continue;
    RawParam previous;
    std::string ignored;
    if (raw_param_from_yaml(format_param_value(v), previous, ignored)) given[k] = std::move(previous);
  }
  given[key] = raw;
  ParamValues values;
  try {
    values = found.info->validate(given);
    std::unique_ptr<Stage> candidate = found.info->create(values);
    if (check_) check_(found.pipeline, found.stage, *candidate);
  } catch (const ParamError& e) {
    const std::string prefix = pipelines_[found.pipeline].name + "." + labels_[found.pipeline][found.stage] + ".";
    out.error = prefix + e.key + ": " + e.expected + (e.key == key ? "" : " (with " + key + " = " + value + ")");
    return out;
  } catch (const std::exception& e) {
    out.error = name + ": the stage cannot take the frames arriving with it: " + log_safe(e.what(), 300);
    return out;
  }
  const std::string old_value = entry(found.pipeline, found.stage, *found.decl).value;
  const std::uint64_t generation = generations_[found.pipeline] + 1;
  const StageInfo* info = found.info;
  try {
    // The executor prepares the change on every device (configures the new instance there) and
    // commits it only when all did: when one refuses, nothing changed, the generation included.
    apply_(found.pipeline, found.stage, [info, values] { return info->create(values); }, generation);
  } catch (const std::exception& e) {
    out.error = name + ": the pipeline's devices refused it: " + log_safe(e.what(), 300);
    return out;
  }
  generations_[found.pipeline] = generation;
  stage.params = std::move(values);
  set_at_[found.pipeline][found.stage][key] = generation;
  out.ok = true;
  out.generation = generation;
  out.entries.push_back(entry(found.pipeline, found.stage, *found.decl));
  spdlog::info("control: {} = {} (was {}) by {}: pipeline {} generation {}, from its next frame", name,
               out.entries.back().value, old_value, client, pipelines_[found.pipeline].name, generation);
  return out;
}

std::uint64_t LiveParameters::generation(std::size_t pipeline) const {
  std::lock_guard lock(mutex_);
  return generations_.at(pipeline);
}

std::vector<PipelineConfig> LiveParameters::pipelines() const {
  std::lock_guard lock(mutex_);
  return pipelines_;
}

}  // namespace sonopipe
