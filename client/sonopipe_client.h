/* libsonopipe-client: send frames to sonopiped and read its results from any language that can
 * call C (MATLAB loadlibrary, LabVIEW, C# P/Invoke, Python ctypes, vendor C++ SDKs).
 *
 * The ABI is plain C: opaque handles, int status codes, C strings and raw buffers. No C++ type or
 * exception crosses it; every entry point catches everything and reports it as a status code with
 * a one-line message in sp_last_error().
 *
 * Status codes: SP_OK (0) or a negative SP_ERROR_*. Functions that return a value instead (the
 * sp_result_* accessors) return a neutral value (0, NULL or "") for a NULL handle.
 *
 * Thread safety:
 *   - sp_sender and sp_subscriber are internally locked: several threads may call sp_send on one
 *     sender (frames go out one after another), or sp_subscriber_next on one subscriber.
 *   - An sp_frame is NOT locked: one thread fills and sends it at a time (a frame per thread, or
 *     the caller's own lock). Sending does not change the frame; it may be sent again.
 *   - An sp_result is immutable once returned and may be read from any thread; release it once.
 *   - sp_last_error() is per thread: it describes the most recent call of this thread that failed,
 *     and is "" after a call that succeeded.
 *   - Closing or destroying a handle while another thread uses it is the caller's error.
 *
 * Wire format: proto/sonopipe/v1 (frame.proto, result.proto). Arrays are C-ordered: the last axis
 * added varies fastest. Payload bytes are little-endian; complex64 is interleaved float32 (I, Q).
 */
#ifndef SONOPIPE_CLIENT_H
#define SONOPIPE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#if defined(SONOPIPE_CLIENT_BUILDING)
#define SP_API __attribute__((visibility("default")))
#else
#define SP_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. */
#define SP_OK 0
#define SP_ERROR_ARGUMENT (-1)      /* NULL where a value is needed, an unknown name, a bad value */
#define SP_ERROR_SIZE_MISMATCH (-2) /* payload bytes != product of the axis sizes x element size */
#define SP_ERROR_BAD_HEADER (-3)    /* the frame description breaks the daemon's ingest rules */
#define SP_ERROR_TIMEOUT (-4)       /* nothing sent / received within the timeout */
#define SP_ERROR_SOCKET (-5)        /* ZeroMQ refused (bad endpoint, CURVE unsupported, ...) */
#define SP_ERROR_STATE (-6)         /* a call out of order (e.g. CURVE keys after connect) */
#define SP_ERROR_MEMORY (-7)        /* out of memory */
#define SP_ERROR_INTERNAL (-8)      /* anything else; sp_last_error() says what */

/* Defaults (milliseconds). */
#define SP_DEFAULT_SEND_TIMEOUT_MS 10000  /* a lossless sp_send waits this long for the daemon */
#define SP_DEFAULT_CLOSE_LINGER_MS 10000  /* sp_sender_close delivers queued frames this long */
#define SP_SEND_HIGH_WATER_MARK 16        /* frames queued in the sender before sp_send waits */

typedef struct sp_sender sp_sender;
typedef struct sp_frame sp_frame;
typedef struct sp_subscriber sp_subscriber;
typedef struct sp_result sp_result;

/* The message of the most recent failed call on this thread ("" if it succeeded). Never NULL;
 * valid until this thread's next call into the library. */
SP_API const char* sp_last_error(void);
/* "0.1.0" (the sonopipe version) and the wire schema version written in headers. */
SP_API const char* sp_version(void);
SP_API uint32_t sp_schema_version(void);

/* ---------------------------------------------------------------- sender
 * lossless != 0: PUSH, for the daemon's default `ingest: {pattern: pull}`. A frame is queued only
 *   while the daemon is connected (ZMQ_IMMEDIATE); when the daemon is absent or its queue is full,
 *   sp_send waits up to the send timeout and then returns SP_ERROR_TIMEOUT with nothing sent.
 * lossless == 0: PUB, for `ingest: {pattern: sub}` (live data): sp_send never waits; a frame that
 *   no subscriber can take is dropped by ZeroMQ (the daemon counts the gap in sequence numbers).
 *
 * shm://<name> (same host, docs/shared-memory.md): the daemon's shared pool (its ingest endpoint);
 *   the pool's mode (set by the daemon's ingest pattern) decides, not `lossless`. A lossless pool
 *   makes sp_send wait for a free slot up to the send timeout (SP_ERROR_TIMEOUT, nothing sent);
 *   sp_sender_delivery tells how many frames the daemon took (the acknowledgement), and
 *   sp_sender_close waits for them up to SP_DEFAULT_CLOSE_LINGER_MS and returns SP_ERROR_TIMEOUT
 *   naming the frames the daemon did not take. sp_frame_buffer writes the payload in place.
 *   A missing pool is SP_ERROR_SOCKET with a message naming the fix.
 *
 * sp_sender_open = sp_sender_create + sp_sender_connect. Use create/connect to set CURVE keys or the
 * send timeout first. */
SP_API int sp_sender_open(const char* endpoint, int lossless, sp_sender** sender);
SP_API int sp_sender_create(int lossless, sp_sender** sender);
/* CURVE encryption (ZeroMQ's ZMQ_CURVE_*): 40-character Z85 keys, as `curve_keygen` prints them.
 * Before sp_sender_connect; the daemon's ingest must be a CURVE server with that public key. */
SP_API int sp_sender_set_curve(sp_sender* sender, const char* server_public_key, const char* client_public_key,
                               const char* client_secret_key);
/* -1 waits for ever; 0 never waits. Any time. */
SP_API int sp_sender_set_send_timeout(sp_sender* sender, int timeout_ms);
SP_API int sp_sender_connect(sp_sender* sender, const char* endpoint);
/* The sequence number the next auto-numbered frame of `stream_id` will carry (0 at first). */
SP_API int sp_sender_next_sequence(const sp_sender* sender, uint32_t stream_id, uint64_t* sequence);
/* Frames sent so far. */
SP_API uint64_t sp_sender_frames_sent(const sp_sender* sender);
/* Delivers what is queued for up to SP_DEFAULT_CLOSE_LINGER_MS, then frees. NULL is ignored. */
SP_API int sp_sender_close(sp_sender* sender);

/* Checks `frame` against `bytes` (and the daemon's ingest rules), numbers it, stamps it, and sends
 * [FrameHeader][payload]. The payload is copied: `data` may be reused when this returns. Nothing is
 * sent when it fails. */
SP_API int sp_send(sp_sender* sender, const sp_frame* frame, const void* data, size_t bytes);

/* Zero copy: *data = where to write the payload of `frame` (sp_frame_payload_bytes bytes) — on
 * shm://, a slot of the daemon's shared pool, written once and read there by the daemon and the GPU
 * copy; on ZeroMQ, a buffer of the sender. Then sp_send_buffer(sender, frame) numbers, checks and
 * sends it (the frame's description may not change size in between). One buffer at a time per
 * sender; on shm:// it waits for a free slot like sp_send. */
SP_API int sp_frame_buffer(sp_sender* sender, const sp_frame* frame, void** data);
SP_API int sp_send_buffer(sp_sender* sender, const sp_frame* frame);
/* Delivery acknowledgement over ZeroMQ (docs/wire-protocol.md, "Acknowledgement"): the daemon's
 * ingest.ack_endpoint, set before sp_sender_connect (lossless senders). Frames are numbered and
 * the daemon's acknowledgements read; sp_sender_delivery and sp_sender_undelivered say what it took,
 * and sp_sender_close waits for them up to SP_DEFAULT_CLOSE_LINGER_MS (SP_ERROR_TIMEOUT naming the
 * count of frames not delivered, e.g. when the daemon died with them in ZeroMQ's queues). */
SP_API int sp_sender_set_ack_endpoint(sp_sender* sender, const char* ack_endpoint);
/* shm://, or ZeroMQ with an ack endpoint: frames the daemon took (delivered) and frames sent that
 * it has not acknowledged (undelivered); over ZeroMQ, frames it read and refused count as neither.
 * sp_sender_wait_delivered first waits up to timeout_ms (-1: for ever) for every frame sent to be
 * taken. */
SP_API int sp_sender_delivery(const sp_sender* sender, uint64_t* delivered, uint64_t* undelivered);
SP_API int sp_sender_wait_delivered(sp_sender* sender, int timeout_ms, uint64_t* delivered, uint64_t* undelivered);
/* ZeroMQ with an ack endpoint: the stream id and sequence of up to `capacity` frames not
 * acknowledged, in send order; *count = how many there are in all (may exceed capacity). */
SP_API int sp_sender_undelivered(const sp_sender* sender, uint32_t* stream_ids, uint64_t* sequences, size_t capacity,
                                 size_t* count);

/* ---------------------------------------------------------------- frame description
 * A new frame: kind "iq", element type "float32", no axes, stream 0, automatic sequence numbers,
 * acquisition time stamped at send, frequencies 0, speed of sound 1540 m/s. */
SP_API int sp_frame_create(sp_frame** frame);
SP_API void sp_frame_destroy(sp_frame* frame); /* NULL is ignored */

