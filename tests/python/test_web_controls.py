"""The browser viewer's live-parameter controls in headless Chromium (browser.py) against the real
daemon: the page shows a slider for each live parameter with a declared range, with that range and
its unit; moving it changes the parameter through sonopipe-web's control connection (the daemon
reports the new value and generation, the page shows the generation); a viewer without a control
connection shows no controls."""
import time
import unittest

import browser
import sonopipe
import support
from test_web import START_TIMEOUT_S, WebProcess, web_launcher

CONFIG = """
ingest: {{endpoint: "{ingest}"}}
publish: {{endpoint: "{publish}", status_interval_s: 0.2}}
control: {{endpoint: "{control}"}}
backend: cpu
cpu_threads: 2
pipelines:
  - name: arfi
    stages:
      - {{type: convert}}
      - {{type: upsample}}
      - {{type: loupas}}
"""

SLIDER = "document.querySelector('input[data-parameter=\"arfi.loupas.kernel_wavelengths\"]')"


class WebControls(unittest.TestCase):
    def setUp(self):
        browser.chromium_path()
        web_launcher()
        self.folder = support.TemporaryFolder(self)
        self.endpoints = {name: self.folder.endpoint(name) for name in ("ingest", "publish", "control")}
        path = self.folder.file("daemon.yaml")
        with open(path, "w") as f:
            f.write(CONFIG.format(**self.endpoints))
        self.daemon = support.Daemon(self, path)
        self.control = sonopipe.Control(self.endpoints["control"], timeout_s=2.0)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                self.control.status()
                break
            except sonopipe.ControlError:
                if self.daemon.process.poll() is not None or time.monotonic() > deadline:
                    self.fail(f"sonopiped did not start:\n{self.daemon.log_text()}")
                time.sleep(0.2)

    def test_a_slider_with_the_declared_range_changes_the_parameter_in_the_daemon(self):
        web = WebProcess(self, "--endpoint", self.endpoints["publish"], "--control", self.endpoints["control"])
        page = browser.Browser(web.url)
        self.addCleanup(page.close)
        page.wait_for(f"!!{SLIDER}", 60, "the kernel_wavelengths slider")
        slider = page.evaluate(f"(() => {{ const s = {SLIDER}; return {{min: s.min, max: s.max, step: s.step, "
                               "value: s.value, unit: s.parentElement.querySelector('.control-unit').textContent}; })()")
        self.assertEqual(slider, {"min": "0.1", "max": "100", "step": "0.01", "value": "1.5", "unit": "wavelengths"})
        # Not live, so no control: loupas has none of those, upsample's are live; the page shows only live ones.
        names = page.evaluate("[...document.querySelectorAll('[data-parameter]')].map(e => e.dataset.parameter)")
        described = {p.name: p for p in self.control.list("arfi")}
        self.assertTrue(names)
        for name in names:
            self.assertTrue(described[name].live, name)
        # The user moves the slider and lets go.
        page.evaluate(f"(() => {{ const s = {SLIDER}; s.value = '2.5'; s.dispatchEvent(new Event('input')); "
                      "s.dispatchEvent(new Event('change')); })()")
        reply = page.wait_for("window.sonopipeViewer.state().lastSet", 30, "the page's set to come back")
        self.assertEqual(reply["reply"], {"ok": True, "generation": 1, "value": "2.5"})
        self.assertEqual(self.control.get("arfi.loupas.kernel_wavelengths"), 2.5)
        note = page.evaluate(f"{SLIDER}.parentElement.querySelector('.note').textContent")
        self.assertEqual(note, "generation 1")
        # The daemon's value comes back with the next status and stays on the slider.
        self.control.set("arfi.loupas.kernel_wavelengths", 3.0)
        page.wait_for(f"{SLIDER}.value === '3'", 30, "the daemon's new value on the slider")

    def test_a_viewer_without_control_shows_no_controls(self):
        web = WebProcess(self, "--endpoint", self.endpoints["publish"], "--control", "")
        page = browser.Browser(web.url)
        self.addCleanup(page.close)
        page.wait_for("window.sonopipeViewer && window.sonopipeViewer.state().statusMessages > 2", 60, "statuses")
        self.assertFalse(page.evaluate("window.sonopipeViewer.state().controlsEnabled"))
        self.assertEqual(page.evaluate("document.querySelectorAll('[data-parameter]').length"), 0)


if __name__ == "__main__":
    unittest.main()
