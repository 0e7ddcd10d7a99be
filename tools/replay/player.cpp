#include "tools/replay/player.h"

#include <algorithm>
#include <functional>
#include <cstring>
#include <memory>
#include <cmath>
#include <iomanip>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tools/common/clock.h"
#include "tools/common/stop_signal.h"
#include "shm/producer.h"
#include "tools/common/zmq_io.h"
#include "tools/replay/acknowledged_sender.h"
#include "tools/replay/stream_route.h"

namespace sonopipe::replay {

namespace {

using tools::SteadyClock;

constexpr auto kSpinWindow = std::chrono::microseconds(200);  // sleep until this close, then spin
constexpr auto kStopCheck = std::chrono::milliseconds(100);   // longest sleep between stop checks

// Sleeps until `due` (sleep, then a short spin for sub-millisecond accuracy). False if stopped.
bool wait_until(SteadyClock::time_point due) {
  while (true) {
    if (tools::stop_requested()) return false;
    const auto left = due - SteadyClock::now();
    if (left <= std::chrono::nanoseconds(0)) return true;
    if (left > kSpinWindow)
      std::this_thread::sleep_for(std::min<SteadyClock::duration>(left - kSpinWindow, kStopCheck));
  }
}

// Live mode: an XPUB sees subscriptions; wait for the first one.
bool wait_for_subscriber(zmq::socket_t& socket, std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  std::vector<zmq::message_t> parts;
  while (!tools::stop_requested()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) return false;
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::min(left, std::chrono::milliseconds(kStopCheck)));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
    if ((item.revents & ZMQ_POLLIN) && tools::receive_message(socket, parts, true) && !parts.empty() &&
        parts[0].size() >= 1 && static_cast<const char*>(parts[0].data())[0] == 1)
      return true;  // subscription messages start with byte 1
  }
  return false;
}

double percentile_ms(std::vector<double>& values, double fraction) {
  if (values.empty()) return 0.0;
  const std::size_t k = std::min(values.size() - 1, static_cast<std::size_t>(fraction * static_cast<double>(values.size())));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
  return values[k];
}


// What sending one frame came to: sent to endpoint `target`, dropped (a live queue was full), or
// stopped (a signal, or the receiver is gone): the loop ends without counting the frame.
struct SendOutcome {
  enum class Kind { sent, dropped, stopped } kind = Kind::sent;
  std::size_t target = 0;
};

// The loops over the source at the schedule's times, shared by every transport: `send` hands one
// prepared frame over; lateness, counts, duration and loops go into `report`.
void paced_loop(FrameSource& source, const Schedule& schedule, const PlayerOptions& options, PlayerReport& report,
                const std::function<SendOutcome(OutgoingFrame&)>& send) {
  std::vector<double> lateness_ms;
  const auto start = SteadyClock::now();
  std::optional<SteadyClock::time_point> first_send_start;
  auto last_send_end = start;
  for (std::size_t loop = 0; options.loops == 0 || loop < options.loops; ++loop) {
    for (std::size_t i = 0; i < source.size(); ++i) {
      // Prepare (and, when streaming from the file, read) before waiting, so the read is off the clock.
      OutgoingFrame frame = source.prepare(i, loop, schedule.recorded_period_ns(), options.keep_headers);
      const std::size_t bytes = frame.payload.size();
      const auto due = start + std::chrono::nanoseconds(schedule.due_ns(loop, i));
      if (schedule.timed() && !wait_until(due)) break;
      if (tools::stop_requested()) break;
      const auto send_start = SteadyClock::now();
      if (!first_send_start) first_send_start = send_start;
      const SendOutcome outcome = send(frame);
      if (outcome.kind == SendOutcome::Kind::stopped) break;
      last_send_end = SteadyClock::now();
      if (schedule.timed()) {
        const double late_ms = std::chrono::duration<double, std::milli>(send_start - due).count();
        lateness_ms.push_back(late_ms);
        if (late_ms > options.late_threshold_ms) ++report.late_frames;
        report.lateness_ms_max = std::max(report.lateness_ms_max, late_ms);
        report.scheduled_duration_s = static_cast<double>(schedule.due_ns(loop, i)) * 1e-9;
      }
      if (outcome.kind == SendOutcome::Kind::dropped) {
        ++report.frames_dropped;
        continue;
      }
      ++report.frames_sent;
      ++report.frames_per_endpoint[outcome.target];
      report.bytes_sent += bytes;
    }
    if (tools::stop_requested()) break;
    ++report.loops_completed;
  }
  report.interrupted = tools::stop_requested();
  if (first_send_start) report.duration_s = std::chrono::duration<double>(last_send_end - *first_send_start).count();
  report.lateness_ms_p50 = percentile_ms(lateness_ms, 0.50);
  report.lateness_ms_p99 = percentile_ms(lateness_ms, 0.99);
}
}  // namespace

