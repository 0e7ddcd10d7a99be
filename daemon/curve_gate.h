// The gate of the daemon's CURVE sockets (security.curve): a ZAP handler (ZeroMQ's authentication
// protocol, RFC 27, on inproc://zeromq.zap.01 of the daemon's context) that lets in only the
// authorized client public keys, and a monitor on every secured socket that counts each refused
// handshake: an unknown key (refused here), no keys or the wrong server key (refused by libzmq
// before ZAP is asked). Refusals are counted per socket and logged at most once a second.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "curve/curve_keys.h"
#include "wire/line_limiter.h"

namespace sonopipe {

inline constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";

class CurveGate {
 public:
  // Binds the ZAP endpoint in `context` (one gate per context).
  CurveGate(zmq::context_t& context, curve::KeyPair server, const std::vector<std::string>& authorized_keys);
  ~CurveGate();
  CurveGate(const CurveGate&) = delete;
  CurveGate& operator=(const CurveGate&) = delete;

  // Makes `socket` a CURVE server named `name` ("ingest", ...) and watches it. Before its bind, and
  // before start().
  void secure(zmq::socket_t& socket, const std::string& name);
  // Starts answering ZAP requests and reading the monitors (a thread of its own).
  void start();

  std::map<std::string, std::uint64_t> refused_by_socket() const;
  std::uint64_t refused() const;

 private:
  struct Watched {
    std::string name;
    zmq::socket_t monitor;
    std::atomic<std::uint64_t> refused{0};
  };
  void run();
  void answer_zap();
  void read_monitor(Watched& watched);

  zmq::context_t& context_;
  curve::KeyPair server_;
  std::set<std::string> authorized_;  // Z85 public keys
  zmq::socket_t zap_;
  std::vector<std::unique_ptr<Watched>> watched_;  // fixed once started
  std::atomic<bool> quit_{false};
  std::thread thread_;
  // One line per socket and second for refused keys (the domain is our socket's name, never the
  // client's text), one for failed handshakes. Gate thread only.
  std::map<std::string, LineLimiter> key_lines_;
  LineLimiter handshake_lines_;
};

}  // namespace sonopipe
