// security.curve on the real daemon: on each socket (ingest, publish, control) a client without keys
// or with a key the daemon does not list gets nothing through, and each refusal moves the socket's
// counter; a listed key works. security.control_stop refuses `stop` as configured.
#include <sys/stat.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "daemon/control.h"
#include "curve/curve_keys.h"
#include "tests/daemon/daemon_harness.h"

using namespace sonopipe;

namespace {

constexpr const char* kConvertPipeline = R"(
backend: cpu
cpu_threads: 2
pipelines:
  - name: demo
    match: {kinds: [iq, rf]}
    stages:
      - {type: convert, params: {scale: 0.5}}
)";

// Key files as an operator makes them with sonopipe-keygen: the server's pair, one authorized
// client in clients/, and a stranger whose public key is not listed.
struct KeyFolder {
  std::string dir;
  curve::KeyPair server, client, stranger;
  KeyFolder() {
    char pattern[] = "/tmp/sonopipe-keys-XXXXXX";
    if (!mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
    dir = pattern;
    std::filesystem::create_directory(dir + "/clients");
    server = curve::generate_key_pair();
    client = curve::generate_key_pair();
    stranger = curve::generate_key_pair();
    curve::write_key_files(dir + "/server", server, false);
    curve::write_key_files(dir + "/clients/client", client, false);
    curve::write_key_files(dir + "/stranger", stranger, false);
  }
  ~KeyFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  std::string settings(const std::string& control_stop) const {
    return std::string(kConvertPipeline) + "security:\n  curve:\n    server_secret_key_file: \"" + dir +
           "/server.key_secret\"\n    authorized_client_keys: [\"" + dir + "/clients\"]\n  control_stop: " +
           control_stop + "\n";
  }
};

// A client socket: no keys (nullptr) or CURVE with `keys` against the server's public key.
zmq::socket_t client_socket(zmq::context_t& context, zmq::socket_type type, const std::string& endpoint,
                            const std::string& server_public_key, const curve::KeyPair* keys) {
  zmq::socket_t socket(context, type);
  socket.set(zmq::sockopt::linger, 0);
  if (keys) curve::make_client(socket, server_public_key, *keys);
  if (type == zmq::socket_type::sub) socket.set(zmq::sockopt::subscribe, "");
  socket.connect(endpoint);
  return socket;
}

std::optional<v1::ControlReply> ask(zmq::socket_t& req, const std::string& command, std::chrono::milliseconds timeout) {
  v1::ControlRequest request;
  request.set_schema_version(wire::kSchemaVersion);
  request.set_command(command);
  req.send(zmq::buffer(request.SerializeAsString()), zmq::send_flags::none);
  zmq::pollitem_t item{req.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, timeout) == 0) return std::nullopt;
  zmq::message_t message;
  if (!req.recv(message, zmq::recv_flags::none)) return std::nullopt;
  v1::ControlReply reply;
  reply.ParseFromArray(message.data(), static_cast<int>(message.size()));
  return reply;
}

