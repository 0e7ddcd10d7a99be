"""The bridges and the MATLAB/Octave wrapper on a daemon's shm:// pools, with real processes:
GNU Octave sends frames through the MEX gateway straight into slots of the daemon's ingest pool
and reads the results in place from its publish.shm pool, byte-exact against convert's reference;
sonopipe-web reads results in place from the pool and sends a page the same pixels as a
sonopipe-web on the ZeroMQ publish endpoint, holding the published values, with the daemon's
status. (sonopipe-igtl on shm with an OpenIGTLink library client: tests/tools/igtl_test.cpp.)"""
import asyncio
import base64
import json
import os
import secrets
import subprocess
import sys
import time
import unittest

import numpy as np

import sonopipe
import support
from daemon_fixture import convert_reference
from sonopipe.web import render
from test_octave_client import ClassCleanup, c_order, read_octave_array
from test_web import WebProcess

SCALE = 0.37
CONFIG = """
ingest: {{endpoint: "{ingest}", pattern: pull}}
publish:
  endpoint: "{publish}"
  status_interval_s: 0.2
  shm: {{endpoint: "{results}", mode: live, slots: 8}}
control: {{endpoint: "{control}"}}
backend: cpu
cpu_threads: 2
max_frame_bytes: 1048576
pipelines:
  - name: rf
    match: {{kinds: [rf]}}
    stages: [{{type: convert, params: {{scale: {scale}}}}}]
  - name: iq
    match: {{kinds: [iq]}}
    stages: [{{type: convert, params: {{scale: {scale}}}}}]
"""



class ShmDaemon:
    """sonopiped with an shm:// ingest pool and a publish.shm pool beside its ipc publish endpoint."""

    def __init__(self, test):
        folder = support.TemporaryFolder(test)
        tag = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.ingest, self.results = f"shm://bridges-in-{tag}", f"shm://bridges-out-{tag}"
        self.publish, self.control_endpoint = folder.endpoint("publish"), folder.endpoint("control")
        config = folder.file("daemon.yaml")
        with open(config, "w") as f:
            f.write(CONFIG.format(ingest=self.ingest, results=self.results, publish=self.publish,
                                  control=self.control_endpoint, scale=SCALE))
        self.daemon = support.Daemon(test, config)
        control = sonopipe.Control(self.control_endpoint, timeout_s=2.0)

        def answers():
            if self.daemon.process.poll() is not None:
                raise AssertionError(f"sonopiped exited:\n{self.daemon.log_text()}")
            try:
                return control.status()
            except sonopipe.ControlError:
                return None
        support.wait_until(answers, "the daemon answers status")


class ViewPage:
    """A WebSocket client of sonopipe-web's /ws that acknowledges every message as the page does
    and keeps the views (by pipeline) and the status messages it was sent."""

    def __init__(self, url):
        self.loop = asyncio.new_event_loop()
        self.views, self.statuses = {}, 0

        async def connect():
            import aiohttp
            self.session = aiohttp.ClientSession()
            self.socket = await self.session.ws_connect(url.replace("http://", "ws://") + "ws", max_msg_size=0)
        self.loop.run_until_complete(connect())

    def read(self, duration_s=0.3):
        """Reads (and acknowledges) what arrives for `duration_s`."""
        import aiohttp

        async def read():
            deadline = time.monotonic() + duration_s
            while (left := deadline - time.monotonic()) > 0:
                try:
                    message = await self.socket.receive(timeout=left)
                except asyncio.TimeoutError:
                    return
                if message.type != aiohttp.WSMsgType.TEXT:
                    raise AssertionError(f"the viewer's socket: {message.type} {message.data!r}")
                item = json.loads(message.data)
                if item.get("type") == "status":
                    self.statuses += 1
                elif "pipeline" in item:
                    self.views.setdefault(item["pipeline"], {})[item["input_sequence"]] = item
                await self.socket.send_str('{"type":"ack"}')
        self.loop.run_until_complete(read())

    def close(self):
        async def disconnect():
            await self.socket.close()
            await self.session.close()
        self.loop.run_until_complete(disconnect())
        self.loop.close()


