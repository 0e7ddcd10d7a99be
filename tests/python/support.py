"""Shared helpers of the Python tests: fresh random inputs with a logged seed, ipc endpoints in a
temporary folder, the tool binaries CTest names in the environment, and a daemon process."""
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
import zmq


def random_generator(test):
    """numpy Generator with a fresh seed, printed so a failure can be replayed (SONOPIPE_TEST_SEED=..., as the C++ tests)."""
    seed = int(os.environ.get("SONOPIPE_TEST_SEED", secrets.randbits(32)))
    print(f"{test.id()}: seed {seed}", file=sys.stderr)
    return np.random.default_rng(seed)


class TemporaryFolder:
    """A temporary folder for ipc endpoints and files, removed on cleanup."""

    def __init__(self, test):
        self.path = tempfile.mkdtemp(prefix="sonopipe-py-")
        test.addCleanup(shutil.rmtree, self.path, ignore_errors=True)

    def endpoint(self, name):
        return f"ipc://{os.path.join(self.path, name)}"

    def file(self, name):
        return os.path.join(self.path, name)


def tool(name):
    """Path of a built tool CTest passed as SONOPIPE_<NAME> (e.g. SONOPIPE_DAEMON); skips when absent."""
    variable = "SONOPIPE_" + name.upper().replace("-", "_")
    path = os.environ.get(variable, "")
    if not path or not os.path.exists(path):
        raise unittest.SkipTest(f"{variable} does not name a built binary ('{path}')")
    return path


def wait_until(condition, what, timeout_s=60.0, interval_s=0.05):
    """Polls `condition()` until it returns a true value and returns that value; fails naming
    `what` (and the last value) when `timeout_s` passes first. Tests wait for a state this way,
    never for a fixed time: the bound only keeps a broken run from hanging, and is generous for a
    loaded two-core machine."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s (last value {value!r})")
        time.sleep(interval_s)


def wait_for_subscription(publisher_socket, subscriber, topic, timeout_s=5.0):
    """Sends probe messages on `topic` from a raw PUB socket until `subscriber` receives one
    (ZeroMQ's slow joiner), then drains the probes. Returns the number of probes sent."""
    deadline = time.monotonic() + timeout_s
    sent = 0
    while time.monotonic() < deadline:
        publisher_socket.send_multipart([topic.encode(), b"probe"])
        sent += 1
        if subscriber._socket.poll(20, zmq.POLLIN):
            while subscriber._socket.poll(50, zmq.POLLIN):
                subscriber._socket.recv_multipart()
            return sent
    raise AssertionError(f"subscription to '{topic}' did not arrive within {timeout_s} s")


class Daemon:
    """sonopiped started on a config file; stopped (SIGTERM, then SIGKILL) on cleanup.
    Its log is kept in memory and printed when a test fails."""

    def __init__(self, test, config_path, extra_args=()):
        daemon = tool("daemon")
        self.log_path = config_path + ".log"
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen([daemon, "--config", config_path, "--backend", "cpu",
                                         *extra_args], stdout=self._log, stderr=subprocess.STDOUT)
        test.addCleanup(self.stop)

    def log_text(self):
        self._log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self, timeout_s=20.0):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode
