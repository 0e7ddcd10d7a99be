/* A plain C program that drives a running sonopiped through libsonopipe-client, as a scanner's own
 * software would. Started by client_test.cpp with the daemon's endpoints and its `convert` scale:
 *   client_program INGEST PUBLISH SCALE SEED UNREACHABLE_ENDPOINT
 * It checks every result against its own reference (out = (float)scale * (float)in, convert.h) and
 * every error path, prints one line per failure, and exits 0 only when all held. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sonopipe_client.h>

static int failures = 0;

#define CHECK(condition)                                                                   \
  do {                                                                                     \
    if (!(condition)) {                                                                    \
      fprintf(stderr, "client_program:%d: FAILED: %s (last error: '%s')\n", __LINE__, #condition, \
              sp_last_error());                                                            \
      ++failures;                                                                          \
    }                                                                                      \
  } while (0)

enum { kLines = 8, kSamples = 64, kFrames = 5, kWarmUpStream = 99, kStream = 7 };
static const int64_t kAcquisitionTimeNs = 1700000000123456789LL;

/* xorshift64*: the payloads come from the seed the test prints. */
static uint64_t random_state;
static uint64_t next_random(void) {
  random_state ^= random_state >> 12;
  random_state ^= random_state << 25;
  random_state ^= random_state >> 27;
  return random_state * 2685821657736338717ULL;
}

static sp_frame* rf_frame(uint32_t stream_id) {
  sp_frame* frame = NULL;
  CHECK(sp_frame_create(&frame) == SP_OK);
  CHECK(sp_frame_set_kind(frame, "rf") == SP_OK);
  CHECK(sp_frame_set_element_type(frame, "float32") == SP_OK);
  CHECK(sp_frame_add_axis(frame, "line", kLines, 0.3e-3, "m", -1.2e-3) == SP_OK);
  CHECK(sp_frame_add_axis(frame, "sample", kSamples, 1.0 / 40e6, "s", 2e-6) == SP_OK);
  CHECK(sp_frame_set_stream_id(frame, stream_id) == SP_OK);
  CHECK(sp_frame_set_sampling_frequency(frame, 40e6) == SP_OK);
  CHECK(sp_frame_set_center_frequency(frame, 7.6e6) == SP_OK);
  CHECK(sp_frame_set_speed_of_sound(frame, 1540.0) == SP_OK);
  CHECK(sp_frame_set_attribute(frame, "probe", "L11-5v") == SP_OK);
  const double delays_s[3] = {0.0, 1e-7, 2e-7};
  CHECK(sp_frame_set_vector(frame, "transmit_delay", delays_s, 3, "s") == SP_OK);
  return frame;
}

/* Sends warm-up frames until one comes back: ZeroMQ's subscription has then reached the daemon. */
static int wait_for_subscription(sp_sender* sender, sp_subscriber* subscriber, const float* payload, size_t bytes) {
  sp_frame* frame = rf_frame(kWarmUpStream);
  for (int attempt = 0; attempt < 100; ++attempt) {
    CHECK(sp_send(sender, frame, payload, bytes) == SP_OK);
    sp_result* result = NULL;
    if (sp_subscriber_next(subscriber, 200, &result) == SP_OK) {
      sp_result_release(result);
      sp_frame_destroy(frame);
      return 1;
    }
  }
  sp_frame_destroy(frame);
  return 0;
}

/* The next result of `stream_id` (warm-up results still in flight are skipped). */
static sp_result* next_result_of(sp_subscriber* subscriber, uint32_t stream_id) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    sp_result* result = NULL;
    if (sp_subscriber_next(subscriber, 100, &result) != SP_OK) continue;
    if (sp_result_stream_id(result) == stream_id) return result;
    sp_result_release(result);
  }
  return NULL;
}

