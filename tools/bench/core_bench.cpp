// `sonopipe-bench core`: throughput and latency of frames through a real sonopiped (convert stage)
// over tcp loopback and ipc, next to raw ZeroMQ PUSH/PULL throughput measured in the same run.
//
// Per transport one daemon is started (generated config: ingest pull, one pipeline with convert);
// per frame size:
//   warm-up   W frames through the daemon one at a time (first-shape configuration, allocation,
//             caches), not timed;
//   throughput N frames pushed as fast as the daemon takes them (lossless PUSH) while the results
//             are collected on a SUB: frames/s = N / (last result received - first frame sent);
//             repeated R times (--repeats), each run preceded by W untimed frames and alternating
//             with the raw and relay runs below, so that the machine's drift during the point hits
//             all three alike; the table gives the medians and the runs are printed;
//   status    the daemon's own timing after the throughput run: per-frame H2D + stage + D2H (CUDA)
//             against the measured wall time per frame gives the slot overlap;
//   latency   L frames one at a time (next sent when the previous result arrived; 10 more before,
//             not counted, let the throughput run's tail settle): end-to-end =
//             result received - frame sent (one host clock), and the daemon's received->published;
//             each frame's time split into sent -> the daemon's ingest has it, received -> published
//             (the daemon), published -> the bench has it, p50 / p99 of each and for the slowest;
//   raw ZeroMQ N frames of the same size PUSH -> PULL on the same transport, no daemon: the
//             ceiling the daemon's ingest hop is compared with (the issue's goal);
//   relay     N frames PUSH -> [PULL -> PUB an output-sized payload] -> SUB: the daemon's two hops
//             without its work, so the table separates transport cost from processing cost.
//             Raw and relay runs follow the daemon's rule: fresh sockets, W untimed frames through
//             them first, then N timed ones. After the daemon's latency run, the relay's (same L
//             frames one at a time after 10 untimed): the transport's own tail beside the daemon's.
//   stall     (--stall-frames > 0) a second subscriber connects and never reads while S frames of the
//             largest size go through one at a time; the daemon's RSS (VmRSS) before, at its peak and
//             after the stalled subscriber left (frames still flowing for 3 s), against its bound
//             (publish.max_queued_bytes, which a config may set with --max-queued-bytes).
// Goals (issue 23): daemon >= 95 % of the relay's frames/s on every row, e2e p99 <= 2 ms at 1 MB,
// a stalled subscriber costs at most its bound plus the slots' results, and the RSS is back within
// 10 % of its baseline after it left. (Issue 2's goal, >= 90 % of raw ZeroMQ at 8 MB, is printed too.)
// --pipeline beamform: the frames are PICMUS-sized channel RF instead (int16, 11 plane waves x 128
// elements x 2048 samples = 5.8 MB; --sizes-mb is ignored) and the pipeline is convert -> beamform
// onto 256 x 1024 RF pixels (the beamform bench's case): channel data through the daemon at rate
// (issue 10's goal: >= 300 frames/s over ipc with 0 loss).
// --pipeline arfi: the paper's ARFI set (52 x 81 x 493 int16 IQ, 8.3 MB in; random samples with the
// simulator's geometry) through convert -> upsample x5 -> loupas -> motion_filter, full-resolution
// float32 displacement out (41 MB).
// --transports shm: the daemon's ingest is a shared pool (shm://, docs/shared-memory.md): the bench
// writes each frame into a slot (one memcpy from its buffer, as a scanner writing in place would
// once) and reads the results in place from the daemon's lossless result pool (publish.shm: the
// daemon waits for the bench, so 0 loss is checked end to end); raw = the pool alone (producer
// thread -> consumer thread, same memcpy), relay = n/a. Issue 23's goals are printed for shm rows:
// 8 MB >= 1,000 frames/s (>= 8 GB/s) with e2e p99 <= 3 ms, channel RF through beamform >= 3,000
// frames/s with 0 loss, ARFI sets >= 700 sets/s with 0 loss.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <numbers>
#include <random>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shm/consumer.h"
#include "shm/producer.h"
#include "wire/wire.h"
#include "tools/bench/commands.h"
#include "tools/bench/core_shm.h"
#include "daemon/backend_choice.h"
#include "daemon/thread_placement.h"
#include "runtime/gpu_resources.h"
#include "tools/common/clock.h"
#include "tools/common/daemon_launcher.h"
#include "tools/common/zmq_io.h"
#include "tools/sim/arfi_sim.h"
#include "tools/sim/channel_sim.h"

