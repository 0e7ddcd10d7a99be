/* sonopipe_mex: the MEX gateway of libsonopipe-client for MATLAB and GNU Octave.
 *
 * One entry point, one sub-command per call (the MATLAB classes SonopipeSender and
 * SonopipeSubscriber are the documented API; docs/clients.md):
 *   h = sonopipe_mex('sender_open', endpoint, lossless, keys)   keys: [] or struct serverPublic,
 *                                                               clientPublic, clientSecret (Z85)
 *   sonopipe_mex('sender_set_timeout', h, timeoutMs)
 *   sonopipe_mex('send', h, data, description)                  one frame (SonopipeSender help)
 *   s = sonopipe_mex('sender_status', h)                        framesSent, endpoint, lossless
 *   sonopipe_mex('sender_close', h)                             delivers queued frames (<= 10 s)
 *   h = sonopipe_mex('subscriber_open', endpoint, prefix, keys)
 *   r = sonopipe_mex('next', h, timeoutMs, attributeKeys)       [] on timeout, else a struct
 *   s = sonopipe_mex('subscriber_status', h)                    skipped, endpoint, prefix
 *   sonopipe_mex('subscriber_close', h)
 *   v = sonopipe_mex('version')                                 sp_version(), e.g. '0.1.0'
 *
 * Handles are numbers (double) naming an entry of this gateway's own table, never raw pointers: a
 * stale or made-up handle is an error, not a crash. Every failure is an error with identifier
 * 'sonopipe:client' and the library's one-line message (sp_last_error()). Handles still open when
 * the MEX file is cleared or the interpreter exits are closed (mexAtExit).
 *
 * Array order: MATLAB and Octave store arrays column-major, so an array of size [n1 n2 ... nk] is,
 * in the wire's C order, the array of shape [nk ... n2 n1] with the same bytes. description.axes
 * lists the axes outermost first (C order): axis i of N gets size(data, N - i + 1). Results come
 * back as arrays of size [fliplr(axis sizes) 1] holding the received bytes unchanged.
 *
 * Built by CMake with Octave's `mkoctfile --mex` (tools/clients/matlab/CMakeLists.txt); for MATLAB:
 *   mex sonopipe_mex.c -I<prefix>/include/sonopipe -L<prefix>/lib/<multiarch> -lsonopipe-client
 * It uses the separate-complex API (MATLAB's default -R2017b; Octave's only). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mex.h"
#include "sonopipe_client.h"

#define MAX_HANDLES 256
#define MAX_TEXT 4096

enum handle_kind { HANDLE_FREE = 0, HANDLE_SENDER, HANDLE_SUBSCRIBER };

struct handle_entry {
  enum handle_kind kind;
  void* pointer;
  int lossless;
  char endpoint[512];
  char prefix[256];
};

static struct handle_entry handles[MAX_HANDLES];
static int exit_registered = 0;
/* The frame of a send whose description raised an error (errors leave the function at once): it
 * is destroyed by the next send or at exit, so nothing leaks. */
static sp_frame* pending_frame = NULL;

/* ------------------------------------------------------------------ errors and arguments */

static void fail(const char* what, int status) {
  mexErrMsgIdAndTxt("sonopipe:client", "%s returned %d: %s", what, status, sp_last_error());
}

static void check(int status, const char* what) {
  if (status != SP_OK) fail(what, status);
}

static void usage(const char* message) { mexErrMsgIdAndTxt("sonopipe:usage", "%s", message); }

/* A char array as a C string in `buffer`; errors name `what`. */
static void text_of(const mxArray* array, const char* what, char* buffer, size_t size) {
  if (array == NULL || !mxIsChar(array) || (mxGetM(array) > 1 && mxGetN(array) > 0)) {
    char message[256];
    snprintf(message, sizeof message, "%s must be a character row vector", what);
    usage(message);
  }
  if (mxGetString(array, buffer, (mwSize)size) != 0) {
    char message[256];
    snprintf(message, sizeof message, "%s is longer than %u characters", what, (unsigned)(size - 1));
    usage(message);
  }
}

static double number_of(const mxArray* array, const char* what) {
  if (array == NULL || (!mxIsNumeric(array) && !mxIsLogical(array)) || mxGetNumberOfElements(array) != 1 ||
      mxIsComplex(array)) {
    char message[256];
    snprintf(message, sizeof message, "%s must be one real number", what);
    usage(message);
  }
  return mxGetScalar(array);
}

