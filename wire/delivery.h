// Delivery acknowledgement over ZeroMQ (docs/wire-protocol.md, "Acknowledgement"), without sockets:
// the daemon's record of what each sender's messages came to (IndexRanges), the Acknowledgement
// message it publishes, and the sender's ledger of what is still unacknowledged (DeliveryLedger).
// A sender numbers its messages 1, 2, 3, ... (send_index) under a random sender_id; the daemon
// answers with the ranges of send indices it accepted and refused. Acknowledgements are cumulative,
// so a lost one costs nothing but time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "wire/wire.h"

namespace sonopipe::wire {

// Ranges one acknowledgement carries per kind (accepted, refused): the oldest are forgotten first.
// A sender's indices form one range per daemon connection (plus one per refused frame between).
constexpr std::size_t kMaxAckRanges = 64;

struct IndexRange {
  std::uint64_t first = 0, last = 0;  // inclusive
  bool operator==(const IndexRange&) const = default;
};

// Sorted, disjoint, merged ranges of send indices; at most `max_ranges` (the lowest are dropped).
class IndexRanges {
 public:
  IndexRanges() = default;
  explicit IndexRanges(std::size_t max_ranges) : max_ranges_(max_ranges) {}
  void add(std::uint64_t index);
  bool contains(std::uint64_t index) const;
  const std::vector<IndexRange>& ranges() const { return ranges_; }

 private:
  std::size_t max_ranges_ = kMaxAckRanges;
  std::vector<IndexRange> ranges_;
};

// Acknowledgement (proto/sonopipe/v1/frame.proto) as a plain struct.
struct Acknowledgement {
  std::uint64_t sender_id = 0;
  std::uint64_t daemon_instance = 0;
  std::vector<IndexRange> accepted, refused;
};

std::string ack_topic(std::uint64_t sender_id);  // "ack/" + 16 lower-case hex digits
std::string encode_ack(const Acknowledgement& ack);
// False when the bytes are not an Acknowledgement.
bool decode_ack(const void* bytes, std::size_t size, Acknowledgement& ack);

// Appends the tag's fields to serialized FrameHeader bytes (protobuf merges concatenated messages:
// the appended fields replace any earlier ones), so a prepared header need not be parsed again.
void stamp_delivery(std::string& header_bytes, const DeliveryTag& tag);

// A random non-zero sender id (std::random_device).
std::uint64_t new_sender_id();

// The sender's side: every message it sent and what became of it.
class DeliveryLedger {
 public:
  struct Frame {
    std::uint64_t send_index = 0;
    std::uint32_t stream_id = 0;
    std::uint64_t sequence = 0;
    std::uint64_t cookie = 0;  // the caller's own reference (replay: its position in the recording)
  };

  explicit DeliveryLedger(std::uint64_t sender_id = new_sender_id()) : sender_id_(sender_id) {}
  std::uint64_t sender_id() const { return sender_id_; }

  // The tag for the next message, recorded as outstanding. `resend_of`: the send index of an
  // outstanding frame sent again (it is then tracked under the new index, and an acknowledgement
  // of either index settles it).
  DeliveryTag send(std::uint32_t stream_id, std::uint64_t sequence, std::uint64_t cookie,
                   std::uint64_t resend_of = 0);
  // Forgets a message whose send() failed after it was numbered (it was never sent).
  void withdraw(std::uint64_t send_index);
  // Settles what `ack` covers (acknowledgements of other senders are ignored); returns how many
  // outstanding frames it settled.
  std::size_t apply(const Acknowledgement& ack);

  std::uint64_t next_index() const { return next_index_; }  // the index send() gives next
  std::uint64_t sent() const { return sent_; }            // messages, resends included
  std::uint64_t delivered() const { return delivered_; }  // frames the daemon accepted
  std::uint64_t refused() const { return refused_; }      // frames the daemon read and refused
  std::size_t outstanding() const { return outstanding_.size(); }
  bool is_outstanding(std::uint64_t send_index) const { return outstanding_.count(send_index) > 0; }
  std::vector<Frame> undelivered() const;                 // outstanding, in send order
  std::size_t daemon_instances() const { return instances_.size(); }  // that acknowledged anything
  // Frames each daemon instance accepted, in the order the instances first acknowledged.
  const std::vector<std::pair<std::uint64_t, std::uint64_t>>& delivered_by_instance() const { return by_instance_; }

 private:
  void settle(std::uint64_t send_index, bool accepted, std::uint64_t instance);

  std::uint64_t sender_id_;
  std::uint64_t next_index_ = 1;
  std::uint64_t sent_ = 0, delivered_ = 0, refused_ = 0;
  std::map<std::uint64_t, Frame> outstanding_;           // by send index
  std::map<std::uint64_t, std::uint64_t> resent_as_;     // first send index -> the index it was resent as
  std::set<std::uint64_t> instances_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> by_instance_;  // instance -> frames accepted
};

}  // namespace sonopipe::wire
