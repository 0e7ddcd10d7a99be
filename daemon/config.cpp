#include "daemon/config.h"

#include "daemon/thread_placement.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "runtime/plugin_loader.h"
#include "curve/curve_keys.h"
#include "shm/layout.h"

namespace sonopipe {

std::string_view ingest_pattern_name(IngestPattern pattern) {
  return pattern == IngestPattern::pull ? "pull" : "sub";
}

std::string_view backend_choice_name(BackendChoice choice) {
  switch (choice) {
    case BackendChoice::automatic: return "auto";
    case BackendChoice::cuda: return "cuda";
    case BackendChoice::cpu: return "cpu";
  }
  return "unknown";
}

bool parse_backend_choice(std::string_view name, BackendChoice& out) {
  for (BackendChoice c : {BackendChoice::automatic, BackendChoice::cuda, BackendChoice::cpu}) {
    if (backend_choice_name(c) == name) {
      out = c;
      return true;
    }
  }
  return false;
}

std::string_view control_stop_name(ControlStop policy) {
  switch (policy) {
    case ControlStop::allow: return "allow";
    case ControlStop::keyed: return "keyed";
    case ControlStop::disabled: return "disabled";
  }
  return "unknown";
}

namespace {

int line_of(const YAML::Node& node) { return node.Mark().line >= 0 ? node.Mark().line + 1 : 0; }

// Reads one YAML document, turning every problem into "file:line: key: expected ...".
class ConfigReader {
 public:
  explicit ConfigReader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(int line, const std::string& key, const std::string& message) const {
    std::string where = source_ + ":" + (line > 0 ? std::to_string(line) : std::string("?"));
    throw ConfigError(where + ": " + key + ": " + message);
  }
  [[noreturn]] void fail(const YAML::Node& at, const std::string& key, const std::string& message) const {
    fail(line_of(at), key, message);
  }

  // A mapping whose keys must all be in `known`.
  void expect_map(const YAML::Node& node, const std::string& key, std::initializer_list<const char*> known) const {
    if (!node.IsMap()) fail(node, key, "expected a mapping");
    std::set<std::string> seen;
    for (const auto& entry : node) {
      if (!entry.first.IsScalar()) fail(entry.first, join(key, "(key)"), "expected a plain word as key, got a list or mapping");
      const std::string name = entry.first.as<std::string>();
      if (!seen.insert(name).second) fail(entry.first, join(key, name), "given twice; expected each key once");
      bool ok = false;
      for (const char* k : known) ok = ok || name == k;
      if (!ok) {
        std::string list;
        for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        fail(entry.first, join(key, name), "unknown key; expected one of " + list);
      }
    }
  }

  static std::string join(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : parent + "." + key;
  }

  std::string scalar(const YAML::Node& node, const std::string& key, const std::string& expected) const {
    if (!node.IsScalar()) fail(node, key, expected);
    return node.Scalar();
  }

  std::string text(const YAML::Node& node, const std::string& key) const {
    std::string value = scalar(node, key, "expected a string");
    if (value.empty()) fail(node, key, "expected a non-empty string");
    return value;
  }

  std::int64_t integer(const YAML::Node& node, const std::string& key, std::int64_t min, std::int64_t max) const {
    std::string expected = "expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    std::string value = scalar(node, key, expected);
    std::int64_t number = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (ec != std::errc() || end != value.data() + value.size() || number < min || number > max)
      fail(node, key, expected + ", got '" + value + "'");
    return number;
  }

  double real(const YAML::Node& node, const std::string& key, double min, double max) const {
    std::ostringstream expected;
    expected << "expected a number in [" << min << ", " << max << "]";
    std::string value = scalar(node, key, expected.str());
    double number = 0;
    std::size_t used = 0;
    try {
      number = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != value.size() || value.empty() || !std::isfinite(number) || number < min || number > max)
      fail(node, key, expected.str() + ", got '" + value + "'");
    return number;
  }

