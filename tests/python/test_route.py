"""Streaming past one machine from Python: a Publisher given two daemons' ingest endpoints routes
frames by stream id (stream s -> daemon s mod 2, one PUSH each) and a Subscriber connected to both
daemons' publish endpoints gets every frame's result exactly once, each stream's in order, each
from the daemon its stream routes to (the daemons name their pipelines apart), bit-exact."""
import time
import unittest

import numpy as np

import sonopipe
from sonopipe.publisher import route_of
from daemon_fixture import convert_reference
import support

CONFIG = """
ingest: {{endpoint: "{ingest}", pattern: pull}}
publish: {{endpoint: "{publish}", status_interval_s: 0.2}}
control: {{endpoint: "{control}"}}
backend: cpu
cpu_threads: 1
pipelines:
  - name: {name}
    stages:
      - type: convert
        params: {{scale: {scale}}}
"""
SCALE = 0.37  # not a power of two: the float32 product must round exactly as the C++ does
DAEMONS = 2
STREAMS = (0, 1, 2, 5, 6)
FRAMES = 6


class RoutedStreams(unittest.TestCase):
    def test_routed_publisher_and_merged_subscriber_see_every_frame_once_in_order(self):
        rng = support.random_generator(self)
        folder = support.TemporaryFolder(self)
        ingests, publishes = [], []
        for d in range(DAEMONS):
            ingest, publish, control = (folder.endpoint(f"{name}{d}") for name in ("ingest", "publish", "control"))
            config = folder.file(f"daemon{d}.yaml")
            with open(config, "w") as file:
                file.write(CONFIG.format(ingest=ingest, publish=publish, control=control, name=f"daemon{d}",
                                         scale=SCALE))
            daemon = support.Daemon(self, config)
            client = sonopipe.Control(control, timeout_s=2.0)
            deadline = time.monotonic() + 30
            while True:
                try:
                    client.status()
                    break
                except sonopipe.ControlError:
                    self.assertLess(time.monotonic(), deadline, daemon.log_text())
                    self.assertIsNone(daemon.process.poll(), daemon.log_text())
                    time.sleep(0.2)
            ingests.append(ingest)
            publishes.append(publish)

        subscriber = sonopipe.Subscriber(publishes, ["result/", "status"], timeout_s=10.0)
        self.addCleanup(subscriber.close)
        # Joined both publishers: a status heartbeat from each (their pipelines tell them apart).
        heard = set()
        deadline = time.monotonic() + 30
        while heard != {f"daemon{d}" for d in range(DAEMONS)} and time.monotonic() < deadline:
            result = subscriber.receive(1.0)
            if result is not None and result.topic == "status":
                heard.update(p.name for p in result.header.pipelines)
        self.assertEqual(heard, {f"daemon{d}" for d in range(DAEMONS)})

        publisher = sonopipe.Publisher(ingests, lossless=True)
        self.addCleanup(publisher.close)
        frames = {}
        for index in range(FRAMES):
            for stream in STREAMS:
                frame = rng.integers(-32768, 32767, size=(4, 32, 2), endpoint=True).astype(np.int16)
                frames[(stream, index)] = frame
                publisher.send(frame, kind="iq", axes=["line", "sample", "iq"], stream_id=stream)

        results = []
        deadline = time.monotonic() + 60
        while len(results) < len(frames) and time.monotonic() < deadline:
            result = subscriber.receive(1.0)
            if result is not None and result.topic != "status":
                results.append(result)
        self.assertEqual(len(results), len(frames))
        by_stream = {}
        for result in results:
            header, array = result
            by_stream.setdefault(header.stream_id, []).append(header.input_sequence)
            self.assertEqual(header.pipeline, f"daemon{route_of(header.stream_id, DAEMONS)}")
            expected = convert_reference(frames[(header.stream_id, header.input_sequence)], SCALE)
            np.testing.assert_array_equal(array.real, expected[..., 0])
            np.testing.assert_array_equal(array.imag, expected[..., 1])
        self.assertEqual(by_stream, {stream: list(range(FRAMES)) for stream in STREAMS})


if __name__ == "__main__":
    unittest.main()
