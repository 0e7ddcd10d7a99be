#include "daemon/subscriber_watch.h"

#include <arpa/inet.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cstring>
#include <stdexcept>

namespace sonopipe {
namespace {

constexpr int kConnectionEvents = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED;

// The other end of a connection, for the status: address and port (tcp) or process id (ipc).
std::string peer_of(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    char text[INET6_ADDRSTRLEN] = {};
    if (address.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
      inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
      return std::string(text) + ":" + std::to_string(ntohs(in->sin_port));
    }
    if (address.ss_family == AF_INET6) {
      const auto* in = reinterpret_cast<const sockaddr_in6*>(&address);
      inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
      return "[" + std::string(text) + "]:" + std::to_string(ntohs(in->sin6_port));
    }
  }
  ucred credentials{};
  socklen_t credentials_length = sizeof credentials;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &credentials_length) == 0 && credentials.pid > 0)
    return "pid " + std::to_string(credentials.pid);
  return "fd " + std::to_string(fd);
}

}  // namespace

SubscriberWatch::SubscriberWatch(zmq::context_t& context, zmq::socket_t& socket, const std::string& name)
    : monitor_(context, zmq::socket_type::pair) {
  const std::string address = "inproc://sonopipe-subscribers-" + name;
  if (zmq_socket_monitor(socket.handle(), address.c_str(), kConnectionEvents) != 0)
    throw std::runtime_error("publish: cannot monitor the " + name + " socket: " + zmq_strerror(zmq_errno()));
  monitor_.set(zmq::sockopt::linger, 0);
  monitor_.connect(address);
}

bool SubscriberWatch::read_events() {
  bool changed = false;
  while (true) {
    // Event: [uint16 id, uint32 value (the connection's fd)][endpoint]
    zmq::message_t first;
    if (!monitor_.recv(first, zmq::recv_flags::dontwait)) break;
    while (first.more()) {
      zmq::message_t rest;
      if (!monitor_.recv(rest, zmq::recv_flags::dontwait)) break;
      if (!rest.more()) break;
    }
    if (first.size() < 6) continue;
    std::uint16_t id = 0;
    std::uint32_t value = 0;
    std::memcpy(&id, first.data(), sizeof id);
    std::memcpy(&value, first.data<char>() + 2, sizeof value);
    const int fd = static_cast<int>(value);
    if (id == ZMQ_EVENT_ACCEPTED) {
      Subscriber subscriber;
      subscriber.info.peer = peer_of(fd);
      subscriber.connected = std::chrono::steady_clock::now();
      by_fd_[fd] = std::move(subscriber);
      changed = true;
    } else if (by_fd_.erase(fd) > 0) {
      changed = true;
    }
  }
  return changed;
}

bool SubscriberWatch::moved(int fd, Subscriber& subscriber) const {
  pollfd item{fd, POLLOUT, 0};
  const bool writable = poll(&item, 1, 0) == 1 && (item.revents & POLLOUT);
  int unsent = 0;
  const long unsent_bytes = ioctl(fd, SIOCOUTQ, &unsent) == 0 ? unsent : -1;
  const bool drained = unsent_bytes != subscriber.unsent_bytes;
  subscriber.unsent_bytes = unsent_bytes;
  return writable || drained;
}

void SubscriberWatch::before_result(std::size_t queue_messages) {
  for (auto& [fd, subscriber] : by_fd_) {
    if (moved(fd, subscriber)) {
      subscriber.results_stalled = 0;
      subscriber.info.stalled = false;
      continue;
    }
    subscriber.info.stalled = true;
    // The message being written when the connection stopped is already out of its queue; the
    // queue takes `queue_messages` more.
    if (++subscriber.results_stalled > queue_messages) {
      ++subscriber.info.results_dropped;
      ++dropped_total_;
    }
  }
}

std::vector<SubscriberInfo> SubscriberWatch::subscribers() const {
  std::vector<SubscriberInfo> out;
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [fd, subscriber] : by_fd_) {
    SubscriberInfo info = subscriber.info;
    info.connected_s = std::chrono::duration<double>(now - subscriber.connected).count();
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace sonopipe