/* An int64 scalar read exactly (a double would round nanosecond times). */
static int64_t int64_of(const mxArray* array, const char* what) {
  if (array != NULL && mxGetClassID(array) == mxINT64_CLASS && mxGetNumberOfElements(array) == 1)
    return *(const int64_t*)mxGetData(array);
  if (array != NULL && mxGetClassID(array) == mxUINT64_CLASS && mxGetNumberOfElements(array) == 1)
    return (int64_t)*(const uint64_t*)mxGetData(array);
  return (int64_t)number_of(array, what);
}

static uint64_t uint64_of(const mxArray* array, const char* what) {
  if (array != NULL && mxGetClassID(array) == mxUINT64_CLASS && mxGetNumberOfElements(array) == 1)
    return *(const uint64_t*)mxGetData(array);
  const double value = number_of(array, what);
  if (value < 0) {
    char message[256];
    snprintf(message, sizeof message, "%s must not be negative", what);
    usage(message);
  }
  return (uint64_t)value;
}

/* Field `name` of struct element `index`, or NULL when the struct has no such field or it is []. */
static const mxArray* field(const mxArray* structure, mwIndex index, const char* name) {
  const mxArray* value = mxGetField(structure, index, name);
  return (value == NULL || mxIsEmpty(value)) ? NULL : value;
}

/* ------------------------------------------------------------------ handle table */

static void close_entry(struct handle_entry* entry) {
  if (entry->kind == HANDLE_SENDER) sp_sender_close((sp_sender*)entry->pointer);
  if (entry->kind == HANDLE_SUBSCRIBER) sp_subscriber_close((sp_subscriber*)entry->pointer);
  memset(entry, 0, sizeof *entry);
}

/* A sender or subscriber that could not be set up: its handle goes, the error names the call. The
 * library's message is copied first, since closing the handle may replace it. */
static void fail_opening(struct handle_entry* entry, const char* what, int status) {
  char copy[512];
  snprintf(copy, sizeof copy, "%s", sp_last_error());
  close_entry(entry);
  mexErrMsgIdAndTxt("sonopipe:client", "%s returned %d: %s", what, status, copy);
}

static void close_all(void) {
  for (int i = 0; i < MAX_HANDLES; ++i) close_entry(&handles[i]);
  sp_frame_destroy(pending_frame);
  pending_frame = NULL;
}

static int new_entry(void) {
  if (!exit_registered) {
    mexAtExit(close_all);
    exit_registered = 1;
  }
  for (int i = 0; i < MAX_HANDLES; ++i)
    if (handles[i].kind == HANDLE_FREE) return i;
  usage("too many open senders and subscribers (256); close some");
  return -1;
}

static struct handle_entry* entry_of(const mxArray* array, enum handle_kind kind) {
  const double value = number_of(array, "the handle");
  const int index = (int)value - 1;
  if ((double)(index + 1) != value || index < 0 || index >= MAX_HANDLES || handles[index].kind != kind)
    usage(kind == HANDLE_SENDER ? "not an open sender handle" : "not an open subscriber handle");
  return &handles[index];
}

static void curve_keys(const mxArray* keys, char server[64], char client_public[64], char client_secret[64]) {
  if (!mxIsStruct(keys) || mxGetNumberOfElements(keys) != 1)
    usage("CURVE keys must be [] or a struct with serverPublic, clientPublic, clientSecret");
  const char* names[3] = {"serverPublic", "clientPublic", "clientSecret"};
  char* buffers[3] = {server, client_public, client_secret};
  for (int i = 0; i < 3; ++i) {
    char what[64];
    snprintf(what, sizeof what, "keys.%s", names[i]);
    const mxArray* value = mxGetField(keys, 0, names[i]);
    if (value == NULL) {
      char message[128];
      snprintf(message, sizeof message, "CURVE keys lack the field %s", names[i]);
      usage(message);
    }
    text_of(value, what, buffers[i], 64);
  }
}

/* ------------------------------------------------------------------ sending */

/* The element type of `data` and, for complex data, its values interleaved (I, Q) as float32 into a
 * buffer the caller frees with mxFree. */
/* The sonopipe element type of `data` (complex single or double travel as complex64). */
static const char* element_type_of(const mxArray* data) {
  const mxClassID type = mxGetClassID(data);
  if (mxIsComplex(data)) {
    if (type != mxSINGLE_CLASS && type != mxDOUBLE_CLASS)
      mexErrMsgIdAndTxt("sonopipe:payload", "complex %s has no sonopipe element type (complex single or double)",
                        mxGetClassName(data));
    return "complex64";
  }
  switch (type) {
    case mxINT16_CLASS: return "int16";
    case mxSINGLE_CLASS: return "float32";
    case mxDOUBLE_CLASS: return "float64";
    case mxUINT8_CLASS: return "uint8";
    default:
      mexErrMsgIdAndTxt("sonopipe:payload",
                        "class %s has no sonopipe element type (int16, single, double, uint8, complex)",
                        mxGetClassName(data));
  }
  return NULL;
}

