// sp_frame_*: the frame description a sender turns into a FrameHeader. The setters check their
// arguments; the daemon's own ingest rules (wire/ decode_frame) are applied by sp_send.
#include <cmath>
#include <string>

#include "client/handles.h"
#include "client/status.h"

using sonopipe::client::ClientError;
using sonopipe::client::guarded;
using sonopipe::client::require;

namespace {

std::string text_or_empty(const char* text) { return text ? std::string(text) : std::string(); }

void require_finite(double value, const char* what) {
  if (!std::isfinite(value)) throw ClientError(SP_ERROR_ARGUMENT, std::string(what) + " is not finite");
}

void require_non_negative(double value, const char* what) {
  require_finite(value, what);
  if (value < 0) throw ClientError(SP_ERROR_ARGUMENT, std::string(what) + " is negative");
}

}  // namespace

extern "C" {

int sp_frame_create(sp_frame** frame) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    *frame = nullptr;
    *frame = new sp_frame();
  });
}

void sp_frame_destroy(sp_frame* frame) { delete frame; }

int sp_frame_set_kind(sp_frame* frame, const char* kind) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    require(kind, "kind");
    if (!sonopipe::parse_frame_kind(kind, frame->meta.kind))
      throw ClientError(SP_ERROR_ARGUMENT, "frame kind '" + std::string(kind) +
                                               "' is not one of iq, rf, dce, channel_rf, channel_iq");
  });
}

int sp_frame_set_element_type(sp_frame* frame, const char* element_type) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    require(element_type, "element_type");
    if (!sonopipe::parse_dtype(element_type, frame->meta.payload.dtype))
      throw ClientError(SP_ERROR_ARGUMENT, "element type '" + std::string(element_type) +
                                               "' is not one of int16, float16, float32, complex64, float64, uint8");
  });
}

int sp_frame_add_axis(sp_frame* frame, const char* name, uint64_t size, double spacing, const char* unit,
                      double origin) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    require(name, "name");
    if (size == 0 || size > static_cast<uint64_t>(INT64_MAX))
      throw ClientError(SP_ERROR_ARGUMENT, "axis '" + std::string(name) + "' has size " + std::to_string(size));
    require_finite(spacing, "spacing");
    require_finite(origin, "origin");
    frame->meta.payload.axes.push_back(sonopipe::Axis{.name = name, .size = static_cast<std::int64_t>(size),
                                                      .spacing = spacing, .unit = text_or_empty(unit),
                                                      .origin = origin});
  });
}

int sp_frame_clear_axes(sp_frame* frame) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    frame->meta.payload.axes.clear();
  });
}

int sp_frame_set_stream_id(sp_frame* frame, uint32_t stream_id) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    frame->meta.stream_id = stream_id;
  });
}

int sp_frame_set_sequence(sp_frame* frame, uint64_t sequence) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    frame->meta.sequence = sequence;
    frame->sequence_fixed = true;
  });
}

int sp_frame_set_auto_sequence(sp_frame* frame) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    frame->sequence_fixed = false;
  });
}

int sp_frame_set_acquisition_time_ns(sp_frame* frame, int64_t time_ns) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    frame->meta.acquisition_time_ns = time_ns;
  });
}

int sp_frame_set_sampling_frequency(sp_frame* frame, double hz) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    require_non_negative(hz, "sampling frequency");
    frame->meta.sampling_frequency_hz = hz;
  });
}

int sp_frame_set_center_frequency(sp_frame* frame, double hz) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    require_non_negative(hz, "centre frequency");
    frame->meta.center_frequency_hz = hz;
  });
}

int sp_frame_set_demodulation_frequency(sp_frame* frame, double hz) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    require_finite(hz, "demodulation frequency");  // the wire allows a negative shift
    frame->meta.demodulation_frequency_hz = hz;
  });
}

int sp_frame_set_speed_of_sound(sp_frame* frame, double m_per_s) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    require_non_negative(m_per_s, "speed of sound");
    frame->meta.speed_of_sound_m_per_s = m_per_s;
  });
}

int sp_frame_set_vector(sp_frame* frame, const char* name, const double* values, size_t count, const char* unit) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    require(name, "name");
    if (count > 0) require(values, "values");
    std::vector<double> copy(values, values + count);
    for (double value : copy) require_finite(value, ("a value of vector '" + std::string(name) + "'").c_str());
    frame->meta.vectors[name] = std::move(copy);
    frame->vector_units[name] = text_or_empty(unit);
  });
}

int sp_frame_set_attribute(sp_frame* frame, const char* key, const char* value) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    require(key, "key");
    require(value, "value");
    frame->meta.attributes[key] = value;
  });
}

int sp_frame_payload_bytes(const sp_frame* frame, uint64_t* bytes) {
  return guarded(__func__, [&] {
    require(frame, "frame");
    require(bytes, "bytes");
    *bytes = frame->meta.payload.byte_size();
  });
}

}  // extern "C"
