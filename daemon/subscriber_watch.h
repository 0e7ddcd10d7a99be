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
// it was writing then, less those ZeroMQ released since (below), bound what is queued for it (its
// backlog).
//
// Reading or stalled: a connection that is not writable still drains while its subscriber reads,
// which the kernel shows as a change in the bytes waiting in its send queue (SIOCOUTQ) between two
// looks, or as the oldest result of its backlog released (a full unix socket can show the same
// SIOCOUTQ at every look while ZeroMQ refills it). A subscriber whose queue has not moved for
// `stall_timeout` is stalled. A result that would take a stalled subscriber's backlog past
// max_queued_bytes cuts it: its connection is shut down, ZeroMQ frees its queue, and the subscriber (a SUB socket reconnects by itself) starts afresh.
// A subscriber that keeps reading is not cut at the bound: it may fall behind a burst by up to
// kReadingAllowance times the bound (a reader slower than the results for good is cut there, so
// the memory stays bounded whatever it does). Results counted as dropped for it: those past
// ZeroMQ's queue of `high_water_mark` messages while it lagged, and those discarded with its queue
// at a cut (an estimate: ZeroMQ learns that a queue was read in batches of half its HWM).
//
// Released results: ZeroMQ lets go of a result (the payload's free function) only when no
// subscriber's queue holds it any more (sent or dropped), so a released result is taken off the
// backlog of every subscriber that was lagging when it was published (Backlog). A subscriber that
// reads while ZeroMQ keeps its connection full is never seen writable; without this its backlog
// grew by every result and it was cut at the reading allowance although it read (H100, 8 MB
// steps). A stalled subscriber's queue holds its results, unreleased: they stay counted.
//
// The backlog counts every unreleased result published while a subscriber lags, whatever its
// subscriptions (a bound on its queue, not its exact size). Used under the publisher's lock only,
// except ReleasedResults (the I/O thread's free functions).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
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

// What a lagging subscriber may have queued: the results published since it lags (from the one it
// was writing then), less those ZeroMQ released since (in no subscriber's queue). Results are
// numbered in publication order.
class Backlog {
 public:
  // Lagging from now on: nothing counted yet (then add() the result being written, unless
  // ZeroMQ already released it).
  void start() {
    unreleased_.clear();
    bytes_ = 0;
  }
  // A result published while it lags.
  void add(std::uint64_t sequence, std::size_t message_bytes) {
    unreleased_[sequence] = message_bytes;
    bytes_ += message_bytes;
  }
  // ZeroMQ let go of result `sequence`: no queue holds it. True when it was the oldest result
  // counted: the subscriber's queue moved on (a stalled subscriber's oldest result stays queued).
  // Results published before it lagged were never counted.
  bool release(std::uint64_t sequence) {
    const auto found = unreleased_.find(sequence);
    if (found == unreleased_.end()) return false;
    const bool oldest = found == unreleased_.begin();
    bytes_ -= found->second;
    unreleased_.erase(found);
    return oldest;
  }
  std::uint64_t bytes() const { return bytes_; }
  // Results counted beyond the oldest (being written: not in ZeroMQ's queue of HWM messages).
  std::size_t queued_results() const { return unreleased_.empty() ? 0 : unreleased_.size() - 1; }

 private:
  std::map<std::uint64_t, std::size_t> unreleased_;  // sequence -> message bytes
  std::uint64_t bytes_ = 0;
};

// Results ZeroMQ let go of, told by the free functions (any thread) and read at the next result.
class ReleasedResults {
 public:
  void released(std::uint64_t sequence) {
    std::lock_guard lock(mutex_);
    released_.push_back(sequence);
  }
  std::vector<std::uint64_t> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(released_, {});
  }

 private:
  std::mutex mutex_;
  std::vector<std::uint64_t> released_;
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
  // Before a result of `message_bytes` is handed to ZeroMQ: takes the released results off the
  // backlogs, updates every subscriber's backlog, counts the result for those whose ZeroMQ queue is
  // full, and cuts those past the bound. Returns the result's sequence number, for released().
  std::uint64_t before_result(std::size_t message_bytes);
  // Where the result's free function tells that ZeroMQ let go of it (kept alive by the message).
  const std::shared_ptr<ReleasedResults>& releases() const { return released_; }

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
    Backlog backlog;
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
  std::uint64_t next_sequence_ = 1;          // 0: before the first result
  std::shared_ptr<ReleasedResults> released_ = std::make_shared<ReleasedResults>();
  std::uint64_t dropped_total_ = 0, cut_total_ = 0;
};

}  // namespace sonopipe
