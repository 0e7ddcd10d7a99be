"""The status line under every figure: result rate, latencies, skips and gaps."""
from collections import deque

import numpy as np


class PipelineMeter:
    """Rate and latency of one pipeline's result groups over the last `window` groups.

    live: rate from this process's receive clock, end-to-end latency = local receive - daemon
    receive (same host clock). recording: rate from the recorded daemon receive times; only the
    daemon's own latency (published - received) is known."""

    def __init__(self, live, window=30):
        self.live = live
        self._times_ns = deque(maxlen=window)
        self._daemon_ms = deque(maxlen=window)
        self._end_to_end_ms = deque(maxlen=window)
        self.groups = 0

    def add(self, group):
        self.groups += 1
        results = list(group.outputs.values())
        timing = results[0].header.timing
        self._times_ns.append(max(r.local_received_ns for r in results) if self.live else timing.received_ns)
        published = max(r.header.timing.published_ns for r in results)
        if timing.received_ns and published:
            self._daemon_ms.append((published - timing.received_ns) / 1e6)
        if self.live and timing.received_ns:
            self._end_to_end_ms.append((max(r.local_received_ns for r in results) - timing.received_ns) / 1e6)

    def rate_hz(self):
        if len(self._times_ns) < 2 or self._times_ns[-1] <= self._times_ns[0]:
            return None
        return (len(self._times_ns) - 1) / ((self._times_ns[-1] - self._times_ns[0]) / 1e9)

    def text(self, group, stats=None):
        header = group.header()
        parts = [f"{group.pipeline}: input #{group.input_sequence} (stream {group.stream_id})"]
        if header.backend:
            parts.append(f"backend {header.backend}")
        rate = self.rate_hz()
        what = "result sets/s received" if self.live else "frames/s into the daemon"
        parts.append(f"{rate:.1f} {what}" if rate else "rate n/a (one set)")
        if self._daemon_ms:
            parts.append(f"daemon latency p50 {np.median(self._daemon_ms):.1f} ms")
        if self._end_to_end_ms:
            parts.append(f"end-to-end p50 {np.median(self._end_to_end_ms):.1f} ms")
        if stats is not None:
            parts.append(f"skipped {stats.skipped} (conflation), missing {stats.missing}")
        return " | ".join(parts)
