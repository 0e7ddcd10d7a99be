"""libsonopipe-client through ctypes (declared from its header, as MATLAB's loadlibrary declares it):
frames out to the real sonopiped and back through `convert` byte for byte, read by the Python
package's independent Subscriber and by the library's own; every header field decoded by Python's
protobuf; PUB mode; one sender shared by threads; refused shapes, names and NULL arguments; an
unreachable daemon; malformed results skipped; CURVE keys applied (plain libzmq CURVE servers)."""
import ctypes
import subprocess
import threading
import time
import unittest

import numpy as np
import zmq

import client_library
from daemon_fixture import IQ_SCALE, RF_SCALE, DaemonFixture, convert_reference
import sonopipe
from sonopipe.v1 import common_pb2, frame_pb2, result_pb2
import support


def handle():
    return ctypes.c_void_p()


class Client:
    """Small conveniences over the raw calls, each a direct sequence of library calls."""

    def __init__(self, test):
        self.test = test
        self.lib = test.lib

    def sender(self, endpoint, lossless=True, timeout_ms=None):
        sender = handle()
        self.test.ok(self.lib.sp_sender_open(endpoint.encode(), int(lossless), ctypes.byref(sender)))
        self.test.addCleanup(self.lib.sp_sender_close, sender)
        if timeout_ms is not None:
            self.test.ok(self.lib.sp_sender_set_send_timeout(sender, timeout_ms))
        return sender

    def frame(self, kind, element_type, axes, **fields):
        """axes: [(name, size, spacing, unit, origin)], outermost first."""
        frame = handle()
        self.test.ok(self.lib.sp_frame_create(ctypes.byref(frame)))
        self.test.addCleanup(self.lib.sp_frame_destroy, frame)
        self.test.ok(self.lib.sp_frame_set_kind(frame, kind.encode()))
        self.test.ok(self.lib.sp_frame_set_element_type(frame, element_type.encode()))
        for name, size, spacing, unit, origin in axes:
            self.test.ok(self.lib.sp_frame_add_axis(frame, name.encode(), size, spacing, unit.encode(), origin))
        for name, value in fields.items():
            self.test.ok(getattr(self.lib, "sp_frame_set_" + name)(frame, value))
        return frame

    def send(self, sender, frame, array):
        array = np.ascontiguousarray(array)
        return self.lib.sp_send(sender, frame, array.ctypes.data_as(ctypes.c_void_p), array.nbytes)

    def subscriber(self, endpoint, prefix="result/"):
        subscriber = handle()
        self.test.ok(self.lib.sp_subscriber_open(endpoint.encode(), prefix.encode(), ctypes.byref(subscriber)))
        self.test.addCleanup(self.lib.sp_subscriber_close, subscriber)
        return subscriber

    def next(self, subscriber, timeout_ms):
        """(status, result handle or None); the caller releases the result."""
        result = handle()
        status = self.lib.sp_subscriber_next(subscriber, timeout_ms, ctypes.byref(result))
        return status, (result if status == self.lib.SP_OK else None)

    def payload(self, result, dtype):
        data = self.lib.sp_result_data(result)
        return np.frombuffer(ctypes.string_at(data, self.lib.sp_result_bytes(result)), dtype=dtype)


def rf_axes(lines, samples):
    return [("line", lines, 0.3e-3, "m", -1.2e-3), ("sample", samples, 1 / 40e6, "s", 0.0)]


