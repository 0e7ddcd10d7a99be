// Live parameters over the control protocol (docs/live-parameters.md): get / set / list validated
// by the stages' declarations, refusals that change nothing, concurrent setters, `set` keyed like
// `stop`, the saved YAML, and a real daemon whose every result carries the generation its frame
// started with (0 frames lost while the scale changes under load).
#include "daemon/control.h"

#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "daemon/config.h"
#include "daemon/live_params.h"
#include "stages/registry.h"
#include "tests/daemon/daemon_harness.h"
#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

enum class Flavour { plain, spiced };

// Every parameter type, all live but `fixed`; a rule: low < high.
struct ToyParams {
  std::int64_t count = 4;
  double gain = 1.5;
  bool enabled = true;
  Flavour flavour = Flavour::plain;
  std::string label = "toy";
  std::vector<int> shifts = {1, 2};
  std::vector<double> weights = {0.5};
  double low = 0, high = 1;
  std::int64_t fixed = 7;
};

class ToyStage final : public Stage {
 public:
  using Params = ToyParams;
  static void declare(ParamSpec<Params>& spec) {
    spec.param(&Params::count, "count", {.min = 1, .max = 16, .unit = "samples", .doc = "how many", .live = true});
    spec.param(&Params::gain, "gain", {.min = 0, .max = 10, .unit = "1", .live = true});
    spec.param(&Params::enabled, "enabled", {.live = true});
    spec.choice(&Params::flavour, "flavour", {{"plain", Flavour::plain}, {"spiced", Flavour::spiced}}, {.live = true});
    spec.param(&Params::label, "label", {.live = true});
    spec.param(&Params::shifts, "shifts", {.min = -5, .max = 5, .live = true});
    spec.param(&Params::weights, "weights", {.live = true});
    spec.param(&Params::low, "low", {.live = true});
    spec.param(&Params::high, "high", {.live = true});
    spec.param(&Params::fixed, "fixed", {.doc = "read once"});
    spec.rule([](const Params& p) {
      if (!(p.low < p.high)) throw ParamError("high", "expected more than low", 0);
    });
  }
  explicit ToyStage(const Params&) {}
  StagePlan configure(const FrameMeta&, const TensorSpec& input, Backend) override { return {{{"out", input}}}; }
  bool run_cpu(const StageIo&) override { return true; }
};

struct Applied {
  std::size_t pipeline, stage;
  std::uint64_t generation;
};

struct Fixture {
  StageRegistry registry;
  DaemonConfig config;
  std::mutex mutex;
  std::vector<Applied> applied;
  std::unique_ptr<LiveParameters> live;
  std::unique_ptr<ControlHandler> handler;

  explicit Fixture(ControlStop policy = ControlStop::allow) {
    registry.add(make_stage_info<ToyStage>("toy", "every parameter type"));
    config = parse_config(
        "pipelines:\n"
        "  - name: a\n"
        "    stages:\n"
        "      - {type: toy, params: {gain: 2, shifts: [3, -3]}}\n"
        "      - {type: toy, name: second}\n",
        "test.yaml", registry);
    live = std::make_unique<LiveParameters>(
        config.pipelines, registry,
        [this](std::size_t p, std::size_t s, const std::function<std::unique_ptr<Stage>()>& make, std::uint64_t g) {
          REQUIRE(make() != nullptr);
          std::lock_guard lock(mutex);
          applied.push_back({p, s, g});
        });
    handler = std::make_unique<ControlHandler>([] { return v1::Status(); }, [] {}, policy, live.get(),
                                               [this] { return config_with_parameters(config, live->pipelines()); });
  }

  v1::ControlReply ask(const std::string& command, const std::string& parameter, const std::string& value = "",
                       bool keyed = false) {
    v1::ControlRequest request;
    request.set_schema_version(wire::kSchemaVersion);
    request.set_command(command);
    request.set_parameter(parameter);
    request.set_value(value);
    return handler->answer(request, keyed, keyed ? "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID" : "");
  }
  std::string value_of(const std::string& name) {
    const v1::ControlReply reply = ask("get", name);
    REQUIRE(reply.ok());
    REQUIRE(reply.parameters_size() == 1);
    return reply.parameters(0).value();
  }
};

}  // namespace

