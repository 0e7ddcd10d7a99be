// `sonopipe-bench doppler-daemon`: the ultrafast Doppler chain through a real sonopiped at the
// acquisition rate (issue 24, "through the daemon"). Per case one daemon is started (the real
// binary, so config -> pipeline_set -> executors as in production) with config/doppler.yaml's chain
// on the case's grid:
//   beamform (ensemble input) -> mean_bmode (published) -> clutter_filter (SVD) -> doppler
// and channel-IQ ensembles [frame, transmit = 1, element, sample] (complex64, the workloads of
// tools/bench/ensemble_workloads.h, random samples) are replayed PACED at their acquisition rate:
//   pwi_disk  32-frame ensembles of PyMUST's disk shape (128 x 334 -> 251 x 251) from a 10 kHz PRF:
//             312.5 ensembles/s, 10.9 MB each (3.4 GB/s in)
//   fus       200-frame ensembles (128 x 1024 -> 256 x 256): 2.5 ensembles/s, 210 MB each
//   demo      config/demo.yaml's Doppler shape (32 frames of 128 x 180 -> 64 x 128, PRF 5 kHz):
//             156.25 ensembles/s, 5.9 MB each; small enough for the CPU backend at a reduced rate
// for --seconds, after a warm-up of a few ensembles one at a time. A sender thread sends ensemble k
// at start + k / rate (a send that blocks, because the daemon's lossless ingest is full, delays the
// later ones: the sender never skips); the main thread collects the four outputs of each ensemble
// (bmode, velocity, power, power_db). Printed per case: the rate asked and the sustained rate
// (result sets per second from the first to the last), the result sets received and lost (must be 0), the
// sender's largest lateness and its time per send (p50 / p99 / max: the copy into the pool slot or
// the ZeroMQ send, apart from the daemon), e2e latency p50/p99 (ensemble sent -> its last output
// received; one host clock) and the daemon's received -> published, the stages' compute time, and
// where an ensemble's time went (p50 / p99 of each leg, from the result header's timestamps: sent
// -> taken by the daemon's ingest, taken -> its stages start (admission, NaN/Inf check, queue,
// H2D), the stages, stages end -> published (D2H, completion, publish), published -> received by
// the bench). --shm-write first copies the ensemble into each pool slot once only (a scanner whose
// hardware writes the slot costs its sender no copy): the daemon's own rate without the bench's
// sender copy. Goals: the
// acquisition rate sustained with 0 loss; our reading of "at acquisition speed" adds e2e p99 <= one
// ensemble period (each result out before the next ensemble's would queue behind it).
// --rate-scale < 1 runs at a fraction of the acquisition rate (a machine without a GPU).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "shm/producer.h"
#include "stages/beamform/channel_conventions.h"
#include "stages/doppler/doppler_conventions.h"
#include "tools/bench/commands.h"
#include "tools/bench/core_shm.h"
#include "tools/bench/ensemble_frame.h"
#include "tools/bench/ensemble_workloads.h"
#include "tools/common/clock.h"
#include "tools/common/daemon_launcher.h"
#include "tools/common/zmq_io.h"
#include "tools/sim/channel_sim.h"
#include "wire/wire.h"

