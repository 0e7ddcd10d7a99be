// `sonopipe-bench hostcopy`: what one thread's copy of a result costs on this host, by where the
// result's bytes are and how they got there (issue 23: the publisher's ZeroMQ I/O thread copies a
// 2 MB convert result into its socket in 0.31-0.34 ms in the daemon, 0.23 ms in the relay).
//  1. memcpy of --bytes on one thread: warm (the same source and destination every time, in the
//     cache), cold (the source rotating over 512 MiB, so it comes from memory), and from pinned
//     memory a D2H has just written.
//  2. A writer thread write()s --messages results of --bytes into a socket (a unix stream
//     socketpair, as ZeroMQ's ipc, or tcp loopback) that a reader thread drains, as the publisher's
//     I/O thread does; a preparer thread (the daemon's completion thread) readies each result
//     first. Per source: the writer's CPU time per result (CLOCK_THREAD_CPUTIME_ID around its
//     write calls: the kernel's copy, its socket work, no waiting), the wall time per result, and
//     how the preparer readied it. Sources separate the hypotheses: heap memory of the relay's kind
//     with 4 KiB or 2 MiB pages, one buffer or several in turn; pinned memory (cudaHostAlloc, the
//     lane's host pool, 2 MiB-page heap memory registered with cudaHostRegister), written by the
//     CPU once or by a D2H before every result; and heap buffers the preparer copies a D2H result
//     into (the result in the cache of another core).
// Each source runs --repeats times, sources alternating; min / median / max are printed.
// --cpus W,R,P pins writer, reader and preparer (default: not pinned).
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/gpu_resources.h"
#include "tools/bench/commands.h"

namespace sonopipe::bench {
namespace {

struct HostCopyOptions {
  std::size_t bytes = std::size_t(2) << 20;
  std::size_t messages = 400;
  std::size_t repeats = 5;
  std::vector<std::string> transports = {"ipc", "tcp"};
  std::vector<int> cpus;  // writer, reader, preparer; empty: not pinned
  bool spinner_scan = false;  // with cpus: the writer's cost with a spinning thread on each other CPU
  bool sources = true;        // false: the spinner scan alone
  bool interference = false;  // the writer's cost while the GPU copies (DMA) or a thread copies, beside
};

constexpr std::size_t kHugePage = std::size_t(2) << 20;

std::int64_t thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return std::int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void pin_this_thread(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
    throw std::runtime_error("hostcopy: cannot pin a thread to CPU " + std::to_string(cpu));
}

// Anonymous memory on 2 MiB boundaries, backed by 4 KiB pages or (where the kernel gives them)
// transparent huge pages.
struct MappedMemory {
  void* data = nullptr;
  std::size_t bytes = 0;
  MappedMemory(std::size_t size, bool huge) {
    bytes = (size + kHugePage - 1) / kHugePage * kHugePage;
    void* raw = mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::runtime_error("hostcopy: mmap failed");
    auto* base = static_cast<std::byte*>(raw);
    auto* aligned = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(base) + kHugePage - 1) / kHugePage * kHugePage);
    if (aligned > base) munmap(base, static_cast<std::size_t>(aligned - base));
    const std::size_t tail = static_cast<std::size_t>(base + bytes + kHugePage - (aligned + bytes));
    if (tail) munmap(aligned + bytes, tail);
    data = aligned;
    madvise(data, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    std::memset(data, 1, bytes);
  }
  ~MappedMemory() {
    if (data) munmap(data, bytes);
  }
  MappedMemory(const MappedMemory&) = delete;
  MappedMemory& operator=(const MappedMemory&) = delete;
};

// KiB of the mapping holding `address` that are transparent huge pages (/proc/self/smaps), or -1.
long huge_kib(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t from = 0, to = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> from >> dash >> to && dash == '-') {
      inside = at >= from && at < to;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) return std::stol(line.substr(14));
  }
  return -1;
}

// The result buffers of one source, and how the preparer readies buffer i before the writer sends it.
struct Source {
  std::string name;
  std::vector<void*> buffers;
  std::function<void(std::size_t)> prepare;  // on the preparer thread; may be empty
  std::string pages;                         // what backs the buffers (huge page KiB of the first)
};