class ThroughTheDaemon(client_library.ClientLibraryTest, DaemonFixture):
    def setUp(self):
        DaemonFixture.setUp(self)
        self.client = Client(self)

    def test_frames_sent_through_the_library_come_back_from_convert_byte_for_byte(self):
        sub = self.subscriber(["result/"])  # the Python package's Subscriber: an independent reader
        sender = self.client.sender(self.ingest)
        frame = self.client.frame("rf", "float32", rf_axes(6, 50), stream_id=3)
        self.ok(self.lib.sp_frame_set_attribute(frame, b"probe", b"L12-3v"))
        frames = [self.rng.standard_normal((6, 50)).astype(np.float32) for _ in range(4)]
        for array in frames:
            self.ok(self.client.send(sender, frame, array))
        complex_frame = self.client.frame("iq", "complex64", [("line", 5, 0, "", 0), ("sample", 40, 0, "", 0)])
        iq = (self.rng.standard_normal((5, 40)) + 1j * self.rng.standard_normal((5, 40))).astype(np.complex64)
        self.ok(self.client.send(sender, complex_frame, iq))
        results = self.results(sub, 5)
        rf = sorted((r for r in results if r.topic == "result/rf/converted"), key=lambda r: r.header.input_sequence)
        self.assertEqual([r.header.input_sequence for r in rf], [0, 1, 2, 3])  # numbered by the library
        for result, array in zip(rf, frames):
            self.assertEqual(result.header.stream_id, 3)
            self.assertEqual(result.header.attributes["probe"], "L12-3v")
            self.assertEqual(result.array.tobytes(), convert_reference(array, RF_SCALE).tobytes())
        (iq_result,) = [r for r in results if r.topic == "result/iq/converted"]
        # complex64 is only rescaled: both float32 halves times float32(scale), exactly
        expected = (np.float32(IQ_SCALE) * iq.view(np.float32)).view(np.complex64)
        self.assertEqual(iq_result.array.tobytes(), expected.tobytes())
        self.assertEqual(self.lib.sp_sender_frames_sent(sender), 5)
        status = self.control.status()
        self.assertEqual(status.frames_rejected, 0)

    def test_the_library_subscriber_reads_results_sent_by_the_python_publisher(self):
        subscriber = self.client.subscriber(self.publish, "result/rf/")
        publisher = self.publisher()  # the Python package's Publisher: an independent sender
        # ZeroMQ's slow joiner: send warm-up frames (stream 9) until one comes back.
        warm_up = np.zeros((2, 8), np.float32)
        for _ in range(100):
            publisher.send(warm_up, kind="rf", axes=["line", "sample"], stream_id=9)
            status, result = self.client.next(subscriber, 200)
            if result:
                self.lib.sp_result_release(result)
                break
        else:
            self.fail("no warm-up result came back")
        array = self.rng.integers(-32768, 32767, size=(4, 30), endpoint=True).astype(np.int16)
        publisher.send(array, kind="rf", axes=[("line", 0.2e-3, "m", 0.01), ("sample", 2.5e-8, "s")], stream_id=1,
                       acquisition_time_ns=1234567890123, attributes={"probe": "P4-2v"})
        publisher.send(warm_up, kind="iq", axes=["line", "sample"], stream_id=1)  # another topic: filtered out
        for _ in range(100):
            status, result = self.client.next(subscriber, 200)
            if result and self.lib.sp_result_stream_id(result) == 1:
                break
            self.lib.sp_result_release(result)
        else:
            self.fail(f"the result did not come; daemon log:\n{self.daemon.log_text()}")
        self.addCleanup(self.lib.sp_result_release, result)
        lib = self.lib
        self.assertEqual(lib.sp_result_topic(result), b"result/rf/converted")
        self.assertEqual(lib.sp_result_pipeline(result), b"rf")
        self.assertEqual(lib.sp_result_output(result), b"converted")
        self.assertEqual(lib.sp_result_input_sequence(result), 0)
        self.assertEqual(lib.sp_result_acquisition_time_ns(result), 1234567890123)
        self.assertEqual(lib.sp_result_input_kind(result), b"rf")
        self.assertEqual(lib.sp_result_element_type(result), b"float32")
        self.assertEqual(lib.sp_result_element_size(result), 4)
        self.assertEqual(lib.sp_result_backend(result), b"cpu")
        self.assertEqual(lib.sp_result_attribute(result, b"probe"), b"P4-2v")
        self.assertIsNone(lib.sp_result_attribute(result, b"absent"))
        self.assertEqual(lib.sp_result_axis_count(result), 2)
        self.assertEqual([lib.sp_result_axis_name(result, i) for i in range(2)], [b"line", b"sample"])
        self.assertEqual([lib.sp_result_axis_size(result, i) for i in range(2)], [4, 30])
        self.assertEqual(lib.sp_result_axis_spacing(result, 0), 0.2e-3)
        self.assertEqual(lib.sp_result_axis_origin(result, 0), 0.01)
        self.assertEqual(lib.sp_result_axis_unit(result, 1), b"s")
        self.assertEqual(lib.sp_result_axis_name(result, 2), b"")  # out of range: neutral, no crash
        values = self.client.payload(result, np.float32).reshape(4, 30)
        self.assertEqual(values.tobytes(), convert_reference(array, RF_SCALE).tobytes())
        self.assertEqual(lib.sp_subscriber_skipped(subscriber), 0)


