"""Python clients on shm:// against the real sonopiped: Publisher("shm://...") writes frames in
place into the daemon's ingest pool (buffer/send_buffer) or copies them in (send), Subscriber on
the daemon's publish.shm pool reads convert's results in place; the delivery acknowledgement
counts what the daemon took; a missing pool is one line naming the fix."""
import os
import time
import unittest

import numpy as np

import sonopipe
from sonopipe.shm import ShmError
import support
from daemon_fixture import IQ_SCALE, RF_SCALE, convert_reference

CONFIG = """
ingest: {{endpoint: "{ingest}", pattern: pull}}
publish: {{endpoint: "{publish}", status_interval_s: 0.2, shm: {{endpoint: "{results}", slots: 16}}}}
control: {{endpoint: "{control}"}}
backend: cpu
slots: 2
queue_depth: 8
cpu_threads: 2
max_frame_bytes: 4194304
pipelines:
  - name: iq
    match: {{kinds: [iq]}}
    stages:
      - type: convert
        params: {{scale: {iq_scale}}}
  - name: rf
    match: {{kinds: [rf]}}
    stages:
      - type: convert
        params: {{scale: {rf_scale}}}
"""


class ShmClients(unittest.TestCase):
    def setUp(self):
        self.rng = support.random_generator(self)
        folder = support.TemporaryFolder(self)
        tag = f"{os.getpid()}-{id(self)}"
        self.ingest, self.results = f"shm://py-in-{tag}", f"shm://py-out-{tag}"
        self.control_endpoint = folder.endpoint("control")
        config = folder.file("daemon.yaml")
        with open(config, "w") as f:
            f.write(CONFIG.format(ingest=self.ingest, publish=folder.endpoint("publish"), results=self.results,
                                  control=self.control_endpoint, iq_scale=IQ_SCALE, rf_scale=RF_SCALE))
        self.daemon = support.Daemon(self, config)
        self.control = sonopipe.Control(self.control_endpoint, timeout_s=2.0)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self.control.status()
                break
            except Exception:
                time.sleep(0.1)
        for name in (self.ingest, self.results):
            self.addCleanup(lambda n=name: os.path.exists("/dev/shm/sonopipe." + n[6:]) and
                            os.unlink("/dev/shm/sonopipe." + n[6:]))

    def test_frames_written_in_place_come_back_from_convert_read_in_place(self):
        subscriber = sonopipe.Subscriber(self.results, topics=["result/"])
        self.addCleanup(subscriber.close)
        publisher = sonopipe.Publisher(self.ingest)
        self.addCleanup(publisher.close)
        sent = []
        for n in range(6):
            if n % 2 == 0:  # in place: the numpy view is the daemon's slot
                frame = publisher.buffer((8, 100), np.int16)
                frame[...] = self.rng.integers(-32768, 32767, size=(8, 100), dtype=np.int16)
                sent.append(("rf", frame.copy()))
                publisher.send_buffer(kind="rf", axes=["line", "sample"], stream_id=0)
            else:
                iq = self.rng.integers(-32768, 32767, size=(4, 50, 2), dtype=np.int16)
                sent.append(("iq", iq))
                publisher.send(iq, kind="iq", axes=["line", "sample", "iq"], stream_id=1)
        # The two pipelines run side by side: results are in order per pipeline, interleaved between.
        received = {}
        for _ in sent:
            result = subscriber.receive(timeout_s=20)
            self.assertIsNotNone(result, "no result from the shm pool")
            received[(result.topic, result.header.input_sequence)] = result.array.copy()  # the view lasts one receive
        for index, (kind, samples) in enumerate(sent):
            array = received[(f"result/{kind}/converted", index // 2)]
            if kind == "rf":
                np.testing.assert_array_equal(array, convert_reference(samples, RF_SCALE))
            else:
                expected = convert_reference(samples, IQ_SCALE)
                np.testing.assert_array_equal(array, expected[..., 0] + 1j * expected[..., 1])
        self.assertEqual(publisher.delivery(timeout_s=10), (6, 0))
        self.assertEqual(subscriber.stats.missing, 0)

    def test_a_buffer_too_large_for_the_slot_is_refused_and_the_slot_comes_back(self):
        publisher = sonopipe.Publisher(self.ingest)
        self.addCleanup(publisher.close)
        with self.assertRaises(sonopipe.PayloadError):
            publisher.buffer((4096, 1024), np.float32)  # 16 MiB > max_frame_bytes
        frame = publisher.buffer((2, 2), np.float32)  # a buffer opens again
        frame[...] = 1.0
        publisher.send_buffer(kind="rf", axes=["line", "sample"])
        self.assertEqual(publisher.delivery(timeout_s=10), (1, 0))

    def test_a_missing_pool_is_one_line_naming_the_fix(self):
        with self.assertRaises(ShmError) as caught:
            sonopipe.Publisher("shm://nobody-here-" + str(os.getpid()))
        self.assertIn("start sonopiped", str(caught.exception))
        self.assertNotIn("\n", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
