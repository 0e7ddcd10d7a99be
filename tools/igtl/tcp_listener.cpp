#include "tools/igtl/tcp_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace sonopipe::igtl_bridge {

namespace {

constexpr int kBacklog = 16;

std::string system_error(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

TcpListener::TcpListener(const std::string& address, int port, int send_buffer_bytes)
    : send_buffer_bytes_(send_buffer_bytes) {
  const std::string where = address + ":" + std::to_string(port);
  if (port < 0 || port > 65535) throw std::runtime_error("port " + std::to_string(port) + " is not a TCP port");
  sockaddr_in socket_address{};
  socket_address.sin_family = AF_INET;
  socket_address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, address.c_str(), &socket_address.sin_addr) != 1)
    throw std::runtime_error("bind address '" + address + "' is not an IPv4 address (e.g. 127.0.0.1)");
  descriptor_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (descriptor_ < 0) throw std::runtime_error(system_error("cannot create a socket for " + where));
  const int on = 1;
  ::setsockopt(descriptor_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);  // restart while old clients linger
  if (::bind(descriptor_, reinterpret_cast<sockaddr*>(&socket_address), sizeof socket_address) != 0 ||
      ::listen(descriptor_, kBacklog) != 0) {
    const std::string message = system_error("cannot listen on " + where);
    ::close(descriptor_);
    throw std::runtime_error(message);
  }
  socklen_t length = sizeof socket_address;
  ::getsockname(descriptor_, reinterpret_cast<sockaddr*>(&socket_address), &length);
  port_ = ntohs(socket_address.sin_port);
}

TcpListener::~TcpListener() { ::close(descriptor_); }

std::optional<AcceptedClient> TcpListener::accept() {
  sockaddr_in peer{};
  socklen_t length = sizeof peer;
  const int client = ::accept4(descriptor_, reinterpret_cast<sockaddr*>(&peer), &length, SOCK_CLOEXEC);
  if (client < 0) return std::nullopt;  // EAGAIN, or a connection that vanished before it was accepted
  const int on = 1;
  ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);  // an image goes out as soon as it is written
  if (send_buffer_bytes_ > 0)
    ::setsockopt(client, SOL_SOCKET, SO_SNDBUF, &send_buffer_bytes_, sizeof send_buffer_bytes_);
  char text[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &peer.sin_addr, text, sizeof text);
  return AcceptedClient{client, std::string(text) + ":" + std::to_string(ntohs(peer.sin_port))};
}

}  // namespace sonopipe::igtl_bridge
