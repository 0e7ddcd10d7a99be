"""sonopipe-web, the live browser viewer, in a real browser: headless Chromium (Debian's chromium,
driven through the DevTools protocol, browser.py) shows the page while the real daemon runs
config/demo.yaml (ARFI, strain, perfusion; its Doppler pipeline idle) on replays of simulated
acquisitions, and on Doppler and channel-strain result sets published as the daemon does. Checked:
the images arrive and change (pixel statistics of the page's screenshots), the status numbers shown are those
`sonopipe-ctl status` gives, a browser that never acknowledges holds back neither the daemon nor the
other browser (its missed versions are counted), and conflation is counted as documented."""
import asyncio
import base64
import concurrent.futures
import json
import os
import re
import select
import signal
import subprocess
import time
import unittest
import urllib.request

import numpy as np

import browser
import sonopipe
from sonopipe.subscriber import Result, SubscriberStats
from sonopipe.view.sources import Group
from sonopipe.web import render
from sonopipe.web.hub import STATUS_TOPIC, Hub
from sonopipe.v1 import result_pb2
import support
import synthetic
from test_view import groups_of

SOURCE_DIR = os.environ.get("SONOPIPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
# Bounded waits, generous for a loaded 2-core machine (the CPU backend computes every chain).
START_TIMEOUT_S = 60.0
RESULTS_TIMEOUT_S = 300.0
ARFI_SETS, STRAIN_FRAMES = 2, 3
# Background of the page's panels (plot.js COLOURS.background), in the screenshot.
PANEL_BACKGROUND = np.array([0x15, 0x19, 0x20])
LINE_COLOUR = np.array([0x7c, 0xc4, 0xff])  # plot.js COLOURS.line


def web_launcher():
    path = os.environ.get("SONOPIPE_WEB", "")
    if not path or not os.path.exists(path):
        raise unittest.SkipTest(f"SONOPIPE_WEB does not name the sonopipe-web launcher ('{path}')")
    return path


class WebProcess:
    """sonopipe-web on an ephemeral loopback port; `url` from the line it prints."""

    def __init__(self, test, *arguments):
        self.process = subprocess.Popen([web_launcher(), "--port", "0", *arguments], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        test.addCleanup(self.stop)
        self.lines = []
        deadline = time.monotonic() + START_TIMEOUT_S
        self.url = None
        while self.url is None:
            ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            line = self.process.stdout.readline() if ready else ""
            if not line:
                self.stop()
                test.fail(f"sonopipe-web printed no URL within {START_TIMEOUT_S} s:\n{''.join(self.lines)}")
            self.lines.append(line)
            match = re.search(r"viewer at (http://\S+/)", line)
            self.url = match.group(1) if match else None

    def get(self, path):
        with urllib.request.urlopen(self.url + path.lstrip("/"), timeout=30) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()

    def stats(self):
        return json.loads(self.get("stats.json")[2])

    def stop(self):
        """SIGINT (as Ctrl-C): returns (exit status, everything it printed)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if not self.process.stdout.closed:
            self.lines.append(self.process.stdout.read())
            self.process.stdout.close()
        return self.process.returncode, "".join(self.lines)


class SilentPage:
    """A WebSocket client of /ws that reads what it is sent but never acknowledges (a page that
    stopped drawing, e.g. a hidden tab or a frozen machine)."""

    def __init__(self, url):
        import aiohttp
        self.loop = asyncio.new_event_loop()
        self.received = 0

        async def connect():
            self.session = aiohttp.ClientSession()
            self.socket = await self.session.ws_connect(url.replace("http://", "ws://") + "ws", max_msg_size=0)
        self.loop.run_until_complete(connect())

    def read_all(self, timeout_s=1.0):
        async def read():
            while True:
                try:
                    await self.socket.receive(timeout=timeout_s)
                except asyncio.TimeoutError:
                    return
                self.received += 1
        self.loop.run_until_complete(read())

    def close(self):
        async def disconnect():
            await self.socket.close()
            await self.session.close()
        self.loop.run_until_complete(disconnect())
        self.loop.close()


class WebViewerWithTheDaemon(unittest.TestCase):
    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)
        browser.chromium_path()
        web_launcher()

    def simulate(self, chain, name, stream_id):
        """A small acquisition of `chain` (fresh seed); returns its recording's path."""
        seed = str(self.rng.integers(1, 2**31))
        path = self.folder.file(f"{name}.h5")
        arguments = {
            "arfi": ["arfi", "--out", path, "--sets", str(ARFI_SETS), "--locations", "16", "--tracks", "24",
                     "--samples", "300", "--threads", "2", "--stream-id", str(stream_id)],
            "strain": ["strain", "--out", path, "--dims", "2", "--frames", str(STRAIN_FRAMES), "--type", "int16",
                       "--stream-id", str(stream_id)],
            # one DCE batch of the whole 32 x 32 slice (the simulator writes stream 0)
            "perfusion": ["perfusion", "--output", self.folder.file(name), "--recording", path, "--shape", "32,32,1",
                          "--samples", "64", "--cnr", "50", "--phantom", "territories"],
        }[chain]
        completed = subprocess.run([support.tool("sim"), *arguments, "--seed", seed], capture_output=True,
                                   text=True, timeout=300)
        self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)
        return path

    def start_daemon(self):
        """config/demo.yaml with its endpoints moved to ipc in the temporary folder, 2 CPU threads and
        a status every 0.2 s."""
        with open(os.path.join(SOURCE_DIR, "config", "demo.yaml")) as f:
            text = f.read()
        endpoints = {name: self.folder.endpoint(name) for name in ("ingest", "publish", "control")}
        for name, endpoint in endpoints.items():
            text, count = re.subn(rf"(\n{name}:\n  endpoint: )tcp://[0-9.]+:\d+", rf"\g<1>{endpoint}", text)
            self.assertEqual(count, 1, f"config/demo.yaml has no {name}.endpoint to move")
        text = text.replace(f"  endpoint: {endpoints['publish']}",
                            f"  endpoint: {endpoints['publish']}\n  status_interval_s: 0.2", 1)
        text = re.sub(r"cpu_threads:\s*\d+", "cpu_threads: 2", text)
        path = self.folder.file("demo.yaml")
        with open(path, "w") as f:
            f.write(text)
        daemon = support.Daemon(self, path)
        control = sonopipe.Control(endpoints["control"], timeout_s=2.0)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                control.status()
                return daemon, endpoints
            except sonopipe.ControlError:
                if daemon.process.poll() is not None or time.monotonic() > deadline:
                    self.fail(f"sonopiped did not start on {path}:\n{daemon.log_text()}")
                time.sleep(0.2)

    def replay(self, path, endpoints):
        completed = subprocess.run([support.tool("replay"), path, "--endpoint", endpoints["ingest"], "--lossless",
                                    "--max"], capture_output=True, text=True, timeout=RESULTS_TIMEOUT_S)
        self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)

    def ctl_status(self, endpoints):
        """What `sonopipe-ctl status --json` prints (the protobuf JSON of sonopipe.v1.Status)."""
        completed = subprocess.run([support.tool("ctl"), "status", "--endpoint", endpoints["control"], "--json"],
                                   capture_output=True, text=True, timeout=60)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        return json.loads(completed.stdout)

    def drained_status(self, endpoints, frames, daemon):
        """sonopipe-ctl's status once all `frames` were received and each processed, rejected or dropped."""
        deadline = time.monotonic() + RESULTS_TIMEOUT_S
        while True:
            status = self.ctl_status(endpoints)
            count = lambda key: int(status.get(key, 0))  # noqa: E731 (protobuf JSON leaves zeros out)
            if count("framesReceived") == frames and \
                    count("framesProcessed") + count("framesRejected") + count("framesDropped") >= frames:
                return status
            if time.monotonic() > deadline:
                self.fail(f"the daemon did not finish {frames} frames: {status}\n{daemon.log_text()}")
            time.sleep(0.5)

    def keep_screenshot(self, name, png):
        """Into the folder SONOPIPE_WEB_SCREENSHOTS names, when set (to look at them)."""
        folder = os.environ.get("SONOPIPE_WEB_SCREENSHOTS", "")
        if folder:
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, name), "wb") as f:
                f.write(png)

    def wait_for_views(self, page, wanted, what):
        """Until every pipeline's shown view matches `wanted[pipeline]` (a dict of view fields)."""
        condition = " && ".join(
            f"(v[{json.dumps(p)}] !== undefined && " +
            " && ".join(f"v[{json.dumps(p)}][{json.dumps(k)}] === {json.dumps(value)}" for k, value in fields.items()) + ")"
            for p, fields in wanted.items())
        return page.wait_for(f"(() => {{ const v = window.sonopipeViewer.state().views; return {condition} && v; }})()",
                             RESULTS_TIMEOUT_S, what)

    @staticmethod
    def canvases(page):
        """[(pipeline, title, (left, top, width, height) in page pixels)] of every drawn panel."""
        return page.evaluate("""[...document.querySelectorAll('section.pipeline')].flatMap(section =>
            [...section.querySelectorAll('canvas')].map(canvas => {
              const box = canvas.getBoundingClientRect();
              return [section.dataset.pipeline, canvas.dataset.title,
                      [box.left + window.scrollX, box.top + window.scrollY, box.width, box.height]];
            }))""")

    @staticmethod
    def crop(pixels, box):
        left, top, width, height = (int(round(v)) for v in box)
        return pixels[top:top + height, left:left + width].astype(np.float64)

    def test_images_arrive_and_change_and_the_status_shown_is_sonopipe_ctls(self):
        first = {"arfi": self.simulate("arfi", "arfi_a", 1), "strain": self.simulate("strain", "strain_a", 2),
                 "perfusion": self.simulate("perfusion", "perfusion_a", 0)}
        second = {"arfi": self.simulate("arfi", "arfi_b", 11), "strain": self.simulate("strain", "strain_b", 12),
                  "perfusion": self.simulate("perfusion", "perfusion_b", 0)}
        daemon, endpoints = self.start_daemon()
        web = WebProcess(self, "--endpoint", endpoints["publish"])
        self.assertTrue(web.url.startswith("http://127.0.0.1:"), web.url)  # loopback unless --host says otherwise
        page = browser.Browser(web.url)
        self.addCleanup(page.close)
        page.wait_for("window.sonopipeViewer && window.sonopipeViewer.state().statusMessages > 0", START_TIMEOUT_S,
                      "the page shows the daemon's status")

        # 1. The first acquisitions: each pipeline's last result set is drawn, with its panels.
        for path in first.values():
            self.replay(path, endpoints)
        views = self.wait_for_views(page, {"arfi": {"stream_id": 1, "input_sequence": ARFI_SETS - 1},
                                           "strain2d": {"stream_id": 2, "input_sequence": STRAIN_FRAMES - 1},
                                           "perfusion": {"count": 1}}, "the first acquisitions' last result sets")
        self.assertEqual(page.evaluate("window.sonopipeViewer.state().errors"), [])
        self.assertEqual(views["arfi"]["chain"], "arfi")
        self.assertEqual([t.split(" at ")[0] for t in views["arfi"]["panels"]],
                         ["peak displacement over time", "depth-time", "time course"])
        self.assertEqual(views["strain2d"]["chain"], "strain")
        self.assertEqual([t.split(",")[0] for t in views["strain2d"]["panels"]],
                         ["B-mode", "strain (axial)", "peak correlation"])
        self.assertEqual(views["perfusion"]["chain"], "perfusion")
        self.assertEqual([t.split()[0] for t in views["perfusion"]["panels"]], ["k_a", "k_p", "k_l"])
        png_first, pixels_first = page.screenshot()
        self.keep_screenshot("first.png", png_first)
        boxes = self.canvases(page)
        self.assertEqual(len(boxes), 9, boxes)
        for pipeline, title, box in boxes:
            panel = self.crop(pixels_first, box)
            if title.startswith("time course"):
                # The line plot: its curve and markers in the line colour (plot.js COLOURS.line);
                # 24 points joined over a ~300 pixel wide plot are well over 300 such pixels.
                curve = np.all(np.abs(panel - LINE_COLOUR) < 40, axis=2).sum()
                self.assertGreater(curve, 300, f"{pipeline} '{title}' shows no curve")
                continue
            drawn = np.any(np.abs(panel - PANEL_BACKGROUND) > 8, axis=2).mean()
            # The image with its colour bar covers about 30 % (strain's equal-aspect maps) to 50 %
            # of a panel; an empty panel has only its ~4 % of title, axes and tick text. 15 %: drawn.
            self.assertGreater(drawn, 0.15, f"{pipeline} '{title}' looks empty ({drawn:.1%} drawn)")
            self.assertGreater(panel.std(), 20.0, f"{pipeline} '{title}' has almost no contrast")

        # A page that stops acknowledging from here on; the Chromium page must still get everything.
        silent = SilentPage(web.url)
        self.addCleanup(silent.close)
        silent.read_all()

        # 2. The second acquisitions (other seeds and streams): new images, different pixels.
        for path in second.values():
            self.replay(path, endpoints)
        self.wait_for_views(page, {"arfi": {"stream_id": 11, "input_sequence": ARFI_SETS - 1},
                                   "strain2d": {"stream_id": 12, "input_sequence": STRAIN_FRAMES - 1},
                                   "perfusion": {"count": 2}}, "the second acquisitions' last result sets")
        self.assertEqual(page.evaluate("window.sonopipeViewer.state().errors"), [])
        png_second, pixels_second = page.screenshot()
        self.keep_screenshot("second.png", png_second)
        for (pipeline, title, box), (new_pipeline, _, new_box) in zip(boxes, self.canvases(page), strict=True):
            self.assertEqual((pipeline, box), (new_pipeline, new_box), "the layout moved")
            change = np.abs(self.crop(pixels_second, box) - self.crop(pixels_first, box)).mean()
            # Other noise seeds give other speckle and noise in every image (and other values of the
            # time course); an unchanged panel differs by 0. 0.5 grey levels on average over the
            # panel: a fraction of its pixels changed colour.
            self.assertGreater(change, 0.5, f"{pipeline} '{title}' did not change ({change:.2f})")

        # 3. The status numbers shown are sonopipe-ctl's, once the daemon has finished.
        frames = 2 * (ARFI_SETS + STRAIN_FRAMES + 1)
        status = self.drained_status(endpoints, frames, daemon)
        count = lambda values, key: str(int(values.get(key, 0)))  # noqa: E731
        expected = {f"daemon.{key}": count(status, key) for key in
                    ("framesReceived", "framesProcessed", "resultsPublished", "framesRejected", "framesDropped",
                     "framesMissing")}
        expected["daemon.backend"] = status["backend"]
        for pipeline in status["pipelines"]:
            name = pipeline["name"]
            for key in ("framesAccepted", "framesProcessed", "resultsPublished", "framesDropped", "stageErrors"):
                expected[f"{name}.{key}"] = count(pipeline, key)
            for key in ("latencyMsP50", "latencyMsP99"):  # shown as sonopipe-ctl status prints them, %.3f
                expected[f"{name}.{key}"] = f"{float(pipeline.get(key, 0.0)):.3f}"
            expected[f"{name}.queue"] = f"{count(pipeline, 'queueDepth')}/{count(pipeline, 'queueCapacity')}"
        self.assertEqual(sorted(p["name"] for p in status["pipelines"]), ["arfi", "doppler", "perfusion", "strain2d"])
        shown_expression = """(() => { const shown = {};
            for (const node of document.querySelectorAll('#daemon [data-field]'))
              shown['daemon.' + node.dataset.field] = node.textContent;
            for (const section of document.querySelectorAll('section.pipeline'))
              for (const node of section.querySelectorAll('.pipeline-status [data-field]'))
                shown[section.dataset.pipeline + '.' + node.dataset.field] = node.textContent;
            return shown; })()"""
        deadline = time.monotonic() + START_TIMEOUT_S  # the next status heartbeats carry the final numbers
        while True:
            shown = page.evaluate(shown_expression)
            if all(shown.get(key) == value for key, value in expected.items()) or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        self.assertEqual({key: shown.get(key) for key in expected}, expected)
        self.assertEqual(self.ctl_status(endpoints).get("framesProcessed"), status.get("framesProcessed"))

        # 4. The silent page held back nothing: the daemon lost no frame (lossless replays finished,
        # nothing dropped), the Chromium page got the newest views, and what the silent page missed
        # is counted as conflated for it.
        self.assertEqual(int(status.get("framesDropped", 0)), 0)
        self.assertEqual(int(status["framesProcessed"]), frames)
        silent.read_all()
        self.assertEqual(silent.received, 1, "a page that acknowledged nothing was sent more than one message")
        stats = web.stats()
        self.assertEqual(sum(stats["skipped_on_intake_per_topic"].values()), stats["results_skipped_on_intake"])
        per_browser = stats["per_browser"]
        self.assertEqual(len(per_browser), 2, per_browser)
        chromium, quiet = per_browser  # numbered in order of connection
        self.assertEqual(quiet["messages"], 1, per_browser)
        # Every status after its first message and every new view replaced a version it had not taken.
        self.assertGreater(quiet["conflated"], 0, per_browser)
        self.assertGreater(chromium["messages"], quiet["messages"], per_browser)

        page.close()
        returncode, output = web.stop()
        self.assertEqual(returncode, 0, output)
        self.assertRegex(output, r"sonopipe-web: \d+ result sets from \d+ messages")


