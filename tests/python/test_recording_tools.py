"""Recordings made by the C++ tools read back by read_recording, and recordings written by Python
replayed by sonopipe-replay through the daemon: sonopipe-sim -> read_recording;
write_recording -> sonopipe-replay --lossless -> sonopipe-convert -> Subscriber; daemon results ->
sonopipe-record -> read_recording equal to what a live Subscriber received."""
import os
import subprocess
import time
import unittest

import numpy as np

import sonopipe
import support
from test_view import check_png
from daemon_fixture import IQ_SCALE, RF_SCALE, DaemonFixture, convert_reference


class SimulatorRecordingReadsInPython(unittest.TestCase):
    def test_speckle_recording_of_sonopipe_sim_reads_back_with_its_shape_type_and_truth(self):
        path = support.TemporaryFolder(self).file("speckle.h5")
        completed = subprocess.run([support.tool("sim"), "speckle", "--out", path, "--frames", "4", "--shape", "3x64",
                                    "--kind", "iq", "--type", "int16", "--seed", "11", "--stream-id", "6",
                                    "--velocity-mm-s", "2"], capture_output=True, text=True, timeout=120)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        recording = sonopipe.read_recording(path)
        self.assertEqual(recording.attributes["format"], "sonopipe-recording")
        self.assertEqual(recording.attributes["seed"], "11")
        stream = recording.streams[6]
        self.assertEqual(len(stream), 4)
        self.assertEqual(stream.payload.dtype, np.int16)
        self.assertEqual(stream.payload.shape, (4, 3, 64, 2))
        self.assertEqual([a.name for a in stream.axes], ["line", "sample", "iq"])
        self.assertEqual(list(stream.sequence), [0, 1, 2, 3])
        self.assertTrue(np.all(np.diff(stream.acquisition_time_ns) > 0))
        for header, array in stream:
            self.assertEqual(header.kind, sonopipe.publisher.frame_kind("iq"))
            self.assertGreater(np.abs(array).max(), 100, "speckle, not zeros")
        truth = recording.truth["axial_shift_m"]
        self.assertEqual((truth.stream_id, truth.unit), (6, "m"))
        # 2 mm/s at 100 frames/s: 20 um per frame
        np.testing.assert_allclose(np.diff(truth.values), 2e-3 / 100, rtol=1e-9)

    def test_flow_channel_ensembles_share_one_shape_and_carry_the_stream_id_given(self):
        # Each ensemble is its own phantom: before, the sample count followed the deepest scatterer of
        # each (177 vs 178 samples: the writer refused the second ensemble), and channel frames were
        # stream 1 whatever --stream-id said.
        path = support.TemporaryFolder(self).file("flow.h5")
        seed = str(support.random_generator(self).integers(1, 1 << 31))
        completed = subprocess.run([support.tool("sim"), "flow", "--channel", "--ensembles", "3", "--frames", "2",
                                    "--stream-id", "5", "--out", path, "--seed", seed, "--threads", "2"],
                                   capture_output=True, text=True, timeout=300)
        self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)
        recording = sonopipe.read_recording(path)
        self.assertEqual(sorted(recording.streams), [5])
        stream = recording.streams[5]
        self.assertEqual(len(stream), 3)
        self.assertEqual([a.name for a in stream.axes], ["frame", "transmit", "element", "sample"])
        self.assertEqual(stream.payload.shape[:4], (3, 2, 1, 128))
        for header, array in stream:
            self.assertEqual(header.stream_id, 5)
            self.assertGreater(np.abs(array).max(), 0, "echoes, not zeros")
        self.assertEqual(recording.truth["axial_velocity_m_per_s"].stream_id, 5)


