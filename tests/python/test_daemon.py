"""Round trips through the real sonopiped (CPU backend) from Python: Publisher -> daemon `convert`
-> Subscriber, arrays equal to the convert stage's reference (out = float32(scale) * float32(in),
int16 IQ interleaved on 'iq' -> complex64); sequence gaps reported; conflation keeps the newest;
Control status counters and stop."""
import unittest

import numpy as np

import sonopipe
from sonopipe.v1 import common_pb2
import support

from daemon_fixture import IQ_SCALE, RF_SCALE, DaemonFixture, convert_reference


class DaemonRoundTrip(DaemonFixture):
    def test_int16_iq_becomes_scaled_complex64_and_int16_rf_scaled_float32(self):
        sub = self.subscriber(["result/iq/", "result/rf/"])
        publisher = self.publisher()
        iq_frames = [self.rng.integers(-32768, 32767, size=(4, 6, 50, 2), endpoint=True).astype(np.int16)
                     for _ in range(10)]
        rf_frames = [self.rng.integers(-32768, 32767, size=(8, 64), endpoint=True).astype(np.int16) for _ in range(5)]
        for frame in iq_frames:
            publisher.send(frame, kind="iq", axes=["location", "ensemble", ("sample", 1 / 8.9e6, "s"), "iq"],
                           stream_id=1, sampling_frequency_hz=8.9e6, demodulation_frequency_hz=5e6)
        for frame in rf_frames:
            publisher.send(frame, kind="rf", axes=[("line", 3e-4, "m"), ("sample", 1.925e-5, "m")], stream_id=2)
        results = self.results(sub, len(iq_frames) + len(rf_frames))
        iq = [r for r in results if r.topic == "result/iq/converted"]
        rf = [r for r in results if r.topic == "result/rf/converted"]
        self.assertEqual([r.header.input_sequence for r in iq], list(range(len(iq_frames))), "exactly once, in order")
        self.assertEqual([r.header.input_sequence for r in rf], list(range(len(rf_frames))))
        for result, frame in zip(iq, iq_frames):
            header, array = result
            self.assertEqual(array.dtype, np.complex64)
            self.assertEqual(header.element_type, common_pb2.ELEMENT_TYPE_COMPLEX64)
            self.assertEqual(result.axis_names, ("location", "ensemble", "sample"))
            self.assertAlmostEqual(result.axis("sample").spacing, 1 / 8.9e6)
            expected = convert_reference(frame, IQ_SCALE)
            np.testing.assert_array_equal(array.real, expected[..., 0])  # bit-exact: same float32 product
            np.testing.assert_array_equal(array.imag, expected[..., 1])
            self.assertEqual((header.pipeline, header.stream_id, header.backend), ("iq", 1, "cpu"))
            timing = header.timing
            self.assertTrue(timing.received_ns <= timing.compute_start_ns <= timing.compute_end_ns
                            <= timing.published_ns, timing)
            self.assertEqual(result.gap, 0)
        for result, frame in zip(rf, rf_frames):
            self.assertEqual(result.array.dtype, np.float32)
            self.assertEqual(result.array.shape, (8, 64))
            np.testing.assert_array_equal(result.array, convert_reference(frame, RF_SCALE))
        self.assertEqual(sub.stats.missing, 0)
        self.assertEqual(sub.stats.malformed, 0)

    def test_a_hole_in_the_input_sequence_is_reported_as_a_gap(self):
        sub = self.subscriber(["result/rf/"])
        publisher = self.publisher()
        frame = np.ones((4, 8), np.int16)
        for sequence in [0, 1, 2, 6, 7]:
            publisher.send(frame, kind="rf", axes=["line", "sample"], stream_id=3, sequence=sequence)
        results = self.results(sub, 5)
        self.assertEqual([r.gap for r in results], [0, 0, 0, 3, 0])
        self.assertEqual((sub.stats.missing, sub.stats.gaps), (3, 1))

    def test_conflating_subscriber_gets_only_the_newest_of_a_burst(self):
        sub = self.subscriber(["result/rf/"], conflate=True)
        publisher = self.publisher()
        frames = [self.rng.integers(-1000, 1000, size=(16, 32)).astype(np.int16) for _ in range(40)]
        for frame in frames:
            publisher.send(frame, kind="rf", axes=["line", "sample"])
        support.wait_until(lambda: self.control.status().results_published >= len(frames), "every result published")
        rf_queued = lambda: sum(n for topic, n in sub.queued().items() if topic.startswith("result/rf/"))  # noqa: E731
        support.wait_until(lambda: rf_queued() == len(frames), "every result at the subscriber")
        results = []
        while (result := sub.receive(0)) is not None:  # what is queued now; heartbeats may follow
            if result.topic != "status":
                results.append(result)
        self.assertEqual(len(results), 1, [r.header.input_sequence for r in results])
        self.assertEqual(results[0].header.input_sequence, len(frames) - 1)
        self.assertEqual(results[0].skipped, len(frames) - 1)
        np.testing.assert_array_equal(results[0].array, convert_reference(frames[-1], RF_SCALE))
        self.assertEqual(sub.stats.missing, 0)

    def test_status_counts_the_frames_and_stop_ends_the_daemon_cleanly(self):
        publisher = self.publisher()
        for _ in range(6):
            publisher.send(np.zeros((2, 8), np.int16), kind="rf", axes=["line", "sample"])
        # Published and processed are counted one after the other; wait for both.
        def counted_six():
            status = self.control.status()
            return status if min(status.results_published, status.frames_processed) >= 6 else None
        status = support.wait_until(counted_six, "6 frames processed and published")
        self.assertEqual((status.frames_received, status.frames_processed, status.results_published), (6, 6, 6))
        self.assertEqual(status.backend, "cpu")
        self.assertEqual(status.frames_rejected, 0)
        self.assertEqual({p.name for p in status.pipelines}, {"iq", "rf"})
        self.control.stop()
        self.assertEqual(self.daemon.process.wait(30), 0, self.daemon.log_text())
        with self.assertRaises(sonopipe.ControlError):
            sonopipe.Control(self.control_endpoint, timeout_s=0.5).status()


if __name__ == "__main__":
    unittest.main()
