// The daemon's YAML config: the examples load, every value reaches its field, and every mistake
// is reported as "file:line: key: what was expected"; `devices` resolves to the GPUs a pipeline
// runs on.
#include "daemon/config.h"

#include <filesystem>
#include <fstream>

#include "daemon/backend_choice.h"
#include "daemon/thread_placement.h"
#include "curve/curve_keys.h"

#include "tests/support/test_support.h"
#include "stages/registry.h"

using namespace sonopipe;

namespace {

DaemonConfig parse(const std::string& text) { return parse_config(text, "test.yaml", builtin_stages()); }

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

const char* kMinimal = "pipelines: [{name: demo, stages: [{type: convert}]}]\n";

// CURVE makes the daemon the server of its sockets: an ingest that connects cannot use it.
std::string parse_config_error_with_ingest_connect(const std::string& source) {
  try {
    parse_config("ingest: {bind: false, endpoint: \"tcp://127.0.0.1:1\"}\nsecurity:\n  curve: {server_secret_key_file: "
                 "server.key_secret, authorized_client_keys: [clients]}\n" + std::string(kMinimal),
                 source, builtin_stages());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

std::string resolve_error(const DaemonConfig& config, int visible) {
  try {
    resolve_devices(config.pipelines[0], config, Backend::cuda, visible);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a list or mapping used as a key is a config error, not an abort", "[config][hardening]") {
  // yaml-cpp throws its own conversion error for a non-scalar key read as a string; it once escaped
  // the loader and ended the daemon in std::terminate instead of exit code 2.
  CHECK_THAT(error_of("[a, b]: 1\n" + std::string(kMinimal)),
             Catch::Contains("test.yaml:1: (key): expected a plain word as key"));
  CHECK_THAT(error_of("ingest: {{endpoint: x}: 1}\n" + std::string(kMinimal)),
             Catch::Contains("test.yaml:1: ingest.(key): expected a plain word as key"));
}

TEST_CASE("a list or mapping used as a parameter name is a config error, not an abort", "[config][fuzz]") {
  // Found by the config fuzzer (tests/fuzz/regressions/config/): yaml-cpp's conversion error for a
  // non-scalar key escaped read_raw_params, and sonopiped ended in std::terminate.
  CHECK_THAT(error_of("pipelines: [{name: a, stages: [{type: convert, params: {[x]: 1}}]}]\n"),
             Catch::Contains("test.yaml:1: pipelines[0].stages[0].params.(key): expected a parameter name as key"));
  CHECK_THAT(error_of("pipelines: [{name: a, stages: [{type: convert, params: {{x: 1}: 1}}]}]\n"),
             Catch::Contains("params.(key): expected a parameter name as key, got a list or mapping"));
}

TEST_CASE("the example configs in config/ load", "[config]") {
  for (const char* name : {"config/demo.yaml", "config/live.yaml"}) {
    INFO(name);
    DaemonConfig config = load_config_file(test::source_path(name), builtin_stages());
    CHECK_FALSE(config.pipelines.empty());
  }
  DaemonConfig demo = load_config_file(test::source_path("config/demo.yaml"), builtin_stages());
  CHECK(demo.ingest_pattern == IngestPattern::pull);
  CHECK(demo.overflow == OverflowPolicy::block);
  DaemonConfig live = load_config_file(test::source_path("config/live.yaml"), builtin_stages());
  CHECK(live.ingest_pattern == IngestPattern::sub);
  CHECK(live.ingest_endpoint == "shm://scanner");  // a same-host scanner (docs/shared-memory.md)
  CHECK(live.shm_permissions == 0660);
  CHECK(live.publish_shm.endpoint == "shm://scanner-results");
  CHECK(live.overflow == OverflowPolicy::drop_oldest);
  REQUIRE(live.pipelines[0].stages.size() == 2);
  CHECK(live.pipelines[0].stages[0].name == "raw");
  CHECK(live.pipelines[0].stages[0].publish);
}

TEST_CASE("a minimal config gets the documented defaults", "[config]") {
  DaemonConfig config = parse(kMinimal);
  CHECK(config.ingest_endpoint == "tcp://127.0.0.1:5555");
  CHECK(config.publish_endpoint == "tcp://127.0.0.1:5556");
  CHECK(config.control_endpoint == "tcp://127.0.0.1:5557");
  CHECK(config.ingest_pattern == IngestPattern::pull);
  CHECK(config.ingest_bind);
  CHECK(config.backend == BackendChoice::automatic);
  CHECK(config.slots == 3);
  CHECK(config.queue_depth == 8);
  CHECK(config.overflow == OverflowPolicy::block);
  CHECK(config.max_frame_bytes == std::size_t(256) << 20);
  CHECK(config.non_finite == NonFinitePolicy::reject);
  CHECK(config.cpu_threads == 0);
  CHECK(config.log_level == "info");
  CHECK(config.max_streams == 64);
  CHECK(config.publish_max_queued_bytes == kDefaultMaxQueuedBytes);
  CHECK(config.publish_stall_timeout_s == 0.1);
  REQUIRE(config.pipelines.size() == 1);
  CHECK(config.pipelines[0].match.kinds.empty());
  CHECK(config.pipelines[0].stages[0].params.real("scale") == 1.0);
}

TEST_CASE("every key reaches its field", "[config]") {
  DaemonConfig config = parse(R"(
ingest: {endpoint: "ipc:///tmp/a", pattern: sub, bind: false, ack_endpoint: "ipc:///tmp/d"}
publish: {endpoint: "ipc:///tmp/b", high_water_mark: 50, max_queued_bytes: 2097152, stall_timeout_s: 0.25, status_interval_s: 0.5}
control: {endpoint: "ipc:///tmp/c"}
backend: cpu
device: 1
slots: 4
queue_depth: 32
overflow: drop_oldest
max_frame_bytes: 1048576
non_finite: pass
cpu_threads: 3
log_level: debug
max_streams: 5
pipelines:
  - name: one
    match: {kinds: [rf, dce], streams: [2, 5]}
    stages:
      - {type: convert, name: first, params: {scale: 0.25}, publish: true}
      - {type: convert}
)");
  CHECK(config.ingest_endpoint == "ipc:///tmp/a");
  CHECK(config.ingest_pattern == IngestPattern::sub);
  CHECK_FALSE(config.ingest_bind);
  CHECK(config.ingest_ack_endpoint == "ipc:///tmp/d");
  CHECK(config.publish_endpoint == "ipc:///tmp/b");
  CHECK(config.publish_high_water_mark == 50);
  CHECK(config.publish_max_queued_bytes == 2097152);
  CHECK(config.publish_stall_timeout_s == 0.25);
  CHECK(config.status_interval_s == 0.5);
  CHECK(config.control_endpoint == "ipc:///tmp/c");
  CHECK(config.backend == BackendChoice::cpu);
  CHECK(config.device == 1);
  CHECK(config.slots == 4);
  CHECK(config.queue_depth == 32);
  CHECK(config.overflow == OverflowPolicy::drop_oldest);
  CHECK(config.max_frame_bytes == 1048576);
  CHECK(config.non_finite == NonFinitePolicy::pass);
  CHECK(config.cpu_threads == 3);
  CHECK(config.log_level == "debug");
  CHECK(config.max_streams == 5);
  const PipelineConfig& p = config.pipelines.at(0);
  CHECK(p.name == "one");
  CHECK(p.match.kinds == std::vector<FrameKind>{FrameKind::rf, FrameKind::dce});
  CHECK(p.match.stream_ids == std::vector<std::uint32_t>{2, 5});
  REQUIRE(p.stages.size() == 2);
  CHECK(p.stages[0].name == "first");
  CHECK(p.stages[0].publish);
  CHECK(p.stages[0].params.real("scale") == 0.25);
  CHECK(p.stages[0].line == 19);  // the YAML text starts with an empty line
  CHECK_FALSE(p.stages[1].publish);  // the executor publishes the last stage regardless
  std::vector<PipelineStage> stages = build_stages(p, builtin_stages());
  CHECK(stages[0].label == "first");
  CHECK(stages[0].output_prefix == "first_");
  CHECK(stages[1].label == "convert");
  CHECK(stages[1].publish);
}

TEST_CASE("frame matching by kind and stream id", "[config]") {
  FrameMatch match{.kinds = {FrameKind::rf}, .stream_ids = {3}};
  FrameMeta frame;
  frame.kind = FrameKind::rf;
  frame.stream_id = 3;
  CHECK(match.matches(frame));
  frame.stream_id = 4;
  CHECK_FALSE(match.matches(frame));
  frame.stream_id = 3;
  frame.kind = FrameKind::iq;
  CHECK_FALSE(match.matches(frame));
  CHECK(FrameMatch{}.matches(frame));
}

TEST_CASE("every config error names file:line, the key and what was expected", "[config]") {
  struct Case {
    const char* yaml;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"pipelines: [\n  {name: demo\n", "test.yaml:3: (syntax): not valid YAML"},
      {"", "test.yaml:1: (document): the file is empty"},
      {"- just\n- a list\n", "test.yaml:1: : expected a mapping"},
      {"slots: 2\n", "test.yaml:1: pipelines: missing; expected a list of pipelines"},
      {"pipelines: []\n", "test.yaml:1: pipelines: expected a non-empty list of pipelines"},
      {"slot: 2\npipelines: []\n", "test.yaml:1: slot: unknown key; expected one of ingest, publish"},
      {"ingest: {endpoint: \"tcp://*:1\", patern: pull}\n", "test.yaml:1: ingest.patern: unknown key; expected one of endpoint, pattern, bind"},
      {"ingest: {pattern: push}\n", "test.yaml:1: ingest.pattern: expected one of pull, sub, got 'push'"},
      {"ingest: {bind: maybe}\n", "test.yaml:1: ingest.bind: expected true or false, got 'maybe'"},
      {"ingest: {endpoint: \"\"}\n", "test.yaml:1: ingest.endpoint: expected a non-empty string"},
      {"ingest: tcp://x\n", "test.yaml:1: ingest: expected a mapping"},
      {"publish: {high_water_mark: 0}\n", "test.yaml:1: publish.high_water_mark: expected an integer in [1, 1000000], got '0'"},
      {"publish: {max_queued_bytes: 1000}\n",
       "test.yaml:1: publish.max_queued_bytes: expected an integer in [1048576, 1099511627776], got '1000'"},
      {"publish: {stall_timeout_s: 0}\n", "test.yaml:1: publish.stall_timeout_s: expected a number in [0.01, 3600], got '0'"},
      {"publish: {status_interval_s: fast}\n", "test.yaml:1: publish.status_interval_s: expected a number in [0.05, 3600], got 'fast'"},
      {"control: {endpoint: [a]}\n", "test.yaml:1: control.endpoint: expected a string"},
      {"backend: gpu\n", "test.yaml:1: backend: expected one of auto, cuda, cpu, got 'gpu'"},
      {"device: -1\n", "test.yaml:1: device: expected an integer in [0, 63], got '-1'"},
      {"slots: 2\nslots: 3\n", "test.yaml:2: slots: given twice; expected each key once"},
      {"pipelines:\n  - name: a\n    stages:\n      - type: convert\n        params: {scale: 1, scale: 2}\n",
       "test.yaml:5: pipelines[0].stages[0].params.scale: given twice; expected each parameter once"},
      {"\nslots: 0\n", "test.yaml:2: slots: expected an integer in [1, 64], got '0'"},
      {"queue_depth: 2.5\n", "test.yaml:1: queue_depth: expected an integer in [1, 100000], got '2.5'"},
      {"overflow: drop_newest\n", "test.yaml:1: overflow: expected one of block, drop_oldest, got 'drop_newest'"},
      {"max_frame_bytes: 0\n", "test.yaml:1: max_frame_bytes: expected an integer"},
      {"non_finite: ignore\n", "test.yaml:1: non_finite: expected one of reject, pass, got 'ignore'"},
      {"cpu_threads: all\n", "test.yaml:1: cpu_threads: expected an integer in [0, 1024], got 'all'"},
      {"log_level: verbose\n", "test.yaml:1: log_level: expected one of trace, debug, info, warn, error, off"},
      {"ingest: {endpoint: \"tcp://a:1\"}\npublish: {endpoint: \"tcp://a:1\"}\npipelines: [{name: d, stages: [{type: convert}]}]\n", "ingest/publish/control.endpoint: expected three different endpoints"},
      {"ingest: {ack_endpoint: \"tcp://127.0.0.1:5556\"}\npipelines: [{name: d, stages: [{type: convert}]}]\n",
       "test.yaml:1: ingest.ack_endpoint: expected an endpoint of its own"},
      {"ingest: {endpoint: \"shm://scanner\", ack_endpoint: \"ipc:///tmp/a\"}\npipelines: [{name: d, stages: [{type: convert}]}]\n",
       "test.yaml:1: ingest.ack_endpoint: acknowledges a tcp:// or ipc:// ingest"},
      {"pipelines:\n  - stages: [{type: convert}]\n", "test.yaml:2: pipelines[0].name: missing; expected the pipeline's name"},
      {"pipelines:\n  - {name: a/b, stages: [{type: convert}]}\n", "test.yaml:2: pipelines[0].name: expected letters, digits"},
      {"pipelines:\n  - {name: a}\n", "test.yaml:2: pipelines[0].stages: missing; expected a list of stages"},
      {"pipelines:\n  - {name: a, stages: []}\n", "test.yaml:2: pipelines[0].stages: expected a non-empty list of stages"},
      {"pipelines:\n  - {name: a, steps: []}\n", "test.yaml:2: pipelines[0].steps: unknown key; expected one of name, match, devices, stages, ingest"},
      {"pipelines:\n  - {name: a, stages: [{type: convert}]}\n  - {name: a, stages: [{type: convert}]}\n",
       "test.yaml:3: pipelines[1].name: pipeline 'a' is defined twice"},
      {"pipelines:\n  - {name: a, match: {kinds: [us]}, stages: [{type: convert}]}\n",
       "test.yaml:2: pipelines[0].match.kinds[0]: expected one of iq, rf, dce, channel_rf, channel_iq, got 'us'"},
      {"pipelines:\n  - {name: a, match: {kinds: []}, stages: [{type: convert}]}\n",
       "test.yaml:2: pipelines[0].match.kinds: expected a non-empty list of iq, rf, dce, channel_rf, channel_iq"},
      {"pipelines:\n  - {name: a, match: {streams: [-1]}, stages: [{type: convert}]}\n",
       "test.yaml:2: pipelines[0].match.streams[0]: expected an integer in [0, 4294967295], got '-1'"},
      {"pipelines:\n  - {name: a, match: {stream: [1]}, stages: [{type: convert}]}\n",
       "test.yaml:2: pipelines[0].match.stream: unknown key; expected one of kinds, streams"},
      {"pipelines:\n  - name: a\n    stages:\n      - {params: {scale: 1}}\n",
       "test.yaml:4: pipelines[0].stages[0].type: missing; expected a stage type"},
      {"pipelines:\n  - name: a\n    stages:\n      - {type: fft}\n",
       "test.yaml:4: pipelines[0].stages[0].type: unknown stage 'fft'; expected one of convert"},
      {"pipelines:\n  - name: a\n    stages:\n      - {type: convert, publish: yes}\n",
       "test.yaml:4: pipelines[0].stages[0].publish: expected true or false, got 'yes'"},
      {"pipelines:\n  - name: a\n    stages:\n      - {type: convert, optinos: {}}\n",
       "test.yaml:4: pipelines[0].stages[0].optinos: unknown key; expected one of type, name, params, publish"},
      {"pipelines:\n  - name: a\n    stages:\n      - type: convert\n        params:\n          scale: loud\n",
       "test.yaml:6: pipelines[0].stages[0].params.scale: expected a number (1/count)"},
      {"pipelines:\n  - name: a\n    stages:\n      - type: convert\n        params:\n          gain: 2\n",
       "test.yaml:6: pipelines[0].stages[0].params.gain: unknown parameter; expected one of scale"},
      {"pipelines:\n  - name: a\n    stages:\n      - type: convert\n        params: {scale: {x: 1}}\n",
       "test.yaml:5: pipelines[0].stages[0].params.scale: expected a scalar or a list of scalars"},
      {"pipelines:\n  - name: a\n    stages:\n      - type: convert\n        params: 3\n",
       "test.yaml:5: pipelines[0].stages[0].params: expected a mapping of parameter names to values"},
      {"pipelines:\n  - name: a\n    stages:\n      - {type: convert, publish: true}\n      - {type: convert}\n",
       "test.yaml:5: pipelines[0].stages[1]: 'convert' appears twice; give the stages distinct `name`s"},
  };
  for (const Case& c : cases) {
    INFO("config:\n" << c.yaml);
    std::string message = error_of(c.yaml);
    INFO("message: " << message);
    CHECK(message.find(c.message) != std::string::npos);
  }
}

TEST_CASE("load_config_file names a missing file", "[config]") {
  try {
    load_config_file("/nonexistent/sonopipe.yaml", builtin_stages());
    FAIL("no error");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()) == "/nonexistent/sonopipe.yaml: cannot open the config file");
  }
}

TEST_CASE("a pipeline may read an ingest socket of its own, which no other socket may use", "[config]") {
  DaemonConfig config = parse(R"(
ingest: {endpoint: "ipc:///tmp/shared"}
pipelines:
  - {name: slow, ingest: {endpoint: "ipc:///tmp/slow"}, stages: [{type: convert}]}
  - {name: fast, stages: [{type: convert}]}
)");
  CHECK(config.pipelines[0].ingest_endpoint == "ipc:///tmp/slow");
  CHECK(config.pipelines[1].ingest_endpoint.empty());
  CHECK_THAT(error_of("ingest: {endpoint: \"ipc:///tmp/shared\"}\n"
                      "pipelines: [{name: a, ingest: {endpoint: \"ipc:///tmp/shared\"}, stages: [{type: convert}]}]\n"),
             Catch::Contains("test.yaml:2: pipelines[0].ingest.endpoint: 'ipc:///tmp/shared' is already used by another "
                             "socket"));
  CHECK_THAT(error_of("pipelines: [{name: a, ingest: {}, stages: [{type: convert}]}]\n"),
             Catch::Contains("pipelines[0].ingest.endpoint: missing"));
}

TEST_CASE("security: curve keys are read from their files, relative to the config", "[config][security]") {
  char pattern[] = "/tmp/sonopipe-config-keys-XXXXXX";
  REQUIRE(mkdtemp(pattern));
  const std::string dir = pattern;
  std::filesystem::create_directory(dir + "/clients");
  const curve::KeyPair server = curve::generate_key_pair(), client = curve::generate_key_pair();
  curve::write_key_files(dir + "/server", server, false);
  curve::write_key_files(dir + "/clients/scanner", client, false);
  const std::string source = dir + "/sonopiped.yaml";
  auto parse_in_dir = [&](const std::string& security) {
    return parse_config("security:\n" + security + kMinimal, source, builtin_stages());
  };
  auto error_in_dir = [&](const std::string& security) {
    try {
      parse_in_dir(security);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const DaemonConfig config = parse_in_dir(
      "  curve: {server_secret_key_file: server.key_secret, authorized_client_keys: [clients]}\n"
      "  control_stop: keyed\n");
  CHECK(config.security.curve);
  CHECK(config.security.server_public_key == server.public_key);
  CHECK(config.security.server_secret_key == server.secret_key);
  CHECK(config.security.authorized_client_keys == std::vector<std::string>{client.public_key});
  CHECK(config.security.control_stop == ControlStop::keyed);
  CHECK(parse(kMinimal).security.curve == false);  // the default: unauthenticated, as before
  CHECK(parse(kMinimal).security.control_stop == ControlStop::allow);

  CHECK_THAT(error_in_dir("  curve: {server_secret_key_file: server.key, authorized_client_keys: [clients]}\n"),
             Catch::Contains("sonopiped.yaml:2: security.curve.server_secret_key_file: expected a secret key file") &&
                 Catch::Contains("holds no secret-key"));
  CHECK_THAT(error_in_dir("  curve: {server_secret_key_file: nothing.key_secret, authorized_client_keys: [clients]}\n"),
             Catch::Contains("security.curve.server_secret_key_file") && Catch::Contains("nothing.key_secret"));
  CHECK_THAT(error_in_dir("  curve: {server_secret_key_file: server.key_secret}\n"),
             Catch::Contains("security.curve.authorized_client_keys: missing"));
  std::filesystem::create_directory(dir + "/empty");
  CHECK_THAT(error_in_dir("  curve: {server_secret_key_file: server.key_secret, authorized_client_keys: [empty]}\n"),
             Catch::Contains("security.curve.authorized_client_keys: no client key found"));
  CHECK_THAT(error_in_dir("  control_stop: keyed\n"),
             Catch::Contains("sonopiped.yaml:2: security.control_stop: keyed needs security.curve"));
  CHECK_THAT(error_in_dir("  control_stop: maybe\n"),
             Catch::Contains("security.control_stop: expected one of allow, keyed, disabled, got 'maybe'"));
  CHECK_THAT(parse_config_error_with_ingest_connect(source), Catch::Contains("needs ingest.bind: true"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("devices: a pipeline's own list wins over the default, which wins over `device`", "[config][devices]") {
  DaemonConfig config = parse(
      "devices: all\n"
      "pipelines:\n"
      "  - {name: a, stages: [{type: convert}]}\n"
      "  - {name: b, devices: [1, 0], stages: [{type: convert}]}\n");
  CHECK(config.devices.all);
  CHECK_FALSE(config.pipelines[0].devices.given());
  CHECK(config.pipelines[1].devices.ids == std::vector<int>{1, 0});
  CHECK(resolve_devices(config.pipelines[0], config, Backend::cuda, 3) == std::vector<int>{0, 1, 2});
  CHECK(resolve_devices(config.pipelines[1], config, Backend::cuda, 3) == std::vector<int>{1, 0});
  // The CPU backend runs every pipeline on its one pool.
  CHECK(resolve_devices(config.pipelines[0], config, Backend::cpu, 0) == std::vector<int>{0});

  DaemonConfig single = parse("device: 2\npipelines: [{name: a, stages: [{type: convert}]}]\n");
  CHECK(resolve_devices(single.pipelines[0], single, Backend::cuda, 4) == std::vector<int>{2});
}

TEST_CASE("devices: mistakes name the line and key", "[config][devices]") {
  CHECK_THAT(error_of("devices: [0, 0]\npipelines: [{name: a, stages: [{type: convert}]}]\n"),
             Catch::Contains("test.yaml:1: devices[1]: device 0 is listed twice"));
  CHECK_THAT(error_of("devices: some\npipelines: [{name: a, stages: [{type: convert}]}]\n"),
             Catch::Contains("devices: expected `all` or a non-empty list of CUDA device ids"));
  CHECK_THAT(error_of("device: 0\ndevices: [1]\npipelines: [{name: a, stages: [{type: convert}]}]\n"),
             Catch::Contains("give either `device` or `devices`, not both"));
  CHECK_THAT(error_of("pipelines:\n  - {name: a, devices: [], stages: [{type: convert}]}\n"),
             Catch::Contains("test.yaml:2: pipelines[0].devices: expected `all` or a non-empty list"));
  CHECK_THAT(error_of("pipelines:\n  - {name: a, devices: [64], stages: [{type: convert}]}\n"),
             Catch::Contains("pipelines[0].devices[0]: expected an integer in [0, 63]"));
}

TEST_CASE("devices: a device that is not visible is an error naming the pipeline", "[config][devices]") {
  DaemonConfig config = parse("pipelines: [{name: strain, devices: [0, 3], stages: [{type: convert}]}]\n");
  CHECK(resolve_error(config, 2) == "pipeline strain: device 3 is not visible (2 CUDA devices)");
  CHECK(resolve_error(config, 4) == "no error");
  DaemonConfig all = parse("devices: all\npipelines: [{name: p, stages: [{type: convert}]}]\n");
  CHECK(resolve_error(all, 0) == "pipeline p: no CUDA device visible");
}

TEST_CASE("shm:// endpoints: keys reach their fields and bad values are config errors naming the key", "[config][shm]") {
  const DaemonConfig config = parse(std::string(R"(
ingest: {endpoint: "shm://scanner", pattern: sub, slots: 12, permissions: "0660"}
publish: {endpoint: "tcp://127.0.0.1:5556", shm: {endpoint: "shm://out", mode: lossless, slots: 4, payload_bytes: 4096}}
)") + kMinimal);
  CHECK(config.ingest_endpoint == "shm://scanner");
  CHECK(config.shm_slots == 12);
  CHECK(config.shm_permissions == 0660);
  CHECK(config.publish_shm.endpoint == "shm://out");
  CHECK(config.publish_shm.lossless);
  CHECK(config.publish_shm.slots == 4);
  CHECK(config.publish_shm.payload_bytes == 4096);
  CHECK_THAT(error_of(std::string("ingest: {endpoint: \"shm://a/b\"}\n") + kMinimal), Catch::Contains("ingest.endpoint"));
  CHECK_THAT(error_of(std::string("ingest: {endpoint: \"shm://a\", bind: false}\n") + kMinimal),
             Catch::Contains("expected bind: true"));
  CHECK_THAT(error_of(std::string("ingest: {endpoint: \"shm://a\", slots: 65}\n") + kMinimal), Catch::Contains("ingest.slots"));
  CHECK_THAT(error_of(std::string("ingest: {endpoint: \"shm://a\", permissions: \"0666\"}\n") + kMinimal),
             Catch::Contains("ingest.permissions"));
  CHECK_THAT(error_of(std::string("publish: {shm: {mode: live}}\n") + kMinimal), Catch::Contains("publish.shm.endpoint"));
  CHECK_THAT(error_of(std::string("ingest: {endpoint: \"shm://a\"}\npublish: {shm: {endpoint: \"shm://a\"}}\n") + kMinimal),
             Catch::Contains("an endpoint of its own"));
  CHECK_THAT(error_of("pipelines: [{name: d, ingest: {endpoint: \"shm://own\"}, stages: [{type: convert}]}]\n"),
             Catch::Contains("shm:// is for the shared ingest"));
}

TEST_CASE("threads: CPU lists reach their fields, in taskset's notation", "[config][threads]") {
  const DaemonConfig config = parse(std::string(kMinimal) +
                                    "threads: {cpus: \"4-7,12\", ingest_io_cpus: 2, publish_io_cpus: \"3, 3\"}\n");
  CHECK(config.threads.cpus == std::vector<int>{4, 5, 6, 7, 12});
  CHECK(config.threads.ingest_io_cpus == std::vector<int>{2});
  CHECK(config.threads.publish_io_cpus == std::vector<int>{3});
  const DaemonConfig plain = parse(kMinimal);
  CHECK(plain.threads.cpus.empty());
  CHECK(plain.threads.ingest_io_cpus.empty());
  CHECK(plain.threads.publish_io_cpus.empty());
  CHECK(cpu_list_text({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
}

TEST_CASE("threads: mistakes name the line and key", "[config][threads]") {
  const std::string base = std::string(kMinimal);
  CHECK_THAT(error_of(base + "threads: {cpus: \"4-x\"}\n"),
             Catch::Contains("test.yaml:2: threads.cpus: '4-x': 'x' is not a CPU number"));
  CHECK_THAT(error_of(base + "threads: {cpus: \"7-4\"}\n"), Catch::Contains("threads.cpus: '7-4': the range 7-4 runs backwards"));
  CHECK_THAT(error_of(base + "threads: {ingest_io_cpus: 100000}\n"),
             Catch::Contains("threads.ingest_io_cpus: '100000': CPU 100000 is past the"));
  CHECK_THAT(error_of(base + "threads: {publish_io_cpus: \"-1\"}\n"), Catch::Contains("threads.publish_io_cpus"));
  CHECK_THAT(error_of(base + "threads: {cpu: 1}\n"), Catch::Contains("threads.cpu: unknown key"));
  CHECK_THAT(error_of(base + "threads: {cpus: \",\"}\n"), Catch::Contains("threads.cpus"));
}

TEST_CASE("cuda_wait: spin by default, block when asked, anything else a config error", "[config]") {
  CHECK_FALSE(parse(kMinimal).cuda_wait_block);
  CHECK_FALSE(parse(std::string(kMinimal) + "cuda_wait: spin\n").cuda_wait_block);
  CHECK(parse(std::string(kMinimal) + "cuda_wait: block\n").cuda_wait_block);
  CHECK_THAT(error_of(std::string(kMinimal) + "cuda_wait: sleep\n"), Catch::Contains("test.yaml:2: cuda_wait"));
}
