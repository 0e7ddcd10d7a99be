#include "daemon/subscriber_watch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace sonopipe {
namespace {

constexpr int kConnectionEvents = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED;

// This end of a connection (its local address), to tell our connection from a later one that got
// the same descriptor number.
std::string local_of(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return {};
  return std::string(reinterpret_cast<const char*>(&address), length);
}

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

SubscriberWatch::SubscriberWatch(zmq::context_t& context, zmq::socket_t& socket, const std::string& name,
                                 std::size_t max_queued_bytes, std::size_t queue_messages,
                                 std::chrono::steady_clock::duration stall_timeout)
    : monitor_(context, zmq::socket_type::pair), max_queued_bytes_(max_queued_bytes), queue_messages_(queue_messages),
      stall_timeout_(stall_timeout) {
  const std::string address = "inproc://sonopipe-subscribers-" + name;
  if (zmq_socket_monitor(socket.handle(), address.c_str(), kConnectionEvents) != 0)
    throw std::runtime_error("publish: cannot monitor the " + name + " socket: " + zmq_strerror(zmq_errno()));
  monitor_.set(zmq::sockopt::linger, 0);
  monitor_.connect(address);
}

bool SubscriberWatch::read_events() {
  bool left = false;
  while (true) {
    // Event: [uint16 id, uint32 value (the connection's fd)][endpoint]
    zmq::message_t first;
    if (!monitor_.recv(first, zmq::recv_flags::dontwait)) break;
    while (first.more()) {
      zmq::message_t rest;
      if (!monitor_.recv(rest, zmq::recv_flags::dontwait) || !rest.more()) break;
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
      subscriber.local = local_of(fd);
      subscriber.connected = std::chrono::steady_clock::now();
      subscriber.last_moved = subscriber.connected;
      by_fd_[fd] = std::move(subscriber);
    } else if (by_fd_.erase(fd) > 0) {
      left = true;
    }
  }
  return left;
}

bool SubscriberWatch::moved(int fd, Subscriber& subscriber, std::chrono::steady_clock::time_point now) {
  // Bytes in the connection's kernel send queue (unix: not yet read by the peer; tcp: not yet
  // acknowledged). ZeroMQ refills it as it drains, so a reading subscriber's count changes between
  // two looks, and a stalled one's stays put once its buffers are full.
  int queued = 0;
  const long now_queued = ioctl(fd, SIOCOUTQ, &queued) == 0 ? queued : -1;
  const bool changed = now_queued < 0 || now_queued != subscriber.queued_in_kernel;
  subscriber.queued_in_kernel = now_queued;
  if (changed) subscriber.last_moved = now;
  return changed;
}

std::uint64_t SubscriberWatch::before_result(std::size_t message_bytes) {
  const auto now = std::chrono::steady_clock::now();
  const std::uint64_t sequence = next_sequence_++;
  const auto released = released_->take();
  // The result before this one (being written where a connection is full), unless already released.
  const bool previous_unreleased =
      sequence > 1 && std::find(released.begin(), released.end(), sequence - 1) == released.end();
  for (auto& [fd, subscriber] : by_fd_) {
    if (subscriber.info.cut) continue;
    // Released results are in no queue; the oldest one released means its queue moved on.
    bool head_released = false;
    if (subscriber.info.lagging)
      for (const std::uint64_t released_sequence : released)
        head_released = subscriber.backlog.release(released_sequence) || head_released;
    pollfd item{fd, POLLOUT, 0};
    if (poll(&item, 1, 0) == 1 && (item.revents & POLLOUT) && !(item.revents & (POLLERR | POLLHUP))) {
      subscriber.info.lagging = false;
      subscriber.info.stalled = false;
      subscriber.info.backlog_bytes = 0;
      subscriber.backlog = {};
      subscriber.last_moved = now;
      subscriber.queued_in_kernel = -1;
      continue;
    }
    // The result that filled its connection is still being written: it counts too.
    if (!subscriber.info.lagging) {
      subscriber.backlog.start();
      if (previous_unreleased) subscriber.backlog.add(sequence - 1, previous_message_bytes_);
    }
    subscriber.info.lagging = true;
    if (!moved(fd, subscriber, now) && head_released) subscriber.last_moved = now;
    subscriber.info.stalled = now - subscriber.last_moved >= stall_timeout_;
    const std::uint64_t backlog = subscriber.backlog.bytes() + message_bytes;
    if ((backlog > max_queued_bytes_ && subscriber.info.stalled) || backlog > kReadingAllowance * max_queued_bytes_) {
      cut(fd, subscriber);
      continue;
    }
    subscriber.backlog.add(sequence, message_bytes);
    subscriber.info.backlog_bytes = subscriber.backlog.bytes();
    if (subscriber.backlog.queued_results() > queue_messages_) {  // ZeroMQ's queue for it is full
      ++subscriber.info.results_dropped;
      ++dropped_total_;
    }
  }
  previous_message_bytes_ = message_bytes;
  return sequence;
}

void SubscriberWatch::cut(int fd, Subscriber& subscriber) {
  // The descriptor is ours to shut down only while it is still this connection (ZeroMQ may have
  // closed it and the number gone to a new socket before the monitor said so).
  if (local_of(fd) != subscriber.local || peer_of(fd) != subscriber.info.peer) return;
  shutdown(fd, SHUT_RDWR);  // ZeroMQ sees the connection end, and drops its queue
  // Lost with it: its queue, the result being written and the one that would have passed the bound.
  const std::uint64_t discarded = std::min<std::uint64_t>(subscriber.backlog.queued_results(), queue_messages_) + 2;
  subscriber.info.results_dropped += discarded;
  dropped_total_ += discarded;
  subscriber.info.cut = true;
  ++cut_total_;
}

bool SubscriberWatch::any_lagging() const {
  for (const auto& [fd, subscriber] : by_fd_)
    if (subscriber.info.lagging && !subscriber.info.cut) return true;
  return false;
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
