"""Headless Chromium driven through the DevTools protocol (its WebSocket, with aiohttp's client):
open a page, evaluate JavaScript in it, take screenshots. For the sonopipe-web test."""
import asyncio
import base64
import io
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.request

import numpy as np


def chromium_path():
    """The Debian package's browser (chromium), or a skip naming it."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise unittest.SkipTest("no chromium on PATH (Debian package chromium, tools/install-deps.sh)")


class Browser:
    """chromium --headless on `url` with a private profile; DevTools on an ephemeral loopback port."""

    def __init__(self, url, width=1440, height=1700, timeout_s=60.0):
        self.profile = tempfile.mkdtemp(prefix="sonopipe-chromium-")
        self.log = open(os.path.join(self.profile, "chromium.log"), "w")
        # --no-sandbox: the test may run as root (CI containers), where Chromium's sandbox refuses to start.
        self.process = subprocess.Popen(
            [chromium_path(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", "--no-default-browser-check", "--remote-debugging-address=127.0.0.1",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}", f"--window-size={width},{height}", url],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)  # its own process group:
        # /usr/bin/chromium is a shell script whose browser and helper processes must all be stopped
        self.loop = asyncio.new_event_loop()
        self.socket = self.session = None
        self._next_id = 0
        try:
            port = self._devtools_port(timeout_s)
            self.loop.run_until_complete(self._connect(port, timeout_s))
        except BaseException:
            self.close()
            raise

    def _devtools_port(self, timeout_s):
        """Chromium writes the port it chose into <profile>/DevToolsActivePort."""
        path = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"chromium exited with {self.process.returncode}:\n{self.log_text()}")
            if os.path.exists(path):
                with open(path) as f:
                    first = f.readline().strip()
                if first.isdigit():
                    return int(first)
            time.sleep(0.1)
        raise AssertionError(f"chromium wrote no DevToolsActivePort within {timeout_s} s:\n{self.log_text()}")

    async def _connect(self, port, timeout_s):
        import aiohttp
        deadline = time.monotonic() + timeout_s
        page = None
        while page is None:  # the page's target appears shortly after the browser's
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
                page = next((t for t in json.load(response) if t.get("type") == "page"), None)
            if page is None:
                if time.monotonic() > deadline:
                    raise AssertionError("chromium shows no page target")
                await asyncio.sleep(0.2)
        self.session = aiohttp.ClientSession()
        self.socket = await self.session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)

    def command(self, method, timeout_s=60.0, **params):
        """Sends one DevTools command and returns its result (events in between are ignored)."""
        async def exchange():
            self._next_id += 1
            await self.socket.send_json({"id": self._next_id, "method": method, "params": params})
            while True:
                message = await self.socket.receive_json(timeout=timeout_s)
                if message.get("id") == self._next_id:
                    if "error" in message:
                        raise AssertionError(f"{method}: {message['error']}")
                    return message["result"]
        return self.loop.run_until_complete(exchange())

    def evaluate(self, expression):
        """The JSON-able value of a JavaScript expression in the page (promises awaited)."""
        result = self.command("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression, timeout_s, what):
        """Evaluates `expression` until it is truthy; returns its value, or fails naming `what`."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout_s} s (last value {value!r})")
            time.sleep(0.25)

    def screenshot(self):
        """PNG bytes and the RGB pixels [row, column, channel] of the whole page."""
        from PIL import Image
        size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        result = self.command("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                              clip={"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1})
        png = base64.b64decode(result["data"])
        return png, np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))

    def log_text(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()[-4000:]

    def _stop_process_group(self):
        """SIGTERM to the browser's process group (the launcher script, the browser, its helpers),
        SIGKILL to what is left after 20 s."""
        group = self.process.pid  # start_new_session: the group id is the launcher's pid
        for signal_number, wait_s in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 20.0)):
            try:
                os.killpg(group, signal_number)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                try:
                    os.killpg(group, 0)  # any member left?
                except ProcessLookupError:
                    break
                self.process.poll()  # reap the launcher
                time.sleep(0.1)
            else:
                continue
            break
        self.process.wait()

    def close(self):
        """Stops the browser; again: nothing."""
        if self.loop.is_closed():
            return

        async def disconnect():
            if self.socket is not None:
                await self.socket.close()
            if self.session is not None:
                await self.session.close()
        try:
            self.loop.run_until_complete(disconnect())
        finally:
            self.loop.close()
            self._stop_process_group()
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)
