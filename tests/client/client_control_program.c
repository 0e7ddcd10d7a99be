/* Live parameters through libsonopipe-client, in plain C: client_control_program <control endpoint>.
 * The daemon runs pipeline `demo` with one `convert` of scale 1 (client_control_test.cpp).
 * Prints "client_control_program: ok" and exits 0 when every check held; else names the first
 * that failed and exits 1. */
#include <stdio.h>
#include <string.h>

#include <sonopipe_client.h>

#define EXPECT(condition)                                                                   \
  do {                                                                                      \
    if (!(condition)) {                                                                     \
      printf("client_control_program: failed: %s (last error: %s)\n", #condition, sp_last_error()); \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 2) {
    printf("usage: client_control_program <control endpoint>\n");
    return 2;
  }
  const char* control = argv[1];
  char value[64];
  uint64_t generation = 0;
  EXPECT(sp_control_get(control, "demo.convert.scale", 2000, value, sizeof value) == SP_OK);
  EXPECT(strcmp(value, "1") == 0);
  EXPECT(sp_control_set(control, "demo.convert.scale", "4", 2000, &generation) == SP_OK);
  EXPECT(generation == 1);
  EXPECT(sp_control_get(control, "demo.convert.scale", 2000, value, sizeof value) == SP_OK);
  EXPECT(strcmp(value, "4") == 0);
  /* A refused value: the daemon's reason, and nothing changed. */
  EXPECT(sp_control_set(control, "demo.convert.scale", "loud", 2000, &generation) == SP_ERROR_ARGUMENT);
  EXPECT(strstr(sp_last_error(), "demo.convert.scale: expected a number") != NULL);
  EXPECT(sp_control_set(control, "demo.nothing.scale", "2", 2000, NULL) == SP_ERROR_ARGUMENT);
  EXPECT(strstr(sp_last_error(), "unknown stage") != NULL);
  EXPECT(sp_control_get(control, "demo.convert.scale", 2000, value, sizeof value) == SP_OK);
  EXPECT(strcmp(value, "4") == 0);
  /* Bad arguments are refused before the wire. */
  EXPECT(sp_control_get(control, "demo.convert.scale", 2000, value, 1) == SP_ERROR_SIZE_MISMATCH);
  EXPECT(sp_control_get(control, NULL, 2000, value, sizeof value) == SP_ERROR_ARGUMENT);
  EXPECT(sp_control_set(control, "demo.convert.scale", "2", 0, NULL) == SP_ERROR_ARGUMENT);
  EXPECT(sp_result_param_generation(NULL) == 0);
  printf("client_control_program: ok\n");
  return 0;
}
