// The host-path experiments' switches (issue 23; docs/host-path.md, "Experiments left as
// switches"): environment variables that bring back a path the daemon no longer takes, or change a
// bound, so that a measurement can be repeated against the default in one lease. None is needed in
// operation. They are named and parsed here and nowhere else, by one rule: unset or empty keeps the
// default; any other value that is not one of the switch's refuses the start, naming the variable.
//
// Each part reads them when it is made (a lane, a publisher, a memory pool), so a test can set one
// around the part it makes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace sonopipe {

struct HostPathSwitches {
  // SONOPIPE_STAGING=driver|slot: how a pageable payload (tcp, ipc) reaches the device on CUDA
  // (runtime/device_lane.cpp, enqueue_on_cuda): handed to cudaMemcpyAsync as it is, the driver
  // copying it through its own pinned buffers (driver), or copied whole into the slot's pinned
  // input first, in 1 MiB pieces over the pipeline's pool (slot: the path before 2026-11-26).
  enum class Staging { driver, slot };
  Staging staging = Staging::driver;

  // SONOPIPE_PUBLISH_COPY=all|fresh (daemon/publisher.cpp): all copies every result into a copy
  // block on the completion thread, as the relay publishes heap memory; fresh makes the copies the
  // publisher must make into a new std::vector each (the daemon before 2026-11-26).
  enum class PublishCopy { when_needed, all, fresh };
  PublishCopy publish_copy = PublishCopy::when_needed;

  // SONOPIPE_PUBLISH_TOUCH=0: results are handed to ZeroMQ without being read first.
  bool publish_touch = true;

  // SONOPIPE_COPY_HUGE_PAGES=1 (daemon/copy_blocks.cpp): copy blocks of 2 MiB or more start on a
  // 2 MiB boundary, with transparent huge pages asked for.
  bool copy_huge_pages = false;

  // SONOPIPE_PINNED_POOL=0 (runtime/gpu_resources.cpp): pinned buffers from cudaHostAlloc and kept
  // blocks, even where the device has a host memory pool.
  bool pinned_pool = true;

  // Whole numbers (daemon/pipeline_set.cpp, into ExecutorOptions): SONOPIPE_MAX_SPARE_RESULTS=N
  // result buffers a lane parks while receivers hold them, SONOPIPE_MAX_SPARE_BYTES=N bytes of
  // them at most, SONOPIPE_SPARE_WAIT_US=N how long the lane waits for a spare (0: never) before it
  // publishes copies.
  std::optional<std::uint64_t> max_spare_results, max_spare_bytes, spare_wait_us;
};

// The switches as the environment sets them. Throws std::invalid_argument naming the variable
// and the values it takes when one is set to anything else.
HostPathSwitches host_path_switches_from_environment();

// "NAME=value" of each switch the environment sets (empty ones left out), for the daemon's start log.
std::vector<std::string> host_path_switches_set();

// The switches' names, in the order host_path_switches_set lists them.
std::span<const char* const> host_path_switch_names();

}  // namespace sonopipe