namespace sonopipe::bench {

namespace {

using tools::SteadyClock;
constexpr std::int64_t kSamplesPerLine = 4096;
constexpr auto kReceiveTimeout = std::chrono::seconds(20);
constexpr auto kSubscriptionMargin = std::chrono::milliseconds(200);

struct CoreOptions {
  std::string daemon;
  std::string backend = "auto";
  std::vector<double> sizes_mb = {1, 8};
  std::vector<std::string> transports = {"tcp", "ipc"};
  std::size_t frames = 200;
  std::size_t latency_frames = 200;
  std::size_t warmup = 20;
  std::size_t repeats = 3;  // throughput runs per point (daemon, raw and relay alternating); medians reported
  int slots = 3;
  int queue_depth = 8;
  int cpu_threads = 0;
  std::string type = "int16";
  std::string pipeline = "convert";  // or "beamform", "arfi"
  std::string work_dir;
  bool keep = false;
  std::size_t stall_frames = 40;     // 0: no stalled-subscriber run
  std::size_t max_queued_bytes = 0;  // 0: the daemon's default
  std::string shm_write = "every";   // shm: the producer copies the payload into every slot, or "first" time only
  // The relay's sockets: "split" = its PULL and PUB in a context of their own with the daemon's two
  // I/O threads (ingest on the first, publish on the second), the bench's PUSH and SUB in another,
  // as with the daemon; "shared" = all four in one context of two I/O threads (before 2026-11-26).
  std::string relay = "split";
  // What the relay publishes (RelayPayloads): constant, rotating, owned, pinned, d2h; with several,
  // each relay runs in every repeat and the first is the one the ratio and the goals use.
  std::vector<std::string> relay_outputs = {"constant"};
  std::vector<int> io_cpus;  // --io-cpus A B: ZeroMQ I/O threads 0 and 1 pinned (daemon and relay alike)
  bool timeline = false;  // SONOPIPE_HOST_TIMELINE for the daemon, summarised per throughput run
  bool cuda_blocking_sync = false;  // cuda_wait: block for the daemon, and the bench's own waits (its d2h relay)
};

// CPU time of a process's threads from /proc/<pid>/task/<tid>/schedstat (ns on a CPU, ns waiting
// for one, time slices), summed per thread name (or per label given for a tid).
struct ThreadCpu {
  std::int64_t run_ns = 0, wait_ns = 0, slices = 0;
};
using ThreadCpuTable = std::map<std::string, ThreadCpu>;

std::set<pid_t> thread_ids(pid_t pid) {
  std::set<pid_t> ids;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", error))
    ids.insert(static_cast<pid_t>(std::stol(entry.path().filename().string())));
  return ids;
}

// Every thread of `pid` under its name; `relay`: those tids under "relay: <name>" (`only_relay`:
// the others left out, else they are counted under their own names).
ThreadCpuTable thread_cpu(pid_t pid, const std::set<pid_t>& relay = {}, bool only_relay = false) {
  ThreadCpuTable table;
  for (pid_t tid : thread_ids(pid)) {
    const bool in_relay = relay.contains(tid);
    if (only_relay && !in_relay) continue;
    std::string name;
    {
      std::ifstream comm("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
      std::getline(comm, name);
    }
    if (in_relay) name = "relay: " + name;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/schedstat");
    ThreadCpu cpu;
    if (!(stat >> cpu.run_ns >> cpu.wait_ns >> cpu.slices)) continue;
    ThreadCpu& sum = table[name];
    sum.run_ns += cpu.run_ns;
    sum.wait_ns += cpu.wait_ns;
    sum.slices += cpu.slices;
  }
  return table;
}

// after - before, added to `total`.
void add_thread_cpu(ThreadCpuTable& total, const ThreadCpuTable& before, const ThreadCpuTable& after) {
  for (const auto& [name, cpu] : after) {
    ThreadCpu base;
    if (auto it = before.find(name); it != before.end()) base = it->second;
    ThreadCpu& sum = total[name];
    sum.run_ns += cpu.run_ns - base.run_ns;
    sum.wait_ns += cpu.wait_ns - base.wait_ns;
    sum.slices += cpu.slices - base.slices;
  }
}

pid_t this_thread_id() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// A timed thread waits at its end until its CPU time has been read (an exited thread's is gone).
struct CountedGate {
  std::atomic<bool> counted{false};
  void linger() const {
    while (!counted.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  void release() { counted.store(true, std::memory_order_release); }
};

// One synthetic frame: RF lines of kSamplesPerLine samples, int16 or float32, random (never
// zeros: they can take faster paths than real data).
struct BenchFrame {
  FrameMeta meta;
  std::vector<std::byte> payload;
};

BenchFrame make_frame(double size_mb, const std::string& type) {
  BenchFrame frame;
  frame.meta.kind = FrameKind::rf;
  frame.meta.payload.dtype = type == "float32" ? DType::float32 : DType::int16;
  const std::size_t element = dtype_size(frame.meta.payload.dtype);
  const auto bytes = static_cast<std::int64_t>(size_mb * (1 << 20));
  const std::int64_t lines = std::max<std::int64_t>(1, bytes / (kSamplesPerLine * static_cast<std::int64_t>(element)));
  frame.meta.payload.axes = {{"line", lines, 3e-4, "m"}, {"sample", kSamplesPerLine, 1.925e-5, "m"}};
  frame.meta.sampling_frequency_hz = 40e6;
  frame.meta.center_frequency_hz = 5e6;
  frame.payload.resize(frame.meta.payload.byte_size());
  std::mt19937 rng(12345);
  if (frame.meta.payload.dtype == DType::int16) {
    auto* values = reinterpret_cast<std::int16_t*>(frame.payload.data());
    std::uniform_int_distribution<int> counts(-32768, 32767);
    for (std::size_t i = 0; i < frame.payload.size() / 2; ++i) values[i] = static_cast<std::int16_t>(counts(rng));
  } else {
    auto* values = reinterpret_cast<float*>(frame.payload.data());
    std::normal_distribution<float> normal(0.0f, 1000.0f);
    for (std::size_t i = 0; i < frame.payload.size() / 4; ++i) values[i] = normal(rng);
  }
  return frame;
}

// PICMUS-sized channel RF (the beamform bench's plane-wave case): the simulator's geometry, random
// int16 samples.
BenchFrame make_channel_frame() {
  sim::ChannelSimConfig config;
  config.center_frequency_hz = 5.208e6;
  config.sampling_frequency_hz = 4 * config.center_frequency_hz;
  config.samples = 2048;
  config.transmits = sim::plane_wave_sequence(11, 16 * std::numbers::pi / 180);
  BenchFrame frame;
  frame.meta = sim::simulate_channel(config).meta;  // no scatterers: geometry only
  frame.meta.payload.dtype = DType::int16;
  frame.payload.resize(frame.meta.payload.byte_size());
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> counts(-32768, 32767);
  auto* values = reinterpret_cast<std::int16_t*>(frame.payload.data());
  for (std::size_t i = 0; i < frame.payload.size() / 2; ++i) values[i] = static_cast<std::int16_t>(counts(rng));
  return frame;
}

// The paper's ARFI set (the ARFI bench's case): the simulator's geometry and metadata, random int16
// IQ (the values do not change the work).
BenchFrame make_arfi_frame() {
  sim::ArfiSimConfig config;
  config.scatterers_per_cell = 10;  // the simulator's least (fully developed speckle)
  BenchFrame frame;
  frame.meta = sim::simulate_arfi(config).meta;
  frame.meta.payload.dtype = DType::int16;
  frame.payload.resize(frame.meta.payload.byte_size());
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> counts(-16384, 16383);
  auto* values = reinterpret_cast<std::int16_t*>(frame.payload.data());
  for (std::size_t i = 0; i < frame.payload.size() / 2; ++i) values[i] = static_cast<std::int16_t>(counts(rng));
  return frame;
}

std::string header_for(BenchFrame& frame, std::uint64_t sequence) {
  frame.meta.sequence = sequence;
  frame.meta.acquisition_time_ns = tools::wall_clock_ns();
  return wire::frame_header_from_meta(frame.meta).SerializeAsString();
}

zmq::message_t zero_copy(const BenchFrame& frame) {
  // The payload outlives every socket of the run, so ZeroMQ may read it in place.
  return zmq::message_t(const_cast<std::byte*>(frame.payload.data()), frame.payload.size(), nullptr, nullptr);
}

double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return std::nan("");
  const std::size_t k = std::min(values.size() - 1, static_cast<std::size_t>(fraction * static_cast<double>(values.size())));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
  return values[k];
}

struct Row {
  std::string transport;
  double size_mb = 0;
  std::size_t frame_bytes = 0;
  double daemon_fps = 0, raw_fps = 0, relay_fps = 0;
  std::size_t output_bytes = 0;
  double e2e_p50_ms = 0, e2e_p99_ms = 0, daemon_p50_ms = 0, daemon_p99_ms = 0;
  bool cuda = false;
  double gpu_busy_ms = 0, gpu_bottleneck_ms = 0;  // per frame from the daemon's status (CUDA only)
  double h2d_ms = 0, stages_ms = 0, d2h_ms = 0;      // medians per frame (CUDA only)
  std::uint64_t results_in_place = 0;               // shm: results the D2H wrote into the result pool
  std::size_t daemon_rejected = 0;
  double faults_per_frame = -1;  // the daemon's minor page faults per frame in the throughput run
  double latency_faults_per_frame = -1;  // ... and in the latency run
  std::string slowest;           // the latency run's three slowest frames and their legs
  std::vector<double> daemon_runs, raw_runs;  // frames/s of each throughput run
  std::uint64_t results_copied = 0;           // over the throughput runs: results published as copies
  std::uint64_t results_waited = 0;           // ... and results that waited for a spare buffer (spare_wait)
  // Latency legs (ms, p50 / p99): sent -> daemon received, received -> published, published -> bench got it.
  double in_p50_ms = 0, in_p99_ms = 0, out_p50_ms = 0, out_p99_ms = 0;
  double relay_p50_ms = std::nan(""), relay_p99_ms = std::nan("");  // the relay's latency run, one in flight
  // Summed over the throughput runs: the daemon's threads and the bench's during the daemon's runs;
  // the relay's (--relay split: "relay: ...") and the bench's during the relay's runs.
  ThreadCpuTable daemon_threads, bench_threads;
  std::size_t daemon_frames_timed = 0;
  // One per --relay-output, in that order: frames/s of each run, its threads and the bench's.
  struct Relay {
    std::string output;
    std::vector<double> runs;
    ThreadCpuTable threads, bench_threads;
    std::size_t frames_timed = 0;
  };
  std::vector<Relay> relays;
  std::vector<std::pair<std::uint64_t, std::size_t>> throughput_sequences;  // [first sequence, frames] per run
  std::vector<std::pair<std::uint64_t, std::size_t>> latency_sequences;     // the latency run's
  std::string timeline, latency_timeline;  // the summary of SONOPIPE_HOST_TIMELINE over the throughput runs (--timeline)
};

// A stalled subscriber's cost (one per transport, at the largest frame size).
struct StallRow {
  std::string transport;
  std::size_t result_bytes = 0, bound_bytes = 0;
  int slots = 0;
  long baseline_kib = 0, peak_kib = 0, after_kib = 0;
  std::uint64_t dropped = 0, cut = 0;
};

// The raw and relay runs' warm-up: the sender sends `warmup` frames, waits until the receiver has
// them all (open()), then notes the time and sends the timed ones.
struct WarmupGate {
  std::atomic<bool> open_{false};
  void open() { open_.store(true, std::memory_order_release); }
  void wait() const {
    while (!open_.load(std::memory_order_acquire)) std::this_thread::yield();
  }
};

// Writes [header][payload] into a slot of `producer`'s pool and commits it (lossless: waits).
// `written`: slots that hold this frame's payload already (--shm-write first: the payload is
// written into each slot once, as a scanner whose acquisition hardware fills the slot costs its
// producer no copy); null: written every time.
void send_shm(shm::Producer& producer, const std::string& header, const BenchFrame& frame,
              std::vector<bool>* written = nullptr) {
  auto claim = producer.claim(SteadyClock::now() + kReceiveTimeout);
  if (!claim) throw std::runtime_error("no slot of the daemon's pool came free within the receive timeout");
  std::memcpy(claim->header.data(), header.data(), header.size());
  if (!written || !(*written)[claim->slot]) {
    std::memcpy(claim->payload.data(), frame.payload.data(), frame.payload.size());
    if (written) (*written)[claim->slot] = true;
  }
  producer.commit(*claim, header.size(), frame.payload.size());
}

// The pool alone: a producer thread writes `count` frames, this thread takes and releases them.
double raw_shm_fps(const BenchFrame& frame, std::size_t count, bool write_once) {
  const std::string endpoint = "shm://bench-raw-" + std::to_string(::getpid());
  shm::PoolOptions options;
  options.slot_count = 8;
  options.payload_capacity = frame.payload.size();
  auto pool = std::shared_ptr<shm::Pool>(shm::Pool::create(endpoint, options));
  shm::Consumer consumer(pool, shm::Mode::lossless);
  BenchFrame copy = frame;
  const std::string header = header_for(copy, 0);
  SteadyClock::time_point first_send;
  std::thread sender([&] {
    shm::Producer producer(endpoint);
    first_send = SteadyClock::now();
    std::vector<bool> written(shm::kMaxSlots, false);
    for (std::size_t i = 0; i < count; ++i) send_shm(producer, header, frame, write_once ? &written : nullptr);
  });
  std::size_t received = 0;
  while (received < count) {
    auto message = consumer.take(SteadyClock::now() + kReceiveTimeout);
    if (!message) break;
    consumer.release(message->slot);
    ++received;
  }
  const auto last = SteadyClock::now();
  sender.join();
  if (received < count) throw std::runtime_error("raw shm run received " + std::to_string(received) + " of " + std::to_string(count));
  return static_cast<double>(count) / std::chrono::duration<double>(last - first_send).count();
}

// Raw ZeroMQ: a PUSH thread sends `count` frames to a PULL on the same transport.
double raw_zeromq_fps(const std::string& transport, const std::string& directory, const BenchFrame& frame,
                      std::size_t count, std::size_t warmup) {
  zmq::context_t context(2);
  zmq::socket_t pull(context, zmq::socket_type::pull);
  pull.set(zmq::sockopt::linger, 0);
  pull.set(zmq::sockopt::rcvtimeo, static_cast<int>(std::chrono::milliseconds(kReceiveTimeout).count()));
  std::string endpoint;
  if (transport == "tcp") {
    pull.bind("tcp://127.0.0.1:*");
    endpoint = pull.get(zmq::sockopt::last_endpoint);
  } else {
    endpoint = "ipc://" + (std::filesystem::path(directory) / "raw-zeromq.ipc").string();
    pull.bind(endpoint);
  }
  BenchFrame copy = frame;
  const std::string header = header_for(copy, 0);
  std::atomic<bool> failed{false};
  SteadyClock::time_point first_send;
  WarmupGate gate;
  std::thread sender([&] {
    zmq::socket_t push(context, zmq::socket_type::push);
    push.set(zmq::sockopt::linger, -1);  // closing waits until every queued frame is delivered
    push.connect(endpoint);
    for (std::size_t i = 0; i < warmup; ++i)
      if (tools::send_frame(push, header, zero_copy(frame), false) != tools::SendResult::sent) failed = true;
    gate.wait();
    first_send = SteadyClock::now();
    for (std::size_t i = 0; i < count; ++i)
      if (tools::send_frame(push, header, zero_copy(frame), false) != tools::SendResult::sent) failed = true;
  });
  std::vector<zmq::message_t> parts;
  std::size_t warmed = 0, received = 0;
  while (warmed < warmup && tools::receive_message(pull, parts)) ++warmed;
  gate.open();
  while (warmed == warmup && received < count && tools::receive_message(pull, parts)) ++received;
  const auto last = SteadyClock::now();
  sender.join();
  if (failed || received < count)
    throw std::runtime_error("raw ZeroMQ run received " + std::to_string(warmed + received) + " of " +
                             std::to_string(warmup + count));
  return static_cast<double>(count) / std::chrono::duration<double>(last - first_send).count();
}

constexpr std::size_t kRotatingOutputs = 8;  // --relay-output rotating: about the daemon's slots and spares
constexpr std::size_t kPinnedOutputs = 3;    // --relay-output pinned | d2h: the daemon's slots

// What the relay publishes (--relay-output):
//   constant  one heap buffer, as a constant message (no free function);
//   rotating  kRotatingOutputs heap buffers in turn, likewise;
//   owned     one heap buffer whose message holds a shared reference that a free function lets go
//             of on the I/O thread, as the daemon's results do (the free function's cost);
//   pinned    kPinnedOutputs pinned buffers from a CUDA host pool (the lane's kind), written by
//             the CPU once, each reused once ZeroMQ let go of it (its free function);
//   d2h       the same buffers, each filled by a D2H copy on the relay thread before it is
//             published: the bytes the daemon publishes, written by DMA, not in any cache;
//   h2d_d2h   as d2h, and first the received frame copied to the device from ZeroMQ's message
//             (pageable, through the driver's staging, as the daemon's lane does): the daemon's
//             host path with its GPU copies and without its stages.
struct RelayPayloads {
  std::string mode;
  std::size_t bytes;
  std::vector<std::vector<std::byte>> heap;
  std::vector<Buffer> pinned;
  std::vector<std::shared_ptr<int>> holds;  // one per buffer; a message in flight holds a copy
  Buffer device, device_input;
  std::unique_ptr<GpuStreamHandle> stream;
  std::unique_ptr<GpuEvent> copied;
  std::shared_ptr<MemoryPool> pool;

  RelayPayloads(const std::string& relay_output, std::size_t output_bytes) : mode(relay_output), bytes(output_bytes) {
    if (mode == "constant" || mode == "owned") heap.assign(1, std::vector<std::byte>(bytes, std::byte{1}));
    else if (mode == "rotating") heap.assign(kRotatingOutputs, std::vector<std::byte>(bytes, std::byte{1}));
    else if (mode == "pinned" || mode == "d2h" || mode == "h2d_d2h") {
      use_gpu_device(0);
      pool = std::make_shared<MemoryPool>(0, 0);
      pinned.resize(kPinnedOutputs);
      for (Buffer& buffer : pinned) {
        buffer.reserve(MemoryKind::pinned, bytes, pool);
        std::memset(buffer.data(), 1, bytes);
      }
      device.reserve(MemoryKind::device, bytes);
      zero_buffer(device, bytes);
      stream = std::make_unique<GpuStreamHandle>();
      copied = std::make_unique<GpuEvent>();
    } else {
      throw std::runtime_error("--relay-output: constant, rotating, owned, pinned, d2h or h2d_d2h, not '" + mode + "'");
    }
    for (std::size_t i = 0; i < std::max(heap.size(), pinned.size()); ++i) holds.push_back(std::make_shared<int>(0));
  }

  // The payload message of the relay's i-th frame (on the relay thread); `input`: the frame's payload.
  zmq::message_t message(std::size_t i, const zmq::message_t& input) {
    const std::size_t count = std::max(heap.size(), pinned.size());
    const std::size_t b = i % count;
    void* data = heap.empty() ? pinned[b].data() : static_cast<void*>(heap[b].data());
    if (mode == "constant" || mode == "rotating") return zmq::message_t(data, bytes, nullptr, nullptr);
    // Held until ZeroMQ lets go of the message (the daemon's Publisher::payload_message does the same).
    while (holds[b].use_count() > 1) std::this_thread::yield();
    if (mode == "h2d_d2h") {
      if (device_input.capacity() < input.size()) device_input.reserve(MemoryKind::device, input.size());
      copy_to_device_async(device_input.data(), input.data(), input.size(), stream->get());
    }
    if (mode == "d2h" || mode == "h2d_d2h") {
      copy_to_host_async(data, device.data(), bytes, stream->get());
      copied->record(stream->get());
      copied->synchronize();
    }
    auto* held = new std::shared_ptr<int>(holds[b]);
    return zmq::message_t(data, bytes, [](void*, void* hint) { delete static_cast<std::shared_ptr<int>*>(hint); }, held);
  }
};

// --io-cpus A B: ZeroMQ I/O thread 0 (the frames' reads) on CPU A and thread 1 (the results'
// writes) on CPU B, in the daemon (its config's `threads:`) and in the relay alike; every other
// thread of the daemon and of the bench on the remaining CPUs. The relay's threads are found by
// name (libzmq names them ZMQbg/IO/<n>).
std::string thread_name(pid_t pid, pid_t tid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

void set_thread_cpus(pid_t tid, const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  if (sched_setaffinity(tid, sizeof set, &set) != 0)
    throw std::runtime_error("--io-cpus: cannot set the CPUs of thread " + std::to_string(tid));
}

std::vector<int> cpus_but(const std::vector<int>& io_cpus) {
  std::vector<int> rest;
  const int count = static_cast<int>(std::thread::hardware_concurrency());
  for (int cpu = 0; cpu < count; ++cpu)
    if (std::find(io_cpus.begin(), io_cpus.end(), cpu) == io_cpus.end()) rest.push_back(cpu);
  return rest;
}

// `tids` of `pid` (all when empty): ZMQbg/IO/0 -> io_cpus[0], ZMQbg/IO/1 -> io_cpus[1], others the rest
// (`others`: false leaves the others as they are).
void place_threads(pid_t pid, const std::vector<int>& io_cpus, const std::set<pid_t>& tids = {}, bool others = true) {
  if (io_cpus.size() != 2) return;
  for (pid_t tid : tids.empty() ? thread_ids(pid) : tids) {
    const std::string name = thread_name(pid, tid);
    if (name == "ZMQbg/IO/0") set_thread_cpus(tid, {io_cpus[0]});
    else if (name == "ZMQbg/IO/1") set_thread_cpus(tid, {io_cpus[1]});
    else if (others) set_thread_cpus(tid, cpus_but(io_cpus));
  }
}

// Raw ZeroMQ relay: the daemon's I/O without its work. PUSH -> [PULL -> PUB] -> SUB, the relay
// thread publishing an output-sized payload per frame as the daemon does ([topic][header][payload]).
// Returns frames/s (N pushed as fast as they go); with `latency_ms`, sends the N frames one at a
// time instead, as the daemon's latency run does, and gives their round trips (0 returned).
double raw_relay(const std::string& transport, const std::string& directory, const BenchFrame& frame,
                 std::size_t output_bytes, std::size_t count, std::size_t warmup, bool split_contexts,
                 const std::string& relay_output, const std::vector<int>& io_cpus,
                 std::vector<double>* latency_ms = nullptr, Row::Relay* row = nullptr) {
  // Split: the relay's own context, its sockets on the daemon's I/O threads (ingest bit 0, publish
  // bit 1); the bench's PUSH and SUB in another context, as against the daemon.
  const std::set<pid_t> threads_before = thread_ids(::getpid());
  zmq::context_t context(2);
  zmq::context_t bench_context(2);
  zmq::context_t& client_context = split_contexts ? bench_context : context;
  auto endpoint_for = [&](zmq::socket_t& socket, const std::string& name) {
    if (transport == "tcp") {
      socket.bind("tcp://127.0.0.1:*");
      return socket.get(zmq::sockopt::last_endpoint);
    }
    const std::string endpoint = "ipc://" + (std::filesystem::path(directory) / name).string();
    socket.bind(endpoint);
    return endpoint;
  };
  zmq::socket_t relay_in(context, zmq::socket_type::pull), relay_out(context, zmq::socket_type::pub);
  if (split_contexts) {
    relay_in.set(zmq::sockopt::affinity, std::uint64_t{1} << 0);
    relay_out.set(zmq::sockopt::affinity, std::uint64_t{1} << 1);
  }
  // The relay context's threads (its I/O threads start with its first socket), for --timeline's
  // per-thread CPU table.
  std::set<pid_t> relay_threads;
  if (split_contexts)
    for (pid_t tid : thread_ids(::getpid()))
      if (!threads_before.contains(tid)) relay_threads.insert(tid);
  if (split_contexts) place_threads(::getpid(), io_cpus, relay_threads, false);
  zmq::socket_t sub(client_context, zmq::socket_type::sub);
  for (zmq::socket_t* s : {&relay_in, &relay_out, &sub}) s->set(zmq::sockopt::linger, 0);
  relay_out.set(zmq::sockopt::sndhwm, 0);
  sub.set(zmq::sockopt::rcvhwm, 0);
  sub.set(zmq::sockopt::rcvtimeo, static_cast<int>(std::chrono::milliseconds(kReceiveTimeout).count()));
  sub.set(zmq::sockopt::subscribe, tools::kResultTopicPrefix);
  const std::string in_endpoint = endpoint_for(relay_in, "relay-in.ipc");
  const std::string out_endpoint = endpoint_for(relay_out, "relay-out.ipc");
  {
    tools::PeerWatch watch(client_context, sub);
    sub.connect(out_endpoint);
    if (!watch.wait(std::chrono::seconds(10))) throw std::runtime_error("relay: no handshake");
    std::this_thread::sleep_for(kSubscriptionMargin);
  }
  RelayPayloads payloads(relay_output, output_bytes);
  const std::string topic = tools::result_topic("bench", "relay");
  std::atomic<pid_t> relay_tid{0};
  CountedGate counted;
  std::thread relay([&] {
    pthread_setname_np(pthread_self(), "relay");
    relay_tid.store(this_thread_id());
    std::vector<zmq::message_t> parts;
    for (std::size_t i = 0; i < warmup + count && tools::receive_message(relay_in, parts); ++i) {
      relay_out.send(zmq::buffer(topic), zmq::send_flags::sndmore);
      relay_out.send(parts[0], zmq::send_flags::sndmore);
      relay_out.send(payloads.message(i, parts.back()), zmq::send_flags::none);
    }
    counted.linger();
  });
  BenchFrame copy = frame;
  const std::string header = header_for(copy, 0);
  zmq::socket_t push(client_context, zmq::socket_type::push);
  push.set(zmq::sockopt::linger, -1);
  push.connect(in_endpoint);
  std::vector<zmq::message_t> parts;
  if (latency_ms) {
    std::size_t received = 0;
    for (std::size_t i = 0; i < warmup + count; ++i) {
      const auto sent = SteadyClock::now();
      tools::send_frame(push, header, zero_copy(frame), false);
      if (!tools::receive_message(sub, parts)) break;
      ++received;
      if (i >= warmup) latency_ms->push_back(std::chrono::duration<double, std::milli>(SteadyClock::now() - sent).count());
    }
    counted.release();
    relay.join();
    if (received < warmup + count)
      throw std::runtime_error("raw relay latency run received " + std::to_string(received) + " of " +
                               std::to_string(warmup + count));
    return 0;
  }
  SteadyClock::time_point first_send;
  WarmupGate gate;
  ThreadCpuTable cpu_before;
  std::thread sender([&] {
    pthread_setname_np(pthread_self(), "bench-sender");
    for (std::size_t i = 0; i < warmup; ++i) tools::send_frame(push, header, zero_copy(frame), false);
    gate.wait();
    first_send = SteadyClock::now();
    for (std::size_t i = 0; i < count; ++i) tools::send_frame(push, header, zero_copy(frame), false);
    counted.linger();
  });
  std::size_t warmed = 0, received = 0;
  while (warmed < warmup && tools::receive_message(sub, parts)) ++warmed;
  while (relay_tid.load() == 0) std::this_thread::yield();
  relay_threads.insert(relay_tid.load());
  if (split_contexts) cpu_before = thread_cpu(::getpid(), relay_threads);
  gate.open();
  while (warmed == warmup && received < count && tools::receive_message(sub, parts)) ++received;
  const auto last = SteadyClock::now();
  if (split_contexts && row) {
    const ThreadCpuTable after = thread_cpu(::getpid(), relay_threads);
    ThreadCpuTable relay_side, bench_side;
    for (const auto& [name, cpu] : after) (name.rfind("relay: ", 0) == 0 ? relay_side : bench_side)[name] = cpu;
    add_thread_cpu(row->threads, cpu_before, relay_side);
    add_thread_cpu(row->bench_threads, cpu_before, bench_side);
    row->frames_timed += count;
  }
  counted.release();
  sender.join();
  relay.join();
  if (received < count)
    throw std::runtime_error("raw relay run received " + std::to_string(warmed + received) + " of " +
                             std::to_string(warmup + count));
  return static_cast<double>(count) / std::chrono::duration<double>(last - first_send).count();
}

// The result pool of an shm run (publish.shm, lossless: read in place by the bench).
std::string results_endpoint() { return "shm://sonopiped-bench-results-" + std::to_string(::getpid()); }
constexpr int kResultSlots = 16;

std::string daemon_config(const tools::DaemonEndpoints& endpoints, const CoreOptions& options, std::size_t max_bytes) {
  std::ostringstream yaml;
  const bool shm_results = shm::is_shm_endpoint(endpoints.ingest);
  yaml << "# generated by sonopipe-bench core\n"
       << "ingest: {endpoint: \"" << endpoints.ingest << "\", pattern: pull}\n"
       << "publish: {endpoint: \"" << endpoints.publish << "\", high_water_mark: 100000"
       << (options.max_queued_bytes ? ", max_queued_bytes: " + std::to_string(options.max_queued_bytes) : std::string())
       << (shm_results ? ", shm: {endpoint: \"" + results_endpoint() + "\", mode: lossless, slots: " +
                             std::to_string(kResultSlots) + "}"
                       : std::string())
       << "}\n"
       << "control: {endpoint: \"" << endpoints.control << "\"}\n"
       << "backend: " << options.backend << "\n"
       << "slots: " << options.slots << "\n"
       << "queue_depth: " << options.queue_depth << "\n"
       << "overflow: block\n"
       << "max_frame_bytes: " << max_bytes << "\n"
       << "non_finite: pass\n"
       << "cpu_threads: " << options.cpu_threads << "\n"
       << (options.cuda_blocking_sync ? "cuda_wait: block\n" : "")
       << (options.io_cpus.size() == 2 ? "threads: {cpus: \"" + cpu_list_text(cpus_but(options.io_cpus)) +
                                             "\", ingest_io_cpus: \"" + std::to_string(options.io_cpus[0]) +
                                             "\", publish_io_cpus: \"" + std::to_string(options.io_cpus[1]) + "\"}\n"
                                       : std::string())
       << "log_level: warn\n"
       << "pipelines:\n"
       << "  - name: bench\n"
       << "    stages:\n"
       << "      - {type: convert, params: {scale: 1.0}}\n";
  if (options.pipeline == "beamform")
    yaml << "      - {type: beamform, params: {x_min_m: -0.019, x_max_m: 0.019, lateral_pixels: 256, z_min_m: 0.005,\n"
         << "                                  z_max_m: 0.05, depth_pixels: 1024, apodisation: hann, f_number: 1.5}}\n";
  if (options.pipeline == "arfi")  // config/arfi.yaml's chain
    yaml << "      - {type: upsample, params: {mode: subsets, boundary: natural, factor: 5, factor_denominator: 1,\n"
         << "                                  subset_knots: 16, overlap: 12}}\n"
         << "      - {type: loupas, params: {kernel_samples: 0, kernel_wavelengths: 1.5, output_step: 1, output_dtype: float32}}\n"
         << "      - {type: motion_filter, params: {order: 1, late_tracks: 10, use_reference: true, output_dtype: float32}}\n";
  return yaml.str();
}

// The bench's two sockets on one daemon: PUSH to its ingest, SUB on its results.
struct DaemonClient {
  zmq::context_t context{2};
  zmq::socket_t push{context, zmq::socket_type::push};
  zmq::socket_t sub{context, zmq::socket_type::sub};
  std::unique_ptr<shm::Producer> shm;  // an shm:// ingest: frames into its pool instead of `push`
  std::unique_ptr<shm::Consumer> results;  // ... and results read in place from the daemon's result pool
  std::vector<zmq::message_t> parts;
  std::size_t last_result_bytes = 0;
  bool write_once = false;              // --shm-write first
  const BenchFrame* written_frame = nullptr;  // the frame the pool's slots hold (write_once)
  std::vector<bool> written;

  // One frame to the daemon's ingest (one sending thread at a time).
  void send(const std::string& header, const BenchFrame& frame) {
    if (shm && write_once) {
      if (written_frame != &frame) written.assign(shm::kMaxSlots, false);  // another frame: write again
      written_frame = &frame;
      send_shm(*shm, header, frame, &written);
    } else if (shm) {
      send_shm(*shm, header, frame);
    }
    else tools::send_frame(push, header, zero_copy(frame), false);
  }

  explicit DaemonClient(const tools::DaemonEndpoints& endpoints) {
    push.set(zmq::sockopt::linger, 0);
    sub.set(zmq::sockopt::linger, 0);
    sub.set(zmq::sockopt::rcvhwm, 0);  // never drop a result on our side
    sub.set(zmq::sockopt::rcvtimeo, static_cast<int>(std::chrono::milliseconds(kReceiveTimeout).count()));
    const bool shm_ingest = shm::is_shm_endpoint(endpoints.ingest);
    // With shm the results come from the result pool; the SUB subscribes to nothing (no result
    // crosses the ipc connection) and only stands for the handshake.
    sub.set(zmq::sockopt::subscribe, shm_ingest ? "-" : tools::kResultTopicPrefix);
    tools::PeerWatch watch(context, sub);
    sub.connect(endpoints.publish);
    if (!watch.wait(std::chrono::seconds(10))) throw std::runtime_error("no handshake with the daemon's publisher");
    std::this_thread::sleep_for(kSubscriptionMargin);  // the subscription travels after the handshake
    if (shm_ingest) {
      shm = open_ready_producer(endpoints.ingest);
      results = std::make_unique<shm::Consumer>(results_endpoint(), shm::Mode::lossless);
    } else {
      push.connect(endpoints.ingest);
    }
  }

  // Next result: its header and the wall time it arrived.
  v1::ResultHeader receive(std::int64_t& received_ns) {
    if (results) return receive_shm(received_ns);
    if (!tools::receive_message(sub, parts))
      throw std::runtime_error("no result from the daemon within " +
                               std::to_string(std::chrono::seconds(kReceiveTimeout).count()) + " s");
    received_ns = tools::wall_clock_ns();
    v1::ResultHeader header;
    if (parts.size() != 3 || !header.ParseFromArray(parts[1].data(), static_cast<int>(parts[1].size())))
      throw std::runtime_error("daemon published a message that is not [topic][ResultHeader][payload]");
    last_result_bytes = parts.back().size();
    return header;
  }

  // A result from the pool: [topic '\0' ResultHeader][payload], read in place, then released.
  v1::ResultHeader receive_shm(std::int64_t& received_ns) {
    const auto message = results->take(SteadyClock::now() + kReceiveTimeout);
    if (!message)
      throw std::runtime_error("no result in the daemon's result pool within " +
                               std::to_string(std::chrono::seconds(kReceiveTimeout).count()) + " s");
    received_ns = tools::wall_clock_ns();
    const char* bytes = reinterpret_cast<const char*>(message->header);
    const std::size_t topic = strnlen(bytes, message->header_bytes);
    v1::ResultHeader header;
    const bool parsed = topic < message->header_bytes &&
                        header.ParseFromArray(bytes + topic + 1, static_cast<int>(message->header_bytes - topic - 1));
    last_result_bytes = message->payload_bytes;
    results->release(message->slot);
    if (!parsed) throw std::runtime_error("daemon wrote a result that is not [topic '\\0' ResultHeader] into its pool");
    return header;
  }
};

// The process's minor page faults so far (/proc/<pid>/stat field 10), or -1.
long minor_faults(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const std::size_t end_of_name = text.rfind(')');
  if (end_of_name == std::string::npos) return -1;
  std::istringstream fields(text.substr(end_of_name + 2));
  std::string field;
  for (int i = 3; i <= 10 && fields >> field; ++i)
    if (i == 10) return std::stol(field);
  return -1;
}

std::string fixed(double value, int precision);

// W frames one at a time through the daemon, not timed (the first also configures the pipeline).
void warm_up(DaemonClient& client, BenchFrame& frame, std::size_t count, std::uint64_t& sequence, Row& row) {
  std::int64_t received_ns = 0;
  for (std::size_t i = 0; i < std::max<std::size_t>(1, count); ++i) {
    client.send(header_for(frame, sequence++), frame);
    client.receive(received_ns);
    row.output_bytes = client.last_result_bytes;
  }
}

// One throughput run: a sender thread pushes N frames, this thread collects N results; frames/s.
double daemon_throughput(tools::DaemonLauncher& daemon, DaemonClient& client, const BenchFrame& frame,
                         const CoreOptions& options, std::uint64_t& sequence, Row& row) {
  const std::uint64_t first_sequence = sequence;
  sequence += options.frames;
  const long faults_before = minor_faults(daemon.pid());
  row.throughput_sequences.emplace_back(first_sequence, options.frames);
  const ThreadCpuTable cpu_before = thread_cpu(daemon.pid()), bench_before = thread_cpu(::getpid());
  const auto start = SteadyClock::now();
  CountedGate counted;
  std::thread sender([&] {
    pthread_setname_np(pthread_self(), "bench-sender");
    BenchFrame local = frame;  // own header state; the payload is shared read-only
    for (std::size_t i = 0; i < options.frames; ++i)
      client.send(header_for(local, first_sequence + i), frame);
    counted.linger();
  });
  std::size_t results = 0;
  std::int64_t received_ns = 0;
  try {
    while (results < options.frames) {
      client.receive(received_ns);
      ++results;
    }
  } catch (const std::exception& e) {
    // Why the results stopped: the daemon gone, or our subscriber cut or starved (its counters).
    std::cerr << "throughput run: " << results << " of " << options.frames << " results, then: " << e.what() << "\n";
    try {
      const v1::Status status = daemon.status();
      std::cerr << "  daemon answers: frames received " << status.frames_received() << ", results published "
                << status.results_published() << ", subscribers cut " << status.subscribers_cut()
                << ", results dropped for subscribers " << status.results_dropped_for_subscribers() << "\n";
    } catch (const std::exception& status_error) {
      std::cerr << "  daemon does not answer (" << status_error.what() << "):\n" << daemon.log_tail() << "\n";
    }
    counted.release();
    sender.join();
    throw;
  }
  const double seconds = tools::seconds_since(start);
  add_thread_cpu(row.daemon_threads, cpu_before, thread_cpu(daemon.pid()));
  add_thread_cpu(row.bench_threads, bench_before, thread_cpu(::getpid()));
  row.daemon_frames_timed += options.frames;
  counted.release();
  sender.join();
  if (const long faults_after = minor_faults(daemon.pid()); faults_before >= 0 && faults_after >= 0)
    row.faults_per_frame = static_cast<double>(faults_after - faults_before) / static_cast<double>(options.frames);
  return static_cast<double>(options.frames) / seconds;
}

// The daemon's own per-frame timing after the throughput runs.
void read_daemon_timing(tools::DaemonLauncher& daemon, std::size_t rejected_before, Row& row) {
  const v1::Status status = daemon.status();
  row.daemon_rejected = status.frames_rejected() - rejected_before;
  row.cuda = status.backend() == "cuda";
  if (row.cuda && status.pipelines_size() > 0) {
    const v1::PipelineStatus& pipeline = status.pipelines(0);
    double stages_ms = 0;
    for (const v1::StageTiming& stage : status.stages()) stages_ms += stage.compute_ms_p50();
    // The daemon's own per-frame sum when it reports one, else the sum of the medians.
    row.gpu_busy_ms = pipeline.busy_ms_p50() > 0 ? pipeline.busy_ms_p50()
                                                 : pipeline.h2d_ms_p50() + stages_ms + pipeline.d2h_ms_p50();
    row.gpu_bottleneck_ms = std::max({pipeline.h2d_ms_p50(), stages_ms, pipeline.d2h_ms_p50()});
    row.h2d_ms = pipeline.h2d_ms_p50();
    row.stages_ms = stages_ms;
    row.d2h_ms = pipeline.d2h_ms_p50();
  }
  row.results_in_place = status.shm_results_in_place();
}

void measure_latency(tools::DaemonLauncher& daemon, DaemonClient& client, BenchFrame& frame,
                     const CoreOptions& options, std::uint64_t& sequence, Row& row) {
  std::int64_t received_ns = 0;
  // One frame in flight at a time, after kLatencySettle frames that are not counted: the first
  // frames after the throughput run wait behind its tail (buffers being handed back, queues
  // draining; seen as the slowest three frames of the run being its first three).
  constexpr std::size_t kLatencySettle = 10;
  for (std::size_t i = 0; i < kLatencySettle; ++i) {
    client.send(header_for(frame, sequence++), frame);
    client.receive(received_ns);
  }
  std::vector<double> e2e_ms, daemon_ms, in_ms, out_ms;
  const long faults_before = minor_faults(daemon.pid());
  row.latency_sequences.emplace_back(sequence, options.latency_frames);
  for (std::size_t i = 0; i < options.latency_frames; ++i) {
    const std::uint64_t expected = sequence;
    const std::int64_t sent_ns = tools::wall_clock_ns();
    client.send(header_for(frame, sequence++), frame);
    v1::ResultHeader header = client.receive(received_ns);
    if (header.input_sequence() != expected)
      throw std::runtime_error("latency run: result for frame " + std::to_string(header.input_sequence()) +
                               ", expected " + std::to_string(expected));
    const v1::Timing& t = header.timing();
    e2e_ms.push_back(static_cast<double>(received_ns - sent_ns) * 1e-6);
    daemon_ms.push_back(static_cast<double>(t.published_ns() - t.received_ns()) * 1e-6);
    in_ms.push_back(static_cast<double>(t.received_ns() - sent_ns) * 1e-6);
    out_ms.push_back(static_cast<double>(received_ns - t.published_ns()) * 1e-6);
  }
  if (const long faults_after = minor_faults(daemon.pid()); faults_before >= 0 && faults_after >= 0)
    row.latency_faults_per_frame =
        static_cast<double>(faults_after - faults_before) / static_cast<double>(options.latency_frames);
  // Where the tail lies: the three slowest frames of the run, with their place in it and their legs.
  std::vector<std::size_t> order(e2e_ms.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return e2e_ms[a] > e2e_ms[b]; });
  for (std::size_t i = 0; i < std::min<std::size_t>(3, order.size()); ++i) {
    const std::size_t k = order[i];
    row.slowest += (i ? ", #" : "#") + std::to_string(k) + ": " + fixed(e2e_ms[k], 2) + " = " + fixed(in_ms[k], 2) +
                   " + " + fixed(daemon_ms[k], 2) + " + " + fixed(out_ms[k], 2);
  }
  row.e2e_p50_ms = percentile(e2e_ms, 0.50);
  row.e2e_p99_ms = percentile(e2e_ms, 0.99);
  row.daemon_p50_ms = percentile(daemon_ms, 0.50);
  row.daemon_p99_ms = percentile(daemon_ms, 0.99);
  row.in_p50_ms = percentile(in_ms, 0.50);
  row.in_p99_ms = percentile(in_ms, 0.99);
  row.out_p50_ms = percentile(out_ms, 0.50);
  row.out_p99_ms = percentile(out_ms, 0.99);
}

double median(std::vector<double> values) { return percentile(std::move(values), 0.5); }

// The daemon's host-path timeline (SONOPIPE_HOST_TIMELINE, runtime/host_timeline.h) over the
// throughput runs of `row`: per step, the median and p90 over frames, in ms; and the pace of each
// point (median interval between consecutive frames passing it), which names the slowest step.
std::string summarise_timeline(const std::string& path,
                               const std::vector<std::pair<std::uint64_t, std::size_t>>& sequences) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return "no timeline at " + path;
  std::vector<std::string> names;
  {
    std::istringstream header(line);
    for (std::string name; std::getline(header, name, ',');) names.push_back(name);
  }
  auto column = [&](const std::string& name) {
    const auto it = std::find(names.begin(), names.end(), name);
    return it == names.end() ? -1 : static_cast<int>(it - names.begin());
  };
  std::map<std::uint64_t, std::vector<std::int64_t>> frames;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::int64_t> values;
    for (std::string field; std::getline(fields, field, ',');) values.push_back(std::stoll(field));
    if (values.size() == names.size()) frames[static_cast<std::uint64_t>(values[0])] = values;
  }
  struct Step {
    const char* label;
    const char* from;
    const char* to;
  };
  static constexpr Step steps[] = {
      {"received -> admitted (checks, queue push)", "received", "admitted"},
      {"received -> popped (queue wait)", "received", "popped"},
      {"popped -> slot free (slot wait)", "popped", "slot"},
      {"host part of the upload (the driver's copy from pageable memory)", "staging_begin", "staging_end"},
      {"slot -> issued (submit thread's work)", "slot", "issued"},
      {"issued -> payload released", "issued", "payload_released"},
      {"GPU H2D", "gpu_start", "gpu_h2d_end"},
      {"GPU stages", "gpu_h2d_end", "gpu_stages_end"},
      {"GPU D2H", "gpu_stages_end", "gpu_done"},
      {"GPU done -> seen by the completion thread", "gpu_done", "done_seen"},
      {"seen -> published", "done_seen", "published"},
      {"published -> slot free", "published", "slot_free"},
      {"received -> published (the daemon's part)", "received", "published"},
  };
  static constexpr const char* paces[] = {"received", "popped", "staging_end", "gpu_start", "gpu_h2d_end",
                                          "gpu_done", "done_seen", "published"};
  std::ostringstream out;
  std::size_t counted = 0;
  std::map<std::string, std::vector<double>> step_ms, pace_ms;
  for (const auto& [first, count] : sequences) {
    const std::vector<std::int64_t>* previous = nullptr;
    for (std::uint64_t sequence = first; sequence < first + count; ++sequence) {
      const auto it = frames.find(sequence);
      if (it == frames.end()) {
        previous = nullptr;
        continue;
      }
      const std::vector<std::int64_t>& f = it->second;
      ++counted;
      for (const Step& step : steps) {
        const int a = column(step.from), b = column(step.to);
        if (a >= 0 && b >= 0 && f[a] != 0 && f[b] != 0) step_ms[step.label].push_back((f[b] - f[a]) * 1e-6);
      }
      if (previous)
        for (const char* point : paces) {
          const int c = column(point);
          if (c >= 0 && f[c] != 0 && (*previous)[c] != 0) pace_ms[point].push_back((f[c] - (*previous)[c]) * 1e-6);
        }
      previous = &f;
    }
  }
  out << counted << " frames; ms p50 / p90:";
  for (const Step& step : steps) {
    const auto& v = step_ms[step.label];
    if (v.empty()) continue;
    out << "\n      " << step.label << ": " << fixed(percentile(v, 0.5), 3) << " / " << fixed(percentile(v, 0.9), 3);
  }
  out << "\n    pace (interval between consecutive frames at each point), ms p50 / p90:";
  for (const char* point : paces) {
    const auto& v = pace_ms[point];
    if (v.empty()) continue;
    out << "\n      " << point << ": " << fixed(percentile(v, 0.5), 3) << " / " << fixed(percentile(v, 0.9), 3);
  }
  return out.str();
}

std::string thread_table(const ThreadCpuTable& table, std::size_t frames) {
  if (frames == 0 || table.empty()) return "-";
  std::vector<std::pair<std::string, ThreadCpu>> rows(table.begin(), table.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.run_ns > b.second.run_ns; });
  std::ostringstream out;
  for (const auto& [name, cpu] : rows) {
    if (cpu.run_ns < 100 * static_cast<std::int64_t>(frames)) continue;  // under 0.1 us per frame
    const double per = 1e-6 / static_cast<double>(frames);
    out << "\n      " << name << ": " << fixed(cpu.run_ns * per, 3) << " ms on CPU, " << fixed(cpu.wait_ns * per, 3)
        << " ms runnable but waiting, " << fixed(static_cast<double>(cpu.slices) / static_cast<double>(frames), 1)
        << " time slices";
  }
  return out.str();
}

// One point: warm-up, R throughput runs of the daemon alternating with raw and relay runs (each
// W untimed frames first), the daemon's timing, the latency run.
void run_point(tools::DaemonLauncher& daemon, DaemonClient& client, BenchFrame& frame, const CoreOptions& options,
               const std::string& transport, const std::string& directory, std::uint64_t& sequence, Row& row) {
  warm_up(client, frame, options.warmup, sequence, row);
  const v1::Status before = daemon.status();
  const std::size_t rejected_before = before.frames_rejected();
  const std::uint64_t copied_before = before.pipelines_size() > 0 ? before.pipelines(0).results_copied() : 0;
  const std::uint64_t waited_before = before.pipelines_size() > 0 ? before.pipelines(0).results_waited() : 0;
  if (transport != "shm")
    for (const std::string& output : options.relay_outputs) row.relays.push_back({.output = output});
  for (std::size_t run = 0; run < std::max<std::size_t>(1, options.repeats); ++run) {
    if (run > 0) warm_up(client, frame, options.warmup, sequence, row);
    row.daemon_runs.push_back(daemon_throughput(daemon, client, frame, options, sequence, row));
    if (transport == "shm") {
      row.raw_runs.push_back(raw_shm_fps(frame, options.frames, options.shm_write == "first"));
    } else {
      row.raw_runs.push_back(raw_zeromq_fps(transport, directory, frame, options.frames, options.warmup));
      for (Row::Relay& relay : row.relays)
        relay.runs.push_back(raw_relay(transport, directory, frame, row.output_bytes, options.frames, options.warmup,
                                       options.relay == "split", relay.output, options.io_cpus, nullptr, &relay));
    }
  }
  row.daemon_fps = median(row.daemon_runs);
  row.raw_fps = median(row.raw_runs);
  row.relay_fps = row.relays.empty() ? std::nan("") : median(row.relays[0].runs);  // shm: results leave over ipc
  if (const v1::Status after = daemon.status(); after.pipelines_size() > 0) {
    row.results_copied = after.pipelines(0).results_copied() - copied_before;
    row.results_waited = after.pipelines(0).results_waited() - waited_before;
  }
  read_daemon_timing(daemon, rejected_before, row);
  measure_latency(daemon, client, frame, options, sequence, row);
  if (transport != "shm") {
    // The same latency run through the relay, with the same settling frames: the transport's own tail.
    std::vector<double> relay_ms;
    raw_relay(transport, directory, frame, row.output_bytes, options.latency_frames, 10, options.relay == "split",
              options.relay_outputs[0], options.io_cpus, &relay_ms);
    row.relay_p50_ms = percentile(relay_ms, 0.50);
    row.relay_p99_ms = percentile(relay_ms, 0.99);
  }
}

long rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// One frame through the daemon and its result back (the stalled run sends one at a time, so the
// ingest queue holds nothing and the RSS shows the publish side).
void one_frame(DaemonClient& client, BenchFrame& frame, std::uint64_t& sequence) {
  std::int64_t received_ns = 0;
  client.send(header_for(frame, sequence++), frame);
  client.receive(received_ns);
}

StallRow run_stall(tools::DaemonLauncher& daemon, DaemonClient& client, BenchFrame& frame, const CoreOptions& options,
                   const std::string& publish_endpoint, std::uint64_t& sequence, std::size_t result_bytes) {
  StallRow row{.result_bytes = result_bytes, .slots = options.slots};
  for (int i = 0; i < 4; ++i) one_frame(client, frame, sequence);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  row.baseline_kib = rss_kib(daemon.pid());
  {
    zmq::context_t context(1);
    zmq::socket_t stalled(context, zmq::socket_type::sub);
    stalled.set(zmq::sockopt::rcvhwm, 1);
    stalled.set(zmq::sockopt::rcvbuf, 64 * 1024);
    stalled.set(zmq::sockopt::linger, 0);
    stalled.set(zmq::sockopt::subscribe, "");
    {
      tools::PeerWatch watch(context, stalled);
      stalled.connect(publish_endpoint);
      if (!watch.wait(std::chrono::seconds(10))) throw std::runtime_error("stall: no handshake");
      std::this_thread::sleep_for(kSubscriptionMargin);
    }
    for (std::size_t i = 0; i < options.stall_frames; ++i) {
      one_frame(client, frame, sequence);
      row.peak_kib = std::max(row.peak_kib, rss_kib(daemon.pid()));
    }
    const v1::Status status = daemon.status();
    row.bound_bytes = status.publish_max_queued_bytes();
  }
  // Frames go on for 3 s after it left (spare buffers are freed after 1 s of keeping up; the
  // heartbeats return freed memory for 5 s after a subscriber left).
  const auto until = SteadyClock::now() + std::chrono::seconds(3);
  while (SteadyClock::now() < until) {
    one_frame(client, frame, sequence);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  row.after_kib = rss_kib(daemon.pid());
  const v1::Status after = daemon.status();
  row.dropped = after.results_dropped_for_subscribers();
  row.cut = after.subscribers_cut();
  return row;
}

std::string fixed(double value, int precision) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(precision) << value;
  return out.str();
}

void print_table(const std::vector<Row>& rows) {
  std::cout << "\n"
            << std::left << std::setw(5) << "tx" << std::right << std::setw(7) << "MB" << std::setw(11) << "daemon f/s"
            << std::setw(9) << "GB/s" << std::setw(11) << "raw f/s" << std::setw(9) << "GB/s" << std::setw(8) << "ratio"
            << std::setw(11) << "relay f/s" << std::setw(8) << "ratio"
            << std::setw(10) << "e2e p50" << std::setw(9) << "e2e p99" << std::setw(10) << "dmn p50" << std::setw(9)
            << "dmn p99" << "  GPU overlap (H2D+kernels+D2H per frame / wall per frame)\n";
  for (const Row& r : rows) {
    const double gb = static_cast<double>(r.frame_bytes) / 1e9;
    std::cout << std::left << std::setw(5) << r.transport << std::right << std::setw(7) << fixed(r.size_mb, 1)
              << std::setw(11) << fixed(r.daemon_fps, 1) << std::setw(9) << fixed(r.daemon_fps * gb, 3) << std::setw(11)
              << fixed(r.raw_fps, 1) << std::setw(9) << fixed(r.raw_fps * gb, 3) << std::setw(7)
              << fixed(100.0 * r.daemon_fps / r.raw_fps, 1) << "%" << std::setw(11) << fixed(r.relay_fps, 1)
              << std::setw(7) << fixed(100.0 * r.daemon_fps / r.relay_fps, 1) << "%" << std::setw(10) << fixed(r.e2e_p50_ms, 3)
              << std::setw(9) << fixed(r.e2e_p99_ms, 3) << std::setw(10) << fixed(r.daemon_p50_ms, 3) << std::setw(9)
              << fixed(r.daemon_p99_ms, 3);
    if (r.cuda) {
      const double wall_ms = 1000.0 / r.daemon_fps;
      std::cout << "  " << fixed(r.gpu_busy_ms, 3) << " / " << fixed(wall_ms, 3) << " ms = "
                << fixed(r.gpu_busy_ms / wall_ms, 2) << " (slowest engine " << fixed(100.0 * r.gpu_bottleneck_ms / wall_ms, 0)
                << " % of wall)";
    }
    if (r.daemon_rejected) std::cout << "  [" << r.daemon_rejected << " rejected!]";
    if (r.transport == "shm") std::cout << "  [" << r.results_in_place << " results written in place]";
    if (r.cuda) std::cout << "  [p50 ms: H2D " << fixed(r.h2d_ms, 3) << ", stages " << fixed(r.stages_ms, 3) << ", D2H " << fixed(r.d2h_ms, 3) << "]";
    std::cout << "\n";
  }
  auto runs = [](const std::vector<double>& values) {
    std::string text;
    for (double v : values) text += (text.empty() ? "" : ", ") + fixed(v, 1);
    return text.empty() ? std::string("-") : text;
  };
  auto spread = [](const std::vector<double>& values) {
    if (values.empty()) return std::string("-");
    const auto [low, high] = std::minmax_element(values.begin(), values.end());
    return fixed(*low, 1) + " / " + fixed(median(values), 1) + " / " + fixed(*high, 1);
  };
  std::cout << "throughput runs, frames/s in run order (the table gives their medians):";
  for (const Row& r : rows) {
    std::cout << "\n  " << r.transport << " " << fixed(r.size_mb, 1) << " MB: daemon " << runs(r.daemon_runs);
    for (const Row::Relay& relay : r.relays) std::cout << "; relay " << relay.output << " " << runs(relay.runs);
    std::cout << "; raw " << runs(r.raw_runs);
  }
  std::cout << "\nthroughput, frames/s min / median / max, and the daemon's median against each relay's:";
  for (const Row& r : rows) {
    std::cout << "\n  " << r.transport << " " << fixed(r.size_mb, 1) << " MB: daemon " << spread(r.daemon_runs);
    for (const Row::Relay& relay : r.relays)
      std::cout << "; relay " << relay.output << " " << spread(relay.runs) << " ("
                << fixed(100.0 * r.daemon_fps / median(relay.runs), 1) << " %)";
    std::cout << "; results published as copies (spare buffers all held) " << r.results_copied << " of "
              << r.daemon_runs.size() * (r.daemon_runs.empty() ? 0 : r.daemon_frames_timed / r.daemon_runs.size())
              << ", waited for a spare " << r.results_waited;
  }
  std::cout << "\nlatency legs, ms p50 / p99 (sent -> the daemon's ingest has it; the daemon's received -> published; "
               "published -> the bench has it):";
  for (const Row& r : rows)
    std::cout << "\n  " << r.transport << " " << fixed(r.size_mb, 1) << " MB: " << fixed(r.in_p50_ms, 3) << " / "
              << fixed(r.in_p99_ms, 3) << "; " << fixed(r.daemon_p50_ms, 3) << " / " << fixed(r.daemon_p99_ms, 3) << "; "
              << fixed(r.out_p50_ms, 3) << " / " << fixed(r.out_p99_ms, 3) << "; the relay's round trip (no daemon) "
              << fixed(r.relay_p50_ms, 3) << " / " << fixed(r.relay_p99_ms, 3);
  std::cout << "\nlatency run, slowest frames (#index: e2e = in + daemon + out ms):";
  for (const Row& r : rows) std::cout << "\n  " << r.transport << " " << fixed(r.size_mb, 1) << " MB: " << r.slowest;
  std::cout << "\ndaemon page faults per frame (throughput run; one per 4 KiB page touched for the first time):";
  for (const Row& r : rows)
    std::cout << " " << r.transport << " " << fixed(r.size_mb, 1) << " MB " << fixed(r.faults_per_frame, 0)
              << " (latency run " << fixed(r.latency_faults_per_frame, 1) << ");";
  // The two I/O threads side by side (the host path's bottleneck is one of them, docs/host-path.md).
  auto io_ms = [](const ThreadCpuTable& table, const std::string& name, std::size_t frames) {
    const auto it = table.find(name);
    return it == table.end() || frames == 0 ? std::string("-")
                                            : fixed(static_cast<double>(it->second.run_ns) * 1e-6 / static_cast<double>(frames), 3);
  };
  std::cout << "\nZeroMQ I/O threads' CPU per frame, ms (IO/0 reads frames, IO/1 writes results):";
  for (const Row& r : rows) {
    std::cout << "\n  " << r.transport << " " << fixed(r.size_mb, 1) << " MB: daemon IO/0 "
              << io_ms(r.daemon_threads, "ZMQbg/IO/0", r.daemon_frames_timed) << ", IO/1 "
              << io_ms(r.daemon_threads, "ZMQbg/IO/1", r.daemon_frames_timed);
    for (const Row::Relay& relay : r.relays)
      std::cout << "; relay " << relay.output << " IO/0 " << io_ms(relay.threads, "relay: ZMQbg/IO/0", relay.frames_timed)
                << ", IO/1 " << io_ms(relay.threads, "relay: ZMQbg/IO/1", relay.frames_timed);
  }
  std::cout << "\nper-thread CPU per frame in the throughput runs (/proc/<pid>/task/*/schedstat, summed per thread "
               "name):";
  for (const Row& r : rows) {
    std::cout << "\n  " << r.transport << " " << fixed(r.size_mb, 1) << " MB daemon:" << thread_table(r.daemon_threads, r.daemon_frames_timed);
    std::cout << "\n  " << r.transport << " " << fixed(r.size_mb, 1) << " MB the bench during the daemon's runs:"
              << thread_table(r.bench_threads, r.daemon_frames_timed);
    for (const Row::Relay& relay : r.relays)
      if (!relay.threads.empty())
        std::cout << "\n  " << r.transport << " " << fixed(r.size_mb, 1) << " MB relay " << relay.output << ":"
                  << thread_table(relay.threads, relay.frames_timed) << "\n  " << r.transport << " "
                  << fixed(r.size_mb, 1) << " MB the bench during the relay " << relay.output << "'s runs:"
                  << thread_table(relay.bench_threads, relay.frames_timed);
    if (!r.timeline.empty())
      std::cout << "\n  " << r.transport << " " << fixed(r.size_mb, 1) << " MB daemon timeline, throughput runs: " << r.timeline
                << "\n  " << r.transport << " " << fixed(r.size_mb, 1) << " MB daemon timeline, latency run (one frame in flight): "
                << r.latency_timeline;
  }
  std::cout << "\n(raw = ZeroMQ PUSH -> PULL of the input frame, one hop; relay = PUSH -> PULL -> PUB -> SUB with the "
               "daemon's output size, its I/O without its work;\n latency in ms: e2e = frame sent -> result received, one "
               "in flight; dmn = the daemon's received -> published; GB/s counts input bytes)\n";
}

void print_goals(const std::vector<Row>& rows, const std::vector<StallRow>& stalls) {
  for (const Row& r : rows) {
    if (r.transport == "shm") {  // issue 23
      const double gbps = r.daemon_fps * static_cast<double>(r.frame_bytes) / 1e9;
      if (std::abs(r.size_mb - 8) < 1e-9) {
        std::cout << "goal shm 8 MB through convert >= 1,000 frames/s (>= 8 GB/s): " << fixed(r.daemon_fps, 0)
                  << " frames/s, " << fixed(gbps, 2) << " GB/s " << (r.daemon_fps >= 1000 ? "PASS" : "MISS") << "\n";
        std::cout << "goal shm 8 MB e2e p99 <= 3 ms: " << fixed(r.e2e_p99_ms, 3) << " ms "
                  << (r.e2e_p99_ms <= 3.0 ? "PASS" : "MISS") << "\n";
        if (r.cuda) {
          // The copy engine's busy share: the H2D copy's median time per frame x frames per second.
          const double busy = r.h2d_ms * r.daemon_fps / 1000.0;
          std::cout << "goal shm 8 MB H2D copy engine busy >= 50 % of wall: " << fixed(100 * busy, 0) << " % (H2D "
                    << fixed(r.h2d_ms, 3) << " ms x " << fixed(r.daemon_fps, 0) << " frames/s) "
                    << (busy >= 0.5 ? "PASS" : "MISS") << "\n";
        }
      } else if (r.size_mb > 7.5 && r.size_mb < 8.5 && r.output_bytes > 40'000'000) {
        std::cout << "goal shm ARFI sets (8.3 MB in, 41 MB out, shm in and out) >= 700 sets/s, 0 loss: "
                  << fixed(r.daemon_fps, 0) << " sets/s, " << r.daemon_rejected << " rejected "
                  << (r.daemon_fps >= 700 && r.daemon_rejected == 0 ? "PASS" : "MISS") << "\n";
      } else if (r.size_mb > 5 && r.size_mb < 6) {
        std::cout << "goal shm convert -> beamform channel RF >= 3,000 frames/s, 0 loss: " << fixed(r.daemon_fps, 0)
                  << " frames/s, " << r.daemon_rejected << " rejected "
                  << (r.daemon_fps >= 3000 && r.daemon_rejected == 0 ? "PASS" : "MISS") << "\n";
        if (r.cuda) {
          // GPU busy: the stages' time per frame (between the events around them) x frames/s. Slots
          // overlap, and a stage's events then also span other slots' kernels: past 100 % the GPU is
          // never idle; below, this is an upper bound. (Kernel alone: 0.233 ms, 4,300 frames/s.)
          const double kernels = r.stages_ms * r.daemon_fps / 1000.0;
          std::cout << "goal shm convert -> beamform GPU busy >= 70 %: stages " << fixed(r.stages_ms, 3) << " ms x "
                    << fixed(r.daemon_fps, 0) << " frames/s = " << fixed(100 * kernels, 0) << " % of wall; "
                    << fixed(100 * r.daemon_fps / 4300.0, 0) << " % of the kernel-alone rate "
                    << (r.daemon_fps / 4300.0 >= 0.7 ? "PASS" : "MISS") << "\n";
        }
      }
      continue;
    }
    const double relay = 100.0 * r.daemon_fps / r.relay_fps;
    std::cout << "goal " << r.transport << " " << fixed(r.size_mb, 1) << " MB throughput >= 95 % of the relay: "
              << fixed(relay, 1) << " % " << (relay >= 95 ? "PASS" : "MISS") << "\n";
    if (std::abs(r.size_mb - 8) < 1e-9) {
      const double ratio = 100.0 * r.daemon_fps / r.raw_fps;
      std::cout << "goal " << r.transport << " 8 MB throughput >= 90 % of raw ZeroMQ (issue 2): " << fixed(ratio, 1)
                << " % " << (ratio >= 90 ? "PASS" : "MISS") << "\n";
    }
    if (std::abs(r.size_mb - 1) < 1e-9)
      std::cout << "goal " << r.transport << " 1 MB e2e p99 <= 2 ms: " << fixed(r.e2e_p99_ms, 3) << " ms "
                << (r.e2e_p99_ms <= 2.0 ? "PASS" : "MISS") << " (the relay's own p99 in this run: "
                << fixed(r.relay_p99_ms, 3) << " ms)\n";
  }
  for (const StallRow& s : stalls) {
    const double mib = 1024.0;
    const long allowed_kib = static_cast<long>((s.bound_bytes + static_cast<std::size_t>(s.slots) * s.result_bytes) / 1024);
    const long grew_kib = s.peak_kib - s.baseline_kib;
    std::cout << "goal " << s.transport << " stalled subscriber (" << fixed(s.result_bytes / 1e6, 1)
              << " MB results) costs <= bound + slots: RSS " << fixed(s.baseline_kib / mib, 1) << " -> peak "
              << fixed(s.peak_kib / mib, 1) << " MiB (+" << fixed(grew_kib / mib, 1) << " <= "
              << fixed(allowed_kib / mib, 1) << ") " << (grew_kib <= allowed_kib ? "PASS" : "MISS") << "; "
              << s.dropped << " results dropped for it, cut " << s.cut << " time(s)\n";
    const bool back = s.after_kib <= s.baseline_kib + s.baseline_kib / 10;
    std::cout << "goal " << s.transport << " RSS within 10 % of baseline after it left: " << fixed(s.after_kib / mib, 1)
              << " MiB vs " << fixed(s.baseline_kib / mib, 1) << " " << (back ? "PASS" : "MISS") << "\n";
  }
}

void run_core_bench(const CoreOptions& options_in) {
  CoreOptions options = options_in;
  if (options.daemon.empty()) options.daemon = tools::path_next_to_executable("../../daemon/sonopiped");
  namespace fs = std::filesystem;
  const bool own_dir = options.work_dir.empty();
  const fs::path work = own_dir ? fs::temp_directory_path() / ("sonopipe-bench-core-" + std::to_string(::getpid()))
                                : fs::path(options.work_dir);
  fs::create_directories(work);
  spdlog::set_level(spdlog::level::warn);
  place_threads(::getpid(), options.io_cpus);  // the bench's threads (and the daemons it starts) off the I/O CPUs
  if (options.cuda_blocking_sync) use_blocking_cuda_waits();  // the d2h relay's waits; the daemon's: its config

  double max_mb = 0;
  for (double mb : options.sizes_mb) max_mb = std::max(max_mb, mb);
  if (options.pipeline == "beamform") max_mb = std::max(max_mb, 6.0);  // the 5.8 MB channel frame
  // Slots hold the input and (publish.shm) the output: ARFI's 41 MB displacement is the largest.
  const std::size_t max_bytes = options.pipeline == "arfi" ? std::size_t(48) << 20
                                                           : static_cast<std::size_t>(max_mb * (1 << 20)) * 2 + (1 << 20);
  std::vector<Row> rows;
  std::vector<StallRow> stalls;
  std::string backend_line;
  for (const std::string& transport : options.transports) {
    const fs::path dir = work / transport;
    fs::create_directories(dir);
    const tools::DaemonEndpoints endpoints = tools::pick_endpoints(transport, dir.string());
    const std::string timeline_path = (dir / "timeline.csv").string();
    if (options.timeline) ::setenv("SONOPIPE_HOST_TIMELINE", timeline_path.c_str(), 1);
    const std::size_t first_row = rows.size();
    tools::DaemonLauncher daemon(options.daemon, daemon_config(endpoints, options, max_bytes), endpoints.control,
                                 dir.string(), std::chrono::seconds(30));
    const v1::Status first = daemon.status();
    backend_line = first.backend() + " on " + first.device_name() + " (" + first.backend_reason() + ")";
    DaemonClient client(endpoints);
    client.write_once = options.shm_write == "first";
    std::uint64_t sequence = 0;
    const bool beamform = options.pipeline == "beamform", arfi = options.pipeline == "arfi";
    const bool fixed_frame = beamform || arfi;
    for (double size_mb : fixed_frame ? std::vector<double>{0} : options.sizes_mb) {
      BenchFrame frame = beamform ? make_channel_frame() : arfi ? make_arfi_frame() : make_frame(size_mb, options.type);
      if (fixed_frame) size_mb = static_cast<double>(frame.payload.size()) / (1 << 20);
      Row row{.transport = transport, .size_mb = size_mb, .frame_bytes = frame.payload.size()};
      run_point(daemon, client, frame, options, transport, dir.string(), sequence, row);
      std::cerr << "  " << transport << " " << size_mb << " MB: daemon " << fixed(row.daemon_fps, 1) << " frames/s, raw "
                << fixed(row.raw_fps, 1) << " frames/s, relay " << fixed(row.relay_fps, 1) << " frames/s\n";
      rows.push_back(row);
      // The stalled subscriber is a ZeroMQ one: tcp and ipc rows only.
      if (options.stall_frames > 0 && transport != "shm" && (fixed_frame || size_mb == max_mb)) {
        StallRow stall = run_stall(daemon, client, frame, options, endpoints.publish, sequence, row.output_bytes);
        stall.transport = transport;
        std::cerr << "  " << transport << " stalled subscriber: RSS " << stall.baseline_kib << " -> " << stall.peak_kib
                  << " -> " << stall.after_kib << " KiB\n";
        stalls.push_back(stall);
      }
    }
    const int code = daemon.stop(std::chrono::seconds(20));
    if (code != 0) std::cerr << "warning: sonopiped exited with " << code << ":\n" << daemon.log_tail();
    if (options.timeline) {
      ::unsetenv("SONOPIPE_HOST_TIMELINE");
      for (std::size_t i = first_row; i < rows.size(); ++i) {
        rows[i].timeline = summarise_timeline(timeline_path, rows[i].throughput_sequences);
        rows[i].latency_timeline = summarise_timeline(timeline_path, rows[i].latency_sequences);
      }
    }
  }
  std::cout << "sonopipe-bench core: " << options.daemon << ", backend " << backend_line << "\n"
            << (options.pipeline == "beamform" ? std::string("convert -> beamform, int16 channel RF 11 x 128 x 2048 -> 256 x 1024")
                : options.pipeline == "arfi"   ? std::string("ARFI convert -> upsample -> loupas -> motion_filter, int16 IQ 52 x 81 x 493 -> float32 full resolution")
                                               : "convert " + options.type + " RF frames (lines x " + std::to_string(kSamplesPerLine) + ")")
            << ", " << options.frames
            << " frames per throughput run, " << options.repeats << " runs per point (daemon, raw, relay alternating; "
            << "medians), " << options.latency_frames << " frames for latency after 10 untimed, " << options.warmup
            << " untimed warm-up frames before every run (daemon, raw and relay alike); slots " << options.slots << ", queue " << options.queue_depth
            << (options.shm_write == "first" ? "; shm: each slot's payload written once (--shm-write first)" : "")
            << "; relay sockets: " << options.relay << " contexts, relay output " << [&] {
                 std::string text;
                 for (const std::string& output : options.relay_outputs) text += (text.empty() ? "" : " and ") + output;
                 return text + (options.relay_outputs.size() > 1 ? " (ratio and goals against the first)" : "");
               }()
            << (options.cuda_blocking_sync ? "; CUDA waits block (cuda_wait: block)" : "")
            << (options.io_cpus.size() == 2 ? "; ZeroMQ I/O threads 0 / 1 on CPUs " + std::to_string(options.io_cpus[0]) +
                                                  " / " + std::to_string(options.io_cpus[1]) +
                                                  " (daemon and relay), every other thread on the others"
                                            : std::string())
            << "\n";
  print_table(rows);
  print_goals(rows, stalls);
  if (own_dir && !options.keep) fs::remove_all(work);
  else std::cout << "daemon configs and logs kept in " << work.string() << "\n";
}

}  // namespace