class WebViewerWithTheDopplerAndChannelStrainDaemon(unittest.TestCase):
    """As a new user would: sonopiped with config/doppler.yaml's and config/beamform_strain.yaml's
    pipelines (CPU backend), channel data from sonopipe-sim replayed through it, sonopipe-web on its
    results in headless Chromium. The Doppler view draws the daemon's mean-frame B-mode (the
    mean_bmode stage's output) under power and velocity; the channel-strain view draws the
    beamformed RF image as a B-mode. Screenshot kept with SONOPIPE_WEB_SCREENSHOTS."""

    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)
        browser.chromium_path()
        web_launcher()

    def config(self):
        """config/doppler.yaml with its endpoints moved to ipc, the CPU backend on 2 threads, and
        config/beamform_strain.yaml's pipeline added."""
        with open(os.path.join(SOURCE_DIR, "config", "doppler.yaml")) as f:
            text = f.read()
        with open(os.path.join(SOURCE_DIR, "config", "beamform_strain.yaml")) as f:
            strain = f.read()
        endpoints = {name: self.folder.endpoint(name) for name in ("ingest", "publish", "control")}
        for name, endpoint in endpoints.items():
            text, count = re.subn(rf"(\n{name}:\n  endpoint: )tcp://[0-9.]+:\d+", rf"\g<1>{endpoint}", text)
            self.assertEqual(count, 1, f"config/doppler.yaml has no {name}.endpoint to move")
        text = re.sub(r"cpu_threads:\s*\d+", "cpu_threads: 2", re.sub(r"backend:\s*\w+", "backend: cpu", text))
        text += strain[strain.index("  - name: channel_strain"):]
        path = self.folder.file("doppler_and_strain.yaml")
        with open(path, "w") as f:
            f.write(text)
        return path, endpoints

    def sim(self, *arguments):
        path = self.folder.file(f"{arguments[0]}.h5")
        seed = str(self.rng.integers(1, 2**31))
        completed = subprocess.run([support.tool("sim"), *arguments, "--out", path, "--seed", seed, "--threads", "2"],
                                   capture_output=True, text=True, timeout=300)
        self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)
        return path

    def test_the_doppler_chain_draws_power_over_its_mean_frame_bmode_and_channel_strain_its_bmode(self):
        flow = self.sim("flow", "--channel", "--frames", "16", "--stream-id", "7")
        speckle = self.sim("channel", "--phantom", "speckle", "--count", "3", "--frames", "2", "--velocity-mm-s", "5",
                           "--stream-id", "8")
        path, endpoints = self.config()
        daemon = support.Daemon(self, path)
        control = sonopipe.Control(endpoints["control"], timeout_s=2.0)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                control.status()
                break
            except sonopipe.ControlError:
                if daemon.process.poll() is not None or time.monotonic() > deadline:
                    self.fail(f"sonopiped did not start on {path}:\n{daemon.log_text()}")
                time.sleep(0.2)
        web = WebProcess(self, "--endpoint", endpoints["publish"])
        page = browser.Browser(web.url)
        self.addCleanup(page.close)
        page.wait_for("window.sonopipeViewer !== undefined", START_TIMEOUT_S, "the page's script")
        time.sleep(1.0)  # the viewer's subscription reaches the daemon's publisher
        for recording in (flow, speckle):
            completed = subprocess.run([support.tool("replay"), recording, "--endpoint", endpoints["ingest"],
                                        "--lossless", "--max"], capture_output=True, text=True,
                                       timeout=RESULTS_TIMEOUT_S)
            self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)
        views = page.wait_for("(() => { const v = window.sonopipeViewer.state().views; return v.doppler && "
                              "v.channel_strain && v.doppler.stream_id === 7 && v.channel_strain.stream_id === 8 "
                              "&& v; })()", RESULTS_TIMEOUT_S, "the Doppler and channel-strain views")
        time.sleep(1.0)  # the intake's idle flush completes the last result set
        views = page.evaluate("window.sonopipeViewer.state().views")
        self.assertEqual(page.evaluate("window.sonopipeViewer.state().errors"), [])
        self.assertEqual(views["doppler"]["chain"], "doppler")
        self.assertEqual([t.split(" (")[0].split(",")[0] for t in views["doppler"]["panels"]],
                         ["B-mode of the mean frame", "power Doppler over B-mode", "velocity"])
        self.assertEqual(views["channel_strain"]["chain"], "strain")
        self.assertEqual(views["channel_strain"]["panels"][0].split(",")[0], "B-mode")
        # Each pipeline took its own frames only, and refused none (the Doppler one matched channel RF
        # once, which its clutter filter cannot take).
        status = control.status()
        self.assertEqual({p.name: (p.frames_processed, p.stage_errors) for p in status.pipelines},
                         {"doppler": (1, 0), "channel_strain": (2, 0)})
        png, pixels = page.screenshot()
        WebViewerWithTheDaemon.keep_screenshot(self, "daemon_doppler_and_channel_strain.png", png)
        boxes = {(pipeline, title.split(",")[0].split(" (")[0]): box
                 for pipeline, title, box in WebViewerWithTheDaemon.canvases(page)}

        def image_part(box):  # inside the panel's frame (plot.js MARGIN), as in the test below
            left, top, width, height = box
            return WebViewerWithTheDaemon.crop(pixels, (left + 62, top + 30, width - 62 - 92, height - 30 - 46))

        for key in (("doppler", "B-mode of the mean frame"), ("channel_strain", "B-mode")):
            part = image_part(boxes[key])
            grey = np.abs(part - part.mean(axis=2, keepdims=True)).max(axis=2) < 4
            lit = grey & np.any(np.abs(part - PANEL_BACKGROUND) > 8, axis=2)
            # The phantom's speckle in grey: a B-mode image, not an empty or flat panel.
            self.assertGreater(lit.mean(), 0.1, f"{key}: no grey image")
            self.assertGreater(part[lit].std(), 20.0, f"{key}: no speckle contrast")
        power = image_part(boxes[("doppler", "power Doppler over B-mode")])
        coloured = np.abs(power - power.mean(axis=2, keepdims=True)).max(axis=2) >= 4
        self.assertGreater(coloured.mean(), 0.002, "no power Doppler over the B-mode")
        page.close()
        returncode, output = web.stop()
        self.assertEqual(returncode, 0, output)


