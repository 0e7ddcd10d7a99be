// Who is connected to the publish socket, how far behind each subscriber is, and the bound in bytes
// on what a subscriber that stops reading may cost (publish.max_queued_bytes).
//
// ZeroMQ's PUB socket keeps one queue per subscriber, bounded in messages only (ZMQ_SNDHWM, fixed
// when the subscriber connects: libzmq 4.3 loses messages of subscribers that read, and can crash
// its I/O thread, when the limit of connected subscribers is changed), and it tells nothing about
// them. This watch learns the connections from the socket's monitor (accepted / closed, with the
// connection's file descriptor) and asks the kernel, before each result, whether each connection
// is writable: a writable connection has nothing of ours waiting (ZeroMQ writes into it while its
// queue holds anything), so the result bytes published since it was last writable, with the result
// it was writing then, bound what is queued for it (its backlog).
//
// Reading or stalled: a connection that is not writable still drains while its subscriber reads,
// which the kernel shows as a change in the bytes waiting in its send queue (SIOCOUTQ) between two
// looks. A subscriber whose queue has not moved for `stall_timeout` is stalled. A result that would
// take a stalled subscriber's backlog past max_queued_bytes cuts it: its connection is shut down,
// ZeroMQ frees its queue, and the subscriber (a SUB socket reconnects by itself) starts afresh.
// A subscriber that keeps reading is not cut at the bound: it may fall behind a burst by up to
// kReadingAllowance times the bound (a reader slower than the results for good is cut there, so
// the memory stays bounded whatever it does). Results counted as dropped for it: those past
// ZeroMQ's queue of `high_water_mark` messages while it lagged, and those discarded with its queue
// at a cut.
//
// The backlog counts every result published while a subscriber lags, whatever its subscriptions
// (a bound on its queue, not its exact size). Used under the publisher's lock only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <zmq.hpp>

namespace sonopipe {

struct SubscriberInfo {
  std::string peer;                  // "127.0.0.1:40512" (tcp) or "pid 1234" (ipc)
  double connected_s = 0;            // since the connection was accepted
  bool lagging = false;              // not writable at the last result
  std::uint64_t backlog_bytes = 0;   // result bytes published since it was last writable
  std::uint64_t results_dropped = 0;
  bool cut = false;                  // shut down for passing the bound (gone once ZeroMQ closes it)
  bool stalled = false;              // lagging and its queue has not moved for stall_timeout
};

// How far a subscriber that keeps reading may fall behind, in units of the bound, before it is cut.
inline constexpr std::size_t kReadingAllowance = 4;

class SubscriberWatch {
 public:
  // Starts monitoring `socket` (before its bind). A socket has one monitor: not for CURVE sockets,
  // whose monitor counts refused handshakes (daemon/curve_gate.h).
  SubscriberWatch(zmq::context_t& context, zmq::socket_t& socket, const std::string& name,
                  std::size_t max_queued_bytes, std::size_t queue_messages,
                  std::chrono::steady_clock::duration stall_timeout);

  // Reads the monitor's pending events; true when a subscriber left (or was cut) since the last call.
  bool read_events();
  // Before a result of `message_bytes` is handed to ZeroMQ: updates every subscriber's backlog,
  // counts the result for those whose ZeroMQ queue is full, and cuts those past the bound.
  void before_result(std::size_t message_bytes);

  std::vector<SubscriberInfo> subscribers() const;
  // Whether a subscriber was lagging at the last result (not counting those cut).
  bool any_lagging() const;
  std::uint64_t results_dropped_total() const { return dropped_total_; }  // subscribers that left included
  std::uint64_t cut_total() const { return cut_total_; }

 private:
  struct Subscriber {
    SubscriberInfo info;
    std::string local;  // the connection's two ends, to recognise it before cutting it
    std::chrono::steady_clock::time_point connected;
    std::uint64_t backlog_results = 0;
    long queued_in_kernel = -1;  // SIOCOUTQ at the last look (-1: unknown)
    std::chrono::steady_clock::time_point last_moved;  // its queue last drained (or it was writable)
  };
  // Whether the connection's queue moved since the last look (updates last_moved).
  bool moved(int fd, Subscriber& subscriber, std::chrono::steady_clock::time_point now);
  void cut(int fd, Subscriber& subscriber);

  zmq::socket_t monitor_;
  const std::size_t max_queued_bytes_, queue_messages_;
  const std::chrono::steady_clock::duration stall_timeout_;
  std::map<int, Subscriber> by_fd_;
  std::size_t previous_message_bytes_ = 0;  // the last result (being written where a connection filled)
  std::uint64_t dropped_total_ = 0, cut_total_ = 0;
};

}  // namespace sonopipe
