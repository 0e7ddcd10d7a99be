// Who is connected to the publish socket, and which results each subscriber lost because its queue
// was full. ZeroMQ's PUB socket keeps one queue per subscriber and drops, for that subscriber alone,
// a message that finds its queue full; it says nothing about it. This watch learns the subscribers'
// connections from the socket's monitor (accepted / disconnected, with the connection's file
// descriptor) and asks the kernel, before each result, whether each connection moved since the
// previous result (writable, or its unsent byte count changed). A subscriber whose connection did
// not move for more results than its queue holds (`queue_messages`) lost the rest: each such
// result is counted for it.
//
// A model of ZeroMQ's queue, not a reading of it (libzmq 4.3 does not expose its pipes): for a
// subscriber that stops reading (the case the bound is for) it counts within ZeroMQ's own slack
// (ZeroMQ learns of messages taken from a queue in batches of half the queue, so it may drop up to
// that many sooner); a subscriber that reads slowly but steadily moves between results and is
// never counted, although ZeroMQ may drop for it at times. Every result published while a
// subscriber is stalled counts, whatever its subscriptions. Used under the publisher's lock only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <zmq.hpp>

namespace sonopipe {

struct SubscriberInfo {
  std::string peer;           // "127.0.0.1:40512" (tcp) or "pid 1234" (ipc)
  double connected_s = 0;     // since the connection was accepted
  bool stalled = false;       // no progress at the last result
  std::uint64_t results_dropped = 0;
};

class SubscriberWatch {
 public:
  // Starts monitoring `socket` (before its bind). A socket has one monitor: not for CURVE sockets,
  // whose monitor counts refused handshakes (daemon/curve_gate.h).
  SubscriberWatch(zmq::context_t& context, zmq::socket_t& socket, const std::string& name);

  // Reads the monitor's pending events; true when a subscriber connected or left since the last call.
  bool read_events();
  // Before a result is handed to ZeroMQ: counts it for each subscriber that is past its queue.
  void before_result(std::size_t queue_messages);

  std::vector<SubscriberInfo> subscribers() const;
  std::uint64_t results_dropped_total() const { return dropped_total_; }  // subscribers that left included

 private:
  struct Subscriber {
    SubscriberInfo info;
    std::chrono::steady_clock::time_point connected;
    long unsent_bytes = -1;          // the kernel's send queue at the previous result
    std::size_t results_stalled = 0; // consecutive results without progress
  };
  bool moved(int fd, Subscriber& subscriber) const;

  zmq::socket_t monitor_;
  std::map<int, Subscriber> by_fd_;
  std::uint64_t dropped_total_ = 0;
};

}  // namespace sonopipe