  bool boolean(const YAML::Node& node, const std::string& key) const {
    std::string value = scalar(node, key, "expected true or false");
    if (value == "true") return true;
    if (value == "false") return false;
    fail(node, key, "expected true or false, got '" + value + "'");
  }

  std::string choice(const YAML::Node& node, const std::string& key, std::initializer_list<const char*> choices) const {
    std::string list;
    for (const char* c : choices) list += (list.empty() ? "" : ", ") + std::string(c);
    std::string value = scalar(node, key, "expected one of " + list);
    for (const char* c : choices)
      if (value == c) return value;
    fail(node, key, "expected one of " + list + ", got '" + value + "'");
  }

 private:
  std::string source_;
};

FrameMatch read_match(const ConfigReader& reader, const YAML::Node& node, const std::string& key) {
  reader.expect_map(node, key, {"kinds", "streams"});
  FrameMatch match;
  if (const YAML::Node kinds = node["kinds"]) {
    if (!kinds.IsSequence() || kinds.size() == 0)
      reader.fail(kinds, key + ".kinds", "expected a non-empty list of iq, rf, dce, channel_rf, channel_iq");
    for (std::size_t i = 0; i < kinds.size(); ++i) {
      FrameKind kind;
      parse_frame_kind(reader.choice(kinds[i], key + ".kinds[" + std::to_string(i) + "]", {"iq", "rf", "dce", "channel_rf", "channel_iq"}), kind);
      match.kinds.push_back(kind);
    }
  }
  if (const YAML::Node streams = node["streams"]) {
    if (!streams.IsSequence() || streams.size() == 0)
      reader.fail(streams, key + ".streams", "expected a non-empty list of stream ids");
    for (std::size_t i = 0; i < streams.size(); ++i)
      match.stream_ids.push_back(static_cast<std::uint32_t>(
          reader.integer(streams[i], key + ".streams[" + std::to_string(i) + "]", 0, 0xffffffffll)));
  }
  return match;
}

std::map<std::string, RawParam> read_raw_params(const ConfigReader& reader, const YAML::Node& node,
                                                const std::string& key) {
  std::map<std::string, RawParam> raw;
  if (!node.IsMap()) reader.fail(node, key, "expected a mapping of parameter names to values");
  for (const auto& entry : node) {
    if (!entry.first.IsScalar())
      reader.fail(entry.first, key + ".(key)", "expected a parameter name as key, got a list or mapping");
    const std::string name = entry.first.Scalar();
    if (raw.count(name)) reader.fail(entry.first, key + "." + name, "given twice; expected each parameter once");
    const YAML::Node& value = entry.second;
    RawParam param;
    param.line = line_of(entry.first);
    if (value.IsScalar()) {
      param.items.push_back(value.Scalar());
    } else if (value.IsSequence()) {
      param.is_list = true;
      for (const YAML::Node& item : value) {
        if (!item.IsScalar()) reader.fail(item, key + "." + name, "expected a list of scalars");
        param.items.push_back(item.Scalar());
      }
    } else {
      reader.fail(value, key + "." + name, "expected a scalar or a list of scalars");
    }
    raw[name] = std::move(param);
  }
  return raw;
}

StageConfig read_stage(const ConfigReader& reader, const YAML::Node& node, const std::string& key,
                       const StageRegistry& registry) {
  reader.expect_map(node, key, {"type", "name", "params", "publish"});
  StageConfig stage;
  stage.line = line_of(node);
  if (!node["type"]) reader.fail(node, key + ".type", "missing; expected a stage type (sonopiped --list-stages)");
  stage.type = reader.text(node["type"], key + ".type");
  const StageInfo* info = registry.find(stage.type);
  if (!info) {
    std::string known;
    for (const StageInfo& s : registry.all()) known += (known.empty() ? "" : ", ") + s.name;
    reader.fail(node["type"], key + ".type", "unknown stage '" + stage.type + "'; expected one of " + known);
  }
  if (node["name"]) stage.name = reader.text(node["name"], key + ".name");
  if (node["publish"]) stage.publish = reader.boolean(node["publish"], key + ".publish");
  std::map<std::string, RawParam> raw;
  if (node["params"] && !node["params"].IsNull()) raw = read_raw_params(reader, node["params"], key + ".params");
  try {
    stage.params = info->validate(raw);
  } catch (const ParamError& e) {
    reader.fail(e.line > 0 ? e.line : stage.line, key + ".params." + e.key, e.expected);
  }
  return stage;
}

// `devices: all` or `devices: [0, 1, ...]` (distinct ids).
DeviceSelection read_devices(const ConfigReader& reader, const YAML::Node& node, const std::string& key) {
  DeviceSelection devices;
  if (node.IsScalar() && node.Scalar() == "all") {
    devices.all = true;
    return devices;
  }
  if (!node.IsSequence() || node.size() == 0)
    reader.fail(node, key, "expected `all` or a non-empty list of CUDA device ids, e.g. [0, 1]");
  std::set<int> seen;
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string item_key = key + "[" + std::to_string(i) + "]";
    const int id = static_cast<int>(reader.integer(node[i], item_key, 0, 63));
    if (!seen.insert(id).second) reader.fail(node[i], item_key, "device " + std::to_string(id) + " is listed twice");
    devices.ids.push_back(id);
  }
  return devices;
}

PipelineConfig read_pipeline(const ConfigReader& reader, const YAML::Node& node, const std::string& key,
                             const StageRegistry& registry) {
  reader.expect_map(node, key, {"name", "match", "devices", "stages", "ingest"});
  PipelineConfig pipeline;
  pipeline.line = line_of(node);
  if (!node["name"]) reader.fail(node, key + ".name", "missing; expected the pipeline's name");
  pipeline.name = reader.text(node["name"], key + ".name");
  for (char c : pipeline.name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'))
      reader.fail(node["name"], key + ".name", "expected letters, digits, '_' or '-' (it is part of topics)");
  if (node["match"]) pipeline.match = read_match(reader, node["match"], key + ".match");
  if (node["devices"]) pipeline.devices = read_devices(reader, node["devices"], key + ".devices");
  if (const YAML::Node ingest = node["ingest"]) {
    reader.expect_map(ingest, key + ".ingest", {"endpoint"});
    if (!ingest["endpoint"]) reader.fail(ingest, key + ".ingest.endpoint", "missing; expected the pipeline's own ingest endpoint");
    pipeline.ingest_endpoint = reader.text(ingest["endpoint"], key + ".ingest.endpoint");
    if (shm::is_shm_endpoint(pipeline.ingest_endpoint))
      reader.fail(ingest["endpoint"], key + ".ingest.endpoint",
                  "a pipeline's own ingest is tcp:// or ipc://; shm:// is for the shared ingest (ingest.endpoint)");
  }
  const YAML::Node stages = node["stages"];
  if (!stages) reader.fail(node, key + ".stages", "missing; expected a list of stages");
  if (!stages.IsSequence() || stages.size() == 0)
    reader.fail(stages, key + ".stages", "expected a non-empty list of stages");
  std::set<std::string> published_labels;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const std::string stage_key = key + ".stages[" + std::to_string(i) + "]";
    StageConfig stage = read_stage(reader, stages[i], stage_key, registry);
    // Output names come from the stage type unless the stage is named: two unnamed publishing
    // stages of one type would publish under the same topic.
    const bool publishes = stage.publish || i + 1 == stages.size();
    const std::string label = stage.name.empty() ? stage.type : stage.name;
    if (!stage.name.empty() || publishes) {
      if (!published_labels.insert(label).second)
        reader.fail(stages[i], stage_key, "'" + label + "' appears twice; give the stages distinct `name`s so "
                                          "their outputs and timings stay apart");
    }
    pipeline.stages.push_back(std::move(stage));
  }
  return pipeline;
}

// Key files are named relative to the config's folder.
std::string config_relative(const std::string& source_name, const std::string& path) {
  std::filesystem::path resolved = path;
  if (resolved.is_relative()) resolved = std::filesystem::path(source_name).parent_path() / resolved;
  return resolved.string();
}

SecurityConfig read_security(const ConfigReader& reader, const YAML::Node& node, const std::string& source_name) {
  reader.expect_map(node, "security", {"curve", "control_stop"});
  SecurityConfig security;
  if (const YAML::Node curve_node = node["curve"]) {
    reader.expect_map(curve_node, "security.curve", {"server_secret_key_file", "authorized_client_keys"});
    security.curve = true;
    const YAML::Node secret = curve_node["server_secret_key_file"];
    if (!secret) reader.fail(curve_node, "security.curve.server_secret_key_file", "missing; expected the server's secret key file (sonopipe-keygen)");
    try {
      const curve::KeyPair keys =
          curve::read_key_file(config_relative(source_name, reader.text(secret, "security.curve.server_secret_key_file")));
      if (keys.secret_key.empty()) throw curve::KeyError("it holds no secret-key (a .key file is the public half; use .key_secret)");
      security.server_public_key = keys.public_key;
      security.server_secret_key = keys.secret_key;
    } catch (const curve::KeyError& e) {
      reader.fail(secret, "security.curve.server_secret_key_file", std::string("expected a secret key file: ") + e.what());
    }
    const YAML::Node clients = curve_node["authorized_client_keys"];
    const std::string key = "security.curve.authorized_client_keys";
    if (!clients) reader.fail(curve_node, key, "missing; expected a list of client public key files or folders of *.key files");
    if (!clients.IsSequence() || clients.size() == 0)
      reader.fail(clients, key, "expected a non-empty list of client public key files or folders of *.key files");
    for (std::size_t i = 0; i < clients.size(); ++i) {
      const std::string item_key = key + "[" + std::to_string(i) + "]";
      try {
        for (std::string& client : curve::read_public_keys(config_relative(source_name, reader.text(clients[i], item_key))))
          security.authorized_client_keys.push_back(std::move(client));
      } catch (const curve::KeyError& e) {
        reader.fail(clients[i], item_key, std::string("expected a public key file or a folder of *.key files: ") + e.what());
      }
    }
    if (security.authorized_client_keys.empty())
      reader.fail(clients, key, "no client key found (a folder holds its keys as *.key files); expected at least one");
  }
  if (const YAML::Node stop = node["control_stop"]) {
    const std::string policy = reader.choice(stop, "security.control_stop", {"allow", "keyed", "disabled"});
    security.control_stop = policy == "allow" ? ControlStop::allow
                            : policy == "keyed" ? ControlStop::keyed : ControlStop::disabled;
    if (security.control_stop == ControlStop::keyed && !security.curve)
      reader.fail(stop, "security.control_stop", "keyed needs security.curve (no client is keyed without it); "
                                                 "expected allow or disabled");
  }
  return security;
}

}  // namespace