// Status through an authorized control client, polled until `done` holds (or 30 s passed).
template <typename Predicate>
v1::Status keyed_status(zmq::context_t& context, const test::DaemonHarness& daemon, const KeyFolder& keys,
                        Predicate done) {
  v1::Status status;
  const auto deadline = test::Clock::now() + std::chrono::seconds(30);
  while (test::Clock::now() < deadline) {
    zmq::socket_t req = client_socket(context, zmq::socket_type::req, daemon.endpoint("control"),
                                      keys.server.public_key, &keys.client);
    if (auto reply = ask(req, "status", std::chrono::seconds(10)); reply && reply->ok()) {
      status = reply->status();
      if (done(status)) return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return status;
}

std::uint64_t refused(const v1::Status& status, const std::string& socket) {
  const auto it = status.clients_refused_by_socket().find(socket);
  return it == status.clients_refused_by_socket().end() ? 0 : it->second;
}

bool nothing_arrives(zmq::socket_t& socket) {
  zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
  return zmq::poll(&item, 1, std::chrono::milliseconds(0)) == 0;
}

std::string sonopipe_ctl() {
  if (const char* path = std::getenv("SONOPIPE_CTL")) return path;
  return test::binary_path("tools/ctl/sonopipe-ctl");
}

}  // namespace

TEST_CASE("with security.curve the control socket answers only an authorized key and counts the others",
          "[daemon][security]") {
  KeyFolder keys;
  test::DaemonHarness daemon(keys.settings("keyed"));
  daemon.launch();
  REQUIRE(daemon.wait_for_log("sonopiped ready").find("sonopiped ready") != std::string::npos);
  zmq::context_t context(1);
  zmq::socket_t anonymous = client_socket(context, zmq::socket_type::req, daemon.endpoint("control"), "", nullptr);
  zmq::socket_t stranger = client_socket(context, zmq::socket_type::req, daemon.endpoint("control"),
                                         keys.server.public_key, &keys.stranger);
  v1::ControlRequest stop;
  stop.set_schema_version(wire::kSchemaVersion);
  stop.set_command("stop");
  anonymous.send(zmq::buffer(stop.SerializeAsString()), zmq::send_flags::none);
  stranger.send(zmq::buffer(stop.SerializeAsString()), zmq::send_flags::none);
  // Both refused: the stranger by the ZAP handler (its key is logged), the client without keys by
  // the CURVE handshake itself. libzmq retries each refused connection, so counts only grow.
  CHECK(daemon.wait_for_log(keys.stranger.public_key).find("refused client key " + keys.stranger.public_key) !=
        std::string::npos);
  const v1::Status status = keyed_status(context, daemon, keys, [](const v1::Status& s) {
    return refused(s, "control") >= 2;
  });
  CHECK(refused(status, "control") >= 2);
  CHECK(status.clients_refused() >= refused(status, "control"));
  CHECK(refused(status, "ingest") == 0);  // nobody tried those
  // Their stop requests never reached the daemon: it still answers, and they got no reply.
  CHECK(nothing_arrives(anonymous));
  CHECK(nothing_arrives(stranger));

  // The C++ tool with the client's key file gets the status; without keys it gets no answer (exit 2).
  const std::string ctl = sonopipe_ctl() + " status --endpoint " + daemon.endpoint("control");
  CHECK(std::system((ctl + " --curve-server-key " + keys.dir + "/server.key --curve-client-key-file " + keys.dir +
                     "/clients/client.key_secret > /dev/null").c_str()) == 0);
  CHECK(WEXITSTATUS(std::system((ctl + " --timeout-ms 300 > /dev/null 2>&1").c_str())) == 2);

  // control_stop: keyed lets the authorized client stop the daemon.
  zmq::socket_t keyed = client_socket(context, zmq::socket_type::req, daemon.endpoint("control"),
                                      keys.server.public_key, &keys.client);
  auto reply = ask(keyed, "stop", std::chrono::seconds(10));
  REQUIRE(reply);
  CHECK(reply->ok());
  CHECK(daemon.wait_exit() == 0);
}

TEST_CASE("with security.curve ingest and publish let only an authorized key through", "[daemon][security]") {
  KeyFolder keys;
  test::DaemonHarness daemon(keys.settings("allow"));
  daemon.launch();
  REQUIRE(daemon.wait_for_log("sonopiped ready").find("sonopiped ready") != std::string::npos);
  zmq::context_t context(1);
  const std::string& server = keys.server.public_key;
  zmq::socket_t keyed_sub = client_socket(context, zmq::socket_type::sub, daemon.endpoint("publish"), server, &keys.client);
  zmq::socket_t anonymous_sub = client_socket(context, zmq::socket_type::sub, daemon.endpoint("publish"), "", nullptr);
  zmq::socket_t stranger_sub =
      client_socket(context, zmq::socket_type::sub, daemon.endpoint("publish"), server, &keys.stranger);
  zmq::socket_t anonymous_push = client_socket(context, zmq::socket_type::push, daemon.endpoint("ingest"), "", nullptr);
  zmq::socket_t stranger_push =
      client_socket(context, zmq::socket_type::push, daemon.endpoint("ingest"), server, &keys.stranger);

  std::mt19937_64 rng(test::fresh_seed());
  const auto samples = test::random_samples(4 * 50 * 2, rng);
  auto send = [&](zmq::socket_t& push, std::uint64_t sequence) {
    REQUIRE(push.send(zmq::buffer(test::iq_header(sequence, 4, 50).SerializeAsString()), zmq::send_flags::sndmore));
    REQUIRE(push.send(zmq::const_buffer(samples.data(), samples.size() * 2), zmq::send_flags::none));
  };
  send(anonymous_push, 1);  // queued on connections whose handshakes fail: never delivered
  send(stranger_push, 2);
  const v1::Status refusals = keyed_status(context, daemon, keys, [](const v1::Status& s) {
    return refused(s, "ingest") >= 2 && refused(s, "publish") >= 2;
  });
  CHECK(refused(refusals, "ingest") >= 2);
  CHECK(refused(refusals, "publish") >= 2);
  const std::string log = daemon.wait_for_log("refused client key " + keys.stranger.public_key + " from");
  CHECK(log.find("ingest refused client key " + keys.stranger.public_key) != std::string::npos);
  CHECK(log.find("publish refused client key " + keys.stranger.public_key) != std::string::npos);

  // The authorized subscriber hears the heartbeat (its subscription has arrived) ...
  auto next_topic = [](zmq::socket_t& sub, std::chrono::milliseconds timeout) -> std::optional<std::string> {
    zmq::pollitem_t item{sub.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, timeout) == 0) return std::nullopt;
    std::vector<zmq::message_t> parts;
    do {
      parts.emplace_back();
      if (!sub.recv(parts.back(), zmq::recv_flags::none)) return std::nullopt;
    } while (parts.back().more());
    if (parts[0].to_string() != "status" && parts.size() == 3) {
      v1::ResultHeader header;
      header.ParseFromArray(parts[1].data(), static_cast<int>(parts[1].size()));
      return parts[0].to_string() + "#" + std::to_string(header.input_sequence());
    }
    return parts[0].to_string();
  };
  REQUIRE(next_topic(keyed_sub, std::chrono::seconds(20)) == std::optional<std::string>("status"));
  // ... and the authorized sender's frame comes back as a result, the only frame that arrived.
  zmq::socket_t keyed_push = client_socket(context, zmq::socket_type::push, daemon.endpoint("ingest"), server, &keys.client);
  send(keyed_push, 3);
  std::optional<std::string> topic;
  const auto deadline = test::Clock::now() + std::chrono::seconds(30);
  while (test::Clock::now() < deadline && (!topic || *topic == "status"))
    topic = next_topic(keyed_sub, std::chrono::milliseconds(200));
  CHECK(topic == std::optional<std::string>("result/demo/converted#3"));
  const v1::Status after = keyed_status(context, daemon, keys, [](const v1::Status& s) {
    return s.results_published() >= 1;
  });
  CHECK(after.frames_received() == 1);
  // Heartbeats went out every 0.1 s all along; the refused subscribers got none of them.
  CHECK(nothing_arrives(anonymous_sub));
  CHECK(nothing_arrives(stranger_sub));
  daemon.signal(SIGTERM);
  CHECK(daemon.wait_exit() == 0);
}