namespace sonopipe::bench {
namespace {

using tools::SteadyClock;
constexpr auto kResultTimeout = std::chrono::seconds(30);  // no result for this long ends the run
constexpr auto kSubscriptionMargin = std::chrono::milliseconds(200);
constexpr std::size_t kWarmup = 3;
// The doppler chain's outputs per ensemble: mean_bmode's and doppler's.
const std::vector<std::string> kOutputs = {"bmode", "velocity", "power", "power_db"};

struct DopplerDaemonOptions {
  std::string daemon;
  std::string backend = "auto";
  std::vector<std::string> cases = {"pwi_disk", "fus"};
  double seconds = 10;
  double rate_scale = 1;
  std::string transport = "shm";
  int slots = 3;
  int queue_depth = 8;
  int cpu_threads = 0;
  std::string clutter = "svd";  // or polynomial (order 4): the chain with a cheaper filter, for comparison
  std::string shm_write = "every";       // shm: the sender copies each ensemble into its slot, or the first time only
  std::string non_finite = "reject";    // the daemon's default: every float payload scanned for NaN/Inf
  // svd: clutter_filter's eigensolver (auto: the key is left out, so an older sonopiped takes the config)
  std::string eigensolver = "auto";
  std::string work_dir;
  bool keep = false;
};

// config/demo.yaml's Doppler pipeline: the flow phantom's channel IQ (sonopipe-sim flow --channel:
// 128 elements, 0.3 mm, f_c 5 MHz sampled at f_c) onto its 10 x 10 mm IQ grid, F-number 1.5.
inline constexpr EnsembleWorkload kDemo{"demo", 128, 0.3e-3, 180, 32, 5e6, 5e6, 0.0, 1540.0, 5e3,
                                        64, 128, -5e-3, 5e-3, 10e-3, 20e-3, 1.5, 0.5};

struct Case {
  const EnsembleWorkload* workload;
  double rate_hz;      // ensembles per second at acquisition speed
  int tissue_rank;     // clutter_filter: pwi_disk as config/doppler.yaml (the disk), fus the doppler bench's k
};

Case case_named(const std::string& name) {
  if (name == "pwi_disk") return {&kPwiDisk, kPwiDisk.prf_hz / kPwiDisk.frames, 1};
  if (name == "fus") return {&kFus, 2.5, 20};
  if (name == "demo") return {&kDemo, kDemo.prf_hz / kDemo.frames, 4};
  throw std::invalid_argument("unknown case '" + name + "' (pwi_disk, fus, demo)");
}

// One ensemble of channel IQ as the beamform stage takes it: ensemble_frame()'s (the channel
// simulator's geometry for the workload, a leading frame axis at the PRF, its random samples) with
// the ensemble times.
struct Ensemble {
  FrameMeta meta;
  std::vector<float> samples;  // [frame, transmit, element, sample] x (re, im)
};

Ensemble make_ensemble(const EnsembleWorkload& w) {
  BenchFrame frame = ensemble_frame(w, /*compound=*/false);
  Ensemble e{std::move(frame.meta), std::move(frame.data)};
  std::vector<double> times(static_cast<std::size_t>(w.frames));
  for (int n = 0; n < w.frames; ++n) times[static_cast<std::size_t>(n)] = n / w.prf_hz;
  e.meta.vectors[doppler::kEnsembleTimeVector] = times;
  if (e.samples.size() * sizeof(float) != e.meta.payload.byte_size())
    throw std::logic_error("doppler-daemon: ensemble samples and frame description differ");
  return e;
}

std::string daemon_config(const tools::DaemonEndpoints& endpoints, const DopplerDaemonOptions& options, const Case& c,
                          std::size_t frame_bytes) {
  const EnsembleWorkload& w = *c.workload;
  std::ostringstream yaml;
  yaml << std::setprecision(17);
  yaml << "# generated by sonopipe-bench doppler-daemon: config/doppler.yaml's chain on the " << w.name << " grid\n"
       << "ingest: {endpoint: \"" << endpoints.ingest << "\", pattern: pull"
       << (shm::is_shm_endpoint(endpoints.ingest) ? ", slots: " + std::to_string(options.queue_depth + options.slots + 2) : "")
       << "}\n"
       << "publish: {endpoint: \"" << endpoints.publish << "\", high_water_mark: 100000}\n"
       << "control: {endpoint: \"" << endpoints.control << "\"}\n"
       << "backend: " << options.backend << "\n"
       << "slots: " << options.slots << "\n"
       << "queue_depth: " << options.queue_depth << "\n"
       << "overflow: block\n"
       << "max_frame_bytes: " << frame_bytes + (1 << 20) << "\n"
       << "cpu_threads: " << options.cpu_threads << "\n"
       << "log_level: warn\n"
       << "non_finite: " << options.non_finite << "\n"
       << "pipelines:\n"
       << "  - name: doppler\n"
       << "    match: {kinds: [channel_iq]}\n"
       << "    stages:\n"
       << "      - type: beamform\n"
       << "        params: {x_min_m: " << w.x_min_m << ", x_max_m: " << w.x_max_m << ", lateral_pixels: " << w.lateral_pixels
       << ", z_min_m: " << w.z_min_m << ", z_max_m: " << w.z_max_m << ", depth_pixels: " << w.depth_pixels
       << ", f_number: " << w.f_number << ", apodisation: tukey, tukey_alpha: " << w.tukey_alpha << "}\n"
       << "      - {type: mean_bmode, publish: true}\n"
       << (options.clutter == "svd"
               ? "      - {type: clutter_filter, params: {method: svd, tissue_rank: " + std::to_string(c.tissue_rank) +
                     (options.eigensolver == "auto" ? std::string() : ", eigensolver: " + options.eigensolver) +
                     "}}\n"
               : std::string("      - {type: clutter_filter, params: {method: polynomial, polynomial_order: 4}}\n"))
       << "      - {type: doppler, params: {average_lateral: 5, average_axial: 5, power_threshold_db: -40}}\n";
  return yaml.str();
}

double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return std::nan("");
  const auto k = static_cast<std::size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
  return values[k];
}

std::string fixed(double value, int precision) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(precision) << value;
  return out.str();
}