namespace {

// shm://: every frame into a slot of the daemon's pool (lossless pools wait for a slot, checking
// for a stop between waits), then the daemon's acknowledgement.
PlayerReport play_shm(FrameSource& source, const Schedule& schedule, const PlayerOptions& options) {
  if (options.endpoints.size() != 1 || options.bind || options.curve.enabled())
    throw std::runtime_error("an shm:// endpoint is one daemon's pool: no --route, --bind or CURVE");
  PlayerReport report;
  report.frames_per_endpoint.assign(1, 0);
  const auto attach_start = SteadyClock::now();
  std::unique_ptr<shm::Producer> producer;
  try {
    producer = std::make_unique<shm::Producer>(options.endpoints[0]);
  } catch (const shm::ShmError& e) {
    throw std::runtime_error(e.what());
  }
  report.shm_mode = std::string(shm::mode_name(producer->mode()));
  report.wait_for_receiver_s = tools::seconds_since(attach_start);
  paced_loop(source, schedule, options, report, [&](OutgoingFrame& frame) {
    const std::size_t bytes = frame.payload.size();
    std::optional<shm::Producer::Claim> claim;
    while (!claim && !tools::stop_requested())
      claim = producer->claim(SteadyClock::now() + std::chrono::milliseconds(kStopCheck));
    if (!claim) return SendOutcome{.kind = SendOutcome::Kind::stopped};
    if (frame.header.size() > claim->header.size() || bytes > claim->payload.size()) {
      producer->abandon(*claim);
      throw std::runtime_error("a frame of " + std::to_string(bytes) + " bytes does not fit a slot of " +
                               options.endpoints[0] + " (" + std::to_string(claim->payload.size()) +
                               "); raise the daemon's max_frame_bytes");
    }
    std::memcpy(claim->header.data(), frame.header.data(), frame.header.size());
    std::memcpy(claim->payload.data(), frame.payload.data(), bytes);
    producer->commit(*claim, frame.header.size(), bytes);
    return SendOutcome{};
  });
  // The acknowledgement: wait (up to the connect timeout) for the daemon to take what is in the pool.
  const auto drain_start = SteadyClock::now();
  producer->wait_delivered(drain_start + options.connect_timeout);
  const shm::ProducerCounters counters = producer->counters();
  report.acknowledged = true;
  report.frames_delivered = counters.delivered;
  report.frames_not_delivered = counters.undelivered();
  report.frames_dropped = counters.overwritten;  // live pools: replaced before the daemon took them
  report.drain_s = tools::seconds_since(drain_start);
  return report;
}

// ZeroMQ with the daemon's acknowledgements: every frame numbered; the report names what the daemon
// did not take; with resend, frames lost with a connection go again when a daemon is back.
PlayerReport play_acknowledged(FrameSource& source, const Schedule& schedule, const PlayerOptions& options) {
  if (options.endpoints.size() != 1 || options.bind || !options.lossless)
    throw std::runtime_error("--ack-endpoint is for one daemon's lossless ingest: --lossless, no --route or --bind");
  PlayerReport report;
  report.frames_per_endpoint.assign(1, 0);
  zmq::context_t context(1);
  const auto attach_start = SteadyClock::now();
  AcknowledgedSender sender(context, {.endpoint = options.endpoints[0], .ack_endpoint = options.ack_endpoint,
                                      .send_high_water_mark = options.send_high_water_mark, .curve = options.curve,
                                      .connect_timeout = options.connect_timeout, .resend = options.resend});
  if (sender.interrupted()) {
    report.interrupted = true;
    return report;
  }
  report.wait_for_receiver_s = tools::seconds_since(attach_start);
  // A frame's cookie is its place in the replay: loop x frames per loop + index.
  const std::size_t per_loop = source.size();
  const AcknowledgedSender::Remake remake = [&](std::uint64_t cookie) {
    return source.prepare(cookie % per_loop, cookie / per_loop, schedule.recorded_period_ns(), options.keep_headers);
  };
  std::size_t position = 0;  // frames handed to send so far, in replay order
  paced_loop(source, schedule, options, report, [&](OutgoingFrame& frame) {
    const std::uint64_t cookie = position++;
    const AcknowledgedSender::Outcome outcome = sender.send(frame, cookie, remake);
    if (outcome == AcknowledgedSender::Outcome::sent) return SendOutcome{};
    return SendOutcome{.kind = SendOutcome::Kind::stopped};
  });
  const auto drain_start = SteadyClock::now();
  sender.settle(remake);
  sender.close();
  report.drain_s = tools::seconds_since(drain_start);
  const wire::DeliveryLedger& ledger = sender.ledger();
  report.acknowledged = true;
  report.frames_delivered = ledger.delivered();
  report.frames_refused = ledger.refused();
  report.frames_not_delivered = ledger.outstanding();
  for (const wire::DeliveryLedger::Frame& frame : ledger.undelivered())
    report.undelivered.push_back({frame.stream_id, frame.sequence});
  report.frames_resent = sender.resent();
  report.daemon_gone = sender.daemon_gone();
  report.daemon_instances = ledger.daemon_instances();
  for (const auto& [instance, count] : ledger.delivered_by_instance()) report.delivered_per_instance.push_back(count);
  if (report.daemon_gone && !report.interrupted) {
    const std::size_t planned = options.loops == 0 ? 0 : options.loops * per_loop;
    report.frames_not_sent = planned > report.frames_sent ? planned - report.frames_sent : 0;
  }
  return report;
}

}  // namespace

