// The bridge behind sonopipe-igtl: subscribes to the daemon's result topics (ZeroMQ SUB, like
// sonopipe-record) and serves them to OpenIGTLink clients (3D Slicer's OpenIGTLinkIF, PLUS, custom
// ones) as IMAGE messages, float32 and a uint8 display-ready variant (image_layout.h,
// display_window.h), with STRING messages for status. One thread reads ZeroMQ, converts and packs each
// result once (when results queue faster than it converts, only the newest of each topic is converted); every client has its own sender with latest-only slots (client_connection.h), so no
// client can slow the subscription, and the daemon never waits on the bridge (PUB drops, never blocks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "tools/igtl/display_window.h"

namespace sonopipe::igtl_bridge {

struct BridgeOptions {
  // The daemon's publish endpoint, or its publish.shm pool shm://<name> (same host: results are
  // converted from the slot in place); then status_endpoint (its ZeroMQ publish endpoint, may be
  // "") brings the status heartbeat, which the pool does not carry.
  std::string endpoint = "tcp://127.0.0.1:5556";
  std::string status_endpoint;
  std::vector<std::string> topics = {""};         // "<pipeline>/<output>" prefixes ("" = every result)
  std::string bind_address = "127.0.0.1";
  int port = 18944;                                // OpenIGTLink's registered port; 0 = any free one
  bool float_images = true;                        // the float32 variant
  bool uint8_images = true;                        // the windowed uint8 variant
  std::map<std::string, DisplayWindow> windows;    // image key prefix -> fixed uint8 window (longest prefix wins)
  std::map<std::string, std::string> names;        // image key -> device name (otherwise device_name(key))
  double status_interval_s = 1.0;                  // STRING status to every client
  double duration_s = 0;                           // stop after this long (0: until a signal)
  std::string ready_file;                          // written ("port N") once listening and subscribed
  int receive_high_water_mark = 1000;              // results queued on the SUB socket
  int client_send_buffer_bytes = 0;                // SO_SNDBUF of client sockets (0: the system's)
  double conflation_log_interval_s = 5.0;          // at most one conflation line per client per interval
  // The daemon's control endpoint for STRING commands from clients (set/get/list of live
  // parameters, docs/live-parameters.md); "" answers every command with an error.
  std::string control_endpoint = "tcp://127.0.0.1:5557";
};

struct TopicCount {
  std::uint64_t results = 0;
  std::uint64_t sequence_gaps = 0;  // results the daemon published that never reached the bridge
  std::uint64_t last_sequence = 0;
  std::uint64_t superseded = 0;     // received, but a newer one of the topic came before it was converted
};

struct ClientSummary {
  int id = 0;
  std::string peer, end_reason;
  std::uint64_t offered = 0, sent = 0, conflated = 0, bytes_sent = 0, dropped = 0;  // dropped: unsent at the end
};

struct BridgeReport {
  int port = 0;
  std::map<std::string, TopicCount> topics;       // by "<pipeline>/<output>"
  std::map<std::string, std::uint64_t> rejected;  // by reason
  std::uint64_t images_packed = 0;
  std::uint64_t status_messages = 0;              // daemon Status messages received
  std::vector<ClientSummary> clients;             // every client, ended or still connected at the stop
  double duration_s = 0;
  std::string stop_reason;                        // "signal" or "duration"
};

// Runs until a signal (tools/common/stop_signal.h) or the duration. Throws on setup errors (cannot
// listen or connect).
BridgeReport run_bridge(const BridgeOptions& options);

std::string describe(const BridgeReport& report);

// The STRING answer to a client's STRING command: "set <pipeline>.<stage>.<parameter> <value>",
// "get <name>" or "list [<prefix>]", asked of the daemon's control socket. "ok: <name> = <value>
// (generation N, from the next frame)" or "error: <the daemon's one-line reason>".
std::string answer_command(zmq::context_t& context, const std::string& control_endpoint, const std::string& command);

}  // namespace sonopipe::igtl_bridge