static void round_trip_rf(sp_sender* sender, sp_subscriber* subscriber, float scale) {
  static float frames[kFrames][kLines * kSamples];
  sp_frame* frame = rf_frame(kStream);
  CHECK(sp_frame_set_acquisition_time_ns(frame, kAcquisitionTimeNs) == SP_OK);
  uint64_t bytes = 0;
  CHECK(sp_frame_payload_bytes(frame, &bytes) == SP_OK);
  CHECK(bytes == sizeof frames[0]);
  for (int f = 0; f < kFrames; ++f) {
    for (int i = 0; i < kLines * kSamples; ++i) frames[f][i] = (float)((int64_t)(next_random() >> 40) - (1 << 23)) / 4096.0f;
    CHECK(sp_send(sender, frame, frames[f], sizeof frames[f]) == SP_OK);
  }
  uint64_t next = 0;
  CHECK(sp_sender_next_sequence(sender, kStream, &next) == SP_OK);
  CHECK(next == kFrames);
  for (int f = 0; f < kFrames; ++f) {
    sp_result* result = next_result_of(subscriber, kStream);
    CHECK(result != NULL);
    if (result == NULL) break;
    const uint64_t sequence = sp_result_input_sequence(result);
    CHECK(sequence == (uint64_t)f);  /* numbered 0, 1, 2, ... by the sender; PUSH keeps order */
    CHECK(strcmp(sp_result_topic(result), "result/rf/converted") == 0);
    CHECK(strcmp(sp_result_pipeline(result), "rf") == 0);
    CHECK(strcmp(sp_result_output(result), "converted") == 0);
    CHECK(strcmp(sp_result_input_kind(result), "rf") == 0);
    CHECK(strcmp(sp_result_element_type(result), "float32") == 0);
    CHECK(sp_result_element_size(result) == 4);
    CHECK(strcmp(sp_result_backend(result), "cpu") == 0);
    CHECK(sp_result_acquisition_time_ns(result) == kAcquisitionTimeNs);
    CHECK(sp_result_attribute(result, "probe") != NULL && strcmp(sp_result_attribute(result, "probe"), "L11-5v") == 0);
    CHECK(sp_result_attribute(result, "absent") == NULL);
    CHECK(sp_result_axis_count(result) == 2);
    CHECK(strcmp(sp_result_axis_name(result, 0), "line") == 0 && sp_result_axis_size(result, 0) == kLines);
    CHECK(strcmp(sp_result_axis_name(result, 1), "sample") == 0 && sp_result_axis_size(result, 1) == kSamples);
    CHECK(sp_result_axis_spacing(result, 0) == 0.3e-3 && sp_result_axis_origin(result, 0) == -1.2e-3);
    CHECK(strcmp(sp_result_axis_unit(result, 1), "s") == 0);
    CHECK(strcmp(sp_result_axis_name(result, 2), "") == 0 && sp_result_axis_size(result, 2) == 0);
    CHECK(sp_result_received_ns(result) > 0 && sp_result_published_ns(result) >= sp_result_received_ns(result));
    CHECK(sp_result_bytes(result) == sizeof frames[0]);
    if (sequence < kFrames && sp_result_bytes(result) == sizeof frames[0]) {
      float expected[kLines * kSamples];
      for (int i = 0; i < kLines * kSamples; ++i) expected[i] = scale * frames[sequence][i];
      CHECK(memcmp(sp_result_data(result), expected, sizeof expected) == 0);  /* byte for byte */
    }
    sp_result_release(result);
  }
  sp_frame_destroy(frame);
}

/* int16 IQ [line, sample, iq=2] -> complex64 [line, sample]: I and Q scaled, interleaved. */
static void round_trip_int16_iq(sp_sender* sender, sp_subscriber* subscriber, float scale) {
  int16_t iq[kLines * kSamples * 2];
  for (int i = 0; i < kLines * kSamples * 2; ++i) iq[i] = (int16_t)(next_random() >> 48);
  sp_frame* frame = NULL;
  CHECK(sp_frame_create(&frame) == SP_OK);
  CHECK(sp_frame_set_kind(frame, "iq") == SP_OK);
  CHECK(sp_frame_set_element_type(frame, "int16") == SP_OK);
  CHECK(sp_frame_add_axis(frame, "line", kLines, 0, NULL, 0) == SP_OK);
  CHECK(sp_frame_add_axis(frame, "sample", kSamples, 0, NULL, 0) == SP_OK);
  CHECK(sp_frame_add_axis(frame, "iq", 2, 0, NULL, 0) == SP_OK);
  CHECK(sp_frame_set_stream_id(frame, kStream + 1) == SP_OK);
  CHECK(sp_frame_set_sequence(frame, 41) == SP_OK);
  CHECK(sp_frame_set_demodulation_frequency(frame, 5e6) == SP_OK);
  CHECK(sp_send(sender, frame, iq, sizeof iq) == SP_OK);
  uint64_t next = 0;
  CHECK(sp_sender_next_sequence(sender, kStream + 1, &next) == SP_OK);
  CHECK(next == 42);  /* numbering continues after a fixed sequence */
  sp_result* result = next_result_of(subscriber, kStream + 1);
  CHECK(result != NULL);
  if (result != NULL) {
    CHECK(sp_result_input_sequence(result) == 41);
    CHECK(strcmp(sp_result_pipeline(result), "iq") == 0);
    CHECK(strcmp(sp_result_element_type(result), "complex64") == 0);
    CHECK(sp_result_axis_count(result) == 2);
    float expected[kLines * kSamples * 2];
    for (int i = 0; i < kLines * kSamples * 2; ++i) expected[i] = scale * (float)iq[i];
    CHECK(sp_result_bytes(result) == sizeof expected);
    if (sp_result_bytes(result) == sizeof expected) CHECK(memcmp(sp_result_data(result), expected, sizeof expected) == 0);
    sp_result_release(result);
  }
  sp_frame_destroy(frame);
}