/* Bytes of the payload of `data` as sent (complex: two float32 per element). */
static size_t payload_bytes_of(const mxArray* data) {
  const size_t count = mxGetNumberOfElements(data);
  return mxIsComplex(data) ? 2 * count * sizeof(float) : count * mxGetElementSize(data);
}

/* Writes the payload of `data` into `out` (payload_bytes_of bytes): complex arrays interleaved
 * (I, Q) as float32, everything else as it lies in MATLAB's memory. */
static void write_payload(const mxArray* data, void* out) {
  const size_t count = mxGetNumberOfElements(data);
  if (!mxIsComplex(data)) {
    if (count > 0) memcpy(out, mxGetData(data), count * mxGetElementSize(data));
    return;
  }
  float* iq = (float*)out;
  if (mxGetClassID(data) == mxSINGLE_CLASS) {
    const float* re = (const float*)mxGetData(data);
    const float* im = (const float*)mxGetImagData(data);
    for (size_t i = 0; i < count; ++i) iq[2 * i] = re[i], iq[2 * i + 1] = im[i];
  } else {
    const double* re = mxGetPr(data);
    const double* im = mxGetPi(data);
    for (size_t i = 0; i < count; ++i) iq[2 * i] = (float)re[i], iq[2 * i + 1] = (float)im[i];
  }
}

/* size(data, dimension) with MATLAB's rule: 1 beyond the array's dimensions (dimension is 1-based). */
static uint64_t size_along(const mxArray* data, size_t dimension) {
  const mwSize count = mxGetNumberOfDimensions(data);
  return dimension <= (size_t)count ? (uint64_t)mxGetDimensions(data)[dimension - 1] : 1;
}

static double double_field_or(const mxArray* description, const char* name, double fallback) {
  const mxArray* value = field(description, 0, name);
  return value == NULL ? fallback : number_of(value, name);
}