TEST_CASE("security.control_stop: disabled refuses stop and keeps serving", "[daemon][security]") {
  test::DaemonHarness daemon(std::string(kConvertPipeline) + "security: {control_stop: disabled}\n");
  daemon.start();
  auto reply = daemon.control("stop");
  REQUIRE(reply);
  CHECK_FALSE(reply->ok());
  CHECK(reply->error().find("disabled") != std::string::npos);
  auto status = daemon.control("status");
  REQUIRE(status);
  CHECK(status->ok());
  CHECK(daemon.wait_for_log("stop refused").find("control: stop refused (disabled)") != std::string::npos);
  daemon.signal(SIGTERM);
  CHECK(daemon.wait_exit() == 0);
}

TEST_CASE("security.control_stop: keyed lets only a keyed client stop; disabled nobody", "[security]") {
  // Under CURVE every client that gets through is keyed, so the keyed policy's other half is tested
  // on the handler itself: the same request with and without a key.
  int stops = 0;
  v1::ControlRequest request;
  request.set_schema_version(wire::kSchemaVersion);
  request.set_command("stop");
  const ControlHandler keyed([] { return v1::Status(); }, [&stops] { ++stops; }, ControlStop::keyed);
  CHECK_FALSE(keyed.answer(request, false).ok());
  CHECK(keyed.answer(request, false).error().find("CURVE") != std::string::npos);
  CHECK(stops == 0);
  CHECK(keyed.answer(request, true).ok());
  CHECK(stops == 1);
  const ControlHandler disabled([] { return v1::Status(); }, [&stops] { ++stops; }, ControlStop::disabled);
  CHECK_FALSE(disabled.answer(request, true).ok());
  CHECK(stops == 1);
  request.set_command("status");
  CHECK(disabled.answer(request, false).ok());
}