// Connected stream sockets: [0] the writer's, [1] the reader's.
std::array<int, 2> connect_pair(const std::string& transport) {
  std::array<int, 2> fds{-1, -1};
  if (transport == "ipc") {
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds.data()) != 0) throw std::runtime_error("hostcopy: socketpair failed");
    return fds;
  }
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw std::runtime_error("hostcopy: cannot listen on tcp loopback");
  fds[0] = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fds[0], reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
    throw std::runtime_error("hostcopy: cannot connect on tcp loopback");
  fds[1] = accept(listener, nullptr, nullptr);
  close(listener);
  const int one = 1;  // as ZeroMQ's tcp transport
  for (int fd : fds) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fds;
}

struct WriteRun {
  double writer_cpu_us = 0;  // per result
  double wall_us = 0;        // per result, first write to last byte read
  double preparer_us = 0;    // per result, wall of prepare()
};

// The writer sends `messages` results from `source` in turn; the preparer readies each a ring
// position ahead (at most buffers - 1 results ahead of the writer); the reader drains.
WriteRun write_run(const std::string& transport, Source& source, const HostCopyOptions& options) {
  const auto fds = connect_pair(transport);
  const std::size_t ring = source.buffers.size();
  std::atomic<std::size_t> prepared{0}, sent{0};
  std::atomic<std::int64_t> reader_done_ns{0};
  std::int64_t preparer_ns = 0;
  const std::size_t total = options.messages * options.bytes;
  auto cpu = [&](std::size_t i) { return options.cpus.size() > i ? options.cpus[i] : -1; };
  std::thread reader([&] {
    pin_this_thread(cpu(1));
    std::vector<std::byte> into(std::size_t(256) << 10);
    std::size_t got = 0;
    while (got < total) {
      const ssize_t n = read(fds[1], into.data(), into.size());
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    reader_done_ns.store(steady_ns());
  });
  if (!source.prepare) prepared.store(options.messages);  // nothing to ready: never waits
  std::thread preparer([&] {
    pin_this_thread(cpu(2));
    for (std::size_t i = 0; source.prepare && i < options.messages; ++i) {
      // Buffer i % ring is free once message i - ring went; one buffer of slack (the one being sent).
      while (i >= sent.load(std::memory_order_acquire) + (ring > 1 ? ring - 1 : 1)) std::this_thread::yield();
      const std::int64_t start = steady_ns();
      if (source.prepare) source.prepare(i % ring);
      preparer_ns += steady_ns() - start;
      prepared.store(i + 1, std::memory_order_release);
    }
  });
  std::int64_t writer_cpu = 0, first_ns = 0;
  {
    std::thread writer([&] {
      pin_this_thread(cpu(0));
      for (std::size_t i = 0; i < options.messages; ++i) {
        while (prepared.load(std::memory_order_acquire) <= i) std::this_thread::yield();
        if (i == 0) first_ns = steady_ns();
        const auto* bytes = static_cast<const std::byte*>(source.buffers[i % ring]);
        const std::int64_t before = thread_cpu_ns();
        std::size_t left = options.bytes;
        while (left > 0) {
          const ssize_t n = write(fds[0], bytes + (options.bytes - left), left);
          if (n <= 0) throw std::runtime_error("hostcopy: write failed");
          left -= static_cast<std::size_t>(n);
        }
        writer_cpu += thread_cpu_ns() - before;
        sent.store(i + 1, std::memory_order_release);
      }
    });
    writer.join();
  }
  preparer.join();
  reader.join();
  close(fds[0]);
  close(fds[1]);
  const double count = static_cast<double>(options.messages);
  return {writer_cpu * 1e-3 / count, (reader_done_ns.load() - first_ns) * 1e-3 / count, preparer_ns * 1e-3 / count};
}

std::string fixed3(double value, int precision = 3) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(precision) << value;
  return out.str();
}

std::string spread(std::vector<double> values, int precision = 3) {
  std::sort(values.begin(), values.end());
  if (values.empty()) return "-";
  return fixed3(values.front(), precision) + " / " + fixed3(values[values.size() / 2], precision) + " / " +
         fixed3(values.back(), precision);
}