class WebViewerWithPublishedResults(unittest.TestCase):
    """The page on result messages published as the daemon does ([topic][ResultHeader][payload] on
    a PUB socket): the Doppler chain (config/doppler.yaml's outputs, synthetic.doppler_results) and
    the channel-strain chain (config/beamform_strain.yaml's, with a correlation of 1.0 everywhere).
    Screenshots kept with SONOPIPE_WEB_SCREENSHOTS."""

    @staticmethod
    def wait_until_drawn(page, sequence):
        """The views once the Doppler pipeline's result set `sequence` is shown."""
        return page.wait_for("(() => { const v = window.sonopipeViewer.state().views; "
                             f"return v.doppler && v.doppler.input_sequence === {sequence} && v; }})()",
                             START_TIMEOUT_S, f"Doppler result set #{sequence} drawn")

    def test_doppler_over_bmode_and_the_beamformed_strain_chain_in_the_browser(self):
        import zmq
        rng = support.random_generator(self)
        browser.chromium_path()
        folder = support.TemporaryFolder(self)
        endpoint = folder.endpoint("publish")
        context = zmq.Context()
        self.addCleanup(context.term)
        socket = context.socket(zmq.PUB)
        socket.setsockopt(zmq.LINGER, 0)
        self.addCleanup(socket.close)
        socket.bind(endpoint)
        web = WebProcess(self, "--endpoint", endpoint)
        page = browser.Browser(web.url)
        self.addCleanup(page.close)
        page.wait_for("window.sonopipeViewer !== undefined", START_TIMEOUT_S, "the page's script")
        published = 0
        deadline = time.monotonic() + START_TIMEOUT_S
        expression = ("(() => { const v = window.sonopipeViewer.state().views; "
                      "return v.doppler !== undefined && v.channel_strain !== undefined && v; })()")
        views, rounds_after = None, 0
        # Until both views are shown, then two rounds more: the viewer learns a pipeline's outputs
        # from what arrives (sonopipe.view.sources.Grouper), so its first result set may be cut short.
        while not views or rounds_after < 2:
            if time.monotonic() > deadline:
                self.fail(f"no Doppler and strain views after {published} result sets:\n{web.stop()[1]}")
            for header, array in (synthetic.doppler_results(published, rng)
                                  + synthetic.beamform_strain_results(published + 1, rng)):
                socket.send_multipart([f"result/{header.pipeline}/{header.output}".encode(), header.SerializeToString(),
                                       np.ascontiguousarray(array).tobytes()])
            published += 1
            time.sleep(0.5)  # the intake's idle flush (0.2 s) completes the result sets
            rounds_after += bool(views)
            views = views or page.evaluate(expression)
        views = self.wait_until_drawn(page, published - 1)
        self.assertEqual(page.evaluate("window.sonopipeViewer.state().errors"), [])
        self.assertEqual(views["doppler"]["chain"], "doppler")
        self.assertEqual([t.split(" (")[0].split(",")[0] for t in views["doppler"]["panels"]],
                         ["B-mode of the mean frame", "power Doppler over B-mode", "velocity"])
        self.assertEqual(views["channel_strain"]["chain"], "strain")
        self.assertEqual([t.split(",")[0] for t in views["channel_strain"]["panels"]],
                         ["B-mode", "strain (axial)", "peak correlation"])
        png, pixels = page.screenshot()
        WebViewerWithTheDaemon.keep_screenshot(self, "doppler_and_channel_strain.png", png)
        boxes = {(pipeline, title.split(",")[0].split(" (")[0]): box
                 for pipeline, title, box in WebViewerWithTheDaemon.canvases(page)}
        crop = WebViewerWithTheDaemon.crop

        def image_part(box):
            # The image inside the panel's frame (plot.js MARGIN: left 62, right 92, top 30,
            # bottom 46), without axes and colour bar; equal-aspect images are centred in it.
            left, top, width, height = box
            return crop(pixels, (left + 62, top + 30, width - 62 - 92, height - 30 - 46))

        def is_grey(part):
            return np.abs(part - part.mean(axis=2, keepdims=True)).max(axis=2) < 4

        def is_dark(part):
            return np.all(np.abs(part - PANEL_BACKGROUND) <= 8, axis=2)

        bmode = image_part(boxes[("doppler", "B-mode of the mean frame")])
        grey = is_grey(bmode) & ~is_dark(bmode)
        self.assertGreater(grey.mean(), 0.5, "the Doppler B-mode is not a grey image")
        self.assertGreater(bmode[grey].std(), 20.0, "the Doppler B-mode has no speckle contrast")
        for title in ("power Doppler over B-mode", "velocity"):
            part = image_part(boxes[("doppler", title)])
            coloured = ~is_grey(part)
            # The tube (about 30 % of the image) in colour, the tissue around it the grey B-mode.
            self.assertGreater(coloured.mean(), 0.1, f"'{title}' shows no colour over the B-mode")
            self.assertGreater((is_grey(part) & ~is_dark(part)).mean(), 0.3, f"'{title}' shows no B-mode around the flow")
        velocity = image_part(boxes[("doppler", "velocity")])
        red = (velocity[..., 0] > velocity[..., 2] + 60)
        blue = (velocity[..., 2] > velocity[..., 0] + 60)
        # Synthetic flow: the left half away from the probe (+, blue), the right half towards (-, red).
        middle = velocity.shape[1] // 2
        self.assertGreater(blue[:, :middle].sum(), 10 * max(1, blue[:, middle:].sum()), "flow away is not blue on the left")
        self.assertGreater(red[:, middle:].sum(), 10 * max(1, red[:, :middle].sum()), "flow towards is not red on the right")
        strain_bmode = image_part(boxes[("channel_strain", "B-mode")])
        self.assertGreater(strain_bmode[is_grey(strain_bmode) & ~is_dark(strain_bmode)].std(), 20.0,
                           "the beamformed image's B-mode is missing or flat")
        correlation = image_part(boxes[("channel_strain", "peak correlation")])
        drawn = correlation[~is_dark(correlation)]
        # 1.0 everywhere: magma's top (light yellow, mean of the channels > 180), not black.
        self.assertGreater(drawn.mean(), 150.0, "a correlation of 1.0 everywhere is drawn dark")
        page.close()
        returncode, output = web.stop()
        self.assertEqual(returncode, 0, output)


