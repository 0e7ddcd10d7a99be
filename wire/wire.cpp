#include "wire/wire.h"

#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "wire/line_limiter.h"
#include "wire/log_text.h"

namespace sonopipe::wire {

std::string_view reject_reason_name(RejectReason reason) {
  switch (reason) {
    case RejectReason::malformed_message: return "malformed_message";
    case RejectReason::unparsable_header: return "unparsable_header";
    case RejectReason::unknown_schema: return "unknown_schema";
    case RejectReason::bad_header: return "bad_header";
    case RejectReason::size_mismatch: return "size_mismatch";
    case RejectReason::too_large: return "too_large";
    case RejectReason::non_finite: return "non_finite";
    case RejectReason::no_pipeline: return "no_pipeline";
    case RejectReason::stage_error: return "stage_error";
    case RejectReason::bad_slot_descriptor: return "bad_slot_descriptor";
  }
  return "unknown";
}

DType dtype_from_proto(v1::ElementType type) {
  switch (type) {
    case v1::ELEMENT_TYPE_INT16: return DType::int16;
    case v1::ELEMENT_TYPE_FLOAT32: return DType::float32;
    case v1::ELEMENT_TYPE_COMPLEX64: return DType::complex64;
    case v1::ELEMENT_TYPE_FLOAT64: return DType::float64;
    case v1::ELEMENT_TYPE_FLOAT16: return DType::float16;
    case v1::ELEMENT_TYPE_UINT8: return DType::uint8;
    default:
      throw WireError(RejectReason::bad_header,
                      "element_type " + std::to_string(static_cast<int>(type)) + " is not supported");
  }
}

v1::ElementType dtype_to_proto(DType type) {
  switch (type) {
    case DType::int16: return v1::ELEMENT_TYPE_INT16;
    case DType::float32: return v1::ELEMENT_TYPE_FLOAT32;
    case DType::complex64: return v1::ELEMENT_TYPE_COMPLEX64;
    case DType::float64: return v1::ELEMENT_TYPE_FLOAT64;
    case DType::float16: return v1::ELEMENT_TYPE_FLOAT16;
    case DType::uint8: return v1::ELEMENT_TYPE_UINT8;
  }
  return v1::ELEMENT_TYPE_UNSPECIFIED;
}

FrameKind frame_kind_from_proto(v1::FrameKind kind) {
  switch (kind) {
    case v1::FRAME_KIND_IQ: return FrameKind::iq;
    case v1::FRAME_KIND_RF: return FrameKind::rf;
    case v1::FRAME_KIND_DCE: return FrameKind::dce;
    case v1::FRAME_KIND_CHANNEL_RF: return FrameKind::channel_rf;
    case v1::FRAME_KIND_CHANNEL_IQ: return FrameKind::channel_iq;
    default:
      throw WireError(RejectReason::bad_header,
                      "frame kind " + std::to_string(static_cast<int>(kind)) + " is not supported");
  }
}

v1::FrameKind frame_kind_to_proto(FrameKind kind) {
  switch (kind) {
    case FrameKind::iq: return v1::FRAME_KIND_IQ;
    case FrameKind::rf: return v1::FRAME_KIND_RF;
    case FrameKind::dce: return v1::FRAME_KIND_DCE;
    case FrameKind::channel_rf: return v1::FRAME_KIND_CHANNEL_RF;
    case FrameKind::channel_iq: return v1::FRAME_KIND_CHANNEL_IQ;
  }
  return v1::FRAME_KIND_UNSPECIFIED;
}

namespace {

Axis axis_from_proto(const v1::Axis& in) {
  return Axis{.name = in.name(), .size = static_cast<std::int64_t>(in.size()), .spacing = in.spacing(),
              .unit = in.unit(), .origin = in.origin()};
}

void axis_to_proto(const Axis& in, v1::Axis* out) {
  out->set_name(in.name);
  out->set_size(static_cast<std::uint64_t>(in.size));
  out->set_spacing(in.spacing);
  out->set_unit(in.unit);
  out->set_origin(in.origin);
}

bool finite_and_non_negative(double value) { return std::isfinite(value) && value >= 0.0; }

}  // namespace

FrameMeta frame_meta_from_header(const v1::FrameHeader& header) {
  if (header.schema_version() != kSchemaVersion)
    throw WireError(RejectReason::unknown_schema,
                    "schema_version " + std::to_string(header.schema_version()) + ", this daemon reads " +
                        std::to_string(kSchemaVersion));
  FrameMeta meta;
  meta.stream_id = header.stream_id();
  meta.sequence = header.sequence();
  meta.acquisition_time_ns = header.acquisition_time_ns();
  meta.kind = frame_kind_from_proto(header.kind());
  meta.payload.dtype = dtype_from_proto(header.element_type());
  if (header.axes_size() == 0) throw WireError(RejectReason::bad_header, "header has no axes");
  // Guard the element count against overflow: no real frame comes near 2^62 bytes.
  const double limit = static_cast<double>(std::numeric_limits<std::int64_t>::max()) / 16.0;
  double elements = 1.0;
  for (const v1::Axis& axis : header.axes()) {
    if (axis.size() == 0)
      throw WireError(RejectReason::bad_header, "axis '" + axis.name() + "' has size 0");
    if (!std::isfinite(axis.spacing()) || !std::isfinite(axis.origin()))
      throw WireError(RejectReason::bad_header, "axis '" + axis.name() + "' has a non-finite spacing or origin");
    elements *= static_cast<double>(axis.size());
    if (elements > limit) throw WireError(RejectReason::bad_header, "shape is absurdly large");
    meta.payload.axes.push_back(axis_from_proto(axis));
  }
  if (!finite_and_non_negative(header.sampling_frequency_hz()) ||
      !finite_and_non_negative(header.center_frequency_hz()) ||
      !std::isfinite(header.demodulation_frequency_hz()) ||
      !finite_and_non_negative(header.speed_of_sound_m_per_s()))
    throw WireError(RejectReason::bad_header, "a frequency or the speed of sound is negative or not finite");
  meta.sampling_frequency_hz = header.sampling_frequency_hz();
  meta.center_frequency_hz = header.center_frequency_hz();
  meta.demodulation_frequency_hz = header.demodulation_frequency_hz();
  if (header.speed_of_sound_m_per_s() > 0) meta.speed_of_sound_m_per_s = header.speed_of_sound_m_per_s();
  for (const auto& [key, value] : header.attributes()) meta.attributes[key] = value;
  for (const v1::Vector& vector : header.vectors()) {
    std::vector<double>& values = meta.vectors[vector.name()];
    values.assign(vector.values().begin(), vector.values().end());
    for (double v : values)
      if (!std::isfinite(v))
        throw WireError(RejectReason::bad_header, "vector '" + vector.name() + "' holds NaN or Inf");
  }
  return meta;
}

v1::FrameHeader frame_header_from_meta(const FrameMeta& meta) {
  v1::FrameHeader header;
  header.set_schema_version(kSchemaVersion);
  header.set_stream_id(meta.stream_id);
  header.set_sequence(meta.sequence);
  header.set_acquisition_time_ns(meta.acquisition_time_ns);
  header.set_kind(frame_kind_to_proto(meta.kind));
  header.set_element_type(dtype_to_proto(meta.payload.dtype));
  for (const Axis& axis : meta.payload.axes) axis_to_proto(axis, header.add_axes());
  header.set_sampling_frequency_hz(meta.sampling_frequency_hz);
  header.set_center_frequency_hz(meta.center_frequency_hz);
  header.set_demodulation_frequency_hz(meta.demodulation_frequency_hz);
  header.set_speed_of_sound_m_per_s(meta.speed_of_sound_m_per_s);
  for (const auto& [key, value] : meta.attributes) (*header.mutable_attributes())[key] = value;
  for (const auto& [name, values] : meta.vectors) {
    v1::Vector* vector = header.add_vectors();
    vector->set_name(name);
    for (double v : values) vector->add_values(v);
  }
  return header;
}

namespace {

void check_header_limits(const v1::FrameHeader& header) {
  auto refuse = [](const std::string& what) { throw WireError(RejectReason::bad_header, what); };
  auto check_name = [&](const std::string& name, const char* what) {
    if (name.size() > HeaderLimits::name_bytes)
      refuse(std::string(what) + " of " + std::to_string(name.size()) + " bytes exceeds " +
             std::to_string(HeaderLimits::name_bytes));
  };
  if (header.axes_size() > HeaderLimits::axes)
    refuse(std::to_string(header.axes_size()) + " axes, at most " + std::to_string(HeaderLimits::axes));
  if (header.vectors_size() > HeaderLimits::vectors)
    refuse(std::to_string(header.vectors_size()) + " vectors, at most " + std::to_string(HeaderLimits::vectors));
  if (header.attributes_size() > HeaderLimits::attributes)
    refuse(std::to_string(header.attributes_size()) + " attributes, at most " + std::to_string(HeaderLimits::attributes));
  for (const v1::Axis& axis : header.axes()) {
    check_name(axis.name(), "an axis name");
    check_name(axis.unit(), "an axis unit");
  }
  for (const v1::Vector& vector : header.vectors()) {
    check_name(vector.name(), "a vector name");
    if (vector.values_size() > HeaderLimits::vector_values)
      refuse("a vector of " + std::to_string(vector.values_size()) + " values, at most " +
             std::to_string(HeaderLimits::vector_values));
  }
  for (const auto& [key, value] : header.attributes()) {
    check_name(key, "an attribute name");
    if (value.size() > HeaderLimits::attribute_value_bytes)
      refuse("an attribute value of " + std::to_string(value.size()) + " bytes exceeds " +
             std::to_string(HeaderLimits::attribute_value_bytes));
  }
}

}  // namespace

FrameMeta decode_frame(const void* header_bytes, std::size_t header_size, std::size_t payload_bytes,
                       std::size_t max_frame_bytes, DeliveryTag* delivery) {
  if (payload_bytes > max_frame_bytes)
    throw WireError(RejectReason::too_large, "payload of " + std::to_string(payload_bytes) +
                                                 " bytes exceeds max_frame_bytes " +
                                                 std::to_string(max_frame_bytes));
  if (header_size > HeaderLimits::bytes)
    throw WireError(RejectReason::bad_header, "header of " + std::to_string(header_size) + " bytes exceeds the " +
                                                  std::to_string(HeaderLimits::bytes) + "-byte limit");
  v1::FrameHeader header;
  if (!header.ParseFromArray(header_bytes, static_cast<int>(header_size)))
    throw WireError(RejectReason::unparsable_header,
                    "header of " + std::to_string(header_size) + " bytes is not a FrameHeader");
  if (delivery) *delivery = {header.sender_id(), header.send_index(), header.resend_of()};
  check_header_limits(header);
  FrameMeta meta = frame_meta_from_header(header);
  const std::size_t expected = meta.payload.byte_size();
  if (expected != payload_bytes)
    throw WireError(RejectReason::size_mismatch,
                    "payload has " + std::to_string(payload_bytes) + " bytes, shape " +
                        meta.payload.shape_string() + " needs " + std::to_string(expected));
  return meta;
}

void route_protobuf_log() {
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel level, const char* file, int line,
                                     const std::string& message) {
    static std::mutex mutex;
    static LineLimiter lines;
    std::lock_guard lock(mutex);
    if (level < google::protobuf::LOGLEVEL_FATAL && !lines.allow(LineLimiter::Clock::now())) return;
    const std::uint64_t held_back = lines.take_held_back();
    spdlog::warn("protobuf: {} ({}:{}){}", log_safe(message), file, line,
                 held_back > 0 ? " (and " + std::to_string(held_back) + " more since the last line)" : "");
  });
}

TensorSpec tensor_spec_from_result(const v1::ResultHeader& header) {
  TensorSpec spec;
  spec.dtype = dtype_from_proto(header.element_type());
  for (const v1::Axis& axis : header.axes()) spec.axes.push_back(axis_from_proto(axis));
  spec.unit = header.unit();
  return spec;
}

}  // namespace sonopipe::wire