static void describe(sp_frame* frame, const mxArray* data, const char* element_type, const mxArray* description) {
  char text[MAX_TEXT], unit[MAX_TEXT];
  if (!mxIsStruct(description) || mxGetNumberOfElements(description) != 1)
    usage("the description must be a struct (fields kind, axes, ...; see SonopipeSender)");
  const mxArray* kind = field(description, 0, "kind");
  if (kind == NULL) usage("the description has no kind ('iq', 'rf', 'dce', 'channel_rf', 'channel_iq')");
  text_of(kind, "description.kind", text, sizeof text);
  check(sp_frame_set_kind(frame, text), "sp_frame_set_kind");
  check(sp_frame_set_element_type(frame, element_type), "sp_frame_set_element_type");

  const mxArray* axes = field(description, 0, "axes");
  if (axes == NULL || !mxIsStruct(axes)) usage("description.axes must be a struct array (name, spacing, unit, origin)");
  const size_t count = mxGetNumberOfElements(axes);
  for (size_t i = 0; i < count; ++i) {
    const mxArray* name = field(axes, i, "name");
    if (name == NULL) usage("every axis needs a name");
    text_of(name, "axes.name", text, sizeof text);
    const mxArray* unit_value = field(axes, i, "unit");
    unit[0] = '\0';
    if (unit_value != NULL) text_of(unit_value, "axes.unit", unit, sizeof unit);
    const mxArray* spacing = field(axes, i, "spacing");
    const mxArray* origin = field(axes, i, "origin");
    check(sp_frame_add_axis(frame, text, size_along(data, count - i), spacing ? number_of(spacing, "axes.spacing") : 0,
                            unit, origin ? number_of(origin, "axes.origin") : 0),
          "sp_frame_add_axis");
  }
  const mxArray* stream = field(description, 0, "streamId");
  check(sp_frame_set_stream_id(frame, stream ? (uint32_t)uint64_of(stream, "streamId") : 0), "sp_frame_set_stream_id");
  const mxArray* sequence = field(description, 0, "sequence");
  if (sequence != NULL) check(sp_frame_set_sequence(frame, uint64_of(sequence, "sequence")), "sp_frame_set_sequence");
  const mxArray* time = field(description, 0, "acquisitionTimeNs");
  if (time != NULL)
    check(sp_frame_set_acquisition_time_ns(frame, int64_of(time, "acquisitionTimeNs")), "sp_frame_set_acquisition_time_ns");
  check(sp_frame_set_sampling_frequency(frame, double_field_or(description, "samplingFrequencyHz", 0)),
        "sp_frame_set_sampling_frequency");
  check(sp_frame_set_center_frequency(frame, double_field_or(description, "centerFrequencyHz", 0)),
        "sp_frame_set_center_frequency");
  check(sp_frame_set_demodulation_frequency(frame, double_field_or(description, "demodulationFrequencyHz", 0)),
        "sp_frame_set_demodulation_frequency");
  check(sp_frame_set_speed_of_sound(frame, double_field_or(description, "speedOfSoundMPerS", 1540)),
        "sp_frame_set_speed_of_sound");

  const mxArray* vectors = field(description, 0, "vectors");
  if (vectors != NULL) {
    if (!mxIsStruct(vectors)) usage("description.vectors must be a struct array (name, values, unit)");
    for (size_t i = 0; i < mxGetNumberOfElements(vectors); ++i) {
      const mxArray* name = field(vectors, i, "name");
      if (name == NULL) usage("every vector needs a name");
      text_of(name, "vectors.name", text, sizeof text);
      const mxArray* unit_value = field(vectors, i, "unit");
      unit[0] = '\0';
      if (unit_value != NULL) text_of(unit_value, "vectors.unit", unit, sizeof unit);
      const mxArray* values = mxGetField(vectors, i, "values");
      const size_t length = values == NULL ? 0 : mxGetNumberOfElements(values);
      if (length > 0 && (!mxIsNumeric(values) || mxIsComplex(values))) usage("vectors.values must be real numbers");
      double* converted = (double*)mxMalloc(length * sizeof(double) + 1);
      for (size_t k = 0; k < length; ++k) {
        switch (mxGetClassID(values)) {
          case mxDOUBLE_CLASS: converted[k] = mxGetPr(values)[k]; break;
          case mxSINGLE_CLASS: converted[k] = ((const float*)mxGetData(values))[k]; break;
          case mxINT16_CLASS: converted[k] = ((const int16_t*)mxGetData(values))[k]; break;
          case mxINT32_CLASS: converted[k] = ((const int32_t*)mxGetData(values))[k]; break;
          case mxUINT8_CLASS: converted[k] = ((const uint8_t*)mxGetData(values))[k]; break;
          default: mxFree(converted); usage("vectors.values must be double, single, int16, int32 or uint8");
        }
      }
      const int status = sp_frame_set_vector(frame, text, converted, length, unit);
      mxFree(converted);
      check(status, "sp_frame_set_vector");
    }
  }
  const mxArray* attributes = field(description, 0, "attributes");
  if (attributes != NULL) {
    if (!mxIsStruct(attributes)) usage("description.attributes must be a struct array (key, value)");
    for (size_t i = 0; i < mxGetNumberOfElements(attributes); ++i) {
      text_of(mxGetField(attributes, i, "key"), "attributes.key", text, sizeof text);
      const mxArray* value = mxGetField(attributes, i, "value");
      unit[0] = '\0';
      if (value != NULL && !mxIsEmpty(value)) text_of(value, "attributes.value", unit, sizeof unit);
      check(sp_frame_set_attribute(frame, text, unit), "sp_frame_set_attribute");
    }
  }
}

static int is_shm(const char* endpoint) { return strncmp(endpoint, "shm://", 6) == 0; }

static void send_frame(struct handle_entry* entry, const mxArray* data, const mxArray* description) {
  if (!mxIsNumeric(data)) usage("data must be a numeric array");
  sp_frame_destroy(pending_frame);
  pending_frame = NULL;
  const char* element_type = element_type_of(data);
  check(sp_frame_create(&pending_frame), "sp_frame_create");
  describe(pending_frame, data, element_type, description);
  sp_sender* sender = (sp_sender*)entry->pointer;
  int status;
  const char* what;
  if (is_shm(entry->endpoint)) {
    /* shm://: straight from MATLAB's array into a slot of the daemon's pool (one copy, no buffer
     * between); the daemon and its GPU copy read it there. */
    void* slot = NULL;
    status = sp_frame_buffer(sender, pending_frame, &slot);
    what = "sp_frame_buffer";
    if (status == SP_OK) {
      write_payload(data, slot);
      status = sp_send_buffer(sender, pending_frame);
      what = "sp_send_buffer";
    }
  } else {
    /* The interleaved copy is mxMalloc'd: MATLAB and Octave free it themselves when an error leaves. */
    const size_t bytes = payload_bytes_of(data);
    void* interleaved = mxIsComplex(data) ? mxMalloc(bytes + 1) : NULL;
    if (interleaved != NULL) write_payload(data, interleaved);
    status = sp_send(sender, pending_frame, interleaved != NULL ? interleaved : mxGetData(data), bytes);
    what = "sp_send";
    mxFree(interleaved);
  }
  sp_frame_destroy(pending_frame);
  pending_frame = NULL;
  check(status, what);
}

