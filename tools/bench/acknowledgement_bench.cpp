// sonopipe-bench acknowledgement: what delivery acknowledgement over ZeroMQ costs (CPU only, no
// GPU; docs/wire-protocol.md, "Acknowledgement").
//  1. The parts in one process: the daemon's record + publish per frame (daemon/acknowledger.h, one
//     subscriber reading them on ipc), the sender's numbering and header stamp per frame, and the
//     decode + apply of one acknowledgement (wire/delivery.h); bytes per acknowledgement.
//  2. A real sonopiped (convert on 64 KiB frames, CPU backend) fed at a fixed rate over ipc by one
//     sender, once without and once with acknowledgement: the daemon's CPU time per frame (from
//     /proc/<pid>/stat), the acknowledgements it published, and the sender's time per send.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "daemon/acknowledger.h"
#include "tools/bench/commands.h"
#include "tools/common/daemon_launcher.h"
#include "wire/delivery.h"

namespace sonopipe::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int parts_frames = 100000;
  int daemon_frames = 6000;
  double rate_hz = 2000;
};

double ns_per(Clock::time_point start, int count) {
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / count;
}

// utime + stime of a process, seconds.
double cpu_seconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

void parts(const Options& o, const std::string& folder) {
  zmq::context_t context(1);
  const std::string endpoint = "ipc://" + folder + "/parts-ack";
  Acknowledger acknowledger(context, endpoint);
  wire::DeliveryLedger ledger;
  zmq::socket_t subscriber(context, zmq::socket_type::sub);
  subscriber.set(zmq::sockopt::subscribe, wire::ack_topic(ledger.sender_id()));
  subscriber.set(zmq::sockopt::rcvhwm, 0);
  subscriber.connect(endpoint);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the subscription reaches the PUB
  std::uint64_t received = 0, ack_bytes = 0;
  // The reader counts what reaches it; a PUB drops what a slow reader cannot take (cumulative
  // acknowledgements make that harmless), so it stops a second after the last one.
  subscriber.set(zmq::sockopt::rcvtimeo, 1000);
  std::thread reader([&] {
    zmq::message_t part;
    while (subscriber.recv(part)) {
      if (part.more()) continue;
      ack_bytes += part.size();
      ++received;
    }
  });
  auto start = Clock::now();
  for (int n = 1; n <= o.parts_frames; ++n) {
    acknowledger.record({ledger.sender_id(), static_cast<std::uint64_t>(n), 0}, true, Clock::now());
    acknowledger.publish(Clock::now());
  }
  const double daemon_ns = ns_per(start, o.parts_frames);
  reader.join();
  std::string header = wire::frame_header_from_meta(FrameMeta{}).SerializeAsString();
  start = Clock::now();
  for (int n = 0; n < o.parts_frames; ++n) {
    std::string stamped = header;
    wire::stamp_delivery(stamped, ledger.send(0, n, n));
  }
  const double sender_ns = ns_per(start, o.parts_frames);
  // One acknowledgement per frame, as at a few kHz: each settles one frame.
  wire::DeliveryLedger settle_ledger(7);
  for (int n = 0; n < o.parts_frames; ++n) settle_ledger.send(0, n, n);
  wire::Acknowledgement ack;
  start = Clock::now();
  for (int n = 1; n <= o.parts_frames; ++n) {
    const std::string body = wire::encode_ack({.sender_id = 7, .daemon_instance = 1,
                                               .accepted = {{1, static_cast<std::uint64_t>(n)}}});
    wire::decode_ack(body.data(), body.size(), ack);
    settle_ledger.apply(ack);
  }
  const double apply_ns = ns_per(start, o.parts_frames);
  std::cout << std::fixed << std::setprecision(2)
            << "parts, one process, " << o.parts_frames << " frames:\n"
            << "  daemon record + publish per frame       " << daemon_ns / 1000 << " us  (at 3 kHz: "
            << daemon_ns * 3000 / 1e7 << " % of a core)\n"
            << "  sender number + stamp per frame          " << sender_ns / 1000 << " us\n"
            << "  sender decode + apply per acknowledgement " << apply_ns / 1000 << " us\n"
            << "  bytes per acknowledgement (one range)     " << static_cast<double>(ack_bytes) / received
            << " + topic " << wire::ack_topic(1).size() << "; " << received << " of " << o.parts_frames
            << " reached a reader in the same process (the others were dropped by the PUB; cumulative)\n";
}

struct RunResult {
  double daemon_cpu_us_per_frame = 0, send_us = 0, seconds = 0;
  std::uint64_t received = 0, acknowledgements = 0, delivered = 0;
};