class WebOnShm(unittest.TestCase):
    def test_the_web_viewer_on_the_result_pool_sends_the_pixels_a_zeromq_viewer_sends_with_the_status(self):
        rng = support.random_generator(self)
        daemon = ShmDaemon(self)
        in_place = WebProcess(self, "--endpoint", daemon.results, "--status-endpoint", daemon.publish, "--control", "")
        over_zeromq = WebProcess(self, "--endpoint", daemon.publish, "--control", "")
        pages = {"shm": ViewPage(in_place.url), "zmq": ViewPage(over_zeromq.url)}
        for page in pages.values():
            self.addCleanup(page.close)
        # Axes 'a' and 'b' are neither depth nor lateral: the generic view shows the values as they are.
        samples = rng.normal(0.0, 100.0, (24, 16)).astype(np.float32)
        publisher = sonopipe.Publisher(daemon.ingest)
        self.addCleanup(publisher.close)
        deadline = time.monotonic() + 60
        common = set()
        while not common and time.monotonic() < deadline:
            # A live pool and a fresh SUB see what comes after they attached: send until both drew one.
            publisher.send(samples, kind="rf", axes=["a", "b"])
            for page in pages.values():
                page.read()
            common = set(pages["shm"].views.get("rf", {})) & set(pages["zmq"].views.get("rf", {}))
        self.assertTrue(common, f"no input drawn by both viewers: {[p.views.keys() for p in pages.values()]}\n"
                                f"{''.join(in_place.lines)}")
        sequence = min(common)
        shm_panel = pages["shm"].views["rf"][sequence]["panels"][0]
        zmq_panel = pages["zmq"].views["rf"][sequence]["panels"][0]
        self.assertEqual(shm_panel["pixels"], zmq_panel["pixels"])  # byte for byte the same page data
        self.assertEqual(shm_panel["colour"], zmq_panel["colour"])
        # And they hold convert's output: codes back to values within half a quantisation step.
        low, high = shm_panel["colour"]["low"], shm_panel["colour"]["high"]
        codes = np.frombuffer(base64.b64decode(shm_panel["pixels"]), np.uint8).reshape(shm_panel["rows"],
                                                                                        shm_panel["columns"])
        expected = np.clip(convert_reference(samples, SCALE).astype(np.float64), low, high)
        step = (high - low) / render.LEVELS
        np.testing.assert_allclose(low + codes * step, expected, rtol=0, atol=step / 2 * 1.001 + 1e-6)
        support.wait_until(lambda: (pages["shm"].read(0.2), pages["shm"].statuses)[1] > 0,
                           "the daemon's status on the in-place viewer's page")


class OctaveOnShm(unittest.TestCase):
    def test_octave_sends_into_the_ingest_pool_and_reads_results_in_place_byte_exact(self):
        mex = os.environ.get("SONOPIPE_OCTAVE_MEX", "")
        if not mex or not os.path.isfile(mex):
            raise AssertionError(f"SONOPIPE_OCTAVE_MEX='{mex}' names no built MEX gateway (tools/install-deps.sh)")
        seed = int(os.environ.get("SONOPIPE_TEST_SEED", secrets.randbits(31)))
        print(f"{self.id()}: seed {seed}", file=sys.stderr)
        daemon = ShmDaemon(self)
        folder = support.TemporaryFolder(self)
        output = folder.file("octave")
        os.makedirs(output)
        config_file = folder.file("octave.json")
        with open(config_file, "w") as f:
            json.dump({"seed": seed, "outputFolder": output, "ingest": daemon.ingest, "results": daemon.results}, f)
        source = os.environ.get("SONOPIPE_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
        paths = [os.path.dirname(mex), os.path.join(source, "tools", "clients", "matlab"),
                 os.path.join(source, "tests", "tools", "clients", "matlab")]
        script = "".join(f"addpath('{p}'); " for p in paths) + f"octave_shm_checks('{config_file}');"
        octave = subprocess.run(["octave-cli", "--no-gui", "--quiet", "--no-history", "--eval", script],
                                capture_output=True, text=True, timeout=240,
                                env={**os.environ, "XDG_CACHE_HOME": folder.file("cache")})
        report_file = os.path.join(output, "report.json")
        if octave.returncode != 0 or not os.path.isfile(report_file):
            self.fail(f"octave exited with {octave.returncode}:\n{octave.stdout}\n{octave.stderr}\n"
                      f"{daemon.daemon.log_text()}")
        with open(report_file) as f:
            report = json.load(f)
        sent = report["sent"]
        results = report["results"]
        self.assertEqual(len(sent), 2)
        self.assertEqual(len(results), 2)
        for entry, result in zip(sent, results):
            with self.subTest(stream=entry["streamId"]):
                data = c_order(read_octave_array(output, entry["file"], entry["type"], entry["dims"]))
                if entry["type"] == "complex_single":  # complex64 rescaled per part in float32
                    expected = (np.float32(SCALE) * data.astype(np.complex64).view(np.float32)).view(np.complex64)
                else:
                    expected = convert_reference(data, SCALE)
                received = c_order(read_octave_array(output, result["file"], result["dataClass"], result["dataDims"]))
                self.assertEqual(int(result["streamId"]), int(entry["streamId"]))
                self.assertEqual(received.reshape(expected.shape).astype(expected.dtype).tobytes(), expected.tobytes())
        # The pool acknowledged both frames (sender.status() on shm).
        self.assertEqual(report["senderStatus"]["delivered"], 2)
        self.assertEqual(report["senderStatus"]["undelivered"], 0)


if __name__ == "__main__":
    unittest.main()
