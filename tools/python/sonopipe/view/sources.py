"""Where the viewer's results come from, grouped into one set per (pipeline, input frame).

- LiveSource: a conflating Subscriber on the daemon's publish endpoint, so rendering slower than
  the daemon publishes only skips (counted) and never backs anything up.
- RecordingSource: the results of an HDF5 recording (sonopipe-record), in recorded order, plus its
  raw frames (for the B-mode of strain RF) when the recording holds them.

A Group is complete when it holds every output the pipeline is known to publish, or when the
pipeline's next input frame starts, or when the source goes idle. A live source learns a pipeline's
outputs from what arrives: until one of its groups has ended, its first group is never taken for
complete early (a one-ensemble Doppler run would otherwise show its first output alone, e.g. the
B-mode without power and velocity, and the rest without the B-mode).
"""
from dataclasses import dataclass, field
import time

from sonopipe.arrays import axes_from_proto
from sonopipe.recording import read_recording
from sonopipe.subscriber import Result, Subscriber


@dataclass
class Group:
    pipeline: str
    input_sequence: int
    stream_id: int
    outputs: dict = field(default_factory=dict)  # output name -> Result

    def header(self):
        return next(iter(self.outputs.values())).header


class Grouper:
    """Collects results into Groups; `add` returns the groups that became complete."""

    def __init__(self, known_outputs=None):
        self._known = {k: set(v) for k, v in (known_outputs or {}).items()}  # pipeline -> outputs
        self._learned = set(self._known)  # pipelines whose whole output set is known
        self._open = {}  # pipeline -> Group

    def add(self, result):
        header = result.header
        pipeline, output = header.pipeline, header.output
        self._known.setdefault(pipeline, set()).add(output)
        done = []
        group = self._open.get(pipeline)
        if group is not None and (group.input_sequence != header.input_sequence
                                  or group.stream_id != header.stream_id or output in group.outputs):
            done.append(self._open.pop(pipeline))
            self._learned.add(pipeline)  # a whole group has passed: its outputs are known
            group = None
        if group is None:
            group = self._open[pipeline] = Group(pipeline, header.input_sequence, header.stream_id)
        group.outputs[output] = result
        if pipeline in self._learned and set(group.outputs) >= self._known[pipeline]:
            done.append(self._open.pop(pipeline))
        return done

    def flush(self):
        done = list(self._open.values())
        self._learned.update(self._open)
        self._open.clear()
        return done


class LiveSource:
    """Results from a running daemon. `stats` is the Subscriber's (skipped, gaps, ...)."""

    def __init__(self, endpoint, topics, idle_timeout_s=None):
        self.subscriber = Subscriber(endpoint, topics, conflate=True)
        self.idle_timeout_s = idle_timeout_s
        self.stats = self.subscriber.stats
        self.recording = None

    def results(self):
        """Yields Results, or None after each 0.2 s without any (so callers can flush and redraw);
        returns after `idle_timeout_s` without results."""
        last = time.monotonic()
        while True:
            result = self.subscriber.receive(0.2)
            if result is not None:
                last = time.monotonic()
                if result.topic.startswith("result/"):
                    yield result
                continue
            if self.idle_timeout_s is not None and time.monotonic() - last > self.idle_timeout_s:
                return
            yield None

    def close(self):
        self.subscriber.close()


class RecordingSource:
    """Results of a recording, ordered by daemon receive time, then input sequence."""

    def __init__(self, path):
        self.recording = read_recording(path)
        self.stats = None

    def known_outputs(self):
        known = {}
        for pipeline, output in self.recording.results:
            known.setdefault(pipeline, set()).add(output)
        return known

    def results(self):
        entries = []
        for (pipeline, output), series in self.recording.results.items():
            for index, header in enumerate(series.headers):
                order = (int(series.received_ns[index]), int(series.sequence[index]), pipeline, output)
                entries.append((order, header, series.payload[index]))
        entries.sort(key=lambda entry: entry[0])
        for order, header, array in entries:
            yield Result(f"result/{header.pipeline}/{header.output}", header, array,
                         axes_from_proto(header.axes), local_received_ns=header.timing.published_ns)

    def close(self):
        pass