static void refused_frames(sp_sender* sender) {
  float payload[kLines * kSamples] = {0};
  sp_frame* frame = rf_frame(kStream);
  const uint64_t sent_before = sp_sender_frames_sent(sender);
  /* shape x element size != bytes: refused before anything is sent */
  CHECK(sp_send(sender, frame, payload, sizeof payload - 4) == SP_ERROR_SIZE_MISMATCH);
  CHECK(strstr(sp_last_error(), "sp_send: payload has 2044 bytes") != NULL);
  CHECK(sp_send(sender, frame, payload, sizeof payload + 4) == SP_ERROR_SIZE_MISMATCH);
  /* the same bytes as a float64 frame of the same shape are too few */
  CHECK(sp_frame_set_element_type(frame, "float64") == SP_OK);
  CHECK(sp_send(sender, frame, payload, sizeof payload) == SP_ERROR_SIZE_MISMATCH);
  /* unknown names */
  CHECK(sp_frame_set_element_type(frame, "int12") == SP_ERROR_ARGUMENT);
  CHECK(strstr(sp_last_error(), "'int12'") != NULL);
  CHECK(sp_frame_set_kind(frame, "doppler") == SP_ERROR_ARGUMENT);
  /* bad values */
  CHECK(sp_frame_add_axis(frame, "empty", 0, 0, NULL, 0) == SP_ERROR_ARGUMENT);
  CHECK(sp_frame_add_axis(frame, "bad", 4, NAN, NULL, 0) == SP_ERROR_ARGUMENT);
  CHECK(sp_frame_set_sampling_frequency(frame, -1.0) == SP_ERROR_ARGUMENT);
  CHECK(sp_frame_set_speed_of_sound(frame, INFINITY) == SP_ERROR_ARGUMENT);
  /* a frame without axes breaks the daemon's ingest rules */
  CHECK(sp_frame_clear_axes(frame) == SP_OK);
  CHECK(sp_send(sender, frame, payload, 0) == SP_ERROR_BAD_HEADER);
  CHECK(strstr(sp_last_error(), "no axes") != NULL);
  /* a failed call leaves a message, a good one clears it */
  CHECK(sp_frame_set_stream_id(frame, 1) == SP_OK);
  CHECK(strcmp(sp_last_error(), "") == 0);
  CHECK(sp_sender_frames_sent(sender) == sent_before);
  sp_frame_destroy(frame);
}

static void null_arguments(sp_sender* sender, sp_subscriber* subscriber) {
  float payload[4] = {0};
  sp_frame* frame = rf_frame(kStream);
  sp_sender* no_sender = (sp_sender*)1;
  CHECK(sp_sender_open(NULL, 1, &no_sender) == SP_ERROR_ARGUMENT && no_sender == (sp_sender*)1);
  CHECK(strcmp(sp_last_error(), "sp_sender_open: endpoint is NULL") == 0);
  CHECK(sp_sender_open("ipc://x", 1, NULL) == SP_ERROR_ARGUMENT);
  CHECK(sp_send(NULL, frame, payload, sizeof payload) == SP_ERROR_ARGUMENT);
  CHECK(strcmp(sp_last_error(), "sp_send: sender is NULL") == 0);
  CHECK(sp_send(sender, NULL, payload, sizeof payload) == SP_ERROR_ARGUMENT);
  CHECK(sp_send(sender, frame, NULL, sizeof payload) == SP_ERROR_ARGUMENT);
  CHECK(sp_frame_create(NULL) == SP_ERROR_ARGUMENT);
  CHECK(sp_frame_set_kind(NULL, "rf") == SP_ERROR_ARGUMENT);
  CHECK(sp_frame_set_kind(frame, NULL) == SP_ERROR_ARGUMENT);
  CHECK(sp_frame_add_axis(frame, NULL, 4, 0, NULL, 0) == SP_ERROR_ARGUMENT);
  CHECK(sp_frame_set_vector(frame, "v", NULL, 3, NULL) == SP_ERROR_ARGUMENT);
  CHECK(sp_frame_set_attribute(frame, "k", NULL) == SP_ERROR_ARGUMENT);
  CHECK(sp_subscriber_open(NULL, NULL, NULL) == SP_ERROR_ARGUMENT);
  CHECK(sp_subscriber_next(subscriber, 0, NULL) == SP_ERROR_ARGUMENT);
  CHECK(sp_subscriber_next(NULL, 0, NULL) == SP_ERROR_ARGUMENT);
  CHECK(sp_sender_set_curve(sender, NULL, NULL, NULL) == SP_ERROR_ARGUMENT);
  /* accessors of no result give neutral values; closing nothing is fine */
  CHECK(sp_result_data(NULL) == NULL && sp_result_bytes(NULL) == 0 && strcmp(sp_result_pipeline(NULL), "") == 0);
  CHECK(sp_result_vector_length(NULL, "v") == -1 && sp_result_attribute(NULL, "k") == NULL);
  CHECK(sp_sender_close(NULL) == SP_OK);
  CHECK(sp_subscriber_close(NULL) == SP_OK);
  sp_frame_destroy(NULL);
  sp_result_release(NULL);
  sp_frame_destroy(frame);
}

