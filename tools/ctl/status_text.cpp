#include "tools/ctl/status_text.h"

#include <cstdio>
#include <sstream>

namespace sonopipe::ctl {
namespace {

std::string ms(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", value);
  return text;
}

// The publish socket's subscribers: the bound, and per subscriber whether it keeps up and what it lost.
void publish_text(const v1::Status& status, std::ostringstream& out) {
  if (status.publish_max_queued_bytes() == 0) return;  // a daemon from before the bound
  out << "publish: a subscriber is cut past a backlog of " << status.publish_max_queued_bytes() << " bytes; "
      << status.publish_bytes_held() << " bytes held now, " << status.results_dropped_for_subscribers()
      << " results dropped for subscribers, " << status.subscribers_cut() << " cut\n";
  if (!status.subscribers_watched()) {
    out << "  subscribers: not watched (security.curve)\n";
    return;
  }
  for (const v1::SubscriberStatus& s : status.subscribers())
    out << "  subscriber " << s.peer() << ": connected " << ms(s.connected_s()) << " s, "
        << (s.cut() ? "cut, " : s.lagging() ? "lagging, " : "") << "backlog " << s.backlog_bytes() << " bytes, "
        << s.results_dropped() << " results dropped\n";
}

}  // namespace

std::string status_text(const v1::Status& status) {
  std::ostringstream out;
  out << "backend: " << status.backend() << " (" << status.backend_reason() << ")\n"
      << "device: " << status.device_name() << "\n"
      << "uptime: " << ms(status.uptime_s()) << " s" << (status.draining() ? " (draining)" : "") << "\n"
      << "frames: " << status.frames_received() << " received, " << status.frames_processed() << " processed, "
      << status.results_published() << " results published, " << status.frames_rejected() << " rejected, "
      << status.frames_dropped() << " dropped, " << status.frames_missing() << " missing (sequence gaps)\n";
  if (!status.rejected_by_reason().empty()) {
    out << "rejected by reason:";
    for (const auto& [reason, count] : status.rejected_by_reason()) out << " " << reason << "=" << count;
    out << "\n";
  }
  if (status.clients_refused() > 0) {
    out << "clients refused (CURVE): " << status.clients_refused() << " (";
    const char* separator = "";
    for (const auto& [socket, count] : status.clients_refused_by_socket()) {
      out << separator << socket << "=" << count;
      separator = " ";
    }
    out << ")\n";
  }
  publish_text(status, out);
  for (const v1::PipelineStatus& p : status.pipelines()) {
    out << "pipeline " << p.name() << ": " << p.frames_accepted() << " accepted, " << p.frames_processed()
        << " processed, " << p.results_published() << " published, " << p.frames_dropped() << " dropped, "
        << p.stage_errors() << " stage errors; queue " << p.queue_depth() << "/" << p.queue_capacity() << ", "
        << p.slots() << " slots\n"
        << "  latency received->published ms: p50 " << ms(p.latency_ms_p50()) << ", p99 " << ms(p.latency_ms_p99())
        << "\n";
    if (status.backend() == "cuda")
      out << "  copies ms: H2D p50 " << ms(p.h2d_ms_p50()) << " p99 " << ms(p.h2d_ms_p99()) << ", D2H p50 "
          << ms(p.d2h_ms_p50()) << " p99 " << ms(p.d2h_ms_p99()) << "\n";
    out << "  per frame ms: busy p50 " << ms(p.busy_ms_p50()) << ", interval p50 " << ms(p.interval_ms_p50())
        << "\n";
    if (p.devices_size() > 1 || status.backend() == "cuda") {
      for (const v1::DeviceStatus& d : p.devices())
        out << "  device " << d.device() << ": " << d.frames_processed() << " frames, busy " << ms(d.busy_ms_total())
            << " ms, queue " << d.queue_depth() << (d.streams() ? ", " + std::to_string(d.streams()) + " streams" : "")
            << "\n";
    }
    for (const v1::StageTiming& s : status.stages()) {
      if (s.pipeline() != p.name()) continue;
      out << "  stage " << s.stage() << ": " << (status.backend() == "cuda" ? "GPU" : "compute") << " ms p50 "
          << ms(s.compute_ms_p50()) << " p99 " << ms(s.compute_ms_p99()) << ", enqueue ms p50 "
          << ms(s.enqueue_ms_p50()) << " p99 " << ms(s.enqueue_ms_p99()) << " (" << s.frames() << " frames)\n";
    }
  }
  return out.str();
}

}  // namespace sonopipe::ctl
