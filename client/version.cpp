// sp_version and sp_schema_version: what a caller links against.
#include "client/sonopipe_client.h"
#include "wire/wire.h"

extern "C" const char* sp_version(void) { return SONOPIPE_CLIENT_VERSION; }
extern "C" uint32_t sp_schema_version(void) { return sonopipe::wire::kSchemaVersion; }