/* "iq", "rf", "dce", "channel_rf", "channel_iq" (proto FrameKind). */
SP_API int sp_frame_set_kind(sp_frame* frame, const char* kind);
/* "int16", "float16", "float32", "complex64", "float64", "uint8" (proto ElementType). */
SP_API int sp_frame_set_element_type(sp_frame* frame, const char* element_type);
/* Appends an axis (outermost first; the last added varies fastest). unit may be NULL (""). */
SP_API int sp_frame_add_axis(sp_frame* frame, const char* name, uint64_t size, double spacing, const char* unit,
                             double origin);
SP_API int sp_frame_clear_axes(sp_frame* frame);
SP_API int sp_frame_set_stream_id(sp_frame* frame, uint32_t stream_id);
/* A fixed sequence number; the sender's count for the stream continues after it. */
SP_API int sp_frame_set_sequence(sp_frame* frame, uint64_t sequence);
/* Back to automatic numbering (per sender and stream: 0, 1, 2, ...). */
SP_API int sp_frame_set_auto_sequence(sp_frame* frame);
/* Scanner clock, ns since the Unix epoch; 0 = stamp with the sending host's clock at sp_send. */
SP_API int sp_frame_set_acquisition_time_ns(sp_frame* frame, int64_t time_ns);
SP_API int sp_frame_set_sampling_frequency(sp_frame* frame, double hz);     /* of the fastest axis */
SP_API int sp_frame_set_center_frequency(sp_frame* frame, double hz);
SP_API int sp_frame_set_demodulation_frequency(sp_frame* frame, double hz); /* 0 for RF */
SP_API int sp_frame_set_speed_of_sound(sp_frame* frame, double m_per_s);
/* A named vector of `count` doubles (copied), replacing one of the same name. unit may be NULL. */
SP_API int sp_frame_set_vector(sp_frame* frame, const char* name, const double* values, size_t count,
                               const char* unit);
/* A free-form key/value string, replacing one of the same key. */
SP_API int sp_frame_set_attribute(sp_frame* frame, const char* key, const char* value);
/* Bytes a payload of this description has (product of axis sizes x element size). */
SP_API int sp_frame_payload_bytes(const sp_frame* frame, uint64_t* bytes);

/* ---------------------------------------------------------------- subscriber
 * SUB on the daemon's publish endpoint. topic_prefix selects results by topic
 * "result/<pipeline>/<output>"; NULL or "" means every result ("result/"). Status heartbeats are
 * skipped. ZeroMQ's slow joiner: results published before the subscription reached the daemon are
 * not received.
 * shm://<name>: the daemon's publish.shm pool: results are read in place (sp_result_data points
 * into the pool; the slot is held until sp_result_release, so release promptly). A live pool
 * overwrites what a slow subscriber did not read; results before the subscriber opened are not
 * seen. */
SP_API int sp_subscriber_open(const char* endpoint, const char* topic_prefix, sp_subscriber** subscriber);
SP_API int sp_subscriber_create(sp_subscriber** subscriber);
SP_API int sp_subscriber_set_curve(sp_subscriber* subscriber, const char* server_public_key,
                                   const char* client_public_key, const char* client_secret_key);
SP_API int sp_subscriber_connect(sp_subscriber* subscriber, const char* endpoint, const char* topic_prefix);
/* The next result, waiting up to timeout_ms (-1: for ever). SP_ERROR_TIMEOUT with *result = NULL
 * when none came. A message that is not a result (wrong part count, unparsable header) is counted
 * in sp_subscriber_skipped and skipped. */
SP_API int sp_subscriber_next(sp_subscriber* subscriber, int timeout_ms, sp_result** result);
SP_API uint64_t sp_subscriber_skipped(const sp_subscriber* subscriber);
SP_API int sp_subscriber_close(sp_subscriber* subscriber); /* NULL is ignored */

/* ---------------------------------------------------------------- shm:// messages
 * The daemon's shared pools at the message level, for bindings that build their own wire headers
 * (Python's sonopipe package). A message is [header][payload] in one slot: sp_shm_claim gives the
 * slot's header and payload areas (payload 64-byte aligned), the caller writes them in place and
 * sp_shm_commit publishes the first header_bytes / payload_bytes of them. sp_shm_delivery waits up
 * to timeout_ms (0: not at all) for the daemon to take every committed message and tells how many
 * it took and how many it has not. sp_shm_take hands out the next message, read in place until
 * sp_shm_release(slot); lossless != 0 holds the producers back until it is taken (lossless pools). */
typedef struct sp_shm_producer sp_shm_producer;
typedef struct sp_shm_consumer sp_shm_consumer;
SP_API int sp_shm_producer_open(const char* endpoint, sp_shm_producer** producer);
SP_API int sp_shm_claim(sp_shm_producer* producer, int timeout_ms, void** header, uint64_t* header_capacity,
                        void** payload, uint64_t* payload_capacity);
