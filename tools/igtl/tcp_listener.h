// The bridge's listening TCP socket, bound to one IPv4 address (127.0.0.1 by default). Not
// igtl::ServerSocket: the Debian library's (1.11) binds every interface (INADDR_ANY) with a backlog of
// one, and the bridge must stay on loopback unless asked. Accepted sockets carry the OpenIGTLink
// messages the library packs.
#pragma once

#include <optional>
#include <string>

namespace sonopipe::igtl_bridge {

struct AcceptedClient {
  int descriptor = -1;
  std::string peer;  // "address:port"
};

class TcpListener {
 public:
  // Throws std::runtime_error naming the address and port when it cannot listen there. port 0 = any free one.
  TcpListener(const std::string& address, int port, int send_buffer_bytes = 0);
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  int descriptor() const { return descriptor_; }
  int port() const { return port_; }  // the bound port (the one chosen when 0 was asked)
  // A waiting connection, or nullopt when none is (never blocks). TCP_NODELAY is set on it, and
  // SO_SNDBUF when a send buffer size was given.
  std::optional<AcceptedClient> accept();

 private:
  int descriptor_ = -1;
  int port_ = 0;
  int send_buffer_bytes_ = 0;
};

}  // namespace sonopipe::igtl_bridge