struct Row {
  std::string name;
  std::size_t frame_bytes = 0;
  double rate_hz = 0, sustained_hz = 0;
  std::size_t sent = 0, complete = 0, lost = 0;
  double max_late_ms = 0;
  double e2e_p50_ms = 0, e2e_p99_ms = 0, daemon_p50_ms = 0, daemon_p99_ms = 0;
  std::uint64_t rejected = 0, dropped = 0, stage_errors = 0;
  std::vector<std::pair<std::string, double>> stage_ms;  // compute p50 per stage
  std::vector<double> stage_host_ms;                     // host time in the stage's run call, p50
  double interval_ms = 0;                                // between completions, p50
  double send_p50_ms = 0, send_p99_ms = 0, send_max_ms = 0;  // the sender's time in send() per ensemble
  std::vector<std::pair<double, double>> legs_ms;  // p50, p99 of each of kLegs
  double busy_ms = 0, h2d_ms = 0;  // per ensemble (CUDA: H2D + stages + D2H; the H2D alone)
  std::string backend;
};

// The bench's connection to one daemon: frames into its ingest (ZeroMQ PUSH or its shm pool), its
// results on a SUB.
class Client {
 public:
  explicit Client(const tools::DaemonEndpoints& endpoints) {
    push_.set(zmq::sockopt::linger, 0);
    sub_.set(zmq::sockopt::linger, 0);
    sub_.set(zmq::sockopt::rcvhwm, 0);  // never drop a result on our side
    sub_.set(zmq::sockopt::rcvtimeo, static_cast<int>(std::chrono::milliseconds(kResultTimeout).count()));
    sub_.set(zmq::sockopt::subscribe, tools::kResultTopicPrefix);
    tools::PeerWatch watch(context_, sub_);
    sub_.connect(endpoints.publish);
    if (!watch.wait(std::chrono::seconds(10))) throw std::runtime_error("no handshake with the daemon's publisher");
    std::this_thread::sleep_for(kSubscriptionMargin);  // the subscription travels after the handshake
    if (shm::is_shm_endpoint(endpoints.ingest)) shm_ = open_ready_producer(endpoints.ingest);
    else push_.connect(endpoints.ingest);
  }

  // --shm-write first: each slot gets the samples once (the slots keep them between ensembles).
  void write_once() { written_.assign(shm::kMaxSlots, false); }

  // One ensemble (lossless: waits for room; one sending thread).
  void send(const std::string& header, const std::vector<float>& samples) {
    const std::size_t bytes = samples.size() * sizeof(float);
    if (shm_) {
      auto claim = shm_->claim(SteadyClock::now() + kResultTimeout);
      if (!claim) throw std::runtime_error("no slot of the daemon's pool came free within the result timeout");
      std::memcpy(claim->header.data(), header.data(), header.size());
      if (written_.empty() || !written_[claim->slot]) {
        std::memcpy(claim->payload.data(), samples.data(), bytes);
        if (!written_.empty()) written_[claim->slot] = true;
      }
      shm_->commit(*claim, header.size(), bytes);
      return;
    }
    // The samples outlive the run's sockets: ZeroMQ reads them in place.
    zmq::message_t payload(const_cast<float*>(samples.data()), bytes, nullptr, nullptr);
    if (tools::send_frame(push_, header, std::move(payload), false) != tools::SendResult::sent)
      throw std::runtime_error("sending an ensemble to the daemon failed");
  }