class WebServerAlone(unittest.TestCase):
    def test_binds_loopback_and_serves_the_page_with_no_outside_resources(self):
        web = WebProcess(self, "--endpoint", support.TemporaryFolder(self).endpoint("no-daemon"))
        self.assertRegex(web.url, r"^http://127\.0\.0\.1:\d+/$")
        self.assertNotEqual(web.url, "http://127.0.0.1:0/")  # the ephemeral port chosen is printed
        status, content_type, page = web.get("/")
        self.assertEqual(status, 200)
        self.assertIn("text/html", content_type)
        page = page.decode()
        references = re.findall(r'(?:src|href)="([^"]+)"', page)
        self.assertEqual(sorted(references), ["/static/plot.js", "/static/viewer.css", "/static/viewer.js"])
        for reference in references:
            status, _, body = web.get(reference)
            self.assertEqual(status, 200, reference)
            self.assertNotRegex(body.decode(), r"(?:src|href)\s*=\s*[\"']?https?://", reference)  # no CDN
        tables = json.loads(web.get("/colormaps.json")[2])
        for name in ("inferno", "RdBu_r", "RdBu", "gray", "viridis", "viridis_r", "magma", "jet", "hot"):
            self.assertEqual(len(tables[name]), 255, name)  # codes 0..254 (render.LEVELS); 255 = no value
        self.assertEqual(tables["gray"][0], [0, 0, 0])
        self.assertEqual(tables["gray"][-1], [255, 255, 255])
        returncode, output = web.stop()
        self.assertEqual(returncode, 0, output)

    def test_a_port_out_of_range_is_one_line_and_a_non_zero_exit(self):
        completed = subprocess.run([web_launcher(), "--port", "70000"], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(completed.returncode, 0)
        self.assertIn("--port 70000 is not a TCP port", completed.stderr)


class HubWithoutSockets(unittest.TestCase):
    """The hub alone: conflation counted per browser, a result set that cannot be drawn."""

    def test_versions_replaced_before_a_browser_took_them_are_counted_for_that_browser_only(self):
        async def scenario():
            hub = Hub(concurrent.futures.ThreadPoolExecutor(max_workers=1), SubscriberStats())
            slow, fast = hub.join(), hub.join()
            statuses = [result_pb2.Status(frames_received=n) for n in range(1, 6)]
            hub.put_status(statuses[0])
            for client in (slow, fast):
                self.assertEqual(hub.next_topic(client), STATUS_TOPIC)
                message = json.loads(await hub.message(client, STATUS_TOPIC))
                self.assertEqual(message["status"]["framesReceived"], "1")
            for status in statuses[1:]:  # `fast` takes each new version, `slow` none
                hub.put_status(status)
                await hub.message(fast, STATUS_TOPIC)
            self.assertIsNone(hub.next_topic(fast))
            self.assertEqual(fast.conflated, 0)
            # versions 2, 3, 4 were replaced while `slow` had not taken them; 5 it still can
            self.assertEqual(slow.conflated, 3)
            self.assertEqual(hub.next_topic(slow), STATUS_TOPIC)
            message = json.loads(await hub.message(slow, STATUS_TOPIC))
            self.assertEqual(message["status"]["framesReceived"], "5")
            self.assertEqual(message["viewer"]["browser_conflated"], 3)
            self.assertIsNone(hub.next_topic(slow))
        asyncio.run(scenario())

    def test_a_result_set_that_cannot_be_drawn_is_counted_once_and_skipped(self):
        async def scenario():
            hub = Hub(concurrent.futures.ThreadPoolExecutor(max_workers=1), SubscriberStats())
            pages = hub.join(), hub.join()
            header = result_pb2.ResultHeader(pipeline="odd", output="nothing", input_sequence=7)
            group = Group("odd", 7, 0, {"nothing": Result("result/odd/nothing", header, None)})  # no array
            hub.put_group(group, None)
            for page in pages:
                self.assertEqual(hub.next_topic(page), "view/odd")
                self.assertIsNone(await hub.message(page, "view/odd"))
                self.assertIsNone(hub.next_topic(page))  # not offered again
            self.assertEqual(hub.render_errors, 1)
            self.assertEqual(hub.counters()["result_sets"], 1)
        asyncio.run(scenario())


def decoded(panel):
    """The values an image panel carries: codes back to values (render.quantise's inverse), NaN
    where it has none."""
    codes = np.frombuffer(base64.b64decode(panel["pixels"]), np.uint8).reshape(panel["rows"], panel["columns"])
    low, high = panel["colour"]["low"], panel["colour"]["high"]
    return np.where(codes == render.NO_VALUE, np.nan, low + codes * (high - low) / render.LEVELS)


class RenderedPanels(unittest.TestCase):
    """What the page is sent for result sets with known fields (synthetic.py, as recordings): the
    pixels are the published values (clipped to the colour limits) at the right place, with the
    axes' physical coordinates and units."""

    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)

    def rendered(self, write):
        path = self.folder.file("results.h5")
        write(path, rng=self.rng)
        groups, context = groups_of(path)
        for group in groups:
            context.remember(group)
        return groups[-1], render.render_group(groups[-1], context)

    def assert_values(self, panel, expected):
        """Equal within half a quantisation step (plus float32 rounding of the published values)."""
        expected = np.clip(np.asarray(expected, np.float64), panel["colour"]["low"], panel["colour"]["high"])
        step = (panel["colour"]["high"] - panel["colour"]["low"]) / render.LEVELS
        np.testing.assert_allclose(decoded(panel), expected, rtol=0, atol=step / 2 * 1.001 + 1e-6)

    def test_arfi_peak_and_depth_time_images_hold_the_published_displacement(self):
        group, view = self.rendered(lambda path, rng: synthetic.write_arfi_results(path, sets=1, rng=rng))
        self.assertEqual(view["chain"], "arfi")
        displacement = group.outputs["displacement"].array  # [location, track, depth] um
        peak, depth_time, course = view["panels"]
        self.assert_values(peak, displacement.max(axis=1).T)  # [depth, location]
        self.assertEqual((peak["x"]["label"], peak["y"]["label"]), ("lateral (mm)", "depth (mm)"))
        self.assertAlmostEqual(peak["x"]["first"], -5.2, places=9)  # origin -5.2 mm, 0.2 mm apart
        self.assertAlmostEqual(peak["x"]["last"], -5.2 + 0.2 * (displacement.shape[0] - 1), places=9)
        depth_step_mm = 1 / 44.4e6 * 1540 / 2 * 1e3  # fast time to depth, c = 1540 m/s
        self.assertAlmostEqual(peak["y"]["last"], depth_step_mm * (displacement.shape[2] - 1), places=9)
        self.assertEqual(peak["colour"]["label"], "peak displacement (µm)")
        location = int(np.unravel_index(np.argmax(displacement.max(axis=1)), displacement.shape[::2])[0])
        self.assert_values(depth_time, displacement[location].T)  # [depth, track]
        self.assertEqual(depth_time["x"]["label"], "time after push (ms)")
        self.assertAlmostEqual(peak["markers"][0]["value"], -5.2 + 0.2 * location, places=9)
        peak_depth = int(np.argmax(displacement[location].max(axis=0)))
        np.testing.assert_allclose(course["y"]["values"], displacement[location, :, peak_depth], rtol=1e-6)

    def test_strain_in_percent_and_a_bmode_reduced_to_at_most_512_rows(self):
        group, view = self.rendered(synthetic.write_strain_results)
        self.assertEqual(view["chain"], "strain")
        bmode_panel, strain_panel, correlation_panel = view["panels"]
        self.assert_values(strain_panel, group.outputs["strain"].array * 100.0)
        self.assertEqual(strain_panel["colour"]["label"], "strain (%)")
        self.assert_values(correlation_panel, group.outputs["correlation"].array)
        self.assertEqual(bmode_panel["title"], "B-mode, pre-compression frame #0")
        self.assertEqual(bmode_panel["colour"]["label"], "echo (dB)")
        # 600 RF samples: block means of 2 (render.MAX_PIXELS_PER_AXIS = 512); centre of the first block
        self.assertEqual((bmode_panel["rows"], bmode_panel["columns"]), (300, 64))
        self.assertAlmostEqual(bmode_panel["y"]["first"], 0.5 * 1540 / 2 / 40e6 * 1e3, places=9)

    def test_perfusion_maps_in_ml_per_100g_per_min(self):
        group, view = self.rendered(synthetic.write_perfusion_results)
        self.assertEqual(view["chain"], "perfusion")
        for panel, name in zip(view["panels"], ("k_a", "k_p", "k_l"), strict=True):
            self.assert_values(panel, group.outputs[name].array)
            self.assertEqual(panel["colour"]["label"], f"{name} (ml/100g/min)")
            self.assertEqual(panel["aspect"], "equal")

    def test_doppler_power_over_the_bmode_and_velocity_over_exactly_plus_minus_nyquist(self):
        # The mean_bmode stage's output (config/doppler.yaml) and, drawn the same, the beamformed
        # ensemble itself (beamform with publish: true).
        for source in ("stage", "ensemble"):
            with self.subTest(bmode=source):
                self.check_doppler_panels(source)

    def check_doppler_panels(self, source):
        group, view = self.rendered(lambda path, rng: synthetic.write_doppler_results(path, rng, bmode=source))
        self.assertEqual(view["chain"], "doppler")
        bmode_panel, power_panel, velocity_panel = view["panels"]
        # B-mode of the mean frame: log-compressed |mean IQ| over 50 dB, its maximum at 0 dB.
        self.assertEqual(bmode_panel["title"], "B-mode of the mean frame (16 frames)")
        self.assertEqual((bmode_panel["colour"]["low"], bmode_panel["colour"]["high"]), (-50.0, 0.0))
        if source == "stage":
            published = group.outputs["bmode"].array.T.astype(np.float64)  # [axial, lateral] dB
            self.assertEqual(group.outputs["bmode"].header.unit, "dB")
            expected_db = np.clip(published - published.max(), -50.0, 0.0)
        else:
            ensemble = group.outputs["beamform_beamformed"].array  # [frame, lateral, axial]
            magnitude = np.abs(ensemble.mean(axis=0)).T  # [axial, lateral]
            expected_db = np.clip(20 * np.log10(magnitude / magnitude.max()), -50.0, 0.0)
        self.assert_values(bmode_panel, expected_db)
        # Velocity: cm/s, limits exactly +-v_N of the header's attribute, RdBu (+ = away = blue).
        nyquist_cm_s = float(group.outputs["velocity"].header.attributes["nyquist_velocity_m_per_s"]) * 100
        self.assertEqual(nyquist_cm_s, synthetic.NYQUIST_M_PER_S * 100)
        colour = velocity_panel["colour"]
        self.assertEqual((colour["low"], colour["high"], colour["map"]), (-nyquist_cm_s, nyquist_cm_s, "RdBu"))
        power_db = group.outputs["power_db"].array.T.astype(np.float64)
        relative = power_db - power_db.max()
        gated = relative >= -15.0  # sonopipe.view.doppler.POWER_DYNAMIC_RANGE_DB
        velocity = group.outputs["velocity"].array.T * 100.0
        self.assert_values(velocity_panel, np.where(gated, velocity, np.nan))
        self.assertTrue(np.isfinite(decoded(velocity_panel)).any())
        self.assertTrue(np.isnan(decoded(velocity_panel)).any())  # the tissue: the B-mode shows through
        # Power Doppler: dB re the largest power over [-15, 0], transparent below.
        self.assertEqual((power_panel["colour"]["low"], power_panel["colour"]["high"]), (-15.0, 0.0))
        self.assert_values(power_panel, np.where(gated, relative, np.nan))
        # Both overlays carry the B-mode as their underlay, on the same grid.
        for panel in (power_panel, velocity_panel):
            underlay = panel["underlay"]
            self.assertEqual(underlay["colour"]["map"], "gray")
            codes = np.frombuffer(base64.b64decode(underlay["pixels"]), np.uint8)
            np.testing.assert_array_equal(codes, np.frombuffer(base64.b64decode(bmode_panel["pixels"]), np.uint8))

    def test_doppler_without_a_beamformed_output_draws_power_and_velocity_without_underlay(self):
        _, view = self.rendered(lambda path, rng: synthetic.write_doppler_results(path, rng, bmode=None))
        self.assertEqual([p["title"].split(",")[0] for p in view["panels"]], ["power Doppler", "velocity"])
        self.assertTrue(all("underlay" not in p for p in view["panels"]))

    def test_doppler_without_the_nyquist_attribute_is_refused_with_a_message(self):
        path = self.folder.file("results.h5")
        results = synthetic.doppler_results(rng=self.rng)
        for header, _ in results:
            if "nyquist_velocity_m_per_s" in header.attributes:
                del header.attributes["nyquist_velocity_m_per_s"]
        sonopipe.write_recording(path, results=results)
        groups, context = groups_of(path)
        with self.assertRaisesRegex(ValueError, "nyquist_velocity_m_per_s"):
            render.render_group(groups[-1], context)

    def test_a_beamformed_image_gets_a_bmode_panel_and_a_correlation_of_one_is_drawn_in_the_map(self):
        group, view = self.rendered(lambda path, rng: sonopipe.write_recording(
            path, results=synthetic.beamform_strain_results(rng=rng)))
        self.assertEqual(view["chain"], "strain")
        bmode_panel, strain_panel, correlation_panel = view["panels"]
        self.assertTrue(bmode_panel["title"].startswith("B-mode"), bmode_panel["title"])
        rf = group.outputs["bmode_beamformed"].array.T  # [axial, lateral]
        from sonopipe.view import bmode
        expected = bmode.log_compress(bmode.envelope(rf, axis=0))
        # 600 axial samples -> block means of 2 (render.MAX_PIXELS_PER_AXIS)
        expected = expected.reshape(300, 2, -1).mean(axis=1)
        self.assert_values(bmode_panel, expected)
        self.assertLess(np.nanmin(decoded(bmode_panel)), -30.0)  # speckle spans tens of dB
        # 1.0 everywhere: the top of the map (0.9 .. 1), not the bottom code of an empty range.
        colour = correlation_panel["colour"]
        self.assertEqual((colour["low"], colour["high"]), (0.9, 1.0))
        codes = np.frombuffer(base64.b64decode(correlation_panel["pixels"]), np.uint8)
        self.assertTrue(np.all(codes == render.LEVELS), np.unique(codes))

    def test_a_constant_image_gets_a_colour_range_around_its_value(self):
        for value in (0.0, 1.0, -3.5):
            panel = render.image_panel(np.full((4, 5), value), np.arange(5.0), "x (mm)", np.arange(4.0), "y (mm)",
                                       "constant", "value", "viridis", (value, value))
            low, high = panel["colour"]["low"], panel["colour"]["high"]
            self.assertLess(low, value)
            self.assertGreater(high, value)
            codes = np.frombuffer(base64.b64decode(panel["pixels"]), np.uint8)
            self.assertTrue(np.all(codes == render.LEVELS // 2), (value, np.unique(codes)))  # mid-map