RunResult daemon_run(const Options& o, const std::string& folder, bool acknowledged) {
  const std::string tag = acknowledged ? "acked" : "plain";
  const std::string ingest = "ipc://" + folder + "/" + tag + "-in", ack = "ipc://" + folder + "/" + tag + "-ack";
  const std::string control = "ipc://" + folder + "/" + tag + "-ctl";
  const std::string config = "ingest: {endpoint: \"" + ingest + "\", pattern: pull, ack_endpoint: \"" + ack +
                             "\"}\npublish: {endpoint: \"ipc://" + folder + "/" + tag +
                             "-pub\"}\ncontrol: {endpoint: \"" + control +
                             "\"}\nbackend: cpu\ncpu_threads: 1\npipelines:\n  - name: rf\n    match: {kinds: [rf]}\n"
                             "    stages: [{type: convert, params: {scale: 2.0}}]\n";
  const std::string run_folder = folder + "/" + tag;
  std::filesystem::create_directories(run_folder);
  tools::DaemonLauncher daemon(tools::path_next_to_executable("../../daemon/sonopiped"), config, control, run_folder,
                               std::chrono::seconds(30));
  zmq::context_t context(1);
  zmq::socket_t push(context, zmq::socket_type::push), acks(context, zmq::socket_type::sub);
  wire::DeliveryLedger ledger;
  push.set(zmq::sockopt::immediate, 1);
  push.connect(ingest);
  if (acknowledged) {
    acks.set(zmq::sockopt::subscribe, wire::ack_topic(ledger.sender_id()));
    acks.set(zmq::sockopt::rcvhwm, 0);
    acks.connect(ack);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  FrameMeta meta;
  meta.kind = FrameKind::rf;
  meta.payload.dtype = DType::int16;
  meta.payload.axes = {Axis{.name = "line", .size = 32}, Axis{.name = "sample", .size = 1024}};
  std::vector<std::int16_t> payload(32 * 1024, 7);
  const double cpu_before = cpu_seconds(daemon.pid());
  const auto start = Clock::now();
  double send_seconds = 0;
  wire::Acknowledgement ack_message;
  for (int n = 0; n < o.daemon_frames; ++n) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(n / o.rate_hz)));
    meta.sequence = static_cast<std::uint64_t>(n);
    const auto send_start = Clock::now();
    std::string header = wire::frame_header_from_meta(meta).SerializeAsString();
    if (acknowledged) wire::stamp_delivery(header, ledger.send(0, meta.sequence, 0));
    push.send(zmq::buffer(header), zmq::send_flags::sndmore);
    push.send(zmq::buffer(payload.data(), payload.size() * sizeof(std::int16_t)), zmq::send_flags::none);
    if (acknowledged) {
      zmq::message_t part;
      while (acks.recv(part, zmq::recv_flags::dontwait)) {
        if (part.more()) continue;
        if (wire::decode_ack(part.data(), part.size(), ack_message)) ledger.apply(ack_message);
      }
    }
    send_seconds += std::chrono::duration<double>(Clock::now() - send_start).count();
  }
  RunResult result;
  // Until the daemon has read every frame (and, acknowledged, the sender knows it).
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    const v1::Status status = daemon.status();
    result.received = status.frames_received();
    result.acknowledgements = status.acknowledgements_published();
    if (acknowledged) {
      zmq::message_t part;
      while (acks.recv(part, zmq::recv_flags::dontwait))
        if (!part.more() && wire::decode_ack(part.data(), part.size(), ack_message)) ledger.apply(ack_message);
    }
    if (result.received >= static_cast<std::uint64_t>(o.daemon_frames) && (!acknowledged || ledger.outstanding() == 0))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.daemon_cpu_us_per_frame = (cpu_seconds(daemon.pid()) - cpu_before) * 1e6 / o.daemon_frames;
  result.send_us = send_seconds * 1e6 / o.daemon_frames;
  result.delivered = ledger.delivered();
  daemon.stop(std::chrono::seconds(20));
  return result;
}

void run(const Options& o) {
  const std::string folder = std::filesystem::temp_directory_path() / ("sonopipe-ack-bench-" + std::to_string(getpid()));
  std::filesystem::create_directories(folder);
  parts(o, folder);
  std::cout << "daemon, convert on 64 KiB int16 frames, CPU backend, " << o.daemon_frames << " frames at "
            << o.rate_hz << " frames/s over ipc:\n";
  for (const bool acknowledged : {false, true}) {
    const RunResult r = daemon_run(o, folder, acknowledged);
    std::cout << std::fixed << std::setprecision(2) << "  " << (acknowledged ? "acknowledged " : "plain        ")
              << "daemon CPU " << r.daemon_cpu_us_per_frame << " us/frame, send " << r.send_us << " us/frame, "
              << r.received << " received, " << r.acknowledgements << " acknowledgements published"
              << (acknowledged ? ", " + std::to_string(r.delivered) + " acknowledged to the sender" : "") << "\n";
  }
  std::filesystem::remove_all(folder);
}

}  // namespace

void add_acknowledgement_bench(CLI::App& app) {
  auto options = std::make_shared<Options>();
  CLI::App* command = app.add_subcommand("acknowledgement", "what delivery acknowledgement over ZeroMQ costs (CPU)");
  command->add_option("--parts-frames", options->parts_frames, "frames of the in-process part")->capture_default_str();
  command->add_option("--daemon-frames", options->daemon_frames, "frames through the daemon, each way")
      ->capture_default_str();
  command->add_option("--rate", options->rate_hz, "frames/s through the daemon")->capture_default_str();
  command->callback([options] { run(*options); });
}

}  // namespace sonopipe::bench