void memcpy_floor(const HostCopyOptions& options, const std::vector<void*>& d2h_pinned, const std::function<void(std::size_t)>& d2h) {
  const std::size_t bytes = options.bytes;
  std::vector<std::byte> destination(bytes, std::byte{2}), warm(bytes, std::byte{3});
  const std::size_t cold_buffers = (std::size_t(512) << 20) / bytes;
  std::vector<std::byte> cold(cold_buffers * bytes, std::byte{4});
  const int count = 200;
  std::vector<double> warm_us, cold_us, dma_us;
  for (std::size_t repeat = 0; repeat < options.repeats; ++repeat) {
    std::int64_t t = 0;
    for (int i = 0; i < count; ++i) {
      const std::int64_t start = steady_ns();
      std::memcpy(destination.data(), warm.data(), bytes);
      t += steady_ns() - start;
    }
    warm_us.push_back(t * 1e-3 / count);
    t = 0;
    for (int i = 0; i < count; ++i) {
      const std::int64_t start = steady_ns();
      std::memcpy(destination.data(), cold.data() + (static_cast<std::size_t>(i) * 7 % cold_buffers) * bytes, bytes);
      t += steady_ns() - start;
    }
    cold_us.push_back(t * 1e-3 / count);
    t = 0;
    for (int i = 0; i < count && !d2h_pinned.empty(); ++i) {
      const std::size_t b = static_cast<std::size_t>(i) % d2h_pinned.size();
      d2h(b);
      const std::int64_t start = steady_ns();
      std::memcpy(destination.data(), d2h_pinned[b], bytes);
      t += steady_ns() - start;
    }
    if (!d2h_pinned.empty()) dma_us.push_back(t * 1e-3 / count);
  }
  auto rate = [&](const std::vector<double>& us) {
    std::vector<double> sorted = us;
    std::sort(sorted.begin(), sorted.end());
    return fixed3(static_cast<double>(bytes) / (sorted[sorted.size() / 2] * 1e3), 1) + " GB/s";
  };
  std::cout << "memcpy of " << bytes << " bytes on one thread, us min / median / max over " << options.repeats
            << " x " << count << ":\n"
            << "  warm source (in the cache)            " << spread(warm_us, 1) << "  (" << rate(warm_us) << ")\n"
            << "  cold source (rotating over 512 MiB)   " << spread(cold_us, 1) << "  (" << rate(cold_us) << ")\n"
            << "  pinned source a D2H has just written  " << spread(dma_us, 1) << "  ("
            << (dma_us.empty() ? std::string("-") : rate(dma_us)) << ")\n";
}

// The writer (pinned) sends the one-buffer heap source over ipc while a thread spins on CPU j, for
// every CPU j but the writer's and the reader's: a CPU whose spinning makes the writer dearer
// shares a core (or its caches and ports) with the writer's CPU, which a guest's topology may not
// show (a hypervisor's vCPUs on one core's two hardware threads).
void spinner_scan(const HostCopyOptions& options, Source& source) {
  if (options.cpus.size() < 2) throw std::runtime_error("hostcopy --spinner-scan needs --cpus W R P");
  const int count = static_cast<int>(std::thread::hardware_concurrency());
  std::vector<std::vector<double>> cpu_us(static_cast<std::size_t>(count) + 1);  // [count]: no spinner
  for (std::size_t repeat = 0; repeat < options.repeats; ++repeat)
    for (int j = -1; j < count; ++j) {
      if (j == options.cpus[0] || j == options.cpus[1]) continue;
      std::atomic<bool> stop{false};
      std::thread spinner;
      if (j >= 0)
        spinner = std::thread([&, j] {
          pin_this_thread(j);
          volatile std::uint64_t sink = 0;
          while (!stop.load(std::memory_order_relaxed)) sink = sink + 1;
        });
      const WriteRun run = write_run("ipc", source, options);
      stop = true;
      if (spinner.joinable()) spinner.join();
      cpu_us[j < 0 ? static_cast<std::size_t>(count) : static_cast<std::size_t>(j)].push_back(run.writer_cpu_us);
    }
  std::cout << "\nipc, " << source.name << ": the writer (CPU " << options.cpus[0] << ", reader on "
            << options.cpus[1] << ") with a thread spinning on another CPU; writer CPU us per result, min / median / "
            << "max over " << options.repeats << " runs:\n  no spinner: " << spread(cpu_us.back(), 1) << "\n";
  for (int j = 0; j < count; ++j)
    if (!cpu_us[static_cast<std::size_t>(j)].empty())
      std::cout << "  spinner on CPU " << std::setw(3) << j << ": " << spread(cpu_us[static_cast<std::size_t>(j)], 1) << "\n";
}

