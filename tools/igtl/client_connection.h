// One OpenIGTLink client of the bridge: a sender thread that owns the TCP socket and a latest-only
// slot per device. The bridge's ZeroMQ loop only ever calls offer(), which replaces what a slot holds
// and never waits on the network; a slot replaced before its message went out counts as conflated.
// So a client that connects late, reads slowly, never reads or vanishes costs the bridge nothing but
// its own conflation. Messages the client sends are read: a STRING message is a command for the
// bridge's command handler (live parameters, bridge.h), whose answer goes back as a STRING on device
// kReplyDevice; other messages (queries, keep-alives) are ignored. End of stream or a socket error
// ends the connection.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "tools/igtl/message_encoding.h"

namespace sonopipe::igtl_bridge {

struct ClientCounters {
  std::uint64_t offered = 0;    // messages handed to this client
  std::uint64_t sent = 0;       // messages written completely
  std::uint64_t conflated = 0;  // replaced by a newer one of the same device before being sent
  std::uint64_t bytes_sent = 0;
  std::uint64_t unsent = 0;     // waiting in a slot (at the end: dropped with the connection)
  std::uint64_t commands = 0;   // STRING commands answered
};

// The answer to one STRING command (on the client's own thread; may wait on the daemon).
using CommandHandler = std::function<std::string(const std::string& command)>;

class ClientConnection {
 public:
  // Takes ownership of the connected socket `descriptor`.
  ClientConnection(int descriptor, std::string peer, int id, CommandHandler on_command = {});
  ~ClientConnection();  // stops the sender (a blocked send is abandoned) and closes the socket
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  void offer(const MessagePointer& message);
  bool alive() const { return !finished_.load(); }
  std::string end_reason() const;  // why the connection ended ("" while alive)
  ClientCounters counters() const;
  const std::string& peer() const { return peer_; }
  int id() const { return id_; }

 private:
  void run();
  MessagePointer next_pending();
  bool send_all(const std::string& bytes);  // false when the connection ended or stop was asked
  bool read_incoming();                     // false at end of stream or on an error
  void handle_messages();                   // complete messages in incoming_: STRING -> command
  void finish(const std::string& reason);
  void wake();

  const int descriptor_;
  const int wake_descriptor_;  // eventfd: new pending messages or stop
  const std::string peer_;
  const int id_;
  const CommandHandler on_command_;
  std::string incoming_;          // bytes of a message not complete yet (sender thread)
  std::uint64_t skipping_ = 0;    // bytes of an oversized message still to discard (sender thread)
  mutable std::mutex mutex_;
  std::deque<std::string> order_;               // devices with a pending message, oldest first
  std::map<std::string, MessagePointer> slots_;  // device -> newest pending message
  ClientCounters counters_;
  std::string end_reason_;
  std::atomic<bool> stop_{false}, finished_{false};
  std::thread thread_;
};

}  // namespace sonopipe::igtl_bridge
