"""Subscriber and Publisher against plain ZeroMQ sockets standing in for the daemon: dtypes, shapes
and named axes; sequence gaps; per-topic conflation; malformed messages counted, never raised."""
import time
import unittest

import numpy as np
import zmq

import sonopipe
from sonopipe.v1 import common_pb2, frame_pb2, result_pb2
import support

ELEMENT_TYPES = {
    "int16": common_pb2.ELEMENT_TYPE_INT16, "float16": common_pb2.ELEMENT_TYPE_FLOAT16,
    "float32": common_pb2.ELEMENT_TYPE_FLOAT32, "float64": common_pb2.ELEMENT_TYPE_FLOAT64,
    "complex64": common_pb2.ELEMENT_TYPE_COMPLEX64, "uint8": common_pb2.ELEMENT_TYPE_UINT8,
}


def random_array(rng, dtype, shape):
    if dtype == "complex64":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    if dtype in ("int16", "uint8"):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def result_message(topic, array, axes, sequence, stream_id=0, unit="um"):
    header = result_pb2.ResultHeader(schema_version=1, pipeline=topic.split("/")[1], output=topic.split("/")[2],
                                     stream_id=stream_id, input_sequence=sequence,
                                     element_type=sonopipe.element_type_of(array.dtype), unit=unit)
    header.timing.received_ns = time.time_ns()
    sonopipe.arrays.axes_to_proto(sonopipe.arrays.make_axes(array.shape, axes), header.axes)
    return [topic.encode(), header.SerializeToString(), np.ascontiguousarray(array).tobytes()]