TEST_CASE("set and get round-trip every parameter type, each set a new generation", "[live]") {
  Fixture f;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"count", "9"},          {"gain", "0.25"},     {"enabled", "false"},        {"flavour", "spiced"},
      {"label", "renamed"},    {"shifts", "[-5, 0, 5]"}, {"weights", "[0.001, 2.5]"}, {"low", "-1"}};
  std::uint64_t generation = 0;
  for (const auto& [key, value] : cases) {
    CAPTURE(key, value);
    const v1::ControlReply reply = f.ask("set", "a.toy." + key, value);
    REQUIRE(reply.ok());
    CHECK(reply.generation() == ++generation);
    REQUIRE(reply.parameters_size() == 1);
    CHECK(reply.parameters(0).generation() == generation);
    CHECK(f.value_of("a.toy." + key) == value);
  }
  REQUIRE(f.applied.size() == cases.size());
  for (std::size_t i = 0; i < f.applied.size(); ++i) {
    CHECK(f.applied[i].pipeline == 0);
    CHECK(f.applied[i].stage == 0);
    CHECK(f.applied[i].generation == i + 1);
  }
  // Declarations travel with the value: type, range, unit, doc, live.
  const v1::Parameter count = f.ask("get", "a.toy.count").parameters(0);
  CHECK(count.type() == "integer");
  CHECK(count.min() == 1);
  CHECK(count.max() == 16);
  CHECK(count.unit() == "samples");
  CHECK(count.doc() == "how many");
  CHECK(count.live());
  CHECK(count.default_value() == "4");
  // The other stage of the pipeline kept its values; its label is its name.
  CHECK(f.value_of("a.second.gain") == "1.5");
}

TEST_CASE("a refused set names the parameter and the rule, and changes nothing", "[live]") {
  Fixture f;
  struct Refusal {
    std::string name, value, error;
  };
  const std::vector<Refusal> refusals = {
      {"a.toy.count", "17", "a.toy.count: expected an integer in [1, 16] (samples)"},
      {"a.toy.count", "2.5", "a.toy.count: expected an integer in [1, 16] (samples)"},
      {"a.toy.gain", "fast", "a.toy.gain: expected a number in [0, 10] (1)"},
      {"a.toy.enabled", "yes", "a.toy.enabled: expected true or false"},
      {"a.toy.flavour", "sweet", "a.toy.flavour: expected one of plain, spiced"},
      {"a.toy.shifts", "4", "a.toy.shifts: expected a list of integers in [-5, 5]"},
      {"a.toy.shifts", "[1, 9]", "a.toy.shifts: expected a list of integers in [-5, 5]"},
      {"a.toy.high", "-2", "a.toy.high: expected more than low"},
      {"a.toy.low", "5", "a.toy.high: expected more than low (with low = 5)"},
      {"a.toy.fixed", "8", "a.toy.fixed: needs a restart"},
      {"a.toy.nothing", "1", "'a.toy.nothing': unknown parameter; stage toy (toy) has count, gain"},
      {"a.third.gain", "1", "'a.third.gain': unknown stage; pipeline a has toy, second"},
      {"b.toy.gain", "1", "'b.toy.gain': unknown pipeline; expected one of a"},
      {"gain", "1", "'gain': expected <pipeline>.<stage>.<parameter>"},
      {"a.toy.gain", "{x: 1}", "a.toy.gain: expected a scalar or a flat list"},
  };
  for (const Refusal& r : refusals) {
    CAPTURE(r.name, r.value);
    const v1::ControlReply reply = f.ask("set", r.name, r.value);
    CHECK_FALSE(reply.ok());
    CHECK(reply.error().rfind(r.error, 0) == 0);
    CHECK(reply.error().find('\n') == std::string::npos);  // one line
  }
  CHECK(f.applied.empty());
  CHECK(f.value_of("a.toy.count") == "4");
  CHECK(f.value_of("a.toy.high") == "1");
  CHECK(f.value_of("a.toy.shifts") == "[3, -3]");
  CHECK(f.live->generation(0) == 0);
}