  // The next result's header and the wall time it arrived; false after kResultTimeout without one.
  bool receive(v1::ResultHeader& header, std::int64_t& received_ns) {
    if (!tools::receive_message(sub_, parts_)) return false;
    received_ns = tools::wall_clock_ns();
    if (parts_.size() != 3 || !header.ParseFromArray(parts_[1].data(), static_cast<int>(parts_[1].size())))
      throw std::runtime_error("daemon published a message that is not [topic][ResultHeader][payload]");
    return true;
  }

 private:
  zmq::context_t context_{2};
  zmq::socket_t push_{context_, zmq::socket_type::push};
  zmq::socket_t sub_{context_, zmq::socket_type::sub};
  std::unique_ptr<shm::Producer> shm_;
  std::vector<bool> written_;  // --shm-write first: slots holding the samples already
  std::vector<zmq::message_t> parts_;
};

// The legs of an ensemble's trip, from the bench's clock and the result header's timestamps (all
// wall clock, one host).
const std::vector<std::string> kLegs = {"sent -> ingest took it", "took -> stages start", "stages",
                                        "stages end -> published", "published -> bench got it"};
std::vector<double> legs_of(std::int64_t sent_ns, const v1::Timing& t, std::int64_t received_ns) {
  const std::int64_t at[] = {sent_ns, t.received_ns(), t.compute_start_ns(), t.compute_end_ns(), t.published_ns(),
                             received_ns};
  std::vector<double> legs;
  for (std::size_t i = 0; i + 1 < std::size(at); ++i) legs.push_back(static_cast<double>(at[i + 1] - at[i]) * 1e-6);
  return legs;
}

std::string header_for(FrameMeta& meta, std::uint64_t sequence) {
  meta.sequence = sequence;
  meta.acquisition_time_ns = tools::wall_clock_ns();
  return wire::frame_header_from_meta(meta).SerializeAsString();
}