void add_core_bench(CLI::App& app) {
  auto options = std::make_shared<CoreOptions>();
  CLI::App* command = app.add_subcommand("core", "daemon throughput/latency (convert) vs raw ZeroMQ, tcp and ipc");
  command->add_option("--daemon", options->daemon, "sonopiped binary (default: ../../daemon/sonopiped next to this tool)");
  command->add_option("--backend", options->backend, "auto | cuda | cpu")->capture_default_str()
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  command->add_option("--sizes-mb", options->sizes_mb, "input frame sizes in MiB")->capture_default_str();
  command->add_option("--transports,--transport", options->transports, "tcp, ipc and/or shm (same-host shared pool)")
      ->capture_default_str()->check(CLI::IsMember({"tcp", "ipc", "shm"}));
  command->add_option("--frames", options->frames, "frames per throughput point (daemon and raw ZeroMQ)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--latency-frames", options->latency_frames, "frames for the latency percentiles")
      ->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--warmup", options->warmup, "untimed frames before every throughput run (daemon, raw, relay)")
      ->capture_default_str();
  command->add_option("--repeats", options->repeats,
                      "throughput runs per point, daemon, raw and relay alternating (medians reported)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--slots", options->slots, "daemon slots (frames in flight)")->capture_default_str();
  command->add_option("--queue-depth", options->queue_depth, "daemon queue depth")->capture_default_str();
  command->add_option("--cpu-threads", options->cpu_threads, "daemon CPU threads (0: all)")->capture_default_str();
  command->add_option("--type", options->type, "input element type: int16 (-> float32) | float32")
      ->capture_default_str()->check(CLI::IsMember({"int16", "float32"}));
  command->add_option("--pipeline", options->pipeline,
                      "convert | beamform (PICMUS-sized channel RF frames) | arfi (the paper's set, full resolution out)")
      ->capture_default_str()->check(CLI::IsMember({"convert", "beamform", "arfi"}));
  command->add_option("--work-dir", options->work_dir, "folder for the daemon's config, log and ipc sockets");
  command->add_flag("--keep", options->keep, "keep the work folder (configs, daemon logs)");
  command->add_option("--stall-frames", options->stall_frames,
                      "frames through the daemon while a second subscriber stalls (largest size; 0: no stall run)")
      ->capture_default_str();
  command->add_option("--shm-write", options->shm_write,
                      "shm: the bench copies each frame into its slot (every), or into each slot the first time only "
                      "(first: a producer whose hardware writes the slot, the daemon's own rate)")
      ->capture_default_str()->check(CLI::IsMember({"every", "first"}));
  command->add_option("--relay", options->relay,
                      "split: the relay's PULL and PUB in a context of their own on the daemon's two I/O threads, "
                      "the bench's PUSH and SUB in another (as with the daemon); shared: all four in one context")
      ->capture_default_str()->check(CLI::IsMember({"split", "shared"}));
  command->add_option("--relay-output", options->relay_outputs,
                      "constant: the relay publishes one buffer (always in the cache); rotating: 8 buffers in turn, "
                      "as the daemon publishes from its result buffers in turn; owned: one buffer with a free "
                      "function, as the daemon's messages; pinned: 3 pinned host-pool buffers (CUDA); d2h: those "
                      "filled by a D2H copy before each is published (CUDA); h2d_d2h: as d2h, after copying the received "
                      "frame to the device from ZeroMQ's message (CUDA: the daemon's GPU copies, no stages). Several: "
                      "each runs in every repeat, "
                      "the first is the one the ratio and the goals use")
      ->capture_default_str()->check(CLI::IsMember({"constant", "rotating", "owned", "pinned", "d2h", "h2d_d2h"}));
  command->add_flag("--cuda-blocking-sync", options->cuda_blocking_sync,
                    "threads that wait for the GPU sleep instead of spinning, in the daemon (cuda_wait: block) "
                    "and in the bench (the d2h relay)");
  command->add_option("--io-cpus", options->io_cpus,
                      "two CPUs: ZeroMQ I/O thread 0 (reads frames) and 1 (writes results) pinned there, in the "
                      "daemon and in the relay alike; every other thread of both on the other CPUs")
      ->expected(2);
  command->add_flag("--timeline", options->timeline,
                    "the daemon notes each frame's host path (SONOPIPE_HOST_TIMELINE); printed per row");
  command->add_option("--max-queued-bytes", options->max_queued_bytes,
                      "the daemon's publish.max_queued_bytes (0: its default)")->capture_default_str();
  command->callback([options] { run_core_bench(*options); });
}

}  // namespace sonopipe::bench
