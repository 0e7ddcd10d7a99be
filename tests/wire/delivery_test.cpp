// wire/delivery.h: the ranges the daemon acknowledges, the Acknowledgement codec, the header stamp,
// and the sender's ledger (settled by ranges, resends, refusals, daemon instances).
#include <algorithm>
#include <random>
#include <set>

#include "tests/support/test_support.h"
#include "wire/delivery.h"

using namespace sonopipe;
using namespace sonopipe::wire;

TEST_CASE("delivery: index ranges merge in any order and equal the set of indices added", "[wire][delivery]") {
  const std::uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  std::mt19937_64 random(seed);
  std::vector<std::uint64_t> indices;
  for (std::uint64_t i = 1; i <= 400; ++i)
    if (random() % 5 != 0) indices.push_back(i);  // gaps, as connections lost and refusals leave
  std::shuffle(indices.begin(), indices.end(), random);
  IndexRanges ranges(1000);
  for (std::uint64_t index : indices) {
    ranges.add(index);
    ranges.add(index);  // twice: no change
  }
  const std::set<std::uint64_t> added(indices.begin(), indices.end());
  for (std::uint64_t i = 0; i <= 401; ++i) CHECK(ranges.contains(i) == (added.count(i) == 1));
  // Sorted, disjoint and merged: no two ranges touch.
  const auto& list = ranges.ranges();
  for (std::size_t r = 1; r < list.size(); ++r) CHECK(list[r - 1].last + 1 < list[r].first);
}

TEST_CASE("delivery: past the cap the lowest ranges are forgotten", "[wire][delivery]") {
  IndexRanges ranges(3);
  for (std::uint64_t i : {1, 3, 5, 7, 9}) ranges.add(i);
  CHECK(ranges.ranges() == std::vector<IndexRange>{{5, 5}, {7, 7}, {9, 9}});
  CHECK_FALSE(ranges.contains(1));
  ranges.add(8);  // joins 7 and 9
  CHECK(ranges.ranges() == std::vector<IndexRange>{{5, 5}, {7, 9}});
}

TEST_CASE("delivery: an acknowledgement round-trips and a stamp replaces the header's delivery fields",
          "[wire][delivery]") {
  const Acknowledgement ack{.sender_id = 0xfeedull << 40, .daemon_instance = 42,
                            .accepted = {{1, 10}, {14, 20}}, .refused = {{11, 11}}};
  const std::string bytes = encode_ack(ack);
  Acknowledgement back;
  REQUIRE(decode_ack(bytes.data(), bytes.size(), back));
  CHECK(back.sender_id == ack.sender_id);
  CHECK(back.daemon_instance == 42);
  CHECK(back.accepted == ack.accepted);
  CHECK(back.refused == ack.refused);
  CHECK(ack_topic(0xabc) == "ack/0000000000000abc");
  CHECK_FALSE(decode_ack("\xff\xff\xff", 3, back));

  FrameMeta meta;
  meta.kind = FrameKind::rf;
  meta.payload.dtype = DType::float32;
  meta.payload.axes = {Axis{.name = "sample", .size = 4}};
  std::string header = frame_header_from_meta(meta).SerializeAsString();
  stamp_delivery(header, {7, 3, 0});
  stamp_delivery(header, {7, 9, 3});  // a resend: the later fields win
  DeliveryTag tag;
  const FrameMeta decoded = decode_frame(header.data(), header.size(), 16, 1 << 20, &tag);
  CHECK(decoded.payload.axes[0].size == 4);
  CHECK((tag.sender_id == 7 && tag.send_index == 9 && tag.resend_of == 3));
}

TEST_CASE("delivery: the ledger settles what acknowledgements cover, resends under either index, and names the rest",
          "[wire][delivery]") {
  DeliveryLedger ledger(99);
  for (std::uint64_t sequence = 0; sequence < 10; ++sequence) ledger.send(0, sequence, sequence);  // indices 1..10
  // Another sender's acknowledgement changes nothing.
  CHECK(ledger.apply({.sender_id = 98, .daemon_instance = 1, .accepted = {{1, 10}}}) == 0);
  // The first daemon took 1..6 and refused 7; 8..10 went down with it.
  CHECK(ledger.apply({.sender_id = 99, .daemon_instance = 1, .accepted = {{1, 6}}, .refused = {{7, 7}}}) == 7);
  CHECK(ledger.delivered() == 6);
  CHECK(ledger.refused() == 1);
  auto lost = ledger.undelivered();
  REQUIRE(lost.size() == 3);
  CHECK((lost[0].sequence == 7 && lost[0].send_index == 8 && lost[2].sequence == 9));
  // Resent as 11..13; the new daemon acknowledges 11 and 12, and a late acknowledgement of the
  // first send of sequence 9 (index 10) settles its resend (13).
  for (const auto& frame : lost) {
    const DeliveryTag tag = ledger.send(frame.stream_id, frame.sequence, frame.cookie, frame.send_index);
    CHECK(tag.resend_of == frame.send_index);
  }
  CHECK(ledger.apply({.sender_id = 99, .daemon_instance = 2, .accepted = {{11, 12}}}) == 2);
  CHECK(ledger.apply({.sender_id = 99, .daemon_instance = 1, .accepted = {{1, 6}, {10, 10}}}) == 1);
  CHECK(ledger.outstanding() == 0);
  CHECK(ledger.delivered() == 9);
  CHECK(ledger.sent() == 13);
  CHECK(ledger.daemon_instances() == 2);
  CHECK(ledger.delivered_by_instance() == std::vector<std::pair<std::uint64_t, std::uint64_t>>{{1, 7}, {2, 2}});
  // A frame numbered but never sent is withdrawn without a trace.
  const DeliveryTag unsent = ledger.send(0, 10, 10);
  ledger.withdraw(unsent.send_index);
  CHECK(ledger.outstanding() == 0);
  CHECK(ledger.sent() == 13);
}
