"""The Python clients against a daemon with security.curve, with keys made by sonopipe-keygen and
read by pyzmq's own zmq.auth: with the client's key they work, without keys they get nothing."""
import os
import stat
import subprocess
import time
import unittest

import numpy as np
import zmq
import zmq.auth

import sonopipe
import support
from daemon_fixture import convert_reference

CONFIG = """
ingest: {{endpoint: "{ingest}", pattern: pull}}
publish: {{endpoint: "{publish}", status_interval_s: 0.2}}
control: {{endpoint: "{control}"}}
backend: cpu
cpu_threads: 2
security:
  curve: {{server_secret_key_file: keys/server.key_secret, authorized_client_keys: [keys/clients]}}
pipelines:
  - name: iq
    match: {{kinds: [iq]}}
    stages:
      - type: convert
        params: {{scale: 0.5}}
"""


class SecurityTest(unittest.TestCase):
    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)
        keygen = support.tool("keygen")
        os.makedirs(self.folder.file("keys/clients"))
        for base in ("keys/server", "keys/clients/viewer"):
            subprocess.run([keygen, self.folder.file(base)], check=True, stdout=subprocess.DEVNULL)
        self.server_key = self.folder.file("keys/server.key")
        self.client_key_file = self.folder.file("keys/clients/viewer.key_secret")
        self.ingest, self.publish, self.control_endpoint = (self.folder.endpoint(n)
                                                            for n in ("ingest", "publish", "control"))
        config = self.folder.file("daemon.yaml")
        with open(config, "w") as f:
            f.write(CONFIG.format(ingest=self.ingest, publish=self.publish, control=self.control_endpoint))
        self.daemon = support.Daemon(self, config)
        self.keyed = dict(curve_server_key=self.server_key, curve_client_key_file=self.client_key_file)
        self.control = sonopipe.Control(self.control_endpoint, timeout_s=2.0, **self.keyed)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.control.status()
                break
            except sonopipe.ControlError:
                if self.daemon.process.poll() is not None or time.monotonic() > deadline:
                    self.fail(f"sonopiped did not answer a keyed client:\n{self.daemon.log_text()}")
                time.sleep(0.2)

    def test_keygen_files_are_zeromq_certificates_with_a_private_secret(self):
        public, secret = zmq.auth.load_certificate(self.client_key_file)
        self.assertEqual(zmq.curve_public(secret), public)  # the pair is a pair
        self.assertEqual(zmq.auth.load_certificate(self.folder.file("keys/clients/viewer.key")), (public, None))
        self.assertEqual(stat.S_IMODE(os.stat(self.client_key_file).st_mode), 0o600)

    def test_keyed_clients_work_and_clients_without_keys_get_nothing(self):
        anonymous_sub = sonopipe.Subscriber(self.publish, ["result/", "status"], timeout_s=0.5)
        self.addCleanup(anonymous_sub.close)
        sub = sonopipe.Subscriber(self.publish, ["result/", "status"], timeout_s=10.0, **self.keyed)
        self.addCleanup(sub.close)
        deadline = time.monotonic() + 20
        while (first := sub.receive(1.0)) is None or first.topic != "status":
            self.assertLess(time.monotonic(), deadline, "no heartbeat for the keyed subscriber")
        samples = self.rng.integers(-2000, 2000, size=(4, 32, 2), dtype=np.int16)
        with sonopipe.Publisher(self.ingest, **self.keyed) as publisher:
            publisher.send(samples, kind="iq", axes=["line", "sample", "iq"], sequence=7)
        result = None
        while result is None or result.topic == "status":
            result = sub.receive(10.0)
            self.assertIsNotNone(result, "no result for the keyed sender's frame")
        self.assertEqual(result.header.input_sequence, 7)
        expected = convert_reference(samples, 0.5)
        np.testing.assert_array_equal(result.array.real, expected[..., 0])
        np.testing.assert_array_equal(result.array.imag, expected[..., 1])

        with self.assertRaises(sonopipe.ControlError):
            sonopipe.Control(self.control_endpoint, timeout_s=0.5).status()
        status = self.control.status()
        self.assertGreaterEqual(status.clients_refused_by_socket["control"], 1)
        self.assertGreaterEqual(status.clients_refused_by_socket["publish"], 1)
        self.assertIsNone(anonymous_sub.receive(0.1))  # heartbeats went out all along; it got none

    def test_half_a_key_pair_is_refused_before_connecting(self):
        with self.assertRaises(ValueError):
            sonopipe.Control(self.control_endpoint, curve_server_key=self.server_key).status()
        with self.assertRaises(ValueError):  # the public half where the secret file belongs
            sonopipe.Control(self.control_endpoint, curve_server_key=self.server_key,
                             curve_client_key_file=self.folder.file("keys/clients/viewer.key")).status()


if __name__ == "__main__":
    unittest.main()