DaemonConfig parse_config(const std::string& yaml_text, const std::string& source_name,
                          const StageRegistry& registry) {
  ConfigReader reader(source_name);
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    reader.fail(e.mark.line >= 0 ? e.mark.line + 1 : 0, "(syntax)", "not valid YAML: " + e.msg);
  }
  if (!root || root.IsNull()) reader.fail(1, "(document)", "the file is empty; expected a mapping with `pipelines`");
  reader.expect_map(root, "", {"ingest", "publish", "control", "backend", "device", "devices", "slots", "queue_depth",
                               "overflow", "max_frame_bytes", "non_finite", "cpu_threads", "log_level",
                               "plugins", "security", "pipelines", "max_streams", "threads", "cuda_wait"});
  DaemonConfig config;
  config.source = source_name;

  // Plugins before pipelines, whatever their order in the file: pipelines may use their stages.
  auto stages = std::make_shared<StageRegistry>(registry);
  if (const YAML::Node plugins = root["plugins"]) {
    if (!plugins.IsSequence() || plugins.size() == 0)
      reader.fail(plugins, "plugins", "expected a non-empty list of shared libraries (stage plugins)");
    const std::filesystem::path folder = std::filesystem::path(source_name).parent_path();
    for (std::size_t i = 0; i < plugins.size(); ++i) {
      const std::string key = "plugins[" + std::to_string(i) + "]";
      std::filesystem::path path = reader.text(plugins[i], key);
      if (path.is_relative()) path = folder / path;
      try {
        load_stage_plugin(path.string(), *stages);
      } catch (const PluginError& e) {
        reader.fail(plugins[i], key, std::string("expected a loadable sonopipe stage plugin: ") + e.what());
      }
      config.plugins.push_back(path.string());
    }
  }
  config.registry = stages;

  if (const YAML::Node ingest = root["ingest"]) {
    reader.expect_map(ingest, "ingest", {"endpoint", "pattern", "bind", "slots", "permissions", "ack_endpoint"});
    if (ingest["slots"])
      config.shm_slots = static_cast<std::uint32_t>(reader.integer(ingest["slots"], "ingest.slots", 1, shm::kMaxSlots));
    if (ingest["permissions"])
      config.shm_permissions = reader.choice(ingest["permissions"], "ingest.permissions", {"0600", "0660"}) == "0600"
                                   ? 0600 : 0660;
    if (ingest["endpoint"]) config.ingest_endpoint = reader.text(ingest["endpoint"], "ingest.endpoint");
    if (ingest["pattern"])
      config.ingest_pattern = reader.choice(ingest["pattern"], "ingest.pattern", {"pull", "sub"}) == "pull"
                                  ? IngestPattern::pull : IngestPattern::sub;
    if (ingest["bind"]) config.ingest_bind = reader.boolean(ingest["bind"], "ingest.bind");
    if (ingest["ack_endpoint"]) {
      config.ingest_ack_endpoint = reader.text(ingest["ack_endpoint"], "ingest.ack_endpoint");
      if (shm::is_shm_endpoint(config.ingest_ack_endpoint) || shm::is_shm_endpoint(config.ingest_endpoint))
        reader.fail(ingest["ack_endpoint"], "ingest.ack_endpoint",
                    "acknowledges a tcp:// or ipc:// ingest on a tcp:// or ipc:// endpoint; an shm:// pool "
                    "acknowledges through the pool itself");
    }
  }
  if (const YAML::Node publish = root["publish"]) {
    reader.expect_map(publish, "publish", {"endpoint", "high_water_mark", "max_queued_bytes", "stall_timeout_s", "status_interval_s", "shm"});
    if (const YAML::Node shm_node = publish["shm"]) {
      reader.expect_map(shm_node, "publish.shm", {"endpoint", "mode", "slots", "payload_bytes"});
      if (!shm_node["endpoint"]) reader.fail(shm_node, "publish.shm.endpoint", "missing; expected shm://<name>");
      config.publish_shm.endpoint = reader.text(shm_node["endpoint"], "publish.shm.endpoint");
      try {
        (void)shm::object_name(config.publish_shm.endpoint);
      } catch (const std::invalid_argument& e) {
        reader.fail(shm_node["endpoint"], "publish.shm.endpoint", e.what());
      }
      if (shm_node["mode"])
        config.publish_shm.lossless = reader.choice(shm_node["mode"], "publish.shm.mode", {"live", "lossless"}) == "lossless";
      if (shm_node["slots"])
        config.publish_shm.slots =
            static_cast<std::uint32_t>(reader.integer(shm_node["slots"], "publish.shm.slots", 1, shm::kMaxSlots));
      if (shm_node["payload_bytes"])
        config.publish_shm.payload_bytes = static_cast<std::size_t>(
            reader.integer(shm_node["payload_bytes"], "publish.shm.payload_bytes", 1, std::int64_t(1) << 40));
    }
    if (publish["endpoint"]) config.publish_endpoint = reader.text(publish["endpoint"], "publish.endpoint");
    if (publish["high_water_mark"])
      config.publish_high_water_mark =
          static_cast<int>(reader.integer(publish["high_water_mark"], "publish.high_water_mark", 1, 1000000));
    // At least 1 MiB: a bound below one result still queues one (see daemon/publisher.h).
    if (publish["max_queued_bytes"])
      config.publish_max_queued_bytes = static_cast<std::size_t>(
          reader.integer(publish["max_queued_bytes"], "publish.max_queued_bytes", std::int64_t(1) << 20, std::int64_t(1) << 40));
    if (publish["stall_timeout_s"])
      config.publish_stall_timeout_s = reader.real(publish["stall_timeout_s"], "publish.stall_timeout_s", 0.01, 3600);
    if (publish["status_interval_s"])
      config.status_interval_s = reader.real(publish["status_interval_s"], "publish.status_interval_s", 0.05, 3600);
  }
  if (const YAML::Node control = root["control"]) {
    reader.expect_map(control, "control", {"endpoint"});
    if (control["endpoint"]) config.control_endpoint = reader.text(control["endpoint"], "control.endpoint");
  }
  if (root["backend"])
    parse_backend_choice(reader.choice(root["backend"], "backend", {"auto", "cuda", "cpu"}), config.backend);
  if (root["device"]) config.device = static_cast<int>(reader.integer(root["device"], "device", 0, 63));
  if (root["devices"]) {
    if (root["device"]) reader.fail(root["devices"], "devices", "give either `device` or `devices`, not both");
    config.devices = read_devices(reader, root["devices"], "devices");
  }
  if (root["slots"]) config.slots = static_cast<int>(reader.integer(root["slots"], "slots", 1, 64));
  if (root["queue_depth"])
    config.queue_depth = static_cast<std::size_t>(reader.integer(root["queue_depth"], "queue_depth", 1, 100000));
  if (root["max_streams"])
    config.max_streams = static_cast<std::size_t>(reader.integer(root["max_streams"], "max_streams", 1, 1000000));
  if (root["overflow"])
    parse_overflow_policy(reader.choice(root["overflow"], "overflow", {"block", "drop_oldest"}), config.overflow);
  if (root["max_frame_bytes"])
    config.max_frame_bytes = static_cast<std::size_t>(
        reader.integer(root["max_frame_bytes"], "max_frame_bytes", 1, std::int64_t(1) << 40));
  if (root["non_finite"])
    config.non_finite = reader.choice(root["non_finite"], "non_finite", {"reject", "pass"}) == "reject"
                            ? NonFinitePolicy::reject : NonFinitePolicy::pass;
  if (root["cpu_threads"]) config.cpu_threads = static_cast<int>(reader.integer(root["cpu_threads"], "cpu_threads", 0, 1024));
  if (const YAML::Node threads = root["threads"]) {
    reader.expect_map(threads, "threads", {"cpus", "ingest_io_cpus", "publish_io_cpus"});
    auto cpus = [&](const char* name, std::vector<int>& out) {
      const std::string key = std::string("threads.") + name;
      if (!threads[name]) return;
      try {
        out = parse_cpu_list(reader.text(threads[name], key));
      } catch (const std::invalid_argument& e) {
        reader.fail(threads[name], key, e.what());
      }
    };
    cpus("cpus", config.threads.cpus);
    cpus("ingest_io_cpus", config.threads.ingest_io_cpus);
    cpus("publish_io_cpus", config.threads.publish_io_cpus);
  }
  if (root["cuda_wait"]) config.cuda_wait_block = reader.choice(root["cuda_wait"], "cuda_wait", {"spin", "block"}) == "block";
  if (root["log_level"])
    config.log_level = reader.choice(root["log_level"], "log_level", {"trace", "debug", "info", "warn", "error", "off"});

  if (const YAML::Node security = root["security"]) {
    config.security = read_security(reader, security, source_name);
    if (config.security.curve && !config.ingest_bind)
      reader.fail(security, "security.curve", "needs ingest.bind: true (the daemon is the CURVE server of its sockets; "
                                              "a connecting ingest would be the client of someone else's)");
  }

  if (shm::is_shm_endpoint(config.ingest_endpoint)) {
    const YAML::Node ingest = root["ingest"];
    try {
      (void)shm::object_name(config.ingest_endpoint);
    } catch (const std::invalid_argument& e) {
      reader.fail(ingest["endpoint"], "ingest.endpoint", e.what());
    }
    if (!config.ingest_bind)
      reader.fail(ingest["bind"], "ingest.bind", "an shm:// ingest is the daemon's own pool; expected bind: true");
    if (config.security.curve)
      reader.fail(root["security"], "security.curve", "does not apply to an shm:// ingest (same host; its protection "
                                                      "is the pool's permissions); use tcp:// or ipc:// with CURVE");
  }

  const YAML::Node pipelines = root["pipelines"];
  if (!pipelines) reader.fail(root, "pipelines", "missing; expected a list of pipelines");
  if (!pipelines.IsSequence() || pipelines.size() == 0)
    reader.fail(pipelines, "pipelines", "expected a non-empty list of pipelines");
  std::set<std::string> names;
  for (std::size_t i = 0; i < pipelines.size(); ++i) {
    const std::string key = "pipelines[" + std::to_string(i) + "]";
    PipelineConfig pipeline = read_pipeline(reader, pipelines[i], key, *stages);
    if (!names.insert(pipeline.name).second)
      reader.fail(pipelines[i]["name"], key + ".name", "pipeline '" + pipeline.name + "' is defined twice; expected unique names");
    config.pipelines.push_back(std::move(pipeline));
  }
  std::set<std::string> endpoints{config.ingest_endpoint, config.publish_endpoint, config.control_endpoint};
  if (!config.publish_shm.endpoint.empty() && !endpoints.insert(config.publish_shm.endpoint).second)
    reader.fail(root["publish"]["shm"], "publish.shm.endpoint", "expected an endpoint of its own");
  if (endpoints.size() != 3 + !config.publish_shm.endpoint.empty())
    reader.fail(root, "ingest/publish/control.endpoint", "expected three different endpoints");
  if (!config.ingest_ack_endpoint.empty() && !endpoints.insert(config.ingest_ack_endpoint).second)
    reader.fail(root["ingest"]["ack_endpoint"], "ingest.ack_endpoint", "expected an endpoint of its own");
  for (std::size_t i = 0; i < config.pipelines.size(); ++i)
    if (const std::string& own = config.pipelines[i].ingest_endpoint; !own.empty() && !endpoints.insert(own).second)
      reader.fail(pipelines[i]["ingest"], "pipelines[" + std::to_string(i) + "].ingest.endpoint",
                  "'" + own + "' is already used by another socket; expected an endpoint of its own");
  config.source_text = yaml_text;
  return config;
}

std::string config_with_parameters(const DaemonConfig& config, const std::vector<PipelineConfig>& pipelines) {
  YAML::Node root = YAML::Load(config.source_text);
  YAML::Node nodes = root["pipelines"];
  for (std::size_t p = 0; p < pipelines.size() && p < nodes.size(); ++p) {
    YAML::Node stages = nodes[p]["stages"];
    for (std::size_t s = 0; s < pipelines[p].stages.size() && s < stages.size(); ++s) {
      YAML::Node stage = stages[s];
      for (const auto& [key, value] : pipelines[p].stages[s].params.values) {
        if (!value.given) continue;
        stage["params"][key] = YAML::Load(format_param_value(value));
      }
    }
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

DaemonConfig load_config_file(const std::string& path, const StageRegistry& registry) {
  std::ifstream file(path);
  if (!file) throw ConfigError(path + ": cannot open the config file");
  std::stringstream text;
  text << file.rdbuf();
  return parse_config(text.str(), path, registry);
}

}  // namespace sonopipe