SP_API int sp_shm_commit(sp_shm_producer* producer, uint64_t header_bytes, uint64_t payload_bytes);
SP_API int sp_shm_abandon(sp_shm_producer* producer);
SP_API int sp_shm_delivery(sp_shm_producer* producer, int timeout_ms, uint64_t* delivered, uint64_t* undelivered);
SP_API int sp_shm_producer_close(sp_shm_producer* producer); /* NULL is ignored */
SP_API int sp_shm_consumer_open(const char* endpoint, int lossless, sp_shm_consumer** consumer);
SP_API int sp_shm_take(sp_shm_consumer* consumer, int timeout_ms, uint32_t* slot, const void** header,
                       uint64_t* header_bytes, const void** payload, uint64_t* payload_bytes);
SP_API int sp_shm_release(sp_shm_consumer* consumer, uint32_t slot);
SP_API int sp_shm_consumer_close(sp_shm_consumer* consumer); /* NULL is ignored */

/* ---------------------------------------------------------------- result (read only) */
SP_API void sp_result_release(sp_result* result); /* NULL is ignored */
SP_API const char* sp_result_topic(const sp_result* result);
SP_API const char* sp_result_pipeline(const sp_result* result);
SP_API const char* sp_result_output(const sp_result* result);
SP_API uint32_t sp_result_stream_id(const sp_result* result);
SP_API uint64_t sp_result_input_sequence(const sp_result* result);
SP_API int64_t sp_result_acquisition_time_ns(const sp_result* result);
SP_API const char* sp_result_input_kind(const sp_result* result);   /* "iq", ...; "" if unknown */
SP_API const char* sp_result_element_type(const sp_result* result); /* "float32", ...; "" if unknown */
SP_API uint32_t sp_result_element_size(const sp_result* result);    /* bytes; 0 if unknown */
SP_API const char* sp_result_unit(const sp_result* result);         /* of the values: "um", "1", ... */
SP_API const char* sp_result_backend(const sp_result* result);      /* "cuda" or "cpu" */
SP_API int64_t sp_result_received_ns(const sp_result* result);      /* daemon clock */
SP_API int64_t sp_result_published_ns(const sp_result* result);
SP_API uint32_t sp_result_axis_count(const sp_result* result);
/* Axis `index` (outermost first); "" / 0 when index is out of range. */
SP_API const char* sp_result_axis_name(const sp_result* result, uint32_t index);
SP_API uint64_t sp_result_axis_size(const sp_result* result, uint32_t index);
SP_API double sp_result_axis_spacing(const sp_result* result, uint32_t index);
SP_API const char* sp_result_axis_unit(const sp_result* result, uint32_t index);
SP_API double sp_result_axis_origin(const sp_result* result, uint32_t index);
/* The input frame's attribute `key`, or NULL when absent. */
SP_API const char* sp_result_attribute(const sp_result* result, const char* key);
/* Vector `name`: its length (-1 when absent) and its values (NULL when absent). */
SP_API int64_t sp_result_vector_length(const sp_result* result, const char* name);
SP_API const double* sp_result_vector_values(const sp_result* result, const char* name);
/* The payload: sp_result_bytes() bytes, C-ordered over the axes, valid until sp_result_release. */
SP_API const void* sp_result_data(const sp_result* result);
SP_API uint64_t sp_result_bytes(const sp_result* result);
/* The pipeline's parameter generation when this result's frame started (0: as configured; each
 * live change adds one, see sp_control_set). */
SP_API uint64_t sp_result_param_generation(const sp_result* result);

/* Live stage parameters on the daemon's control endpoint (docs/live-parameters.md), one request
 * per call (a fresh socket; no CURVE: a daemon with security.control_stop: keyed refuses set).
 * `name` is "<pipeline>.<stage>.<parameter>", values are YAML text ("2.0", "hann", "[61, 11]").
 *   sp_control_get: writes the current value (NUL-terminated) into `value` of `capacity` bytes;
 *     SP_ERROR_SIZE_MISMATCH when it does not fit.
 *   sp_control_set: changes a live parameter; `generation` (may be NULL) receives the pipeline's
 *     new generation. A refused value is SP_ERROR_ARGUMENT with the daemon's one-line reason in
 *     sp_last_error(); nothing changed then. No answer within timeout_ms: SP_ERROR_TIMEOUT. */
SP_API int sp_control_get(const char* endpoint, const char* name, int timeout_ms, char* value, size_t capacity);
SP_API int sp_control_set(const char* endpoint, const char* name, const char* value, int timeout_ms,
                          uint64_t* generation);

#ifdef __cplusplus
}
#endif

#endif /* SONOPIPE_CLIENT_H */
