"""A sonopiped (CPU backend) on ipc endpoints in a temporary folder, for the Python tests that
drive the real daemon: pipelines `iq` and `rf`, each one `convert` stage with its own scale."""
import time
import unittest

import numpy as np

import sonopipe
import support

CONFIG = """
ingest: {{endpoint: "{ingest}", pattern: pull}}
publish: {{endpoint: "{publish}", status_interval_s: 0.2}}
control: {{endpoint: "{control}"}}
backend: cpu
slots: 2
queue_depth: 64
overflow: block
cpu_threads: 2
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
IQ_SCALE = 0.37   # not a power of two: the float32 product must round exactly as the C++ does
RF_SCALE = 2.5


def convert_reference(samples, scale):
    """stages/common/convert/convert.cpp convert_reference: out[i] = scale * float(in[i]) in float32."""
    return np.float32(scale) * samples.astype(np.float32)


class DaemonFixture(unittest.TestCase):
    """sonopiped on ipc endpoints with pipelines `iq` and `rf` (convert), answering control."""

    def setUp(self):
        self.rng = support.random_generator(self)
        folder = support.TemporaryFolder(self)
        self.ingest, self.publish, self.control_endpoint = (folder.endpoint(n) for n in ("ingest", "publish", "control"))
        config = folder.file("daemon.yaml")
        with open(config, "w") as f:
            f.write(CONFIG.format(ingest=self.ingest, publish=self.publish, control=self.control_endpoint,
                                  iq_scale=IQ_SCALE, rf_scale=RF_SCALE))
        self.daemon = support.Daemon(self, config)
        self.control = sonopipe.Control(self.control_endpoint, timeout_s=2.0)
        self.wait_until_answering()

    def wait_until_answering(self, timeout_s=30.0):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.daemon.process.poll() is not None:
                self.fail(f"sonopiped exited with {self.daemon.process.returncode}:\n{self.daemon.log_text()}")
            try:
                return self.control.status()
            except sonopipe.ControlError:
                time.sleep(0.2)
        self.fail(f"sonopiped did not answer status within {timeout_s} s:\n{self.daemon.log_text()}")

    def subscriber(self, topics, **options):
        """A Subscriber that has provably joined: it has received a status heartbeat."""
        sub = sonopipe.Subscriber(self.publish, list(topics) + ["status"], timeout_s=10.0, **options)
        self.addCleanup(sub.close)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            result = sub.receive(1.0)
            if result is not None and result.topic == "status":
                return sub
        self.fail("no status heartbeat on the publish socket")

    def results(self, sub, count, timeout_s=30.0):
        got = []
        deadline = time.monotonic() + timeout_s
        while len(got) < count and time.monotonic() < deadline:
            result = sub.receive(1.0)
            if result is not None and result.topic != "status":
                got.append(result)
        self.assertEqual(len(got), count, f"results missing; daemon log:\n{self.daemon.log_text()}")
        return got

    def publisher(self):
        publisher = sonopipe.Publisher(self.ingest, lossless=True)
        self.addCleanup(publisher.close)
        return publisher

