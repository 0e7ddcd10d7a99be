// sp_result_*: read-only accessors of one received result. A NULL result or an index out of
// range gives a neutral value (0, "" or NULL), never a crash.
#include <string>

#include "client/handles.h"
#include "client/status.h"
#include "wire/wire.h"

using sonopipe::client::guarded_value;

namespace {

const sonopipe::v1::Axis* axis_at(const sp_result* result, uint32_t index) {
  if (result == nullptr || index >= static_cast<uint32_t>(result->header.axes_size())) return nullptr;
  return &result->header.axes(static_cast<int>(index));
}

const sonopipe::v1::Vector* vector_named(const sp_result* result, const char* name) {
  if (result == nullptr || name == nullptr) return nullptr;
  for (const sonopipe::v1::Vector& vector : result->header.vectors())
    if (vector.name() == name) return &vector;
  return nullptr;
}

}  // namespace

extern "C" {

void sp_result_release(sp_result* result) { delete result; }

const char* sp_result_topic(const sp_result* result) { return result ? result->topic.c_str() : ""; }
const char* sp_result_pipeline(const sp_result* result) { return result ? result->header.pipeline().c_str() : ""; }
const char* sp_result_output(const sp_result* result) { return result ? result->header.output().c_str() : ""; }
uint32_t sp_result_stream_id(const sp_result* result) { return result ? result->header.stream_id() : 0; }
uint64_t sp_result_input_sequence(const sp_result* result) { return result ? result->header.input_sequence() : 0; }
int64_t sp_result_acquisition_time_ns(const sp_result* result) {
  return result ? result->header.acquisition_time_ns() : 0;
}

// The names are string literals (sdk/frame.cpp, sdk/tensor.cpp), so data() ends in a NUL.
const char* sp_result_input_kind(const sp_result* result) {
  return guarded_value(__func__, "", [&] {
    return result ? sonopipe::frame_kind_name(sonopipe::wire::frame_kind_from_proto(result->header.input_kind())).data()
                  : "";
  });
}

const char* sp_result_element_type(const sp_result* result) {
  return guarded_value(__func__, "", [&] {
    return result ? sonopipe::dtype_name(sonopipe::wire::dtype_from_proto(result->header.element_type())).data() : "";
  });
}

uint32_t sp_result_element_size(const sp_result* result) {
  return guarded_value(__func__, uint32_t{0}, [&] {
    return result ? static_cast<uint32_t>(
                        sonopipe::dtype_size(sonopipe::wire::dtype_from_proto(result->header.element_type())))
                  : uint32_t{0};
  });
}

const char* sp_result_unit(const sp_result* result) { return result ? result->header.unit().c_str() : ""; }
const char* sp_result_backend(const sp_result* result) { return result ? result->header.backend().c_str() : ""; }
int64_t sp_result_received_ns(const sp_result* result) { return result ? result->header.timing().received_ns() : 0; }
int64_t sp_result_published_ns(const sp_result* result) {
  return result ? result->header.timing().published_ns() : 0;
}

uint32_t sp_result_axis_count(const sp_result* result) {
  return result ? static_cast<uint32_t>(result->header.axes_size()) : 0;
}
const char* sp_result_axis_name(const sp_result* result, uint32_t index) {
  const auto* axis = axis_at(result, index);
  return axis ? axis->name().c_str() : "";
}
uint64_t sp_result_axis_size(const sp_result* result, uint32_t index) {
  const auto* axis = axis_at(result, index);
  return axis ? axis->size() : 0;
}
double sp_result_axis_spacing(const sp_result* result, uint32_t index) {
  const auto* axis = axis_at(result, index);
  return axis ? axis->spacing() : 0.0;
}
const char* sp_result_axis_unit(const sp_result* result, uint32_t index) {
  const auto* axis = axis_at(result, index);
  return axis ? axis->unit().c_str() : "";
}
double sp_result_axis_origin(const sp_result* result, uint32_t index) {
  const auto* axis = axis_at(result, index);
  return axis ? axis->origin() : 0.0;
}

const char* sp_result_attribute(const sp_result* result, const char* key) {
  if (result == nullptr || key == nullptr) return nullptr;
  const auto& attributes = result->header.attributes();
  auto found = attributes.find(key);
  return found == attributes.end() ? nullptr : found->second.c_str();
}

int64_t sp_result_vector_length(const sp_result* result, const char* name) {
  const auto* vector = vector_named(result, name);
  return vector ? vector->values_size() : -1;
}
const double* sp_result_vector_values(const sp_result* result, const char* name) {
  const auto* vector = vector_named(result, name);
  return vector ? vector->values().data() : nullptr;
}

const void* sp_result_data(const sp_result* result) { return result ? result->payload.data() : nullptr; }
uint64_t sp_result_bytes(const sp_result* result) { return result ? result->payload.size() : 0; }

}  // extern "C"
