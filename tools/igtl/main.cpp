// sonopipe-igtl: serves the daemon's results to 3D Slicer (OpenIGTLink IMAGE and STRING messages).
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <iostream>
#include <sstream>

#include "tools/common/stop_signal.h"
#include "tools/igtl/bridge.h"
#include "wire/version.h"

using namespace sonopipe;

namespace {

// "KEY=VALUE" -> {KEY, VALUE}; throws CLI::ValidationError naming the option.
std::pair<std::string, std::string> split_assignment(const std::string& text, const std::string& option) {
  const auto at = text.rfind('=');
  if (at == std::string::npos || at == 0 || at + 1 == text.size())
    throw CLI::ValidationError(option, "expected KEY=VALUE, got '" + text + "'");
  return {text.substr(0, at), text.substr(at + 1)};
}

igtl_bridge::DisplayWindow parse_window(const std::string& text, const std::string& option) {
  const auto colon = text.find(':');
  try {
    if (colon == std::string::npos) throw std::invalid_argument("no colon");
    igtl_bridge::DisplayWindow window{std::stod(text.substr(0, colon)), std::stod(text.substr(colon + 1))};
    if (!(window.high > window.low)) throw std::invalid_argument("empty");
    return window;
  } catch (const std::exception&) {
    throw CLI::ValidationError(option, "expected LOW:HIGH with LOW < HIGH, got '" + text + "'");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sonopipe-igtl: serve sonopipe results to 3D Slicer and other OpenIGTLink clients"};
  app.set_version_flag("--version", version_line("sonopipe-igtl"));
  igtl_bridge::BridgeOptions options;
  std::vector<std::string> topics, windows, names;
  std::string variants = "float32,uint8";
  app.add_option("--results", options.endpoint,
                 "the daemon's publish endpoint, or its publish.shm pool shm://<name> (same host, read in place)")
      ->capture_default_str();
  app.add_option("--status-endpoint", options.status_endpoint,
                 "with an shm:// --results: the daemon's ZeroMQ publish endpoint, for its status heartbeat");
  app.add_option("--control", options.control_endpoint,
                 "the daemon's control endpoint, for STRING commands (set/get/list); \"\" to refuse them")
      ->capture_default_str();
  app.add_option("--topic", topics,
                 "<pipeline>/<output> prefix to serve (repeatable; e.g. arfi/displacement_filtered, strain2d/strain; "
                 "default: every result)");
  app.add_option("--port", options.port, "OpenIGTLink TCP port (0: any free one)")->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--bind", options.bind_address, "IPv4 address to listen on (0.0.0.0: every interface)")
      ->capture_default_str();
  app.add_option("--variants", variants, "image variants: float32, uint8 or both (comma-separated)")
      ->capture_default_str();
  app.add_option("--window", windows,
                 "KEY=LOW:HIGH fixed uint8 window for images whose key starts with KEY, in the result's unit "
                 "(repeatable; default: the 0.5..99.5th percentiles of each image)");
  app.add_option("--name", names, "KEY=DEVICE device name for an image key (repeatable; at most 20 characters)");
  app.add_option("--status-interval", options.status_interval_s, "seconds between STRING status messages")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--duration", options.duration_s, "stop after this many seconds (0: at SIGINT/SIGTERM)")
      ->capture_default_str();
  app.add_option("--ready-file", options.ready_file, "file written (\"port N\") once listening and subscribed");
  app.add_option("--hwm", options.receive_high_water_mark, "results queued on the ZeroMQ socket")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--client-send-buffer", options.client_send_buffer_bytes,
                 "SO_SNDBUF of each client socket in bytes (0: the system's; small = fresher images on slow links)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    if (!topics.empty()) options.topics = topics;
    for (std::string& topic : options.topics)
      if (topic.rfind("result/", 0) == 0) topic.erase(0, 7);  // the full topic works too
    options.float_images = options.uint8_images = false;
    std::stringstream list(variants);
    for (std::string variant; std::getline(list, variant, ',');) {
      if (variant == "float32") options.float_images = true;
      else if (variant == "uint8") options.uint8_images = true;
      else throw CLI::ValidationError("--variants", "unknown variant '" + variant + "' (float32, uint8)");
    }
    if (!options.float_images && !options.uint8_images)
      throw CLI::ValidationError("--variants", "no variant given (float32, uint8)");
    for (const std::string& text : windows) {
      const auto [key, value] = split_assignment(text, "--window");
      options.windows[key] = parse_window(value, "--window");
    }
    for (const std::string& text : names) {
      const auto [key, device] = split_assignment(text, "--name");
      if (device.size() > 20) throw CLI::ValidationError("--name", "device name '" + device + "' is over 20 characters");
      options.names[key] = device;
    }
  } catch (const CLI::Error& e) {
    return app.exit(e);
  }
  try {
    tools::install_stop_handlers();
    const igtl_bridge::BridgeReport report = igtl_bridge::run_bridge(options);
    std::cout << igtl_bridge::describe(report) << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "sonopipe-igtl: " << e.what() << "\n";
    return 1;
  }
}