/* ------------------------------------------------------------------ receiving */

#define MAX_NAMES 64

struct names {
  size_t count;
  char names[MAX_NAMES][64];
};

/* A cell array of names that can be struct field names (letters, digits, '_', a letter first). */
static void names_of(const mxArray* cell, const char* what, struct names* out) {
  char message[256];
  out->count = 0;
  if (cell == NULL || mxIsEmpty(cell)) return;
  if (!mxIsCell(cell) || mxGetNumberOfElements(cell) > MAX_NAMES) {
    snprintf(message, sizeof message, "%s must be a cell array of at most %d names", what, MAX_NAMES);
    usage(message);
  }
  for (size_t i = 0; i < mxGetNumberOfElements(cell); ++i) {
    char* name = out->names[i];
    text_of(mxGetCell(cell, i), what, name, sizeof out->names[i]);
    int valid = (name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z');
    for (const char* c = name; *c != '\0'; ++c)
      valid = valid && ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_');
    if (!valid) {
      snprintf(message, sizeof message, "%s: '%s' is not a valid field name", what, name);
      usage(message);
    }
    out->count = i + 1;
  }
}

static int known_element_type(const char* type) {
  static const char* known[] = {"int16", "float16", "float32", "complex64", "float64", "uint8"};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; ++i)
    if (strcmp(type, known[i]) == 0) return 1;
  return 0;
}

static mxArray* string_array(const char* text) { return mxCreateString(text != NULL ? text : ""); }

static mxArray* scalar_of_class(mxClassID type, const void* value, size_t bytes) {
  mxArray* array = mxCreateNumericMatrix(1, 1, type, mxREAL);
  memcpy(mxGetData(array), value, bytes);
  return array;
}

/* The payload as an array of size [fliplr(axis sizes) 1]; raises no error (next_result checked the
 * axis count and element type, the library the payload size), so the result is always released. */
static mxArray* result_data(const sp_result* result) {
  const char* element_type = sp_result_element_type(result);
  const uint32_t axis_count = sp_result_axis_count(result);
  mwSize dims[34];
  mwSize dim_count = axis_count < 2 ? 2 : axis_count;
  for (mwSize i = 0; i < dim_count; ++i) dims[i] = 1;
  for (uint32_t i = 0; i < axis_count; ++i) dims[i] = (mwSize)sp_result_axis_size(result, axis_count - 1 - i);
  const unsigned char* bytes = (const unsigned char*)sp_result_data(result);
  const uint64_t byte_count = sp_result_bytes(result);
  mxClassID type;
  if (strcmp(element_type, "int16") == 0) type = mxINT16_CLASS;
  else if (strcmp(element_type, "float16") == 0) type = mxUINT16_CLASS;  /* the bits; no half type */
  else if (strcmp(element_type, "float32") == 0 || strcmp(element_type, "complex64") == 0) type = mxSINGLE_CLASS;
  else if (strcmp(element_type, "float64") == 0) type = mxDOUBLE_CLASS;
  else if (strcmp(element_type, "uint8") == 0) type = mxUINT8_CLASS;
  else type = mxUINT8_CLASS;  /* not reached: next_result refuses unknown element types first */
  if (strcmp(element_type, "complex64") == 0) {
    mxArray* array = mxCreateNumericArray(dim_count, dims, mxSINGLE_CLASS, mxCOMPLEX);
    float* re = (float*)mxGetData(array);
    float* im = (float*)mxGetImagData(array);
    const size_t count = mxGetNumberOfElements(array);
    /* The library skips results whose payload disagrees with their axes: sizes match here. */
    for (size_t i = 0; i < count && 8 * i + 8 <= byte_count; ++i) {
      memcpy(&re[i], bytes + 8 * i, 4);
      memcpy(&im[i], bytes + 8 * i + 4, 4);
    }
    return array;
  }
  mxArray* array = mxCreateNumericArray(dim_count, dims, type, mxREAL);
  const size_t capacity = mxGetNumberOfElements(array) * mxGetElementSize(array);
  if (byte_count > 0) memcpy(mxGetData(array), bytes, byte_count < capacity ? byte_count : capacity);
  return array;
}