PlayerReport play(FrameSource& source, const Schedule& schedule, const PlayerOptions& options) {
  if (options.endpoints.empty()) throw std::invalid_argument("no endpoint to send to");
  if (shm::is_shm_endpoint(options.endpoints[0])) return play_shm(source, schedule, options);
  if (!options.ack_endpoint.empty()) return play_acknowledged(source, schedule, options);
  PlayerReport report;
  report.frames_per_endpoint.assign(options.endpoints.size(), 0);
  zmq::context_t context(1);
  std::vector<zmq::socket_t> sockets;
  sockets.reserve(options.endpoints.size());
  const auto attach_start = SteadyClock::now();
  for (const std::string& endpoint : options.endpoints) {
    zmq::socket_t& socket = sockets.emplace_back(context, options.lossless ? zmq::socket_type::push : zmq::socket_type::xpub);
    socket.set(zmq::sockopt::sndhwm, options.send_high_water_mark);
    // Lossless: closing waits until every frame is handed over; live: give up after a second.
    socket.set(zmq::sockopt::linger, options.lossless ? -1 : 1000);
    if (!options.lossless) socket.set(zmq::sockopt::xpub_nodrop, 1);  // full queue -> EAGAIN, counted
    tools::PeerWatch watch(context, socket);
    if (options.curve.enabled() && options.bind)
      throw std::runtime_error("CURVE keys are for connecting to a daemon; --bind makes replay the server");
    tools::apply_curve_client(socket, options.curve);
    tools::attach(socket, endpoint, options.bind);
    const bool attached = options.lossless ? watch.wait(options.connect_timeout)
                                           : wait_for_subscriber(socket, options.connect_timeout);
    if (!attached) {
      if (tools::stop_requested()) {
        report.interrupted = true;
        return report;
      }
      throw std::runtime_error(std::string("no receiver ") + (options.lossless ? "attached to " : "subscribed on ") +
                               endpoint + " within " + std::to_string(options.connect_timeout.count()) +
                               " ms (is the daemon running with ingest.pattern " +
                               (options.lossless ? "pull" : "sub") + "?)");
    }
  }
  report.wait_for_receiver_s = tools::seconds_since(attach_start);
  paced_loop(source, schedule, options, report, [&](OutgoingFrame& frame) {
    const std::size_t target = route_of(frame.stream_id, sockets.size());
    const tools::SendResult result =
        tools::send_frame(sockets[target], frame.header, std::move(frame.payload), !options.lossless);
    if (result == tools::SendResult::interrupted) return SendOutcome{.kind = SendOutcome::Kind::stopped};
    if (result == tools::SendResult::would_block) return SendOutcome{.kind = SendOutcome::Kind::dropped};
    return SendOutcome{.kind = SendOutcome::Kind::sent, .target = target};
  });
  const auto drain_start = SteadyClock::now();
  for (zmq::socket_t& socket : sockets) socket.close();
  context.close();  // returns once lingering frames are handed to the OS
  report.drain_s = tools::seconds_since(drain_start);
  return report;
}

std::string describe_frame_ids(const std::vector<FrameId>& frames) {
  // "stream 0 sequence 40-55, 60; stream 1 sequence 7", at most kShownRanges ranges.
  constexpr std::size_t kShownRanges = 16;
  std::vector<FrameId> sorted = frames;
  std::sort(sorted.begin(), sorted.end(), [](const FrameId& a, const FrameId& b) {
    return a.stream_id != b.stream_id ? a.stream_id < b.stream_id : a.sequence < b.sequence;
  });
  std::ostringstream out;
  std::size_t ranges = 0;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1].stream_id == sorted[i].stream_id &&
           sorted[j + 1].sequence == sorted[j].sequence + 1)
      ++j;
    if (ranges == kShownRanges) {
      out << "; ... " << sorted.size() - i << " more";
      break;
    }
    const bool new_stream = i == 0 || sorted[i - 1].stream_id != sorted[i].stream_id;
    out << (i == 0 ? "" : new_stream ? "; " : ", ");
    if (new_stream) out << "stream " << sorted[i].stream_id << " sequence ";
    out << sorted[i].sequence;
    if (j > i) out << "-" << sorted[j].sequence;
    ++ranges;
    i = j + 1;
  }
  return out.str();
}