TEST_CASE("a change the executor refuses while preparing it is a one-line error, and changes nothing", "[live]") {
  StageRegistry registry;
  registry.add(make_stage_info<ToyStage>("toy", "every parameter type"));
  const DaemonConfig config =
      parse_config("pipelines:\n  - name: a\n    stages:\n      - {type: toy, params: {gain: 2}}\n", "test.yaml",
                   registry);
  bool refuse = true;
  std::vector<std::uint64_t> applied;
  LiveParameters live(config.pipelines, registry,
                      [&](std::size_t, std::size_t, const std::function<std::unique_ptr<Stage>()>&, std::uint64_t g) {
                        if (refuse) throw StageError("toy: the device cannot\nhold that");
                        applied.push_back(g);
                      });
  const LiveParameters::Outcome refused = live.set("a.toy.gain", "3", "local");
  CHECK_FALSE(refused.ok);
  CHECK(refused.error.rfind("a.toy.gain: the pipeline's devices refused it: toy: the device cannot", 0) == 0);
  CHECK(refused.error.find('\n') == std::string::npos);  // one line
  CHECK(live.generation(0) == 0);
  CHECK(live.get("a.toy.gain").entries.at(0).value == "2");
  refuse = false;
  const LiveParameters::Outcome accepted = live.set("a.toy.gain", "3", "local");
  CHECK(accepted.ok);
  CHECK(accepted.generation == 1);  // the refused change took no generation
  CHECK(applied == std::vector<std::uint64_t>{1});
  CHECK(live.get("a.toy.gain").entries.at(0).value == "3");
}

TEST_CASE("list answers every parameter under a prefix with its declaration", "[live]") {
  Fixture f;
  const v1::ControlReply all = f.ask("list", "");
  REQUIRE(all.ok());
  CHECK(all.parameters_size() == 20);  // two stages of 10
  const v1::ControlReply one = f.ask("list", "a.second");
  REQUIRE(one.ok());
  REQUIRE(one.parameters_size() == 10);
  for (const v1::Parameter& p : one.parameters()) CHECK(p.name().rfind("a.second.", 0) == 0);
  CHECK_FALSE(one.parameters(9).live());  // fixed
  CHECK_FALSE(f.ask("list", "a.sec").ok());  // a prefix ends at a dot
}

TEST_CASE("concurrent setters are applied one after the other, in generation order", "[live]") {
  Fixture f;
  constexpr int kThreads = 4, kEach = 50;
  std::vector<std::thread> setters;
  std::mutex mutex;
  std::map<std::uint64_t, std::string> by_generation;
  for (int t = 0; t < kThreads; ++t)
    setters.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string value = std::to_string(1 + (t * kEach + i) % 16);
        const v1::ControlReply reply = f.ask("set", "a.toy.count", value);
        REQUIRE(reply.ok());
        std::lock_guard lock(mutex);
        CHECK(by_generation.emplace(reply.generation(), value).second);  // unique generations
      }
    });
  for (std::thread& t : setters) t.join();
  REQUIRE(by_generation.size() == kThreads * kEach);
  CHECK(by_generation.begin()->first == 1);
  CHECK(by_generation.rbegin()->first == kThreads * kEach);
  CHECK(f.value_of("a.toy.count") == by_generation.rbegin()->second);  // the last applied wins
  REQUIRE(f.applied.size() == kThreads * kEach);
  for (std::size_t i = 0; i < f.applied.size(); ++i) CHECK(f.applied[i].generation == i + 1);
}

TEST_CASE("with control_stop keyed, set needs a CURVE client; disabled refuses it", "[live][security]") {
  Fixture keyed(ControlStop::keyed);
  CHECK_FALSE(keyed.ask("set", "a.toy.count", "5").ok());
  CHECK(keyed.ask("set", "a.toy.count", "5").error().find("CURVE") != std::string::npos);
  CHECK(keyed.ask("get", "a.toy.count").ok());  // reading stays open
  CHECK(keyed.ask("set", "a.toy.count", "5", true).ok());
  CHECK(keyed.value_of("a.toy.count") == "5");
  Fixture disabled(ControlStop::disabled);
  CHECK_FALSE(disabled.ask("set", "a.toy.count", "5", true).ok());
}

