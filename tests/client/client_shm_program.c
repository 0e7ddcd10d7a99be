/* A plain C program that drives a running sonopiped over shm:// through libsonopipe-client, as a
 * same-host scanner program would: frames written in place (sp_frame_buffer / sp_send_buffer) and
 * copied in (sp_send), results read in place from the publish pool, the delivery acknowledgement,
 * and a missing pool's error. Started by client_shm_test.cpp:
 *   client_shm_program INGEST PUBLISH SEED MISSING_ENDPOINT
 * The daemon's pipeline is one `convert` with scale 0.5 (int16 RF -> float32, exact). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sonopipe_client.h>

static int failures = 0;

#define CHECK(condition)                                                                       \
  do {                                                                                         \
    if (!(condition)) {                                                                        \
      fprintf(stderr, "client_shm_program:%d: FAILED: %s (last error: '%s')\n", __LINE__, #condition, \
              sp_last_error());                                                                \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

enum { kLines = 8, kSamples = 64, kFrames = 6 };

static uint64_t random_state;
static uint64_t next_random(void) {
  random_state ^= random_state >> 12;
  random_state ^= random_state << 25;
  random_state ^= random_state >> 27;
  return random_state * 2685821657736338717ULL;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: client_shm_program INGEST PUBLISH SEED MISSING_ENDPOINT\n");
    return 2;
  }
  random_state = strtoull(argv[3], NULL, 10) | 1;
  static int16_t sent[kFrames][kLines * kSamples];

  sp_subscriber* subscriber = NULL;
  CHECK(sp_subscriber_open(argv[2], "result/", &subscriber) == SP_OK);
  sp_sender* sender = NULL;
  CHECK(sp_sender_open(argv[1], 1, &sender) == SP_OK);
  sp_frame* frame = NULL;
  CHECK(sp_frame_create(&frame) == SP_OK);
  CHECK(sp_frame_set_kind(frame, "rf") == SP_OK);
  CHECK(sp_frame_set_element_type(frame, "int16") == SP_OK);
  CHECK(sp_frame_add_axis(frame, "line", kLines, 0.3e-3, "m", 0.0) == SP_OK);
  CHECK(sp_frame_add_axis(frame, "sample", kSamples, 1.0 / 40e6, "s", 0.0) == SP_OK);
  for (int n = 0; n < kFrames; ++n) {
    for (int i = 0; i < kLines * kSamples; ++i) sent[n][i] = (int16_t)(next_random() >> 48);
    if (n % 2 == 0) {  /* in place: written once, into the daemon's pool */
      void* slot = NULL;
      CHECK(sp_frame_buffer(sender, frame, &slot) == SP_OK);
      CHECK(slot != NULL && ((uintptr_t)slot % 64) == 0);
      if (slot) memcpy(slot, sent[n], sizeof sent[n]);
      CHECK(sp_send(sender, frame, sent[n], sizeof sent[n]) == SP_ERROR_STATE); /* a buffer is open */
      CHECK(sp_send_buffer(sender, frame) == SP_OK);
    } else {
      CHECK(sp_send(sender, frame, sent[n], sizeof sent[n]) == SP_OK);
    }
  }
  CHECK(sp_send_buffer(sender, frame) == SP_ERROR_STATE); /* none open */
  CHECK(sp_send(sender, frame, sent[0], sizeof sent[0] - 2) == SP_ERROR_SIZE_MISMATCH);
  for (int n = 0; n < kFrames; ++n) {
    sp_result* result = NULL;
    CHECK(sp_subscriber_next(subscriber, 20000, &result) == SP_OK);
    if (!result) break;
    CHECK(sp_result_input_sequence(result) == (uint64_t)n);
    CHECK(strcmp(sp_result_element_type(result), "float32") == 0);
    CHECK(sp_result_bytes(result) == kLines * kSamples * sizeof(float));
    const float* values = (const float*)sp_result_data(result);
    int mismatches = 0;
    for (int i = 0; values && i < kLines * kSamples; ++i) mismatches += values[i] != 0.5f * (float)sent[n][i];
    CHECK(mismatches == 0);
    sp_result_release(result);
  }
  uint64_t delivered = 0, undelivered = 0;
  CHECK(sp_sender_delivery(sender, &delivered, &undelivered) == SP_OK);
  CHECK(delivered == kFrames);
  CHECK(undelivered == 0);
  CHECK(sp_sender_frames_sent(sender) == kFrames);
  CHECK(sp_sender_close(sender) == SP_OK);
  sp_frame_destroy(frame);
  CHECK(sp_subscriber_close(subscriber) == SP_OK);

  sp_sender* missing = NULL;
  CHECK(sp_sender_open(argv[4], 1, &missing) == SP_ERROR_SOCKET);
  CHECK(strstr(sp_last_error(), "start sonopiped") != NULL);
  CHECK(missing == NULL);
  if (failures == 0) printf("client_shm_program: ok\n");
  return failures == 0 ? 0 : 1;
}