static mxArray* result_struct(const sp_result* result, const struct names* attribute_keys) {
  static const char* fields[] = {"topic",    "pipeline",     "output",  "streamId",   "inputSequence",
                                 "acquisitionTimeNs", "inputKind", "elementType", "unit", "backend",
                                 "receivedNs", "publishedNs", "axes", "attributes", "data"};
  const int field_count = (int)(sizeof fields / sizeof fields[0]);
  mxArray* out = mxCreateStructMatrix(1, 1, field_count, fields);
  mxSetField(out, 0, "topic", string_array(sp_result_topic(result)));
  mxSetField(out, 0, "pipeline", string_array(sp_result_pipeline(result)));
  mxSetField(out, 0, "output", string_array(sp_result_output(result)));
  const uint32_t stream = sp_result_stream_id(result);
  mxSetField(out, 0, "streamId", scalar_of_class(mxUINT32_CLASS, &stream, sizeof stream));
  const uint64_t sequence = sp_result_input_sequence(result);
  mxSetField(out, 0, "inputSequence", scalar_of_class(mxUINT64_CLASS, &sequence, sizeof sequence));
  const int64_t time = sp_result_acquisition_time_ns(result);
  mxSetField(out, 0, "acquisitionTimeNs", scalar_of_class(mxINT64_CLASS, &time, sizeof time));
  mxSetField(out, 0, "inputKind", string_array(sp_result_input_kind(result)));
  mxSetField(out, 0, "elementType", string_array(sp_result_element_type(result)));
  mxSetField(out, 0, "unit", string_array(sp_result_unit(result)));
  mxSetField(out, 0, "backend", string_array(sp_result_backend(result)));
  const int64_t received = sp_result_received_ns(result), published = sp_result_published_ns(result);
  mxSetField(out, 0, "receivedNs", scalar_of_class(mxINT64_CLASS, &received, sizeof received));
  mxSetField(out, 0, "publishedNs", scalar_of_class(mxINT64_CLASS, &published, sizeof published));

  static const char* axis_fields[] = {"name", "size", "spacing", "unit", "origin"};
  const uint32_t axis_count = sp_result_axis_count(result);
  mxArray* axes = mxCreateStructMatrix(1, axis_count, 5, axis_fields);
  for (uint32_t i = 0; i < axis_count; ++i) {
    mxSetField(axes, i, "name", string_array(sp_result_axis_name(result, i)));
    mxSetField(axes, i, "size", mxCreateDoubleScalar((double)sp_result_axis_size(result, i)));
    mxSetField(axes, i, "spacing", mxCreateDoubleScalar(sp_result_axis_spacing(result, i)));
    mxSetField(axes, i, "unit", string_array(sp_result_axis_unit(result, i)));
    mxSetField(axes, i, "origin", mxCreateDoubleScalar(sp_result_axis_origin(result, i)));
  }
  mxSetField(out, 0, "axes", axes);

  /* attributes: struct key -> value ('' when the frame had none of that key). */
  mxArray* attributes = mxCreateStructMatrix(1, 1, 0, NULL);
  for (size_t i = 0; i < attribute_keys->count; ++i) {
    const char* key = attribute_keys->names[i];
    mxAddField(attributes, key);
    mxSetField(attributes, 0, key, string_array(sp_result_attribute(result, key)));
  }
  mxSetField(out, 0, "attributes", attributes);
  mxSetField(out, 0, "data", result_data(result));
  return out;
}

/* sp_result_vector_values for the names the caller asks for: struct name -> column of doubles. */
static mxArray* result_vectors(const sp_result* result, const struct names* names) {
  mxArray* vectors = mxCreateStructMatrix(1, 1, 0, NULL);
  for (size_t i = 0; i < names->count; ++i) {
    const char* name = names->names[i];
    mxAddField(vectors, name);
    const int64_t length = sp_result_vector_length(result, name);
    mxArray* values = mxCreateDoubleMatrix(length < 0 ? 0 : (mwSize)length, 1, mxREAL);
    if (length > 0) memcpy(mxGetPr(values), sp_result_vector_values(result, name), (size_t)length * sizeof(double));
    mxSetField(vectors, 0, name, values);
  }
  return vectors;
}

