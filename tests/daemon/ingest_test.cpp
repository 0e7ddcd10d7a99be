// The NaN/Inf check of float payloads and the per-reason reject counters.
#include "daemon/ingest.h"
#include "daemon/sequence_tracker.h"
#include "wire/wire.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <set>

#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

// A 64-sample float32 RF frame of ones: what the admission tests send again and again.
struct RfFrame {
  std::shared_ptr<const std::byte> payload;
  std::size_t payload_bytes;
  FrameMeta meta;
};

RfFrame ones_rf_frame() {
  auto samples = std::make_shared<std::vector<float>>(64, 1.0f);
  RfFrame frame{std::shared_ptr<const std::byte>(samples, reinterpret_cast<const std::byte*>(samples->data())),
                samples->size() * sizeof(float), FrameMeta{}};
  frame.meta.kind = FrameKind::rf;
  frame.meta.payload.dtype = DType::float32;
  frame.meta.payload.axes = {{"sample", 64, 1.0, "", 0.0}};
  return frame;
}

}  // namespace

TEST_CASE("payload_is_finite finds a NaN or Inf anywhere in every float type", "[ingest]") {
  std::mt19937_64 rng(test::fresh_seed());
  std::uniform_real_distribution<double> dist(-1e30, 1e30);
  std::vector<float> f32(1001);
  std::vector<double> f64(1001);
  for (auto& v : f32) v = static_cast<float>(dist(rng));
  for (auto& v : f64) v = dist(rng);
  CHECK(payload_is_finite(DType::float32, f32.data(), f32.size() * 4));
  CHECK(payload_is_finite(DType::complex64, f32.data(), 1000 * 4));
  CHECK(payload_is_finite(DType::float64, f64.data(), f64.size() * 8));
  const std::size_t at = std::uniform_int_distribution<std::size_t>(0, 1000)(rng);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> copy = f32;
    copy[at] = bad;
    CHECK_FALSE(payload_is_finite(DType::float32, copy.data(), copy.size() * 4));
  }
  std::vector<double> copy64 = f64;
  copy64[at] = std::numeric_limits<double>::quiet_NaN();
  CHECK_FALSE(payload_is_finite(DType::float64, copy64.data(), copy64.size() * 8));
  // float16: exponent all ones (0x7c00) is Inf/NaN; the largest finite half is 0x7bff.
  std::vector<std::uint16_t> f16{0x3c00, 0x7bff, 0xfbff, 0x0001};
  CHECK(payload_is_finite(DType::float16, f16.data(), f16.size() * 2));
  f16[2] = 0xfc00;  // -Inf
  CHECK_FALSE(payload_is_finite(DType::float16, f16.data(), f16.size() * 2));
  // Integers have no NaN: any bit pattern is finite.
  std::vector<std::int16_t> ints(8, -1);
  CHECK(payload_is_finite(DType::int16, ints.data(), ints.size() * 2));
}

TEST_CASE("payload_is_finite finds a NaN or Inf at either end of an unaligned payload of any length", "[ingest]") {
  // The check runs in vector lanes: a bad value in the first or last element, in the scalar tail
  // past the last full vector, or at an odd address must still be found.
  std::mt19937_64 rng(test::fresh_seed());
  std::uniform_real_distribution<double> dist(-1e30, 1e30);
  for (std::size_t count : {std::size_t(1), std::size_t(7), std::size_t(33), std::size_t(4099)}) {
    std::vector<float> f32(count);
    std::vector<double> f64(count);
    for (auto& v : f32) v = static_cast<float>(dist(rng));
    for (auto& v : f64) v = dist(rng);
    std::vector<unsigned char> bytes(count * 8 + 1);
    for (std::size_t at : {std::size_t(0), count - 1}) {
      for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
        std::vector<float> copy = f32;
        std::memcpy(bytes.data() + 1, copy.data(), count * 4);  // odd address
        CHECK(payload_is_finite(DType::float32, bytes.data() + 1, count * 4));
        copy[at] = bad;
        std::memcpy(bytes.data() + 1, copy.data(), count * 4);
        CHECK_FALSE(payload_is_finite(DType::float32, bytes.data() + 1, count * 4));
      }
      std::vector<double> copy = f64;
      std::memcpy(bytes.data() + 1, copy.data(), count * 8);
      CHECK(payload_is_finite(DType::float64, bytes.data() + 1, count * 8));
      copy[at] = std::numeric_limits<double>::infinity();
      std::memcpy(bytes.data() + 1, copy.data(), count * 8);
      CHECK_FALSE(payload_is_finite(DType::float64, bytes.data() + 1, count * 8));
      std::vector<std::uint16_t> f16(count, 0x3c00);  // 1.0
      f16[at] = 0x7e00;                               // a NaN
      std::memcpy(bytes.data() + 1, f16.data(), count * 2);
      CHECK_FALSE(payload_is_finite(DType::float16, bytes.data() + 1, count * 2));
    }
  }
}

