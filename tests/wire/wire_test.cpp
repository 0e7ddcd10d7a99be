// The wire door: FrameHeader <-> FrameMeta round trips and every refusal reason of decode_frame.
#include "wire/wire.h"

#include "tests/support/test_support.h"

using namespace sonopipe;

namespace {

FrameMeta sample_meta() {
  FrameMeta meta;
  meta.stream_id = 7;
  meta.sequence = 123456789012ull;
  meta.acquisition_time_ns = 1700000000123456789ll;
  meta.kind = FrameKind::iq;
  meta.payload.dtype = DType::int16;
  meta.payload.axes = {{"location", 52, 1e-4, "m", -2.5e-3}, {"ensemble", 81, 1e-4, "s"}, {"sample", 493, 1 / 8.9e6, "s"},
                       {"iq", 2}};
  meta.sampling_frequency_hz = 400e6 / 45;
  meta.center_frequency_hz = 5.33e6;
  meta.demodulation_frequency_hz = 5.0e6;
  meta.speed_of_sound_m_per_s = 1540;
  meta.attributes = {{"probe", "VF7-3"}, {"push", "focused"}};
  meta.vectors = {{"f_dem_hz", {5e6, 4.9e6, 4.8e6}}};
  return meta;
}

wire::RejectReason reason_of(const std::string& header, std::size_t payload_bytes, std::size_t limit = 1 << 30) {
  try {
    wire::decode_frame(header.data(), header.size(), payload_bytes, limit);
  } catch (const wire::WireError& e) {
    return e.reason;
  }
  FAIL("decode_frame accepted the frame");
  return wire::RejectReason::malformed_message;
}

}  // namespace

TEST_CASE("a frame header survives encode and decode unchanged", "[wire]") {
  const FrameMeta meta = sample_meta();
  const std::string bytes = wire::frame_header_from_meta(meta).SerializeAsString();
  FrameMeta back = wire::decode_frame(bytes.data(), bytes.size(), meta.payload.byte_size(), 1 << 30);
  CHECK(back.stream_id == meta.stream_id);
  CHECK(back.sequence == meta.sequence);
  CHECK(back.acquisition_time_ns == meta.acquisition_time_ns);
  CHECK(back.kind == meta.kind);
  CHECK(back.payload == meta.payload);
  CHECK(back.sampling_frequency_hz == meta.sampling_frequency_hz);
  CHECK(back.center_frequency_hz == meta.center_frequency_hz);
  CHECK(back.demodulation_frequency_hz == meta.demodulation_frequency_hz);
  CHECK(back.speed_of_sound_m_per_s == meta.speed_of_sound_m_per_s);
  CHECK(back.attributes == meta.attributes);
  CHECK(back.vectors == meta.vectors);
}

TEST_CASE("every element type and frame kind maps both ways", "[wire]") {
  for (DType t : {DType::int16, DType::float16, DType::float32, DType::complex64, DType::float64, DType::uint8})
    CHECK(wire::dtype_from_proto(wire::dtype_to_proto(t)) == t);
  for (FrameKind k : {FrameKind::iq, FrameKind::rf, FrameKind::dce})
    CHECK(wire::frame_kind_from_proto(wire::frame_kind_to_proto(k)) == k);
}

TEST_CASE("decode_frame refuses each bad header with its reason", "[wire]") {
  const FrameMeta meta = sample_meta();
  const std::size_t bytes = meta.payload.byte_size();
  auto header = [&] { return wire::frame_header_from_meta(meta); };

  CHECK(reason_of(std::string("\x0a\xff", 2), bytes) == wire::RejectReason::unparsable_header);
  {
    v1::FrameHeader h = header();
    h.set_schema_version(2);
    CHECK(reason_of(h.SerializeAsString(), bytes) == wire::RejectReason::unknown_schema);
    h.set_schema_version(0);  // a writer that forgot the version
    CHECK(reason_of(h.SerializeAsString(), bytes) == wire::RejectReason::unknown_schema);
  }
  {
    v1::FrameHeader h = header();
    h.set_element_type(v1::ELEMENT_TYPE_UNSPECIFIED);
    CHECK(reason_of(h.SerializeAsString(), bytes) == wire::RejectReason::bad_header);
  }
  {
    v1::FrameHeader h = header();
    h.set_kind(v1::FRAME_KIND_UNSPECIFIED);
    CHECK(reason_of(h.SerializeAsString(), bytes) == wire::RejectReason::bad_header);
  }
  {
    v1::FrameHeader h = header();
    h.clear_axes();
    CHECK(reason_of(h.SerializeAsString(), 0) == wire::RejectReason::bad_header);
  }
  {
    v1::FrameHeader h = header();
    h.mutable_axes(1)->set_size(0);
    CHECK(reason_of(h.SerializeAsString(), 0) == wire::RejectReason::bad_header);
  }
  {
    v1::FrameHeader h = header();
    h.set_sampling_frequency_hz(-1);
    CHECK(reason_of(h.SerializeAsString(), bytes) == wire::RejectReason::bad_header);
  }
  {
    v1::FrameHeader h = header();
    h.mutable_vectors(0)->add_values(std::numeric_limits<double>::infinity());
    CHECK(reason_of(h.SerializeAsString(), bytes) == wire::RejectReason::bad_header);
  }
  CHECK(reason_of(header().SerializeAsString(), bytes - 2) == wire::RejectReason::size_mismatch);
  CHECK(reason_of(header().SerializeAsString(), bytes + 1) == wire::RejectReason::size_mismatch);
  CHECK(reason_of(header().SerializeAsString(), bytes, bytes - 1) == wire::RejectReason::too_large);
}

TEST_CASE("reject reasons have the names the status reports", "[wire]") {
  CHECK(wire::reject_reason_name(wire::RejectReason::size_mismatch) == "size_mismatch");
  CHECK(wire::reject_reason_name(wire::RejectReason::stage_error) == "stage_error");
  CHECK(wire::reject_reason_name(wire::RejectReason::no_pipeline) == "no_pipeline");
}