class FakeDaemon(unittest.TestCase):
    """Each test gets a PUB socket bound like the daemon's publish endpoint and a Subscriber."""

    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)
        self.context = zmq.Context()
        self.addCleanup(self.context.term)
        self.pub = self.context.socket(zmq.PUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        self.pub.setsockopt(zmq.SNDHWM, 100000)
        self.addCleanup(self.pub.close)
        self.endpoint = self.folder.endpoint("publish")
        self.pub.bind(self.endpoint)

    def subscriber(self, **options):
        sub = sonopipe.Subscriber(self.endpoint, ["result/", "status"], timeout_s=0.5, context=self.context,
                                  **options)
        self.addCleanup(sub.close)
        support.wait_for_subscription(self.pub, sub, "result/probe/probe")
        sub.stats = sonopipe.SubscriberStats()  # probes do not count
        return sub


class SubscriberDecodes(FakeDaemon):
    def test_every_element_type_arrives_with_its_dtype_shape_axes_and_values(self):
        sub = self.subscriber()
        sent = {}
        for index, (name, element_type) in enumerate(ELEMENT_TYPES.items()):
            array = random_array(self.rng, name, (3, 4, 5))
            axes = [("location", 0.2e-3, "m", -0.3e-3), ("time", 1e-4, "s"), "sample"]
            sent[f"result/p/{name}"] = array
            self.pub.send_multipart(result_message(f"result/p/{name}", array, axes, index))
        for _ in sent:
            result = sub.receive(2.0)
            self.assertIsNotNone(result, "a result did not arrive")
            header, array = result
            expected = sent[result.topic]
            self.assertEqual(array.dtype, expected.dtype, result.topic)
            self.assertEqual(array.dtype, sonopipe.dtype_of(header.element_type))
            np.testing.assert_array_equal(array, expected)
            self.assertEqual(result.axis_names, ("location", "time", "sample"))
            location = result.axis("location")
            np.testing.assert_allclose(location.coordinates(), -0.3e-3 + 0.2e-3 * np.arange(3))
            self.assertEqual(result.axis("time").unit, "s")
            self.assertGreaterEqual(result.latency_ms, 0.0)
        self.assertEqual(sub.stats.delivered, len(sent))
        self.assertEqual(sub.stats.malformed, 0)

    def test_status_topic_yields_the_status_message_and_no_array(self):
        sub = self.subscriber()
        status = result_pb2.Status(schema_version=1, uptime_s=12.5, backend="cpu", frames_received=7)
        self.pub.send_multipart([b"status", status.SerializeToString()])
        header, array = sub.receive(2.0)
        self.assertIsNone(array)
        self.assertEqual(header.frames_received, 7)
        self.assertEqual(header.backend, "cpu")

    def test_sequence_gaps_are_reported_on_the_next_result_per_topic_and_stream(self):
        sub = self.subscriber()
        array = np.zeros((2, 2), np.float32)
        sequences = [0, 1, 2, 5, 6, 10]
        for sequence in sequences:
            self.pub.send_multipart(result_message("result/a/x", array, ["z", "x"], sequence))
        # another stream on the same topic has its own numbering: no gap from the interleaving
        for sequence in [0, 1]:
            self.pub.send_multipart(result_message("result/a/x", array, ["z", "x"], sequence, stream_id=3))
        gaps = {}
        for result in sub:
            gaps[(result.header.stream_id, result.header.input_sequence)] = result.gap
        self.assertEqual(gaps, {(0, 0): 0, (0, 1): 0, (0, 2): 0, (0, 5): 2, (0, 6): 0, (0, 10): 3,
                                (3, 0): 0, (3, 1): 0})
        self.assertEqual(sub.stats.missing, 5)
        self.assertEqual(sub.stats.gaps, 2)

    def test_malformed_messages_are_counted_and_good_ones_keep_flowing(self):
        sub = self.subscriber()
        good = result_message("result/a/x", np.ones((2, 3), np.float32), ["z", "x"], 0)
        self.pub.send_multipart(good[:2])                             # no payload part
        self.pub.send_multipart([good[0], b"\xff\xff\xff", good[2]])  # not a ResultHeader
        self.pub.send_multipart([good[0], good[1], good[2][:-4]])     # payload 4 bytes short
        self.pub.send_multipart([b"status", b"x", b"y"])              # status with a payload
        self.pub.send_multipart(good)
        results = list(sub)
        self.assertEqual(len(results), 1)
        np.testing.assert_array_equal(results[0].array, np.ones((2, 3), np.float32))
        self.assertEqual(sub.stats.malformed, 4)


class SubscriberConflates(FakeDaemon):
    def test_conflation_keeps_only_the_newest_per_topic_and_counts_the_skipped(self):
        sub = self.subscriber(conflate=True)
        count = 50
        topics = ["result/arfi/displacement", "result/arfi/quality"]
        last = {}
        for sequence in range(count):
            for topic in topics:
                array = random_array(self.rng, "float32", (4, 6))
                last[topic] = array
                self.pub.send_multipart(result_message(topic, array, ["depth", "location"], sequence))
        support.wait_until(lambda: sub.queued() == {t: count for t in topics}, "the whole burst at the subscriber")
        results = list(sub)
        self.assertEqual(sorted(r.topic for r in results), sorted(topics))
        for result in results:
            self.assertEqual(result.header.input_sequence, count - 1)
            np.testing.assert_array_equal(result.array, last[result.topic])
            self.assertEqual(result.skipped, count - 1)
            self.assertEqual(result.gap, 0, "skipped messages are not gaps")
        self.assertEqual(sub.stats.skipped, 2 * (count - 1))
        self.assertEqual(sub.stats.per_topic_skipped, {t: count - 1 for t in topics})
        self.assertEqual(sub.stats.missing, 0)

    def test_conflation_delivers_everything_when_the_reader_keeps_up(self):
        sub = self.subscriber(conflate=True)
        for sequence in range(5):
            self.pub.send_multipart(result_message("result/a/x", np.full((2,), sequence, np.float32), ["x"], sequence))
            result = sub.receive(2.0)
            self.assertEqual(result.header.input_sequence, sequence)
            self.assertEqual(result.skipped, 0)
        self.assertEqual(sub.stats.skipped, 0)

    def test_conflation_still_reports_a_gap_hidden_behind_skipped_messages(self):
        sub = self.subscriber(conflate=True)
        for sequence in [0, 1, 4, 5]:
            self.pub.send_multipart(result_message("result/a/x", np.zeros(2, np.float32), ["x"], sequence))
        support.wait_until(lambda: sub.queued() == {"result/a/x": 4}, "the 4 messages at the subscriber")
        (result,) = list(sub)
        self.assertEqual(result.header.input_sequence, 5)
        self.assertEqual(result.skipped, 3)
        self.assertEqual(result.gap, 2)


class PublisherSends(unittest.TestCase):
    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)
        self.context = zmq.Context()
        self.addCleanup(self.context.term)
        self.pull = self.context.socket(zmq.PULL)
        self.pull.setsockopt(zmq.LINGER, 0)
        self.addCleanup(self.pull.close)
        self.endpoint = self.folder.endpoint("ingest")
        self.pull.bind(self.endpoint)

    def receive_frame(self):
        self.assertTrue(self.pull.poll(2000), "no frame arrived")
        parts = self.pull.recv_multipart()
        self.assertEqual(len(parts), 2, "a frame is [FrameHeader][payload]")
        header = frame_pb2.FrameHeader()
        header.ParseFromString(parts[0])
        return header, parts[1]

    def test_frames_arrive_as_header_and_raw_little_endian_payload_numbered_per_stream(self):
        publisher = sonopipe.Publisher(self.endpoint, context=self.context)
        self.addCleanup(publisher.close)
        iq = random_array(self.rng, "int16", (3, 5, 7, 2))
        f_dem = np.linspace(5e6, 4e6, 7)
        publisher.send(iq, kind="iq", axes=["location", "ensemble", ("sample", 1 / 8.9e6, "s"), "iq"],
                       sampling_frequency_hz=8.9e6, demodulation_frequency_hz=5e6, center_frequency_hz=5.33e6,
                       attributes={"probe": "VF7-3"}, vectors={"f_dem_hz": (f_dem, "Hz")})
        rf = random_array(self.rng, "float32", (16, 8))
        publisher.send(rf, kind="rf", axes=["sample", "line"], stream_id=2)
        publisher.send(rf, kind="rf", axes=["sample", "line"], stream_id=2)

        header, payload = self.receive_frame()
        self.assertEqual(header.schema_version, 1)
        self.assertEqual(header.kind, frame_pb2.FRAME_KIND_IQ)
        self.assertEqual(header.element_type, common_pb2.ELEMENT_TYPE_INT16)
        self.assertEqual([(a.name, a.size) for a in header.axes],
                         [("location", 3), ("ensemble", 5), ("sample", 7), ("iq", 2)])
        self.assertAlmostEqual(header.axes[2].spacing, 1 / 8.9e6)
        self.assertEqual(header.sequence, 0)
        self.assertEqual(header.attributes["probe"], "VF7-3")
        self.assertEqual(header.vectors[0].name, "f_dem_hz")
        np.testing.assert_array_equal(header.vectors[0].values, f_dem)
        self.assertEqual(payload, iq.astype("<i2").tobytes())
        for expected_sequence in (0, 1):
            header, payload = self.receive_frame()
            self.assertEqual((header.stream_id, header.sequence), (2, expected_sequence))
            np.testing.assert_array_equal(np.frombuffer(payload, "<f4").reshape(16, 8), rf)

    def test_big_endian_and_non_contiguous_arrays_go_out_little_endian_c_ordered(self):
        publisher = sonopipe.Publisher(self.endpoint, context=self.context)
        self.addCleanup(publisher.close)
        array = random_array(self.rng, "float64", (6, 4)).astype(">f8").T  # big-endian, Fortran view
        publisher.send(array, kind="rf", axes=["sample", "line"])
        header, payload = self.receive_frame()
        self.assertEqual(header.element_type, common_pb2.ELEMENT_TYPE_FLOAT64)
        np.testing.assert_array_equal(np.frombuffer(payload, "<f8").reshape(4, 6), array)

    def test_inconsistent_arrays_are_refused_before_sending(self):
        publisher = sonopipe.Publisher(self.endpoint, context=self.context)
        self.addCleanup(publisher.close)
        with self.assertRaises(sonopipe.PayloadError):
            publisher.send(np.zeros((2, 3), np.float32), kind="rf", axes=["sample"])  # 1 name, 2 dims
        with self.assertRaises(sonopipe.PayloadError):
            publisher.send(np.zeros((2, 3), np.int64), kind="rf", axes=["sample", "line"])  # no int64 on the wire
        with self.assertRaises(ValueError):
            publisher.send(np.zeros((2, 3), np.float32), kind="ultrasound", axes=["sample", "line"])
        self.assertFalse(self.pull.poll(200), "nothing may have been sent")


if __name__ == "__main__":
    unittest.main()