class AgainstPlainSockets(client_library.ClientLibraryTest):
    """Plain pyzmq sockets stand in for the daemon: what goes over the wire, decoded independently."""

    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)
        self.context = zmq.Context()
        self.addCleanup(self.context.term)
        self.client = Client(self)

    def socket(self, kind, endpoint, **options):
        socket = self.context.socket(kind)
        socket.setsockopt(zmq.LINGER, 0)
        for name, value in options.items():
            socket.setsockopt(getattr(zmq, name.upper()), value)
        socket.bind(endpoint)
        self.addCleanup(socket.close)
        return socket

    def receive_frame(self, socket, timeout_ms=10000):
        self.assertTrue(socket.poll(timeout_ms), "no frame arrived")
        header_bytes, payload = socket.recv_multipart()
        header = frame_pb2.FrameHeader()
        header.ParseFromString(header_bytes)
        return header, payload

    def test_every_header_field_is_on_the_wire_as_protobuf_reads_it(self):
        endpoint = self.folder.endpoint("ingest")
        pull = self.socket(zmq.PULL, endpoint)
        sender = self.client.sender(endpoint)
        frame = self.client.frame("channel_rf", "int16",
                                  [("transmit", 3, 0.0, "", 0.0), ("element", 4, 0.3e-3, "m", -0.45e-3),
                                   ("sample", 100, 1 / 31.25e6, "s", 2e-6)],
                                  stream_id=5, sampling_frequency=ctypes.c_double(31.25e6),
                                  center_frequency=ctypes.c_double(7.8e6), demodulation_frequency=ctypes.c_double(0.0),
                                  speed_of_sound=ctypes.c_double(1480.0))
        x = np.array([-0.45e-3, -0.15e-3, 0.15e-3, 0.45e-3])
        self.ok(self.lib.sp_frame_set_vector(frame, b"element_x_m", x.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
                                             4, b"m"))
        self.ok(self.lib.sp_frame_set_vector(frame, b"transmit_angle_rad", (ctypes.c_double * 3)(-0.1, 0, 0.1), 3, None))
        self.ok(self.lib.sp_frame_set_attribute(frame, b"probe", b"L11-5v"))
        self.ok(self.lib.sp_frame_set_attribute(frame, b"probe", b"L22-14v"))  # replaces
        data = self.rng.integers(-32768, 32767, size=(3, 4, 100), endpoint=True).astype(np.int16)
        before = time.time_ns()
        self.ok(self.client.send(sender, frame, data))
        after = time.time_ns()
        header, payload = self.receive_frame(pull)
        self.assertEqual(header.schema_version, common_pb2.SCHEMA_VERSION_CURRENT)
        self.assertEqual(header.kind, frame_pb2.FRAME_KIND_CHANNEL_RF)
        self.assertEqual(header.element_type, common_pb2.ELEMENT_TYPE_INT16)
        self.assertEqual([(a.name, a.size, a.spacing, a.unit, a.origin) for a in header.axes],
                         [("transmit", 3, 0.0, "", 0.0), ("element", 4, 0.3e-3, "m", -0.45e-3),
                          ("sample", 100, 1 / 31.25e6, "s", 2e-6)])
        self.assertEqual((header.stream_id, header.sequence), (5, 0))
        self.assertTrue(before <= header.acquisition_time_ns <= after, "stamped at send")
        self.assertEqual(header.sampling_frequency_hz, 31.25e6)
        self.assertEqual(header.center_frequency_hz, 7.8e6)
        self.assertEqual(header.demodulation_frequency_hz, 0.0)
        self.assertEqual(header.speed_of_sound_m_per_s, 1480.0)
        vectors = {v.name: (list(v.values), v.unit) for v in header.vectors}
        self.assertEqual(vectors, {"element_x_m": (list(x), "m"), "transmit_angle_rad": ([-0.1, 0.0, 0.1], "")})
        self.assertEqual(dict(header.attributes), {"probe": "L22-14v"})
        self.assertEqual(payload, data.tobytes())
        # A fixed acquisition time and sequence number are sent as given; numbering goes on after it.
        self.ok(self.lib.sp_frame_set_acquisition_time_ns(frame, 1700000000000000000))
        self.ok(self.lib.sp_frame_set_sequence(frame, 1000))
        self.ok(self.client.send(sender, frame, data))
        self.ok(self.lib.sp_frame_set_auto_sequence(frame))
        self.ok(self.client.send(sender, frame, data))
        sequences = []
        for _ in range(2):
            header, _ = self.receive_frame(pull)
            sequences.append(header.sequence)
            self.assertEqual(header.acquisition_time_ns, 1700000000000000000)
        self.assertEqual(sequences, [1000, 1001])

    def test_a_live_pub_sender_never_waits_and_reaches_a_sub_ingest(self):
        endpoint = self.folder.endpoint("ingest")
        sender = self.client.sender(endpoint, lossless=False)
        frame = self.client.frame("iq", "complex64", [("line", 2, 0, "", 0), ("sample", 8, 0, "", 0)])
        data = np.zeros((2, 8), np.complex64)
        # Nobody listens: ZeroMQ drops the frame; the send neither waits nor fails.
        self.ok(self.client.send(sender, frame, data))
        sub = self.socket(zmq.SUB, endpoint, subscribe=b"")
        for _ in range(200):  # until the subscription has reached the sender
            self.ok(self.client.send(sender, frame, data))
            if sub.poll(50):
                break
        header_bytes, payload = sub.recv_multipart()
        header = frame_pb2.FrameHeader.FromString(header_bytes)
        self.assertEqual(header.kind, frame_pb2.FRAME_KIND_IQ)
        self.assertEqual(payload, data.tobytes())

    def test_threads_sharing_one_sender_send_every_frame_whole_and_numbered_once(self):
        endpoint = self.folder.endpoint("ingest")
        pull = self.socket(zmq.PULL, endpoint, rcvhwm=0)
        sender = self.client.sender(endpoint)
        threads, per_thread = 4, 50
        errors = []

        def send_frames(thread):
            frame = handle()  # a frame per thread: frames are not locked, senders are
            if self.lib.sp_frame_create(ctypes.byref(frame)) != 0:
                errors.append("create")
                return
            try:
                self.lib.sp_frame_add_axis(frame, b"value", 64, 0.0, None, 0.0)
                for index in range(per_thread):
                    values = np.full(64, thread * 1000 + index, np.float32)
                    status = self.lib.sp_send(sender, frame, values.ctypes.data_as(ctypes.c_void_p), values.nbytes)
                    if status != 0:
                        errors.append(self.lib.sp_last_error().decode())  # per thread
            finally:
                self.lib.sp_frame_destroy(frame)

        workers = [threading.Thread(target=send_frames, args=(t,)) for t in range(threads)]
        for worker in workers:
            worker.start()
        received = [self.receive_frame(pull) for _ in range(threads * per_thread)]
        for worker in workers:
            worker.join()
        self.assertEqual(errors, [])
        self.assertEqual(sorted(h.sequence for h, _ in received), list(range(threads * per_thread)))
        values = sorted(np.frombuffer(p, np.float32)[0] for _, p in received)
        self.assertEqual(values, sorted(t * 1000 + i for t in range(threads) for i in range(per_thread)))
        for _, payload in received:  # whole: every value of a frame is its own
            array = np.frombuffer(payload, np.float32)
            self.assertTrue(np.all(array == array[0]))

    def test_the_subscriber_skips_what_is_not_a_result_and_counts_it(self):
        endpoint = self.folder.endpoint("publish")
        pub = self.socket(zmq.PUB, endpoint, sndhwm=0)
        subscriber = self.client.subscriber(endpoint, "")  # "" = every result

        def result_message(sequence, payload_bytes=None):
            header = result_pb2.ResultHeader(schema_version=1, pipeline="p", output="o", input_sequence=sequence,
                                             element_type=common_pb2.ELEMENT_TYPE_FLOAT32)
            header.axes.add(name="value", size=3)
            header.vectors.add(name="depth_m", values=[0.01, 0.02], unit="m")
            payload = np.arange(3, dtype=np.float32).tobytes() if payload_bytes is None else payload_bytes
            return [b"result/p/o", header.SerializeToString(), payload]

        for _ in range(200):  # slow joiner: probes until one arrives
            pub.send_multipart(result_message(0))
            status, result = self.client.next(subscriber, 50)
            if result:
                self.lib.sp_result_release(result)
                break
        while True:  # drain the probes still in flight
            status, result = self.client.next(subscriber, 200)
            if not result:
                break
            self.lib.sp_result_release(result)
        pub.send_multipart([b"status", b"heartbeat"])  # not subscribed ("result/" only): never seen
        pub.send_multipart([b"result/p/o", b"two parts"])
        pub.send_multipart([b"result/p/o", b"\xff\xff not protobuf", b""])
        pub.send_multipart(result_message(1, payload_bytes=b"\0" * 8))  # 3 float32 need 12 bytes
        pub.send_multipart(result_message(2))
        status, result = self.client.next(subscriber, 10000)
        self.ok(status)
        self.addCleanup(self.lib.sp_result_release, result)
        self.assertEqual(self.lib.sp_result_input_sequence(result), 2)
        self.assertEqual(self.client.payload(result, np.float32).tolist(), [0.0, 1.0, 2.0])
        self.assertEqual(self.lib.sp_subscriber_skipped(subscriber), 3)
        self.assertEqual(self.lib.sp_result_vector_length(result, b"depth_m"), 2)
        values = self.lib.sp_result_vector_values(result, b"depth_m")
        self.assertEqual([values[0], values[1]], [0.01, 0.02])
        self.assertEqual(self.lib.sp_result_vector_length(result, b"absent"), -1)
        self.assertFalse(self.lib.sp_result_vector_values(result, b"absent"))  # NULL
        status, none = self.client.next(subscriber, 0)
        self.assertEqual(status, self.lib.SP_ERROR_TIMEOUT)
        self.assertIn("no result within 0 ms", self.last_error())