Row run_case(const DopplerDaemonOptions& options, const std::string& name, const std::filesystem::path& dir) {
  const Case c = case_named(name);
  Ensemble ensemble = make_ensemble(*c.workload);
  Row row{.name = name, .frame_bytes = ensemble.meta.payload.byte_size(), .rate_hz = c.rate_hz * options.rate_scale};
  std::filesystem::create_directories(dir);
  const tools::DaemonEndpoints endpoints = tools::pick_endpoints(options.transport, dir.string());
  tools::DaemonLauncher daemon(options.daemon, daemon_config(endpoints, options, c, row.frame_bytes), endpoints.control,
                               dir.string(), std::chrono::seconds(60));
  const v1::Status first = daemon.status();
  row.backend = first.backend() + " on " + first.device_name();
  Client client(endpoints);
  if (options.shm_write == "first") client.write_once();

  // Warm-up, one ensemble at a time: configuration, plans and allocations are out of the numbers.
  std::uint64_t sequence = 0;
  for (std::size_t i = 0; i < kWarmup; ++i) {
    client.send(header_for(ensemble.meta, sequence++), ensemble.samples);
    std::size_t outputs = 0;
    v1::ResultHeader header;
    std::int64_t received_ns = 0;
    while (outputs < kOutputs.size()) {
      if (!client.receive(header, received_ns))
        throw std::runtime_error(name + ": no result during the warm-up:\n" + daemon.log_tail());
      outputs += header.input_sequence() == sequence - 1;
    }
  }
  const v1::Status before = daemon.status();

  // Paced run: ensemble k at start + k / rate.
  const std::size_t count = std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(options.seconds * row.rate_hz)));
  const std::uint64_t first_sequence = sequence;
  std::vector<std::int64_t> sent_ns(count, 0);
  std::vector<double> send_ms(count, 0.0);
  std::atomic<std::size_t> sent{0};
  std::atomic<double> max_late_ms{0};
  std::string send_error;
  const auto period = std::chrono::duration<double>(1.0 / row.rate_hz);
  const auto start = SteadyClock::now() + std::chrono::milliseconds(50);
  std::thread sender([&] {
    FrameMeta meta = ensemble.meta;
    try {
      for (std::size_t k = 0; k < count; ++k) {
        const auto due = start + std::chrono::duration_cast<SteadyClock::duration>(period * static_cast<double>(k));
        std::this_thread::sleep_until(due);
        const double late_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - due).count();
        if (late_ms > max_late_ms.load()) max_late_ms = late_ms;
        sent_ns[k] = tools::wall_clock_ns();
        const auto send_start = SteadyClock::now();
        client.send(header_for(meta, first_sequence + k), ensemble.samples);
        send_ms[k] = std::chrono::duration<double, std::milli>(SteadyClock::now() - send_start).count();
        sent.fetch_add(1, std::memory_order_release);
      }
    } catch (const std::exception& e) {
      send_error = e.what();
    }
  });
  std::map<std::uint64_t, std::size_t> outputs_of;  // sequence -> outputs received
  std::vector<double> e2e_ms, daemon_ms;
  std::vector<std::vector<double>> legs(kLegs.size());
  std::int64_t first_result_ns = 0, last_result_ns = 0;
  v1::ResultHeader header;
  std::int64_t received_ns = 0;
  while (row.complete < count && client.receive(header, received_ns)) {
    const std::uint64_t s = header.input_sequence();
    if (s < first_sequence || s >= first_sequence + count) continue;
    if (++outputs_of[s] != kOutputs.size()) continue;
    if (++row.complete == 1) first_result_ns = received_ns;
    last_result_ns = received_ns;
    e2e_ms.push_back(static_cast<double>(received_ns - sent_ns[s - first_sequence]) * 1e-6);
    daemon_ms.push_back(static_cast<double>(header.timing().published_ns() - header.timing().received_ns()) * 1e-6);
    const std::vector<double> leg = legs_of(sent_ns[s - first_sequence], header.timing(), received_ns);
    for (std::size_t i = 0; i < leg.size(); ++i) legs[i].push_back(leg[i]);
  }
  sender.join();
  if (!send_error.empty()) std::cerr << "doppler-daemon " << name << ": sender stopped: " << send_error << "\n";
  row.sent = sent.load();
  row.lost = count - row.complete;
  row.max_late_ms = max_late_ms.load();
  // Result sets per second between the first and the last (paced input: the rate asked when the
  // daemon keeps up, lower when it falls behind and the sender with it).
  const double seconds = static_cast<double>(last_result_ns - first_result_ns) * 1e-9;
  row.sustained_hz = row.complete > 1 && seconds > 0 ? static_cast<double>(row.complete - 1) / seconds : 0;
  row.e2e_p50_ms = percentile(e2e_ms, 0.50);
  row.e2e_p99_ms = percentile(e2e_ms, 0.99);
  row.daemon_p50_ms = percentile(daemon_ms, 0.50);
  row.daemon_p99_ms = percentile(daemon_ms, 0.99);
  send_ms.resize(row.sent);
  row.send_p50_ms = percentile(send_ms, 0.50);
  row.send_p99_ms = percentile(send_ms, 0.99);
  row.send_max_ms = send_ms.empty() ? 0 : *std::max_element(send_ms.begin(), send_ms.end());
  for (const std::vector<double>& leg : legs) row.legs_ms.emplace_back(percentile(leg, 0.50), percentile(leg, 0.99));

  const v1::Status after = daemon.status();
  row.rejected = after.frames_rejected() - before.frames_rejected();
  row.dropped = after.frames_dropped() - before.frames_dropped();
  if (after.pipelines_size() > 0) {
    row.stage_errors = after.pipelines(0).stage_errors() - (before.pipelines_size() ? before.pipelines(0).stage_errors() : 0);
    row.busy_ms = after.pipelines(0).busy_ms_p50();
    row.h2d_ms = after.pipelines(0).h2d_ms_p50();
  }
  for (const v1::StageTiming& stage : after.stages()) {
    row.stage_ms.emplace_back(stage.stage(), stage.compute_ms_p50());
    row.stage_host_ms.push_back(stage.enqueue_ms_p50());
  }
  if (after.pipelines_size() > 0) row.interval_ms = after.pipelines(0).interval_ms_p50();
  const int code = daemon.stop(std::chrono::seconds(30));
  if (code != 0) std::cerr << "warning: sonopiped exited with " << code << ":\n" << daemon.log_tail();
  if (options.keep) std::cerr << "doppler-daemon " << name << ": kept " << dir.string() << "\n";
  return row;
}