std::string describe(const PlayerReport& report, const Schedule& schedule, const PlayerOptions& options,
                     const FrameSource& source) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(3);
  const Timing& timing = schedule.timing();
  out << "sonopipe-replay: sent " << report.frames_sent << " frames (" << static_cast<double>(report.bytes_sent) / 1e6
      << " MB) in " << report.duration_s << " s to ";
  if (options.endpoints.size() == 1) {
    out << options.endpoints[0];
  } else {
    out << options.endpoints.size() << " endpoints by stream id mod " << options.endpoints.size() << " (";
    for (std::size_t i = 0; i < options.endpoints.size(); ++i)
      out << (i ? ", " : "") << options.endpoints[i] << ": " << report.frames_per_endpoint[i] << " frames";
    out << ")";
  }
  if (!report.shm_mode.empty())
    out << " (shared memory, " << report.shm_mode << " pool)";
  else if (report.acknowledged)
    out << " (push, lossless, acknowledged on " << options.ack_endpoint << (options.resend ? ", resend" : "") << ")";
  else
    out << " (" << (options.lossless ? "push, lossless" : "pub, live") << ")";
  if (report.interrupted) out << " -- stopped by signal";
  out << "\n  timing: ";
  switch (timing.mode) {
    case TimingMode::original:
      out << "original x" << timing.speed << " (recorded span " << static_cast<double>(schedule.recorded_span_ns()) * 1e-9
          << " s)";
      break;
    case TimingMode::fixed_rate: out << "fixed " << timing.rate_hz << " frames/s"; break;
    case TimingMode::max: out << "as fast as possible"; break;
  }
  out << ", loops " << report.loops_completed << "/" << (options.loops == 0 ? std::string("endless") : std::to_string(options.loops))
      << ", " << source.size() << " frames per loop, " << (source.preloaded() ? "preloaded" : "read from file")
      << ", receiver attached after " << report.wait_for_receiver_s << " s";
  out << "\n  achieved: " << report.frames_per_s() << " frames/s, " << report.bytes_per_s() / 1e6 << " MB/s";
  if (schedule.timed() && report.scheduled_duration_s > 0)
    out << " (schedule " << report.scheduled_duration_s << " s for the same frames)";
  if (schedule.timed())
    out << "\n  lateness: " << report.late_frames << " frames started more than " << options.late_threshold_ms
        << " ms late; p50 " << report.lateness_ms_p50 << " ms, p99 " << report.lateness_ms_p99 << " ms, max "
        << report.lateness_ms_max << " ms";
  else
    out << "\n  lateness: not applicable (--max)";
  if (report.acknowledged && report.shm_mode.empty()) {
    out << "\n  delivered: " << report.frames_delivered << " (acknowledged by the daemon";
    if (report.delivered_per_instance.size() > 1) {
      out << ", " << report.delivered_per_instance.size() << " daemon instances:";
      for (std::size_t i = 0; i < report.delivered_per_instance.size(); ++i)
        out << (i ? " +" : "") << " " << report.delivered_per_instance[i];
    }
    out << "), not delivered: " << report.frames_not_delivered;
    if (report.frames_not_delivered > 0) out << " (" << describe_frame_ids(report.undelivered) << ")";
    out << "\n  refused: " << report.frames_refused << " (read by the daemon and refused: its rejected counters say why)"
        << "\n  resent: " << report.frames_resent << (options.resend ? " (after the daemon came back)" : " (no --resend)");
    if (report.daemon_gone)
      out << "\n  the daemon went away" << (options.resend ? " and did not come back" : "") << ": "
          << report.frames_not_sent << " frame(s) not sent";
  } else if (report.acknowledged) {
    out << "\n  delivered: " << report.frames_delivered << " (taken by the daemon), not delivered: "
        << report.frames_not_delivered
        << (report.frames_not_delivered ? " (the daemon did not take them: they wait in the pool for the next "
                                          "daemon on this name)" : "")
        << "\n  dropped: " << report.frames_dropped << " (live pool: replaced by newer frames before the daemon took them)";
  } else {
    out << "\n  dropped: " << report.frames_dropped
        << (options.lossless ? " (lossless: sends block instead)" : " (live: publisher queue full)");
    if (options.lossless)
      out << "\n  delivery: not acknowledged (no --ack-endpoint): frames in ZeroMQ's queues when a daemon dies are "
             "lost without notice";
  }
  out << "\n  drained in " << report.drain_s << " s after the last send";
  return out.str();
}

}  // namespace sonopipe::replay