TEST_CASE("resends reach a restarted daemon after newer frames without counting a gap or a frame twice", "[ingest]") {
  // A sender's queue can deliver frames 128..143 to a restarted daemon before the sender resends
  // everything unacknowledged (100..143): the resends of 100..127 are taken, those of 128..143 are
  // duplicates, and the next new frame (144) follows 143: nothing is missing.
  DaemonConfig config;
  RejectLog rejects;
  std::vector<std::uint64_t> dispatched;
  FrameAdmission admission(config, [&](InputFrame&& frame) { dispatched.push_back(frame.meta.sequence); return true; },
                           rejects);
  std::set<std::uint64_t> accepted_indices;
  admission.set_already_accepted([&](const wire::DeliveryTag& tag) { return accepted_indices.contains(tag.resend_of); });
  RfFrame frame = ones_rf_frame();
  FrameMeta& meta = frame.meta;
  std::uint64_t next_index = 601;  // the sender's send indices after the restart
  auto send = [&](std::uint64_t sequence, std::uint64_t send_index, std::uint64_t resend_of) {
    meta.sequence = sequence;
    v1::FrameHeader header = wire::frame_header_from_meta(meta);
    header.set_sender_id(7);
    header.set_send_index(send_index);
    header.set_resend_of(resend_of);
    const std::string bytes = header.SerializeAsString();
    const auto verdict = admission.admit(bytes.data(), bytes.size(), frame.payload, frame.payload_bytes, false, 0);
    if (verdict == FrameAdmission::Verdict::accepted) accepted_indices.insert(send_index);
    return verdict;
  };
  for (std::uint64_t s = 128; s < 144; ++s) CHECK(send(s, s + 1, 0) == FrameAdmission::Verdict::accepted);
  for (std::uint64_t s = 100; s < 144; ++s)
    CHECK(send(s, next_index++, s + 1) ==
          (s < 128 ? FrameAdmission::Verdict::accepted : FrameAdmission::Verdict::duplicate));
  CHECK(send(144, 145, 0) == FrameAdmission::Verdict::accepted);
  CHECK(admission.missing() == 0);
  CHECK(admission.duplicates() == 16);
  CHECK(dispatched.size() == 16 + 28 + 1);
  // A real gap after that is still counted.
  CHECK(send(146, 147, 0) == FrameAdmission::Verdict::accepted);
  CHECK(admission.missing() == 1);
}

TEST_CASE("reject counters count every frame by reason, even when the log line is suppressed", "[ingest]") {
  RejectLog rejects;
  for (int i = 0; i < 50; ++i) rejects.reject(wire::RejectReason::size_mismatch, "test");
  rejects.reject(wire::RejectReason::non_finite, "test");
  CHECK(rejects.count(wire::RejectReason::size_mismatch) == 50);
  CHECK(rejects.total() == 51);
  auto by_reason = rejects.by_reason();
  CHECK(by_reason.size() == 2);
  CHECK(by_reason["size_mismatch"] == 50);
  CHECK(by_reason["non_finite"] == 1);
}

TEST_CASE("sequence gaps are counted per stream, and the number of remembered streams is bounded", "[ingest]") {
  SequenceTracker tracker(4);
  bool forgot = false;
  CHECK(tracker.arrive(1, 0, forgot) == 0);
  CHECK(tracker.arrive(2, 10, forgot) == 0);  // interleaved streams keep their own sequences
  CHECK(tracker.arrive(1, 1, forgot) == 0);
  CHECK(tracker.arrive(2, 13, forgot) == 2);  // 11 and 12 missing
  CHECK(tracker.arrive(1, 1, forgot) == 0);   // a repeat is no gap
  // A sender inventing stream ids: memory stays at the capacity, and the stream that keeps sending
  // (1) is never the one forgotten, so its gaps are still counted.
  std::uint64_t sequence = 2;
  for (std::uint32_t id = 100; id < 100100; ++id) {
    tracker.arrive(id, 0, forgot);
    REQUIRE(tracker.size() <= 4);
    if (id % 3 == 0) REQUIRE(tracker.arrive(1, sequence++, forgot) == 0);
  }
  CHECK(tracker.arrive(1, sequence + 5, forgot) == 5);
}

TEST_CASE("with a timeline, admission notes when each accepted frame was received and queued; without, nothing",
          "[ingest][timeline]") {
  DaemonConfig config;
  RejectLog rejects;
  std::vector<FrameTimes*> dispatched;
  FrameAdmission admission(config, [&](InputFrame&& frame) { dispatched.push_back(frame.times); return true; },
                           rejects);
  RfFrame frame = ones_rf_frame();
  FrameMeta& meta = frame.meta;
  auto admit = [&](std::uint64_t sequence, std::int64_t received_steady_ns) {
    meta.sequence = sequence;
    const std::string bytes = wire::frame_header_from_meta(meta).SerializeAsString();
    return admission.admit(bytes.data(), bytes.size(), frame.payload, frame.payload_bytes, false, 0, nullptr,
                           received_steady_ns);
  };
  REQUIRE(admit(1, 0) == FrameAdmission::Verdict::accepted);
  REQUIRE(dispatched.size() == 1);
  CHECK(dispatched[0] == nullptr);

  HostTimeline timeline("unused.csv", 16);
  admission.set_timeline(&timeline);
  const std::int64_t received = host_steady_ns();
  REQUIRE(admit(2, received) == FrameAdmission::Verdict::accepted);
  REQUIRE(dispatched.size() == 2);
  REQUIRE(dispatched[1] == timeline.find(2));
  CHECK(dispatched[1]->at[static_cast<std::size_t>(HostPoint::received)].load() == received);
  CHECK(dispatched[1]->at[static_cast<std::size_t>(HostPoint::admitted)].load() >= received);
  // A refused frame gets no record.
  meta.payload.axes = {{"sample", 65, 1.0, "", 0.0}};  // no longer matches the payload's size
  CHECK(admit(3, host_steady_ns()) == FrameAdmission::Verdict::refused);
  CHECK(dispatched.size() == 2);
  CHECK(timeline.find(3) == nullptr);
}
