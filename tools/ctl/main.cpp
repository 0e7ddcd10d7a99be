// sonopipe-ctl: asks a running sonopiped for its status, tells it to stop, reads and changes live
// stage parameters, and saves the running configuration (docs/live-parameters.md).
//   sonopipe-ctl status [--endpoint tcp://127.0.0.1:5557] [--json] [--timeout-ms 3000]
//   sonopipe-ctl stop   [--endpoint ...] [--wait]
//   sonopipe-ctl list [<pipeline>[.<stage>]] | get <pipeline>.<stage>.<parameter> | set <name> <value>
//   sonopipe-ctl save <file.yaml>
//   --curve-server-key <key or .key file> --curve-client-key-file <.key_secret>: a daemon with security.curve
// Exit codes: 0 ok, 1 the daemon answered with an error, 2 no answer in time (or unusable keys).
#include <CLI/CLI.hpp>
#include <google/protobuf/util/json_util.h>
#include <zmq.hpp>

#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "tools/common/control_client.h"
#include "tools/common/curve_options.h"
#include "tools/ctl/status_text.h"
#include "wire/version.h"
#include "wire/wire.h"

int main(int argc, char** argv) {
  CLI::App app{"sonopipe-ctl: status, stop, live parameters and save for a running sonopiped"};
  app.set_version_flag("--version", sonopipe::version_line("sonopipe-ctl"));
  std::string command, endpoint = "tcp://127.0.0.1:5557";
  std::vector<std::string> arguments;
  bool json = false, wait = false;
  int timeout_ms = 3000;
  app.add_option("command", command, "status | stop | list | get | set | save")
      ->required()
      ->check(CLI::IsMember({"status", "stop", "list", "get", "set", "save"}));
  app.add_option("arguments", arguments,
                 "list: [prefix]; get: <pipeline>.<stage>.<parameter>; set: <name> <value>; save: <file.yaml>");
  app.add_option("--endpoint", endpoint, "the daemon's control endpoint")->capture_default_str();
  app.add_flag("--json", json, "print the status as JSON");
  app.add_flag("--wait", wait, "stop: wait until the daemon has drained and stopped answering");
  app.add_option("--timeout-ms", timeout_ms, "how long to wait for an answer")->capture_default_str();
  sonopipe::tools::CurveClient curve;
  sonopipe::tools::add_curve_options(app, curve);
  CLI11_PARSE(app, argc, argv);

  const std::size_t wanted = command == "set" ? 2 : command == "get" || command == "save" ? 1 : 0;
  if (arguments.size() != wanted && !(command == "list" && arguments.size() <= 1)) {
    std::cerr << "sonopipe-ctl: " << command << " takes "
              << (command == "set" ? "a parameter name and a value"
                  : command == "get" ? "a parameter name (<pipeline>.<stage>.<parameter>)"
                  : command == "save" ? "the file to write"
                  : command == "list" ? "at most a prefix" : "no arguments")
              << "\n";
    return 2;
  }
  sonopipe::v1::ControlRequest request;
  request.set_command(command);
  if ((command == "get" || command == "set" || command == "list") && !arguments.empty())
    request.set_parameter(arguments[0]);
  if (command == "set") request.set_value(arguments[1]);

  zmq::context_t context(1);
  std::optional<sonopipe::v1::ControlReply> reply;
  try {
    reply = sonopipe::tools::control_request(context, endpoint, request, std::chrono::milliseconds(timeout_ms), curve);
  } catch (const std::runtime_error& e) {
    std::cerr << "sonopipe-ctl: " << e.what() << "\n";
    return 2;
  }
  if (!reply) {
    std::cerr << "sonopipe-ctl: no answer from " << endpoint << " within " << timeout_ms << " ms\n";
    return 2;
  }
  if (!reply->ok()) {
    std::cerr << "sonopipe-ctl: the daemon refused '" << command << "': " << reply->error() << "\n";
    return 1;
  }
  if (command == "save") {
    std::ofstream file(arguments[0]);
    file << reply->config_yaml();
    if (!file.flush()) {
      std::cerr << "sonopipe-ctl: cannot write " << arguments[0] << "\n";
      return 2;
    }
    std::cout << "saved the running configuration to " << arguments[0] << "\n";
    return 0;
  }
  if (command == "get" || command == "set" || command == "list") {
    if (json) {
      std::string text;
      google::protobuf::util::JsonPrintOptions options;
      options.add_whitespace = true;
      (void)google::protobuf::util::MessageToJsonString(*reply, &text, options);
      std::cout << text;
      return 0;
    }
    for (const sonopipe::v1::Parameter& parameter : reply->parameters())
      std::cout << sonopipe::ctl::parameter_text(parameter) << "\n";
    if (command == "set")
      std::cout << "applies from the next frame pipeline " << arguments[0].substr(0, arguments[0].find('.'))
                << " starts: generation " << reply->generation() << "\n";
    return 0;
  }
  if (json) {
    std::string text;
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.always_print_primitive_fields = true;
    (void)google::protobuf::util::MessageToJsonString(reply->status(), &text, options);
    std::cout << text;
  } else {
    std::cout << sonopipe::ctl::status_text(reply->status());
  }
  if (command == "stop" && wait) {
    // The daemon answers status while it drains; it stops answering once it has exited.
    while (sonopipe::tools::control_request(context, endpoint, "status", std::chrono::milliseconds(500), curve))
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 0;
}