/* Lossless PUSH with no daemon: ZMQ_IMMEDIATE queues nothing, so sp_send waits out its timeout and
 * says so; a malformed endpoint is refused at connect. */
static void unreachable_endpoints(const char* unreachable) {
  float payload[kLines * kSamples] = {0};
  sp_sender* sender = NULL;
  CHECK(sp_sender_open(unreachable, 1, &sender) == SP_OK);  /* ZeroMQ connects in the background */
  CHECK(sp_sender_set_send_timeout(sender, 100) == SP_OK);
  sp_frame* frame = rf_frame(kStream);
  CHECK(sp_send(sender, frame, payload, sizeof payload) == SP_ERROR_TIMEOUT);
  CHECK(strstr(sp_last_error(), "nothing was sent") != NULL);
  CHECK(sp_sender_frames_sent(sender) == 0);
  uint64_t next = 99;
  CHECK(sp_sender_next_sequence(sender, kStream, &next) == SP_OK && next == 0);  /* not consumed */
  CHECK(sp_sender_close(sender) == SP_OK);
  sp_frame_destroy(frame);

  sender = (sp_sender*)1;
  CHECK(sp_sender_open("not-an-endpoint", 1, &sender) == SP_ERROR_SOCKET);
  CHECK(sender == NULL);
  CHECK(strstr(sp_last_error(), "'not-an-endpoint'") != NULL);
  sp_subscriber* subscriber = NULL;
  CHECK(sp_subscriber_open("tcp://", NULL, &subscriber) == SP_ERROR_SOCKET && subscriber == NULL);
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: client_program INGEST PUBLISH SCALE SEED UNREACHABLE_ENDPOINT\n");
    return 2;
  }
  const float scale = (float)atof(argv[3]);
  random_state = strtoull(argv[4], NULL, 10) | 1;
  printf("client_program: libsonopipe-client %s, wire schema %u, seed %s\n", sp_version(), sp_schema_version(), argv[4]);

  sp_subscriber* subscriber = NULL;
  sp_sender* sender = NULL;
  CHECK(sp_subscriber_open(argv[2], "result/", &subscriber) == SP_OK);
  CHECK(sp_sender_open(argv[1], 1, &sender) == SP_OK);
  if (sender == NULL || subscriber == NULL) return 1;
  float warm_up[kLines * kSamples] = {0};
  CHECK(wait_for_subscription(sender, subscriber, warm_up, sizeof warm_up));
  round_trip_rf(sender, subscriber, scale);
  round_trip_int16_iq(sender, subscriber, scale);
  refused_frames(sender);
  null_arguments(sender, subscriber);
  unreachable_endpoints(argv[5]);
  printf("client_program: %llu frames sent, %llu messages skipped\n",
         (unsigned long long)sp_sender_frames_sent(sender), (unsigned long long)sp_subscriber_skipped(subscriber));
  CHECK(sp_subscriber_skipped(subscriber) == 0);
  CHECK(sp_sender_close(sender) == SP_OK);
  CHECK(sp_subscriber_close(subscriber) == SP_OK);
  printf("client_program: %s (%d failures)\n", failures == 0 ? "ok" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}