void print_rows(const std::vector<Row>& rows, const DopplerDaemonOptions& options) {
  std::cout << "| case | ensemble | rate asked | sustained | sent | result sets | lost | sender late max | e2e p50 / p99 ms "
               "| daemon recv->pub p50 / p99 ms | busy / H2D p50 ms | stages p50 ms |\n"
            << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    std::ostringstream stages;
    for (const auto& [stage, ms] : r.stage_ms) stages << (stages.tellp() ? ", " : "") << stage << " " << fixed(ms, 3);
    std::cout << "| " << r.name << " | " << fixed(static_cast<double>(r.frame_bytes) / 1e6, 1) << " MB | "
              << fixed(r.rate_hz, 2) << "/s | " << fixed(r.sustained_hz, 2) << "/s | " << r.sent << " | " << r.complete
              << " | " << r.lost << " | " << fixed(r.max_late_ms, 1) << " ms | " << fixed(r.e2e_p50_ms, 2) << " / "
              << fixed(r.e2e_p99_ms, 2) << " | " << fixed(r.daemon_p50_ms, 2) << " / " << fixed(r.daemon_p99_ms, 2)
              << " | " << fixed(r.busy_ms, 3) << " / " << fixed(r.h2d_ms, 3) << " | " << stages.str() << " |\n";
  }
  std::cout << "\nwhere an ensemble's time went, ms p50 / p99 (each set's last output; the sender's time in send() "
               "p50 / p99 / max):\n| case | send() |";
  for (const std::string& leg : kLegs) std::cout << " " << leg << " |";
  std::cout << "\n|---|---|";
  for (std::size_t i = 0; i < kLegs.size(); ++i) std::cout << "---|";
  std::cout << "\n";
  for (const Row& r : rows) {
    std::cout << "| " << r.name << " | " << fixed(r.send_p50_ms, 2) << " / " << fixed(r.send_p99_ms, 2) << " / "
              << fixed(r.send_max_ms, 2) << " |";
    for (const auto& [p50, p99] : r.legs_ms) std::cout << " " << fixed(p50, 2) << " / " << fixed(p99, 2) << " |";
    std::cout << "\n";
  }
  std::cout << "daemon host side, p50 ms: each stage's run call on the submit thread (CUDA: enqueue only); "
               "between completions:\n";
  for (const Row& r : rows) {
    std::cout << "  " << r.name << ":";
    for (std::size_t i = 0; i < r.stage_host_ms.size(); ++i)
      std::cout << " " << r.stage_ms[i].first << " " << fixed(r.stage_host_ms[i], 3) << ";";
    std::cout << " completions every " << fixed(r.interval_ms, 3) << "\n";
  }
  for (const Row& r : rows) {
    const Case c = case_named(r.name);
    const double period_ms = 1e3 / r.rate_hz;
    // Kept up: nothing lost, the sender never held back a whole period (a daemon that falls behind
    // fills its lossless queue and then blocks the sender), and the result rate within 3 % of the
    // rate asked (the first and last results' latency jitter over a short run).
    const bool rate_met = r.lost == 0 && r.sustained_hz >= 0.97 * r.rate_hz && r.max_late_ms < period_ms;
    std::cout << "goal " << r.name << " " << fixed(c.rate_hz, 1) << " ensembles/s"
              << (options.rate_scale != 1 ? " x " + fixed(options.rate_scale, 3) + " = " + fixed(r.rate_hz, 2) + "/s" : "")
              << " sustained with 0 loss: " << fixed(r.sustained_hz, 2) << "/s, " << r.lost << " lost, sender at most "
              << fixed(r.max_late_ms, 1) << " ms late " << (rate_met ? "PASS" : "MISS") << "\n";
    std::cout << "goal " << r.name << " e2e p99 <= one ensemble period (" << fixed(period_ms, 2) << " ms): "
              << fixed(r.e2e_p99_ms, 2) << " ms " << (r.e2e_p99_ms <= period_ms ? "PASS" : "MISS") << "\n";
    if (r.rejected || r.dropped || r.stage_errors)
      std::cout << "  " << r.name << ": daemon rejected " << r.rejected << ", dropped " << r.dropped << ", stage errors "
                << r.stage_errors << "\n";
  }
}