void run_host_copy(const HostCopyOptions& options) {
  const std::size_t bytes = options.bytes;
  // Without a CUDA device only the heap sources run.
  bool cuda = true;
  try {
    use_gpu_device(0);
  } catch (const std::exception& e) {
    cuda = false;
    std::cout << "no CUDA device (" << e.what() << "): heap sources only\n";
  }
  Buffer device;
  std::unique_ptr<GpuStreamHandle> stream;
  std::unique_ptr<GpuEvent> copied;
  if (cuda) {
    device.reserve(MemoryKind::device, bytes);
    zero_buffer(device, bytes);
    stream = std::make_unique<GpuStreamHandle>();
    copied = std::make_unique<GpuEvent>();
  }
  auto d2h_into = [&](void* host) {
    copy_to_host_async(host, device.data(), bytes, stream->get());
    copied->record(stream->get());
    copied->synchronize();
  };

  // The buffers every source draws on.
  std::vector<std::byte> relay_kind(bytes, std::byte{1});  // as the relay's std::vector
  MappedMemory small_pages(bytes, false), huge_pages(bytes, true);
  std::vector<std::unique_ptr<MappedMemory>> small_ring, huge_ring, heap_copies;
  for (int i = 0; i < 8; ++i) small_ring.push_back(std::make_unique<MappedMemory>(bytes, false));
  for (int i = 0; i < 3; ++i) huge_ring.push_back(std::make_unique<MappedMemory>(bytes, true));
  for (int i = 0; i < 3; ++i) heap_copies.push_back(std::make_unique<MappedMemory>(bytes, true));
  std::vector<Buffer> host_alloc(3), pool_alloc(3);
  std::shared_ptr<MemoryPool> pool;
  if (cuda) {
    for (Buffer& b : host_alloc) b.reserve(MemoryKind::pinned, bytes);
    pool = std::make_shared<MemoryPool>(0, 0);
    for (Buffer& b : pool_alloc) b.reserve(MemoryKind::pinned, bytes, pool);
    for (auto& m : huge_ring) register_host_memory(m->data, m->bytes);
    for (Buffer& b : host_alloc) std::memset(b.data(), 1, bytes);
    for (Buffer& b : pool_alloc) std::memset(b.data(), 1, bytes);
  }

  auto pages_of = [](const void* p) {
    const long kib = huge_kib(p);
    return kib < 0 ? std::string("?") : std::to_string(kib) + " KiB huge";
  };
  std::vector<Source> sources;
  sources.push_back({"heap (the relay's vector), one buffer", {relay_kind.data()}, {}, pages_of(relay_kind.data())});
  sources.push_back({"heap 4 KiB pages, one buffer", {small_pages.data}, {}, pages_of(small_pages.data)});
  sources.push_back({"heap 2 MiB pages, one buffer", {huge_pages.data}, {}, pages_of(huge_pages.data)});
  {
    Source s{"heap 4 KiB pages, 8 in turn", {}, {}, pages_of(small_ring[0]->data)};
    for (auto& m : small_ring) s.buffers.push_back(m->data);
    sources.push_back(std::move(s));
  }
  {
    // Written just before by another core (the completion thread's copy), from a warm source.
    Source s{"heap 2 MiB pages, 3 in turn, written by the preparer each", {}, {}, pages_of(heap_copies[0]->data)};
    for (auto& m : heap_copies) s.buffers.push_back(m->data);
    s.prepare = [&, buffers = s.buffers](std::size_t i) { std::memcpy(buffers[i], huge_pages.data, bytes); };
    sources.push_back(std::move(s));
  }
  if (cuda) {
  sources.push_back({"cudaHostAlloc, one buffer, CPU-written", {host_alloc[0].data()}, {}, pages_of(host_alloc[0].data())});
  {
    Source s{"cudaHostAlloc, 3 in turn, D2H each", {}, {}, pages_of(host_alloc[0].data())};
    for (Buffer& b : host_alloc) s.buffers.push_back(b.data());
    s.prepare = [&, buffers = s.buffers](std::size_t i) { d2h_into(buffers[i]); };
    sources.push_back(std::move(s));
  }
  sources.push_back({std::string("host pool") + (pool->pinned_pool() ? "" : " (none: cudaHostAlloc)") +
                         ", one buffer, CPU-written",
                     {pool_alloc[0].data()}, {}, pages_of(pool_alloc[0].data())});
  {
    Source s{"host pool, 3 in turn, D2H each (the daemon's)", {}, {}, pages_of(pool_alloc[0].data())};
    for (Buffer& b : pool_alloc) s.buffers.push_back(b.data());
    s.prepare = [&, buffers = s.buffers](std::size_t i) { d2h_into(buffers[i]); };
    sources.push_back(std::move(s));
  }
  sources.push_back({"2 MiB pages registered, one buffer, CPU-written", {huge_ring[0]->data}, {}, pages_of(huge_ring[0]->data)});
  {
    Source s{"2 MiB pages registered, 3 in turn, D2H each", {}, {}, pages_of(huge_ring[0]->data)};
    for (auto& m : huge_ring) s.buffers.push_back(m->data);
    s.prepare = [&, buffers = s.buffers](std::size_t i) { d2h_into(buffers[i]); };
    sources.push_back(std::move(s));
  }
  {
    // The daemon's result copied on the completion thread into heap memory (2 MiB pages) first.
    Source s{"host pool D2H, copied into heap (2 MiB pages) by the preparer", {}, {}, pages_of(heap_copies[0]->data)};
    for (auto& m : heap_copies) s.buffers.push_back(m->data);
    s.prepare = [&, buffers = s.buffers](std::size_t i) {
      d2h_into(pool_alloc[i].data());
      std::memcpy(buffers[i], pool_alloc[i].data(), bytes);
    };
    sources.push_back(std::move(s));
  }
  }  // cuda

  std::vector<void*> pool_pointers;
  if (cuda)
    for (Buffer& b : pool_alloc) pool_pointers.push_back(b.data());
  memcpy_floor(options, pool_pointers, [&](std::size_t i) { d2h_into(pool_pointers[i]); });

  if (options.spinner_scan) spinner_scan(options, sources[0]);
  if (options.interference) {
    // What the daemon does beside its publishing thread, one kind at a time: the GPU copying both
    // ways (the H2D of the next frames, the D2H of results) and a thread copying (the driver's
    // staging copy, the completion thread's copies of results).
    struct Load {
      const char* name;
      std::function<void(const std::atomic<bool>&)> run;
    };
    std::vector<Buffer> pinned(2), gpu(2);
    std::unique_ptr<GpuStreamHandle> up, down;
    if (cuda) {
      for (Buffer& b : pinned) b.reserve(MemoryKind::pinned, bytes);
      for (Buffer& b : gpu) b.reserve(MemoryKind::device, bytes);
      up = std::make_unique<GpuStreamHandle>();
      down = std::make_unique<GpuStreamHandle>();
    }
    std::vector<std::byte> from(bytes, std::byte{5}), to(bytes);
    std::vector<Load> loads{{"none", {}},
                            {"a thread copying 2 MB buffers without pause", [&](const std::atomic<bool>& stop) {
                               while (!stop.load(std::memory_order_relaxed)) std::memcpy(to.data(), from.data(), bytes);
                             }}};
    if (cuda)
      loads.push_back({"the GPU copying H2D and D2H without pause (pinned, 2 streams)", [&](const std::atomic<bool>& stop) {
                         while (!stop.load(std::memory_order_relaxed)) {
                           copy_to_device_async(gpu[0].data(), pinned[0].data(), bytes, up->get());
                           copy_to_host_async(pinned[1].data(), gpu[1].data(), bytes, down->get());
                           GpuEvent done_up, done_down;
                           done_up.record(up->get());
                           done_down.record(down->get());
                           done_up.synchronize();
                           done_down.synchronize();
                         }
                       }});
    for (const std::string& transport : options.transports) {
      std::vector<std::vector<double>> cpu_us(loads.size()), wall_us(loads.size());
      for (std::size_t repeat = 0; repeat < options.repeats; ++repeat)
        for (std::size_t l = 0; l < loads.size(); ++l) {
          std::atomic<bool> stop{false};
          std::thread load;
          if (loads[l].run)
            load = std::thread([&, l] {
              if (options.cpus.size() > 2) pin_this_thread(options.cpus[2]);
              loads[l].run(stop);
            });
          const WriteRun run = write_run(transport, sources[0], options);
          stop = true;
          if (load.joinable()) load.join();
          cpu_us[l].push_back(run.writer_cpu_us);
          wall_us[l].push_back(run.wall_us);
        }
      std::cout << "\n" << transport << ", " << sources[0].name << ", beside other work (loads alternating); us per "
                << "result, min / median / max over " << options.repeats << " runs:\n";
      for (std::size_t l = 0; l < loads.size(); ++l)
        std::cout << "  " << std::left << std::setw(64) << loads[l].name << std::right << " writer CPU "
                  << spread(cpu_us[l], 1) << "   wall " << spread(wall_us[l], 1) << "\n";
    }
  }
  for (const std::string& transport : options.sources ? options.transports : std::vector<std::string>{}) {
    std::vector<std::vector<WriteRun>> runs(sources.size());
    for (std::size_t repeat = 0; repeat < options.repeats; ++repeat)
      for (std::size_t s = 0; s < sources.size(); ++s) runs[s].push_back(write_run(transport, sources[s], options));
    std::cout << "\n" << transport << ": a writer thread sends " << options.messages << " results of " << bytes
              << " bytes into a socket a reader drains; us per result, min / median / max over " << options.repeats
              << " runs (sources alternating)" << (options.cpus.empty() ? "" : ", threads pinned") << ":\n";
    for (std::size_t s = 0; s < sources.size(); ++s) {
      std::vector<double> cpu, wall, prep;
      for (const WriteRun& r : runs[s]) {
        cpu.push_back(r.writer_cpu_us);
        wall.push_back(r.wall_us);
        prep.push_back(r.preparer_us);
      }
      std::cout << "  " << std::left << std::setw(62) << sources[s].name << std::right << " writer CPU "
                << spread(cpu, 1) << "   wall " << spread(wall, 1);
      if (sources[s].prepare) std::cout << "   preparer " << spread(prep, 1);
      std::cout << "   [" << sources[s].pages << "]\n";
    }
  }
  if (cuda)
    for (auto& m : huge_ring) unregister_host_memory(m->data);
}

}  // namespace

void add_host_copy_bench(CLI::App& app) {
  auto options = std::make_shared<HostCopyOptions>();
  CLI::App* command = app.add_subcommand(
      "hostcopy", "what one thread's copy of a result into a socket costs, by the result's memory (CUDA)");
  command->add_option("--bytes", options->bytes, "result size in bytes")->capture_default_str();
  command->add_option("--messages", options->messages, "results per run")->capture_default_str();
  command->add_option("--repeats", options->repeats, "runs per source, sources alternating")->capture_default_str();
  command->add_option("--transports", options->transports, "ipc (unix stream socket) and/or tcp (loopback)")
      ->capture_default_str();
  command->add_option("--cpus", options->cpus, "CPUs of writer, reader, preparer (default: not pinned)")
      ->expected(3);
  command->add_flag("--spinner-scan", options->spinner_scan,
                    "with --cpus: the writer's cost with a thread spinning on each other CPU in turn (shared cores)");
  command->add_flag("!--no-sources", options->sources, "the spinner scan alone, not the sources' table");
  command->add_flag("--interference", options->interference,
                    "the writer's cost (heap source) while a thread copies or the GPU copies both ways beside it");
  command->callback([options] { run_host_copy(*options); });
}

}  // namespace sonopipe::bench
