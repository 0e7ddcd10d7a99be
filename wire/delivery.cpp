#include "wire/delivery.h"

#include <algorithm>
#include <cstdio>
#include <random>

namespace sonopipe::wire {

void IndexRanges::add(std::uint64_t index) {
  // The common case: the next index of the newest range.
  if (!ranges_.empty() && ranges_.back().last + 1 == index) {
    ++ranges_.back().last;
    return;
  }
  auto after = std::upper_bound(ranges_.begin(), ranges_.end(), index,
                                [](std::uint64_t value, const IndexRange& range) { return value < range.first; });
  if (after != ranges_.begin() && std::prev(after)->last >= index) return;  // already in
  const bool joins_before = after != ranges_.begin() && std::prev(after)->last + 1 == index;
  const bool joins_after = after != ranges_.end() && after->first == index + 1;
  if (joins_before && joins_after) {
    std::prev(after)->last = after->last;
    ranges_.erase(after);
  } else if (joins_before) {
    std::prev(after)->last = index;
  } else if (joins_after) {
    after->first = index;
  } else {
    ranges_.insert(after, IndexRange{index, index});
    if (ranges_.size() > max_ranges_) ranges_.erase(ranges_.begin());
  }
}

bool IndexRanges::contains(std::uint64_t index) const {
  auto after = std::upper_bound(ranges_.begin(), ranges_.end(), index,
                                [](std::uint64_t value, const IndexRange& range) { return value < range.first; });
  return after != ranges_.begin() && std::prev(after)->last >= index;
}

std::string ack_topic(std::uint64_t sender_id) {
  char text[24];
  std::snprintf(text, sizeof text, "ack/%016llx", static_cast<unsigned long long>(sender_id));
  return text;
}

std::string encode_ack(const Acknowledgement& ack) {
  v1::Acknowledgement message;
  message.set_sender_id(ack.sender_id);
  message.set_daemon_instance(ack.daemon_instance);
  for (const IndexRange& range : ack.accepted) {
    v1::SendRange* out = message.add_accepted();
    out->set_first(range.first);
    out->set_last(range.last);
  }
  for (const IndexRange& range : ack.refused) {
    v1::SendRange* out = message.add_refused();
    out->set_first(range.first);
    out->set_last(range.last);
  }
  return message.SerializeAsString();
}

bool decode_ack(const void* bytes, std::size_t size, Acknowledgement& ack) {
  v1::Acknowledgement message;
  if (!message.ParseFromArray(bytes, static_cast<int>(size))) return false;
  ack.sender_id = message.sender_id();
  ack.daemon_instance = message.daemon_instance();
  ack.accepted.clear();
  ack.refused.clear();
  for (const v1::SendRange& range : message.accepted()) ack.accepted.push_back({range.first(), range.last()});
  for (const v1::SendRange& range : message.refused()) ack.refused.push_back({range.first(), range.last()});
  return true;
}

void stamp_delivery(std::string& header_bytes, const DeliveryTag& tag) {
  v1::FrameHeader fields;
  fields.set_sender_id(tag.sender_id);
  fields.set_send_index(tag.send_index);
  fields.set_resend_of(tag.resend_of);
  header_bytes += fields.SerializeAsString();
}

std::uint64_t new_sender_id() {
  std::random_device device;
  std::uint64_t id = 0;
  while (id == 0) id = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  return id;
}

DeliveryTag DeliveryLedger::send(std::uint32_t stream_id, std::uint64_t sequence, std::uint64_t cookie,
                                 std::uint64_t resend_of) {
  const std::uint64_t index = next_index_++;
  ++sent_;
  if (resend_of != 0 && outstanding_.erase(resend_of) > 0) {
    for (auto& [first, current] : resent_as_)
      if (current == resend_of) current = index;
    resent_as_[resend_of] = index;
  } else {
    resend_of = 0;  // settled meanwhile, or never sent: a first send
  }
  outstanding_[index] = Frame{index, stream_id, sequence, cookie};
  return DeliveryTag{sender_id_, index, resend_of};
}

void DeliveryLedger::withdraw(std::uint64_t send_index) {
  if (outstanding_.erase(send_index) > 0) --sent_;
}

void DeliveryLedger::settle(std::uint64_t send_index, bool accepted, std::uint64_t instance) {
  if (outstanding_.erase(send_index) == 0) return;
  ++(accepted ? delivered_ : refused_);
  if (!accepted) return;
  auto entry = std::find_if(by_instance_.begin(), by_instance_.end(), [&](const auto& e) { return e.first == instance; });
  if (entry == by_instance_.end()) entry = by_instance_.insert(by_instance_.end(), {instance, 0});
  ++entry->second;
}

std::size_t DeliveryLedger::apply(const Acknowledgement& ack) {
  if (ack.sender_id != sender_id_) return 0;
  const std::size_t before = outstanding_.size();
  auto settle_ranges = [&](const std::vector<IndexRange>& ranges, bool accepted) {
    for (const IndexRange& range : ranges) {
      if (range.first > range.last) continue;
      std::vector<std::uint64_t> covered;
      for (auto it = outstanding_.lower_bound(range.first); it != outstanding_.end() && it->first <= range.last; ++it)
        covered.push_back(it->first);
      // An earlier send of a frame since resent: the frame is settled under its current index.
      for (auto it = resent_as_.lower_bound(range.first); it != resent_as_.end() && it->first <= range.last; ++it)
        covered.push_back(it->second);
      for (const std::uint64_t index : covered) settle(index, accepted, ack.daemon_instance);
    }
  };
  settle_ranges(ack.accepted, true);
  settle_ranges(ack.refused, false);
  if (ack.daemon_instance != 0 && (!ack.accepted.empty() || !ack.refused.empty()))
    instances_.insert(ack.daemon_instance);
  return before - outstanding_.size();
}

std::vector<DeliveryLedger::Frame> DeliveryLedger::undelivered() const {
  std::vector<Frame> frames;
  frames.reserve(outstanding_.size());
  for (const auto& [index, frame] : outstanding_) frames.push_back(frame);
  return frames;
}

}  // namespace sonopipe::wire