void run_doppler_daemon_bench(const DopplerDaemonOptions& options_in) {
  DopplerDaemonOptions options = options_in;
  if (options.daemon.empty()) options.daemon = tools::path_next_to_executable("../../daemon/sonopiped");
  if (!(options.rate_scale > 0)) throw std::invalid_argument("--rate-scale must be > 0");
  namespace fs = std::filesystem;
  const bool own_dir = options.work_dir.empty();
  const fs::path work = own_dir ? fs::temp_directory_path() / ("sonopipe-bench-doppler-" + std::to_string(::getpid()))
                                : fs::path(options.work_dir);
  spdlog::set_level(spdlog::level::warn);
  std::vector<Row> rows;
  for (const std::string& name : options.cases) {
    rows.push_back(run_case(options, name, work / name));
    std::cerr << "  " << name << ": " << fixed(rows.back().sustained_hz, 2) << " ensembles/s sustained, "
              << rows.back().lost << " lost\n";
  }
  std::cout << "sonopipe-bench doppler-daemon: " << options.daemon << ", backend "
            << (rows.empty() ? std::string("?") : rows.front().backend) << ", transport " << options.transport
            << ", " << options.seconds << " s per case after " << kWarmup << " warm-up ensembles; slots " << options.slots
            << ", queue " << options.queue_depth
            << (options.shm_write == "first" ? "; shm: each slot's samples written once (--shm-write first)" : "")
            << "; non_finite: " << options.non_finite << "\n"
            << "chain: beamform -> mean_bmode (published) -> clutter_filter " << options.clutter << " -> doppler 5 x 5 "
               "(config/doppler.yaml's), channel IQ complex64 [frame, 1, 128, samples], random samples\n";
  print_rows(rows, options);
  if (own_dir && !options.keep) fs::remove_all(work);
}

}  // namespace

void add_doppler_daemon_bench(CLI::App& app) {
  auto options = std::make_shared<DopplerDaemonOptions>();
  CLI::App* command = app.add_subcommand(
      "doppler-daemon", "the Doppler chain through sonopiped, channel ensembles paced at their acquisition rate");
  command->add_option("--daemon", options->daemon, "sonopiped binary (default: the one built next to this tool)");
  command->add_option("--backend", options->backend, "auto, cuda or cpu")->capture_default_str();
  command->add_option("--cases,--case", options->cases, "pwi_disk (312.5/s), fus (2.5/s), demo (156.25/s)")
      ->capture_default_str()->check(CLI::IsMember({"pwi_disk", "fus", "demo"}));
  command->add_option("--seconds", options->seconds, "paced run per case")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--rate-scale", options->rate_scale, "fraction of the acquisition rate (< 1 without a GPU)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--transport", options->transport, "the ingest: shm (same-host pool), ipc or tcp")
      ->capture_default_str()->check(CLI::IsMember({"shm", "ipc", "tcp"}));
  command->add_option("--slots", options->slots, "frames in flight in the pipeline")->capture_default_str();
  command->add_option("--queue-depth", options->queue_depth, "frames queued in front of it")->capture_default_str();
  command->add_option("--cpu-threads", options->cpu_threads, "CPU backend threads (0: all cores)")->capture_default_str();
  command->add_option("--clutter", options->clutter, "clutter_filter method: svd (config/doppler.yaml) or polynomial")
      ->capture_default_str()->check(CLI::IsMember({"svd", "polynomial"}));
  command->add_option("--shm-write", options->shm_write,
                      "shm: the sender copies each ensemble into its slot (every), or into each slot the first time "
                      "only (first: the daemon's own rate, without the sender's copy)")
      ->capture_default_str()->check(CLI::IsMember({"every", "first"}));
  command->add_option("--non-finite", options->non_finite,
                      "the daemon's non_finite policy: reject (its default: float payloads scanned) or pass")
      ->capture_default_str()->check(CLI::IsMember({"reject", "pass"}));
  command->add_option("--eigensolver", options->eigensolver, "svd: clutter_filter eigensolver, auto or full")
      ->capture_default_str();
  command->add_option("--work-dir", options->work_dir, "folder for the daemon's config, log and sockets");
  command->add_flag("--keep", options->keep, "keep the work folder");
  command->callback([options] { run_doppler_daemon_bench(*options); });
}

}  // namespace sonopipe::bench