static mxArray* next_result(struct handle_entry* entry, int timeout_ms, const mxArray* attribute_keys,
                            const mxArray* vector_names) {
  /* Every argument is checked before a result exists, so no error can leave one unreleased. */
  struct names keys, vectors_wanted;
  names_of(attribute_keys, "attribute keys", &keys);
  names_of(vector_names, "vector names", &vectors_wanted);
  sp_result* result = NULL;
  const int status = sp_subscriber_next((sp_subscriber*)entry->pointer, timeout_ms, &result);
  if (status == SP_ERROR_TIMEOUT) return mxCreateDoubleMatrix(0, 0, mxREAL);
  check(status, "sp_subscriber_next");
  if (sp_result_axis_count(result) > 32 || !known_element_type(sp_result_element_type(result))) {
    char copy[128];
    snprintf(copy, sizeof copy, "%s", sp_result_element_type(result));
    const uint32_t axes = sp_result_axis_count(result);
    sp_result_release(result);
    mexErrMsgIdAndTxt("sonopipe:client", "sp_subscriber_next: a result with %u axes of element type '%s'", axes, copy);
  }
  mxArray* out = result_struct(result, &keys);
  mxArray* vectors = result_vectors(result, &vectors_wanted);
  sp_result_release(result);
  mxAddField(out, "vectors");
  mxSetField(out, 0, "vectors", vectors);
  return out;
}

/* ------------------------------------------------------------------ entry point */