class TheLibraryFile(client_library.ClientLibraryTest):
    def test_it_exports_exactly_the_functions_of_its_header(self):
        path = support.tool("client-library")
        listing = subprocess.run(["nm", "-D", "--defined-only", path], check=True, capture_output=True, text=True)
        exported = {line.split()[-1].split("@")[0] for line in listing.stdout.splitlines() if line.strip()}
        self.assertEqual(exported, set(self.lib.prototypes))  # nothing of the C++ inside leaks out

    def test_it_names_its_version_and_the_wire_schema(self):
        self.assertRegex(self.lib.sp_version().decode(), r"^\d+\.\d+\.\d+$")
        self.assertEqual(self.lib.sp_schema_version(), common_pb2.SCHEMA_VERSION_CURRENT)


class RefusedCalls(client_library.ClientLibraryTest):
    def setUp(self):
        self.folder = support.TemporaryFolder(self)
        self.client = Client(self)

    def test_a_payload_that_disagrees_with_the_shape_is_refused_before_the_wire(self):
        sender = self.client.sender(self.folder.endpoint("nobody"), timeout_ms=0)
        frame = self.client.frame("rf", "int16", rf_axes(4, 10))
        for wrong in (np.zeros(79, np.int16), np.zeros(81, np.int16), np.zeros(40, np.float32)):
            self.assertEqual(self.client.send(sender, frame, wrong), self.lib.SP_ERROR_SIZE_MISMATCH)
            self.assertIn(f"payload has {wrong.nbytes} bytes, shape int16[line=4, sample=10] needs 80",
                          self.last_error())
        self.assertEqual(self.lib.sp_sender_frames_sent(sender), 0)
        bytes_needed = ctypes.c_uint64()
        self.ok(self.lib.sp_frame_payload_bytes(frame, ctypes.byref(bytes_needed)))
        self.assertEqual(bytes_needed.value, 80)

    def test_unknown_element_types_and_kinds_are_refused_by_name(self):
        frame = self.client.frame("rf", "int16", [])
        self.assertEqual(self.lib.sp_frame_set_element_type(frame, b"int12"), self.lib.SP_ERROR_ARGUMENT)
        self.assertEqual(self.last_error(), "sp_frame_set_element_type: element type 'int12' is not one of "
                                            "int16, float16, float32, complex64, float64, uint8")
        self.assertEqual(self.lib.sp_frame_set_kind(frame, b"Doppler"), self.lib.SP_ERROR_ARGUMENT)
        self.assertIn("'Doppler'", self.last_error())

    def test_null_arguments_give_an_argument_error_naming_them(self):
        lib = self.lib
        out = handle()
        self.assertEqual(lib.sp_sender_open(None, 1, ctypes.byref(out)), lib.SP_ERROR_ARGUMENT)
        self.assertEqual(self.last_error(), "sp_sender_open: endpoint is NULL")
        self.assertEqual(lib.sp_send(None, None, None, 0), lib.SP_ERROR_ARGUMENT)
        self.assertEqual(self.last_error(), "sp_send: sender is NULL")
        self.assertEqual(lib.sp_frame_set_attribute(None, b"k", b"v"), lib.SP_ERROR_ARGUMENT)
        self.assertEqual(lib.sp_subscriber_open(b"ipc://x", None, None), lib.SP_ERROR_ARGUMENT)
        self.assertEqual(self.last_error(), "sp_subscriber_open: subscriber is NULL")
        self.assertEqual(lib.sp_subscriber_next(None, 0, None), lib.SP_ERROR_ARGUMENT)
        self.assertEqual(lib.sp_result_pipeline(None), b"")
        self.assertEqual(lib.sp_result_vector_length(None, b"v"), -1)
        self.ok(lib.sp_sender_close(None))
        self.assertEqual(self.last_error(), "")  # a call that succeeded clears the message

    def test_a_lossless_send_with_no_daemon_times_out_and_sends_nothing(self):
        sender = self.client.sender(self.folder.endpoint("nobody"), timeout_ms=100)
        frame = self.client.frame("rf", "float32", rf_axes(2, 4))
        self.assertEqual(self.client.send(sender, frame, np.zeros((2, 4), np.float32)), self.lib.SP_ERROR_TIMEOUT)
        self.assertEqual(self.last_error(), "sp_send: no daemon took the frame within the send timeout (100 ms): "
                                            "none is connected, or its queue is full; nothing was sent")
        next_sequence = ctypes.c_uint64(99)
        self.ok(self.lib.sp_sender_next_sequence(sender, 0, ctypes.byref(next_sequence)))
        self.assertEqual(next_sequence.value, 0)  # the number was not used up

    def test_malformed_endpoints_are_refused_at_connect(self):
        out = handle()
        self.assertEqual(self.lib.sp_sender_open(b"tcp://", 1, ctypes.byref(out)), self.lib.SP_ERROR_SOCKET)
        self.assertIsNone(out.value)
        self.assertIn("cannot connect to 'tcp://'", self.last_error())
        self.assertEqual(self.lib.sp_subscriber_open(b"nowhere", None, ctypes.byref(out)), self.lib.SP_ERROR_SOCKET)