TEST_CASE("save writes a configuration that loads with the running values", "[live]") {
  Fixture f;
  REQUIRE(f.ask("set", "a.toy.gain", "3.5").ok());
  REQUIRE(f.ask("set", "a.second.shifts", "[-1, 1]").ok());
  v1::ControlRequest request;
  request.set_schema_version(wire::kSchemaVersion);
  request.set_command("save");
  const v1::ControlReply saved = f.handler->answer(request, false);
  REQUIRE(saved.ok());
  const DaemonConfig again = parse_config(saved.config_yaml(), "saved.yaml", f.registry);
  LiveParameters reloaded(again.pipelines, f.registry, [](auto, auto, const auto&, auto) {});
  const auto before = f.live->list("").entries;
  const auto after = reloaded.list("").entries;
  REQUIRE(before.size() == after.size());
  for (std::size_t i = 0; i < before.size(); ++i) {
    CHECK(before[i].name == after[i].name);
    CHECK(before[i].value == after[i].value);
  }
}

TEST_CASE("sonopiped: set under load: every result's generation matches the scale of its frame, 0 lost",
          "[live][daemon]") {
  test::DaemonHarness daemon(R"(
pipelines:
  - name: demo
    stages:
      - {type: convert, params: {scale: 1}}
)");
  daemon.start();
  std::mt19937_64 rng(test::fresh_seed());
  constexpr std::size_t kFrames = 400;
  constexpr std::int64_t kLines = 4, kSamples = 64;
  std::vector<std::vector<std::int16_t>> sent;
  std::thread sender([&] {
    std::mt19937_64 local(rng());
    for (std::uint64_t n = 0; n < kFrames; ++n) {
      auto samples = test::random_samples(kLines * kSamples * 2, local);
      v1::FrameHeader header = test::iq_header(n, kLines, kSamples);
      daemon.send(header.SerializeAsString(), samples.data(), samples.size() * 2);
      sent.push_back(std::move(samples));
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  // Generation g sets scale g + 1 (products of small integers: exact in float).
  std::uint64_t last = 0;
  for (int g = 1; g <= 20; ++g) {
    auto reply = daemon.control("set", "demo.convert.scale", std::to_string(g + 1));
    REQUIRE(reply);
    REQUIRE(reply->ok());
    CHECK(reply->generation() == static_cast<std::uint64_t>(g));
    last = reply->generation();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto results = daemon.receive_results(kFrames);
  sender.join();
  REQUIRE(results.size() == kFrames);
  std::set<std::uint64_t> seen;
  std::uint64_t previous = 0;
  for (std::size_t n = 0; n < kFrames; ++n) {
    const test::Received& r = results[n];
    REQUIRE(r.header.input_sequence() == n);
    const std::uint64_t g = r.header.param_generation();
    REQUIRE(g >= previous);
    previous = g;
    seen.insert(g);
    const float scale = static_cast<float>(g + 1);
    std::vector<float> values(sent[n].size());
    REQUIRE(r.payload.size() == values.size() * sizeof(float));
    std::memcpy(values.data(), r.payload.data(), r.payload.size());
    for (std::size_t i = 0; i < values.size(); ++i) REQUIRE(values[i] == scale * static_cast<float>(sent[n][i]));
  }
  CHECK(seen.size() > 1);
  // status: current values and generation, and the log names who changed what.
  auto status = daemon.control("status");
  REQUIRE(status);
  const v1::PipelineStatus& pipeline = status->status().pipelines(0);
  CHECK(pipeline.param_generation() == last);
  REQUIRE(pipeline.parameters_size() == 1);
  CHECK(pipeline.parameters(0).name() == "demo.convert.scale");
  CHECK(pipeline.parameters(0).value() == "21");
  CHECK(pipeline.parameters(0).generation() == last);
  CHECK_THAT(daemon.wait_for_log("control: demo.convert.scale = 21 (was 20) by a local client"),
             Catch::Contains("generation 20"));
  // The saved configuration starts an equivalent daemon.
  auto saved = daemon.control("save");
  REQUIRE(saved);
  REQUIRE(saved->ok());
  test::DaemonHarness again(saved->config_yaml().substr(saved->config_yaml().find("pipelines:")));
  again.start();
  auto again_status = again.control("status");
  REQUIRE(again_status);
  REQUIRE(again_status->status().pipelines_size() == 1);
  const v1::PipelineStatus& restarted = again_status->status().pipelines(0);
  REQUIRE(restarted.parameters_size() == pipeline.parameters_size());
  for (int i = 0; i < restarted.parameters_size(); ++i) {
    CHECK(restarted.parameters(i).name() == pipeline.parameters(i).name());
    CHECK(restarted.parameters(i).value() == pipeline.parameters(i).value());
  }
  CHECK(daemon.control("stop"));
}

TEST_CASE("sonopipe-ctl list, get, set and save; a refused set exits 1 with the reason", "[live][daemon][ctl]") {
  test::DaemonHarness daemon(R"(
pipelines:
  - name: arfi
    stages:
      - {type: convert}
      - {type: upsample}
      - {type: loupas, params: {output_step: 2}}
)");
  daemon.start();
  const std::string ctl = test::binary_path("tools/ctl/sonopipe-ctl");
  auto run = [&](const std::string& args, std::string& output) {
    const std::string path = daemon.config_path() + ".ctl.out";
    int status = std::system((ctl + " " + args + " --endpoint " + daemon.endpoint("control") + " > " + path + " 2>&1").c_str());
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    output = text.str();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string output;
  REQUIRE(run("list arfi.loupas", output) == 0);
  CHECK_THAT(output, Catch::Contains("arfi.loupas.kernel_wavelengths = 1.5 wavelengths (real, range [0.1, 100], live)"));
  CHECK_THAT(output, Catch::Contains("arfi.loupas.output_step = 2 samples (integer, range [1, 1024], live)"));
  REQUIRE(run("set arfi.loupas.kernel_wavelengths 2.0", output) == 0);
  CHECK_THAT(output, Catch::Contains("arfi.loupas.kernel_wavelengths = 2 wavelengths"));
  CHECK_THAT(output, Catch::Contains("applies from the next frame pipeline arfi starts: generation 1"));
  REQUIRE(run("get arfi.loupas.kernel_wavelengths", output) == 0);
  CHECK_THAT(output, Catch::Contains("= 2 wavelengths"));
  CHECK_THAT(output, Catch::Contains("set at generation 1"));
  CHECK(run("set arfi.loupas.kernel_wavelengths 200", output) == 1);
  CHECK_THAT(output, Catch::Contains("arfi.loupas.kernel_wavelengths: expected a number in [0.1, 100] (wavelengths)"));
  CHECK(run("set arfi.loupas.kernel_wavelengths", output) == 2);  // the value is missing
  REQUIRE(run("status", output) == 0);
  // No frame has started since: the change waits for the next one; status lists the value set.
  CHECK_THAT(output, Catch::Contains("arfi.loupas.kernel_wavelengths = 2 wavelengths (real, range [0.1, 100], live, set at generation 1)"));
  const std::string saved = daemon.config_path() + ".saved.yaml";
  REQUIRE(run("save " + saved, output) == 0);
  std::ifstream file(saved);
  std::stringstream text;
  text << file.rdbuf();
  const DaemonConfig again = parse_config(text.str(), saved, builtin_stages());
  REQUIRE(again.pipelines.size() == 1);
  LiveParameters reloaded(again.pipelines, builtin_stages(), [](auto, auto, const auto&, auto) {});
  CHECK(reloaded.get("arfi.loupas.kernel_wavelengths").entries.at(0).value == "2");
  CHECK(reloaded.get("arfi.loupas.output_step").entries.at(0).value == "2");
  CHECK(daemon.control("stop"));
}