void mexFunction(int nlhs, mxArray* plhs[], int nrhs, const mxArray* prhs[]) {
  char command[64], endpoint[512], prefix[256];
  (void)nlhs;
  if (nrhs < 1) usage("the first argument is a sub-command ('sender_open', 'send', 'next', ..., 'version')");
  text_of(prhs[0], "the sub-command", command, sizeof command);

  if (strcmp(command, "version") == 0) {
    plhs[0] = mxCreateString(sp_version());
  } else if (strcmp(command, "sender_open") == 0) {
    if (nrhs < 2) usage("sender_open needs an endpoint");
    text_of(prhs[1], "the endpoint", endpoint, sizeof endpoint);
    const int lossless = nrhs >= 3 && !mxIsEmpty(prhs[2]) ? number_of(prhs[2], "lossless") != 0 : 1;
    /* Every argument is read before anything is opened, so an argument error leaves nothing open. */
    const int keyed = nrhs >= 4 && !mxIsEmpty(prhs[3]);
    char server[64], client_public[64], client_secret[64];
    if (keyed) curve_keys(prhs[3], server, client_public, client_secret);
    const int index = new_entry();
    sp_sender* sender = NULL;
    check(sp_sender_create(lossless, &sender), "sp_sender_create");
    struct handle_entry* entry = &handles[index];
    entry->kind = HANDLE_SENDER;
    entry->pointer = sender;
    entry->lossless = lossless;
    snprintf(entry->endpoint, sizeof entry->endpoint, "%s", endpoint);
    int status = SP_OK;
    const char* what = "sp_sender_connect";
    if (keyed) {
      status = sp_sender_set_curve(sender, server, client_public, client_secret);
      what = "sp_sender_set_curve";
    }
    if (status == SP_OK) status = sp_sender_connect(sender, endpoint);
    if (status != SP_OK) fail_opening(entry, what, status);
    plhs[0] = mxCreateDoubleScalar(index + 1);
  } else if (strcmp(command, "sender_set_timeout") == 0) {
    if (nrhs < 3) usage("sender_set_timeout needs a handle and milliseconds");
    struct handle_entry* entry = entry_of(prhs[1], HANDLE_SENDER);
    check(sp_sender_set_send_timeout((sp_sender*)entry->pointer, (int)number_of(prhs[2], "the timeout")),
          "sp_sender_set_send_timeout");
  } else if (strcmp(command, "send") == 0) {
    if (nrhs < 4) usage("send needs a handle, the data and its description");
    send_frame(entry_of(prhs[1], HANDLE_SENDER), prhs[2], prhs[3]);
  } else if (strcmp(command, "sender_status") == 0) {
    if (nrhs < 2) usage("sender_status needs a handle");
    struct handle_entry* entry = entry_of(prhs[1], HANDLE_SENDER);
    static const char* fields[] = {"framesSent", "endpoint", "lossless", "delivered", "undelivered"};
    mxArray* out = mxCreateStructMatrix(1, 1, 5, fields);
    const uint64_t sent = sp_sender_frames_sent((const sp_sender*)entry->pointer);
    mxSetField(out, 0, "framesSent", scalar_of_class(mxUINT64_CLASS, &sent, sizeof sent));
    /* What the daemon acknowledged (shm://); [] where the transport does not say. */
    uint64_t delivered = 0, undelivered = 0;
    if (sp_sender_delivery((const sp_sender*)entry->pointer, &delivered, &undelivered) == SP_OK) {
      mxSetField(out, 0, "delivered", scalar_of_class(mxUINT64_CLASS, &delivered, sizeof delivered));
      mxSetField(out, 0, "undelivered", scalar_of_class(mxUINT64_CLASS, &undelivered, sizeof undelivered));
    } else {
      mxSetField(out, 0, "delivered", mxCreateDoubleMatrix(0, 0, mxREAL));
      mxSetField(out, 0, "undelivered", mxCreateDoubleMatrix(0, 0, mxREAL));
    }
    mxSetField(out, 0, "endpoint", mxCreateString(entry->endpoint));
    mxSetField(out, 0, "lossless", mxCreateLogicalScalar(entry->lossless != 0));
    plhs[0] = out;
  } else if (strcmp(command, "sender_close") == 0) {
    if (nrhs < 2) usage("sender_close needs a handle");
    close_entry(entry_of(prhs[1], HANDLE_SENDER));
  } else if (strcmp(command, "subscriber_open") == 0) {
    if (nrhs < 2) usage("subscriber_open needs an endpoint");
    text_of(prhs[1], "the endpoint", endpoint, sizeof endpoint);
    prefix[0] = '\0';
    if (nrhs >= 3 && !mxIsEmpty(prhs[2])) text_of(prhs[2], "the topic prefix", prefix, sizeof prefix);
    const int keyed = nrhs >= 4 && !mxIsEmpty(prhs[3]);
    char server[64], client_public[64], client_secret[64];
    if (keyed) curve_keys(prhs[3], server, client_public, client_secret);
    const int index = new_entry();
    sp_subscriber* subscriber = NULL;
    check(sp_subscriber_create(&subscriber), "sp_subscriber_create");
    struct handle_entry* entry = &handles[index];
    entry->kind = HANDLE_SUBSCRIBER;
    entry->pointer = subscriber;
    snprintf(entry->endpoint, sizeof entry->endpoint, "%s", endpoint);
    snprintf(entry->prefix, sizeof entry->prefix, "%s", prefix);
    int status = SP_OK;
    const char* what = "sp_subscriber_connect";
    if (keyed) {
      status = sp_subscriber_set_curve(subscriber, server, client_public, client_secret);
      what = "sp_subscriber_set_curve";
    }
    if (status == SP_OK) status = sp_subscriber_connect(subscriber, endpoint, prefix);
    if (status != SP_OK) fail_opening(entry, what, status);
    plhs[0] = mxCreateDoubleScalar(index + 1);
  } else if (strcmp(command, "next") == 0) {
    if (nrhs < 3) usage("next needs a handle and a timeout in milliseconds");
    struct handle_entry* entry = entry_of(prhs[1], HANDLE_SUBSCRIBER);
    plhs[0] = next_result(entry, (int)number_of(prhs[2], "the timeout"), nrhs >= 4 ? prhs[3] : NULL,
                          nrhs >= 5 ? prhs[4] : NULL);
  } else if (strcmp(command, "subscriber_status") == 0) {
    if (nrhs < 2) usage("subscriber_status needs a handle");
    struct handle_entry* entry = entry_of(prhs[1], HANDLE_SUBSCRIBER);
    static const char* fields[] = {"skipped", "endpoint", "prefix"};
    mxArray* out = mxCreateStructMatrix(1, 1, 3, fields);
    const uint64_t skipped = sp_subscriber_skipped((const sp_subscriber*)entry->pointer);
    mxSetField(out, 0, "skipped", scalar_of_class(mxUINT64_CLASS, &skipped, sizeof skipped));
    mxSetField(out, 0, "endpoint", mxCreateString(entry->endpoint));
    mxSetField(out, 0, "prefix", mxCreateString(entry->prefix));
    plhs[0] = out;
  } else if (strcmp(command, "subscriber_close") == 0) {
    if (nrhs < 2) usage("subscriber_close needs a handle");
    close_entry(entry_of(prhs[1], HANDLE_SUBSCRIBER));
  } else {
    char message[128];
    snprintf(message, sizeof message, "unknown sub-command '%s'", command);
    usage(message);
  }
}
