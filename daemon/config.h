// The daemon's YAML configuration (examples in config/). Every error names the file, the line,
// the key and what was expected: "demo.yaml:12: pipelines[0].stages[1].params.scale: expected a
// number (1/count)".
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/frame_queue.h"
#include "runtime/pipeline_def.h"
#include "sdk/registry.h"

namespace sonopipe {

enum class IngestPattern { pull, sub };        // pull: lossless (PUSH senders block); sub: live
enum class NonFinitePolicy { reject, pass };   // NaN/Inf in float payloads
enum class BackendChoice { automatic, cuda, cpu };
enum class ControlStop { allow, keyed, disabled };  // who may send `stop` on the control socket

std::string_view ingest_pattern_name(IngestPattern pattern);
std::string_view backend_choice_name(BackendChoice choice);  // "auto", "cuda", "cpu"
bool parse_backend_choice(std::string_view name, BackendChoice& out);
std::string_view control_stop_name(ControlStop policy);  // "allow", "keyed", "disabled"

// `security:` (docs/operations.md, "Security"). Off by default: sockets are unauthenticated, as before.
struct SecurityConfig {
  // CURVE on the ingest, publish and control sockets; only the listed client keys get through.
  bool curve = false;
  std::string server_public_key, server_secret_key;  // Z85, from server_secret_key_file
  std::vector<std::string> authorized_client_keys;   // Z85 public keys
  ControlStop control_stop = ControlStop::allow;
};

// publish.max_queued_bytes by default: three 41 MB full-resolution ARFI results, 256 of 512 KB.
inline constexpr std::size_t kDefaultMaxQueuedBytes = std::size_t(128) << 20;

struct DaemonConfig {
  std::string source;  // file the config came from (for messages)

  std::string ingest_endpoint = "tcp://127.0.0.1:5555";
  IngestPattern ingest_pattern = IngestPattern::pull;
  bool ingest_bind = true;  // false: connect (e.g. SUB to a scanner's PUB)
  // Delivery acknowledgements to ZeroMQ senders that ask for them (daemon/acknowledger.h); empty: none.
  std::string ingest_ack_endpoint;
  // shm:// endpoints (docs/shared-memory.md): pool slots (0: enough for every pipeline's queue and
  // slots) and the /dev/shm object's permissions (0600 or 0660, never for others).
  std::uint32_t shm_slots = 0;
  unsigned shm_permissions = 0600;
  std::string publish_endpoint = "tcp://127.0.0.1:5556";
  int publish_high_water_mark = 1000;  // messages queued per subscriber before PUB drops
  // publish.shm: results also written once into a shared pool that same-host subscribers read in
  // place (docs/shared-memory.md); empty: none. Live pools never wait for subscribers; lossless
  // ones wait for lossless subscribers (the recorder).
  struct ShmPublish {
    std::string endpoint;
    bool lossless = false;
    std::uint32_t slots = 8;
    std::size_t payload_bytes = 0;  // 0: max_frame_bytes
  } publish_shm;
  // Bytes of results queued per subscriber before its results are dropped (counted per subscriber):
  // a subscriber that stops reading costs at most this much (daemon/publisher.h).
  std::size_t publish_max_queued_bytes = kDefaultMaxQueuedBytes;
  // A lagging subscriber whose connection has not drained for this long is stalled: cut at
  // max_queued_bytes. One that keeps reading is cut only past kReadingAllowance x the bound.
  double publish_stall_timeout_s = 0.1;
  std::string control_endpoint = "tcp://127.0.0.1:5557";
  double status_interval_s = 1.0;

  BackendChoice backend = BackendChoice::automatic;
  int device = 0;             // the single device of every pipeline, unless `devices` is given
  DeviceSelection devices;    // default for pipelines without their own `devices`
  int slots = 3;
  std::size_t queue_depth = 8;
  OverflowPolicy overflow = OverflowPolicy::block;
  std::size_t max_streams = 64;  // live stream states per pipeline (stateful stages); LRU evicted
  std::size_t max_frame_bytes = std::size_t(256) << 20;
  NonFinitePolicy non_finite = NonFinitePolicy::reject;
  int cpu_threads = 0;  // 0: one per hardware thread
  // `threads:` where the daemon's threads run (daemon/thread_placement.h); empty: where the OS
  // puts them. `cpus` holds every thread of the daemon; the two ZeroMQ I/O threads (frames read
  // from tcp/ipc senders; results written to subscribers) go to their own lists.
  struct ThreadPlacement {
    std::vector<int> cpus, ingest_io_cpus, publish_io_cpus;
  } threads;
  // `cuda_wait`: how a thread that waits for the GPU (a lane's completion thread in
  // cudaEventSynchronize) waits: `spin` keeps its CPU busy (the CUDA runtime's choice when there
  // are more CPUs than GPUs); `block` sleeps until the device signals (cudaDeviceScheduleBlockingSync).
  bool cuda_wait_block = false;
  std::string log_level = "info";
  std::vector<std::string> plugins;  // stage plugin libraries, resolved against the config's folder
  SecurityConfig security;

  std::vector<PipelineConfig> pipelines;
  // The stages the pipelines were checked against and are built from: the registry given to
  // parse_config plus every plugin's stages.
  std::shared_ptr<const StageRegistry> registry;
  std::string source_text;  // the YAML it was parsed from (config_with_parameters)
};

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses YAML text; `source_name` is used in messages (and relative plugin paths are resolved
// against its folder). Plugins are loaded first; stage types and parameters are checked against
// `registry` plus the plugins' stages. Throws ConfigError.
DaemonConfig parse_config(const std::string& yaml_text, const std::string& source_name,
                          const StageRegistry& registry);
DaemonConfig load_config_file(const std::string& path, const StageRegistry& registry);

// The config's YAML with every stage's given parameters set to their values in `pipelines` (the
// running values after live changes): a file that starts the same daemon (`sonopipe-ctl save`).
std::string config_with_parameters(const DaemonConfig& config, const std::vector<PipelineConfig>& pipelines);

}  // namespace sonopipe
