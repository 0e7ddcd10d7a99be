#include "tools/ctl/status_text.h"

#include <charconv>
#include <cmath>
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
  out << "publish: a stalled subscriber is cut past a backlog of " << status.publish_max_queued_bytes() << " bytes; "
      << status.publish_bytes_held() << " bytes held now, " << status.results_dropped_for_subscribers()
      << " results dropped for subscribers, " << status.subscribers_cut() << " cut\n";
  if (!status.subscribers_watched()) {
    out << "  subscribers: not watched (security.curve)\n";
    return;
  }
  for (const v1::SubscriberStatus& s : status.subscribers())
    out << "  subscriber " << s.peer() << ": connected " << ms(s.connected_s()) << " s, "
        << (s.cut() ? "cut, " : s.stalled() ? "stalled, " : s.lagging() ? "lagging, " : "") << "backlog " << s.backlog_bytes() << " bytes, "
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
    if (p.param_changes() > 0 || p.state_resets() > 0)
      out << "  parameters: generation " << p.param_generation() << ", " << p.param_changes() << " live changes, "
          << p.state_resets() << " stream state resets\n";
    for (const v1::Parameter& parameter : p.parameters())
      if (parameter.generation() > 0) out << "  " << parameter_text(parameter) << "\n";
  }
  return out.str();
}

std::string parameter_text(const v1::Parameter& p) {
  std::ostringstream out;
  out << p.name() << " = " << p.value();
  if (!p.unit().empty()) out << " " << p.unit();
  out << " (" << p.type();
  if (p.choices_size() > 0) {
    out << ":";
    for (int i = 0; i < p.choices_size(); ++i) out << (i ? "|" : " ") << p.choices(i);
  }
  auto number = [](double value) {  // shortest text that reads back as the same double
    char text[32];
    auto [end, ec] = std::to_chars(text, text + sizeof text, value);
    return ec == std::errc() ? std::string(text, end) : std::to_string(value);
  };
  if (std::isfinite(p.min()) || std::isfinite(p.max()))
    out << ", range [" << (std::isfinite(p.min()) ? number(p.min()) : "-inf") << ", "
        << (std::isfinite(p.max()) ? number(p.max()) : "inf") << "]";
  out << (p.live() ? ", live" : ", needs a restart");
  if (p.generation() > 0) out << ", set at generation " << p.generation();
  out << ")";
  return out.str();
}

}  // namespace sonopipe::ctl
