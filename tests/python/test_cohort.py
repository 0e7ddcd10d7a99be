"""sonopipe-cohort on a LocalCluster of 2 worker processes over several recordings, one of whose
workers is killed (SIGKILL) while it runs a task: the task runs again, every output is complete and
exact (convert at scale 1 turns int16 (I, Q) counts into the same complex64 values), a bad input
fails alone, and the summary says so.

The kill is made certain, not timed: the recording `victim.h5` goes, on its first attempt only,
through a wrapper that records its worker's pid and then blocks; the test kills that worker."""
import csv
import os
import signal
import stat
import subprocess
import sys
import unittest

import numpy as np

from sonopipe.recording import read_recording
import support
from support import TemporaryFolder, random_generator, tool

GOOD = ("a", "b", "c", "victim")
FRAMES = 5
WAIT_S = 180  # generous bounds for a loaded two-core machine; nothing asserts on time


def wait_until(condition, what):
    return support.wait_until(condition, what, timeout_s=WAIT_S)


def process_gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().split(")")[-1].split()[0] == "Z"  # a zombie has ended too
    except FileNotFoundError:
        return True


class CohortTest(unittest.TestCase):
    def test_worker_killed_mid_task_is_retried_and_every_output_is_complete(self):
        folder = TemporaryFolder(self)
        rng = random_generator(self)
        sim, run = tool("sim"), tool("run")
        inputs = []
        for name in GOOD:
            path = folder.file(f"{name}.h5")
            subprocess.run([sim, "speckle", "--out", path, "--frames", str(FRAMES), "--shape", "6x128", "--kind", "iq",
                            "--type", "int16", "--seed", str(int(rng.integers(1, 2**31)))], check=True,
                           stdout=subprocess.DEVNULL)
            inputs.append(path)
        junk = folder.file("junk.h5")
        with open(junk, "w") as file:
            file.write("not a recording\n")
        config = folder.file("convert.yaml")
        with open(config, "w") as file:
            file.write("pipelines:\n  - name: demo\n    stages:\n      - {type: convert, params: {scale: 1.0}}\n"
                       "backend: cpu\ncpu_threads: 1\n")

        marker = folder.file("first-attempt")
        wrapper = folder.file("run-wrapper.sh")
        with open(wrapper, "w") as file:
            file.write(f"""#!/bin/sh
# First attempt at victim.h5: note the worker ($PPID) and this process, then block until killed.
for last; do :; done
if [ "$(basename "$last")" = victim.h5 ] && mkdir '{marker}' 2>/dev/null; then
  echo "$PPID $$" > '{marker}/pids.partial' && mv '{marker}/pids.partial' '{marker}/pids'
  exec sleep 3600
fi
exec '{run}' "$@"
""")
        os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IXUSR)

        out = folder.file("out")
        log_path = folder.file("cohort.log")
        with open(log_path, "w") as log:
            cohort = subprocess.Popen([sys.executable, "-m", "sonopipe.cohort", "--config", config,
                                       folder.file("[abc].h5"), folder.file("victim.h5"), junk, "--out", out,
                                       "--workers", "2", "--run", wrapper],
                                      stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: cohort.poll() is None and cohort.kill())

        def log_text():
            with open(log_path) as file:
                return file.read()

        wait_until(lambda: os.path.exists(os.path.join(marker, "pids")), "the victim's first attempt")
        with open(os.path.join(marker, "pids")) as file:
            worker_pid, attempt_pid = (int(value) for value in file.read().split())
        self.assertNotEqual(worker_pid, cohort.pid, "the task runs in a worker process, not the client")
        os.kill(worker_pid, signal.SIGKILL)

        try:
            exit_code = cohort.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            self.fail("sonopipe-cohort did not finish:\n" + log_text())
        text = log_text()
        self.assertEqual(exit_code, 1, text)  # junk.h5 alone failed
        # The blocked first attempt died with its worker (no orphan left writing the same output).
        wait_until(lambda: process_gone(attempt_pid), "the killed worker's child ending")

        with open(os.path.join(out, "summary.csv"), newline="") as file:
            rows = list(csv.DictReader(file))
        self.assertEqual([row["input"] for row in rows], inputs[:3] + [inputs[3], junk], text)
        for row in rows[:4]:
            self.assertEqual((row["status"], row["frames"], row["results"]), ("ok", str(FRAMES), str(FRAMES)), row)
            self.assertTrue(row["worker"].startswith("tcp://127.0.0.1:"), row)
        self.assertEqual(rows[4]["status"], "failed")
        self.assertIn("junk.h5", rows[4]["error"])
        self.assertEqual(sorted(os.listdir(out)), ["a.h5", "b.h5", "c.h5", "summary.csv", "victim.h5"])

        for path in inputs:
            name = os.path.basename(path)
            frames = read_recording(path).streams
            self.assertEqual(len(frames), 1)
            (stream,) = frames.values()
            results = read_recording(os.path.join(out, name)).results[("demo", "converted")]
            self.assertEqual(len(results), FRAMES, name)
            self.assertEqual([int(h.input_sequence) for h in results.headers], list(range(FRAMES)), name)
            for index in range(FRAMES):
                counts = np.asarray(stream.payload[index], dtype=np.int16)  # [..., iq]
                expected = counts[..., 0].astype(np.float32) + 1j * counts[..., 1].astype(np.float32)
                np.testing.assert_array_equal(results.payload[index], expected, err_msg=name)


if __name__ == "__main__":
    unittest.main()