class RecordingsThroughTheDaemon(DaemonFixture):

    def test_a_python_recording_replays_through_the_daemon_losslessly(self):
        replay = support.tool("replay")
        frames = [self.rng.integers(-32768, 32767, size=(3, 4, 40, 2), endpoint=True).astype(np.int16) for _ in range(12)]
        path = support.TemporaryFolder(self).file("python_iq.h5")
        sonopipe.write_recording(path, frames=[
            (sonopipe.make_frame_header(f, kind="iq", axes=["location", "ensemble", "sample", "iq"], stream_id=2,
                                        sequence=i, acquisition_time_ns=1_000_000 * i), f) for i, f in enumerate(frames)])
        sub = self.subscriber(["result/iq/"])
        completed = subprocess.run([replay, path, "--endpoint", self.ingest, "--lossless", "--max"],
                                   capture_output=True, text=True, timeout=120)
        self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)
        results = self.results(sub, len(frames))
        self.assertEqual([r.header.input_sequence for r in results], list(range(len(frames))))
        for result, frame in zip(results, frames):
            expected = convert_reference(frame, IQ_SCALE)
            np.testing.assert_array_equal(result.array.real, expected[..., 0])
            np.testing.assert_array_equal(result.array.imag, expected[..., 1])

    def test_sonopipe_record_writes_what_a_live_subscriber_receives(self):
        record = support.tool("record")
        folder = support.TemporaryFolder(self)
        path, ready = folder.file("results.h5"), folder.file("ready")
        frames = [self.rng.integers(-2000, 2000, size=(8, 32)).astype(np.int16) for _ in range(7)]
        recorder = subprocess.Popen([record, "--endpoint", self.publish, "--out", path, "--topic", "result/rf/",
                                     "--count", str(len(frames)), "--ready-file", ready],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(lambda: recorder.poll() is None and recorder.kill())
        sub = self.subscriber(["result/rf/"])
        deadline = time.monotonic() + 30
        while not os.path.exists(ready) and recorder.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(os.path.exists(ready), "sonopipe-record never became ready")
        publisher = self.publisher()
        for frame in frames:
            publisher.send(frame, kind="rf", axes=[("line", 3e-4, "m"), "sample"], stream_id=1)
        live = self.results(sub, len(frames))
        output, _ = recorder.communicate(timeout=30)  # stops by itself after --count results
        self.assertEqual(recorder.returncode, 0, output)
        recording = sonopipe.read_recording(path)
        series = recording.results[("rf", "converted")]
        self.assertEqual(len(series), len(frames), output)
        for (header, array), result, frame in zip(series, live, frames):
            self.assertEqual(header, result.header)  # the header as published, timing included
            np.testing.assert_array_equal(array, result.array)
            np.testing.assert_array_equal(array, convert_reference(frame, RF_SCALE))


    def test_daemon_results_of_simulated_rf_recorded_then_drawn_offline_as_a_bmode(self):
        folder = support.TemporaryFolder(self)
        rf, results, ready, png = (folder.file(n) for n in ("rf.h5", "results.h5", "ready", "png"))
        completed = subprocess.run([support.tool("sim"), "speckle", "--out", rf, "--frames", "3", "--shape", "48x600",
                                    "--kind", "rf", "--type", "int16", "--seed", "4"], capture_output=True, text=True)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        recorder = subprocess.Popen([support.tool("record"), "--endpoint", self.publish, "--out", results,
                                     "--count", "3", "--ready-file", ready],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(lambda: recorder.poll() is None and recorder.kill())
        deadline = time.monotonic() + 30
        while not os.path.exists(ready) and recorder.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        completed = subprocess.run([support.tool("replay"), rf, "--endpoint", self.ingest, "--lossless", "--max"],
                                   capture_output=True, text=True, timeout=120)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        output, _ = recorder.communicate(timeout=30)
        self.assertEqual(recorder.returncode, 0, output)
        completed = subprocess.run([os.environ["SONOPIPE_VIEW"], "--recording", results, "--png", png],
                                   capture_output=True, text=True, timeout=300)
        self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)
        self.assertEqual(sorted(os.listdir(png)), [f"rf_{i:06d}.png" for i in range(3)])
        for name in os.listdir(png):
            check_png(self, os.path.join(png, name), (7, 4.6))


if __name__ == "__main__":
    unittest.main()