class CurveKeys(AgainstPlainSockets):
    """CURVE keys reach libzmq: a plain CURVE server accepts the right ones and nothing else."""

    def setUp(self):
        super().setUp()
        self.server_public, self.server_secret = zmq.curve_keypair()
        self.client_public, self.client_secret = zmq.curve_keypair()

    def curve_server(self, kind, endpoint, **options):
        return self.socket(kind, endpoint, curve_server=1, curve_secretkey=self.server_secret, **options)

    def curve_sender(self, endpoint, server_public):
        sender = handle()
        self.ok(self.lib.sp_sender_create(1, ctypes.byref(sender)))
        self.addCleanup(self.lib.sp_sender_close, sender)
        self.ok(self.lib.sp_sender_set_curve(sender, server_public, self.client_public, self.client_secret))
        self.ok(self.lib.sp_sender_set_send_timeout(sender, 300))
        self.ok(self.lib.sp_sender_connect(sender, endpoint.encode()))
        return sender

    def test_a_sender_with_the_server_key_is_heard_and_one_with_another_key_is_not(self):
        endpoint = self.folder.endpoint("curve-ingest")
        pull = self.curve_server(zmq.PULL, endpoint)
        frame = self.client.frame("rf", "float32", rf_axes(2, 4))
        data = self.rng.standard_normal((2, 4)).astype(np.float32)
        wrong_public, _ = zmq.curve_keypair()
        wrong = self.curve_sender(endpoint, wrong_public)
        # The handshake fails, so no connection is ever ready: the lossless send waits and gives up.
        self.assertEqual(self.client.send(wrong, frame, data), self.lib.SP_ERROR_TIMEOUT)
        plain = self.client.sender(endpoint, timeout_ms=300)
        self.assertEqual(self.client.send(plain, frame, data), self.lib.SP_ERROR_TIMEOUT)
        right = self.curve_sender(endpoint, self.server_public)
        status = self.lib.SP_ERROR_TIMEOUT
        for _ in range(30):  # the handshake may take longer than one timeout on a loaded machine
            status = self.client.send(right, frame, data)
            if status != self.lib.SP_ERROR_TIMEOUT:
                break
        self.ok(status)
        header, payload = self.receive_frame(pull)
        self.assertEqual(payload, data.tobytes())
        self.assertFalse(pull.poll(100), "a frame without the right key got through")

    def test_a_subscriber_with_the_server_key_reads_results(self):
        endpoint = self.folder.endpoint("curve-publish")
        pub = self.curve_server(zmq.PUB, endpoint)
        subscriber = handle()
        self.ok(self.lib.sp_subscriber_create(ctypes.byref(subscriber)))
        self.addCleanup(self.lib.sp_subscriber_close, subscriber)
        self.ok(self.lib.sp_subscriber_set_curve(subscriber, self.server_public, self.client_public, self.client_secret))
        self.ok(self.lib.sp_subscriber_connect(subscriber, endpoint.encode(), b"result/"))
        header = result_pb2.ResultHeader(schema_version=1, pipeline="p", output="o",
                                         element_type=common_pb2.ELEMENT_TYPE_UINT8)
        header.axes.add(name="value", size=2)
        for _ in range(200):
            pub.send_multipart([b"result/p/o", header.SerializeToString(), b"\x07\x09"])
            status, result = self.client.next(subscriber, 50)
            if result:
                break
        self.ok(status)
        self.addCleanup(self.lib.sp_result_release, result)
        self.assertEqual(self.client.payload(result, np.uint8).tolist(), [7, 9])

    def test_keys_are_checked_and_must_come_before_connect(self):
        sender = self.client.sender(self.folder.endpoint("x"))
        self.assertEqual(self.lib.sp_sender_set_curve(sender, self.server_public, self.client_public, self.client_secret),
                         self.lib.SP_ERROR_STATE)
        self.assertEqual(self.last_error(), "sp_sender_set_curve: CURVE keys must be set before sp_sender_connect")
        fresh = handle()
        self.ok(self.lib.sp_sender_create(1, ctypes.byref(fresh)))
        self.addCleanup(self.lib.sp_sender_close, fresh)
        self.assertEqual(self.lib.sp_sender_set_curve(fresh, b"too short", self.client_public, self.client_secret),
                         self.lib.SP_ERROR_ARGUMENT)
        self.assertEqual(self.last_error(), "sp_sender_set_curve: server_public_key is not a 40-character Z85 CURVE key")
        self.assertEqual(self.lib.sp_sender_set_curve(fresh, self.server_public, self.client_public, b"~" * 40),
                         self.lib.SP_ERROR_ARGUMENT)

    # The plain-socket tests of the base class are not repeated here.
    test_every_header_field_is_on_the_wire_as_protobuf_reads_it = None
    test_a_live_pub_sender_never_waits_and_reaches_a_sub_ingest = None
    test_threads_sharing_one_sender_send_every_frame_whole_and_numbered_once = None
    test_the_subscriber_skips_what_is_not_a_result_and_counts_it = None


if __name__ == "__main__":
    unittest.main()
