"""The MATLAB wrapper (tools/clients/matlab) held to its exact call sequence without MATLAB:
matlab_mirror.py has a Python twin of every MATLAB function that calls the library, and these tests
check (1) the MATLAB text itself: every calllib names a header function with the header's number
of arguments and casts each number to the declared C type; (2) that the twins make the MATLAB
text's calls in its order (every recorded sequence is a subsequence of the function's calllib
sites, and together the tests reach every site); (3) what the twins do, end to end: the Verasonics
external functions' RcvData and IQ frames through the real sonopiped and back (Python package's
Subscriber and the SonopipeSubscriber twin), every header field they set, errors, CURVE."""
import os
import re
from types import SimpleNamespace
import unittest

import numpy as np
import zmq

import client_library
from daemon_fixture import DaemonFixture, convert_reference
import matlab_mirror as mirror
import sonopipe
from sonopipe.v1 import common_pb2, frame_pb2, result_pb2
import support

SCALE = 0.37  # each pipeline one `convert`: float32(scale) * float32(value), reproduced exactly below

CONFIG = """
ingest: {{endpoint: "{ingest}", pattern: pull}}
publish: {{endpoint: "{publish}", status_interval_s: 0.2}}
control: {{endpoint: "{control}"}}
backend: cpu
queue_depth: 16
overflow: block
cpu_threads: 2
pipelines:
  - name: channel
    match: {{kinds: [channel_rf]}}
    stages: [{{type: convert, params: {{scale: {scale}}}}}]
  - name: iq
    match: {{kinds: [iq]}}
    stages: [{{type: convert, params: {{scale: {scale}}}}}]
"""

SOURCE = mirror.MatlabSource()
RECORDED = []  # (MATLAB function, invocation, library function) of every test, checked against the text at the end


def collapse(names):
    """Consecutive repeats of one call (a loop over one call site) counted once."""
    return [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]


def is_subsequence(part, whole):
    it = iter(whole)
    return all(any(n == w for w in it) for n in part)


def tearDownModule():
    """Together the tests made every calllib of the MATLAB text, each in the text's order."""
    by_function = {}
    for recording in RECORDED:
        for function, _, name in recording:
            by_function.setdefault(function, []).append(name)
    for function, sites in SOURCE.functions.items():
        if sites:
            missing = {name for name, _, _ in sites} - set(by_function.get(function, []))
            if missing:
                raise AssertionError(f"the twin of {function} never made {sorted(missing)}")


class Mirror(client_library.ClientLibraryTest):
    def matlab(self, workspace=None):
        matlab = mirror.Matlab(self.lib, workspace)
        self.addCleanup(self.check_order, matlab)
        RECORDED.append(matlab.calls)
        return matlab

    def check_order(self, matlab):
        per_invocation = {}
        for function, invocation, name in matlab.calls:
            self.assertIn(function, SOURCE.functions, f"{name} called outside a MATLAB twin")
            per_invocation.setdefault((function, invocation), []).append(name)
        for (function, _), names in per_invocation.items():
            sites = [name for name, _, _ in SOURCE.functions[function]]
            self.assertTrue(is_subsequence(collapse(names), sites),
                            f"{function}: the twin called {collapse(names)}, the MATLAB text has {sites}")

    def use_ingest(self, endpoint):
        previous = os.environ.get("SONOPIPE_INGEST")
        os.environ["SONOPIPE_INGEST"] = endpoint
        self.addCleanup(lambda: os.environ.__setitem__("SONOPIPE_INGEST", previous) if previous is not None
                        else os.environ.pop("SONOPIPE_INGEST", None))


class TheMatlabText(client_library.ClientLibraryTest):
    # A number the MATLAB code passes without a cast, and why it already has the declared class.
    UNCAST = {("sp_send", "bytes"): "uint64 from sonopipe_payload",
              **{(f"sp_result_axis_{field}", "i"): "uint32 indices" for field in ("name", "size", "spacing", "unit", "origin")}}

    def test_every_calllib_names_a_header_function_with_its_arguments_and_casts(self):
        sites = [(function, site) for function, calls in SOURCE.functions.items() for site in calls]
        self.assertGreater(len(sites), 40)
        for function, (name, arguments, library) in sites:
            where = f"{function}: calllib {name}"
            self.assertEqual(library, "'sonopipe_client'", where)
            self.assertIn(name, self.lib.prototypes, where)
            _, parameters = self.lib.prototypes[name]
            self.assertEqual(len(arguments), len(parameters), f"{where}: {arguments} for {parameters}")
            for argument, declared in zip(arguments, parameters):
                cast = mirror.MATLAB_CASTS.get(re.sub(r"\s*\*", "*", declared))
                if cast is None:
                    continue
                if (name, argument) in self.UNCAST:
                    continue
                self.assertTrue(argument.startswith(cast + "("), f"{where}: '{argument}' for {declared} is not {cast}(...)")

    def test_every_matlab_function_that_calls_the_library_has_a_twin(self):
        twins = {getattr(value, "mirrors", None) for value in vars(mirror).values()}
        twins |= {getattr(member, "mirrors", None) for value in vars(mirror).values() if isinstance(value, type)
                  for member in vars(value).values()}
        calling = {function for function, sites in SOURCE.functions.items() if sites}
        self.assertEqual(calling - twins, set())
        self.assertEqual(self.lib.SP_ERROR_TIMEOUT, -4)  # SonopipeSubscriber.next compares with -4
        self.assertIn("status == -4", SOURCE.text["SonopipeSubscriber"])


def verasonics_workspace(rng):
    """The setup structures of a small Vantage script: 3 plane-wave acquisitions of 48 samples per
    frame on 8 channels (connector permuted), two frames in the receive buffer."""
    acquisitions, samples, channels = 3, 48, 8
    receive = [SimpleNamespace(bufnum=1, framenum=frame, startSample=1 + (frame - 1) * 200 + a * samples,
                               endSample=(frame - 1) * 200 + (a + 1) * samples, decimSampleRate=20.8333,
                               startDepth=2.0)
               for frame in (1, 2) for a in range(acquisitions)]
    steer = [-0.1, 0.0, 0.1]
    tx = [SimpleNamespace(Steer=np.array([angle, 0.0])) for angle in steer]
    # Event k receives into Receive(rcv) with TX(tx); a processing event (rcv 0) in between.
    events = [SimpleNamespace(rcv=0, tx=0)] + [SimpleNamespace(rcv=i + 1, tx=(i % 3) + 1) for i in range(6)]
    element_position = np.zeros((channels, 5))
    element_position[:, 0] = (np.arange(channels) - 3.5) * 1.0  # wavelengths
    trans = SimpleNamespace(frequency=5.208, ElementPos=element_position, lensCorrection=0.7,
                            Connector=rng.permutation(channels) + 1)
    resource = SimpleNamespace(Parameters=SimpleNamespace(speedOfSound=1540.0))
    pdata = [SimpleNamespace(PDelta=np.array([0.5, 0.0, 0.25]), Origin=np.array([-10.0, 0.0, 3.0]))]
    return {"Trans": trans, "Receive": receive, "TX": tx, "Event": events, "Resource": resource, "PData": pdata}, \
        (acquisitions, samples, channels, steer)


class ThroughTheDaemon(Mirror, DaemonFixture):
    def setUp(self):
        self.rng = support.random_generator(self)
        folder = support.TemporaryFolder(self)
        self.ingest, self.publish, self.control_endpoint = (folder.endpoint(n) for n in ("ingest", "publish", "control"))
        config = folder.file("daemon.yaml")
        with open(config, "w") as f:
            f.write(CONFIG.format(ingest=self.ingest, publish=self.publish, control=self.control_endpoint, scale=SCALE))
        self.daemon = support.Daemon(self, config)
        self.control = sonopipe.Control(self.control_endpoint, timeout_s=2.0)
        self.wait_until_answering()
        self.use_ingest(self.ingest)

    def test_the_verasonics_rcvdata_function_sends_each_frame_as_channel_rf_transmit_element_sample(self):
        workspace, (acquisitions, samples, channels, _) = verasonics_workspace(self.rng)
        matlab = self.matlab(workspace)
        sub = self.subscriber(["result/channel/"])
        external = mirror.VerasonicsExternal(matlab)
        frames = []
        for _ in range(2):
            rdata = np.asfortranarray(self.rng.integers(-32768, 32767, size=(400, channels), endpoint=True)
                                      .astype(np.int16))  # more rows than the frame's acquisitions use
            external(rdata)
            frames.append(rdata)
        external.sender.delete()
        results = self.results(sub, 2)
        connector = workspace["Trans"].Connector
        for result, rdata in zip(sorted(results, key=lambda r: r.header.input_sequence), frames):
            # Independent of the twin's reshape: [t, e, s] = RData(Receive(t).startSample + s, Connector(e))
            expected = np.empty((acquisitions, channels, samples), np.int16)
            for t in range(acquisitions):
                start = workspace["Receive"][t].startSample - 1
                for e in range(channels):
                    expected[t, e] = rdata[start:start + samples, connector[e] - 1]
            self.assertEqual(result.axis_names, ("transmit", "element", "sample"))
            self.assertEqual(result.array.tobytes(), convert_reference(expected, SCALE).tobytes())
            sample = result.axis("sample")
            self.assertAlmostEqual(sample.spacing, 1 / 20.8333e6, delta=1e-20)  # 1/f_s, computed once each side
            self.assertAlmostEqual(sample.origin, 2 * 2.0 / 5.208e6, delta=1e-20)  # 2 startDepth / f_c
            self.assertEqual(result.header.attributes["source"], "verasonics")
        self.assertEqual([r.header.input_sequence for r in sorted(results, key=lambda r: r.header.input_sequence)], [0, 1])

    def test_the_verasonics_iq_function_and_the_subscriber_twin_round_trip_complex_frames(self):
        workspace, _ = verasonics_workspace(self.rng)
        matlab = self.matlab(workspace)
        subscriber = mirror.SonopipeSubscriber(matlab, self.publish, "result/iq/")
        self.addCleanup(subscriber.delete)
        external = mirror.VerasonicsExternalIq(matlab)
        # Slow joiner: frames until a result comes back through the twin.
        i_data = self.rng.standard_normal((20, 6))
        q_data = self.rng.standard_normal((20, 6))
        result = None
        for _ in range(100):
            external(i_data, q_data)
            result = subscriber.next(200, ["source", "absent"])
            if result is not None:
                break
        self.assertIsNotNone(result, self.daemon.log_text())
        self.assertEqual((result.pipeline, result.output, result.inputKind, result.elementType),
                         ("iq", "converted", "iq", "complex64"))
        self.assertEqual([(a.name, a.size) for a in result.axes], [("line", 6.0), ("sample", 20.0)])
        wavelength = 1540.0 / 5.208e6
        self.assertEqual(result.axes[0].spacing, 0.5 * wavelength)
        self.assertEqual(result.axes[1].origin, 3.0 * wavelength)
        self.assertEqual(result.attributes, {"source": "verasonics", "absent": ""})
        # MATLAB's [z, x] array comes back in MATLAB's shape, each part float32(scale) * float32(value)
        iq = (i_data.astype(np.float32) + 1j * q_data.astype(np.float32)).astype(np.complex64)
        expected = (np.float32(SCALE) * iq.view(np.float32)).view(np.complex64)
        self.assertEqual(result.data.shape, (20, 6, 1))
        self.assertEqual(result.data[:, :, 0].astype(np.complex64).tobytes(order="F"), expected.tobytes(order="F"))
        self.assertIsNone(subscriber.next(0))  # SP_ERROR_TIMEOUT -> []
        external.sender.delete()


class AgainstPlainSockets(Mirror):
    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)
        self.context = zmq.Context()
        self.addCleanup(self.context.term)

    def bound(self, kind, name, **options):
        socket = self.context.socket(kind)
        socket.setsockopt(zmq.LINGER, 0)
        for option, value in options.items():
            socket.setsockopt(getattr(zmq, option.upper()), value)
        endpoint = self.folder.endpoint(name)
        socket.bind(endpoint)
        self.addCleanup(socket.close)
        return socket, endpoint

    def receive(self, pull):
        self.assertTrue(pull.poll(10000), "no frame arrived")
        header_bytes, payload = pull.recv_multipart()
        return frame_pb2.FrameHeader.FromString(header_bytes), payload

    def test_the_rcvdata_frame_carries_probe_and_transmit_geometry_from_the_setup_structures(self):
        workspace, (acquisitions, samples, channels, steer) = verasonics_workspace(self.rng)
        matlab = self.matlab(workspace)
        pull, endpoint = self.bound(zmq.PULL, "ingest")
        self.use_ingest(endpoint)
        external = mirror.VerasonicsExternal(matlab)
        external(np.asfortranarray(np.zeros((400, channels), np.int16)))
        external.sender.delete()
        header, payload = self.receive(pull)
        wavelength = 1540.0 / 5.208e6
        self.assertEqual(header.kind, frame_pb2.FRAME_KIND_CHANNEL_RF)
        self.assertEqual([(a.name, a.size) for a in header.axes], [("transmit", acquisitions), ("element", channels),
                                                                   ("sample", samples)])
        self.assertEqual(len(payload), acquisitions * channels * samples * 2)
        self.assertAlmostEqual(header.sampling_frequency_hz, 20.8333e6, delta=1e-3)  # MHz * 1e6 in double
        self.assertAlmostEqual(header.center_frequency_hz, 5.208e6, delta=1e-3)
        self.assertEqual(header.demodulation_frequency_hz, 0.0)
        self.assertEqual(header.speed_of_sound_m_per_s, 1540.0)
        vectors = {v.name: (np.array(v.values), v.unit) for v in header.vectors}
        np.testing.assert_allclose(vectors["element_x_m"][0], (np.arange(channels) - 3.5) * wavelength, rtol=1e-15)
        self.assertEqual(vectors["transmit_angle_rad"][0].tolist(), steer)  # via Event(k).rcv -> Event(k).tx
        self.assertEqual(vectors["transmit_wavefront"][0].tolist(), [0.0] * acquisitions)
        np.testing.assert_allclose(vectors["element_delay_s"][0], np.full(channels, 2 * 0.7 / 5.208e6), rtol=1e-15)
        self.assertEqual({name: unit for name, (_, unit) in vectors.items()},
                         {"element_x_m": "m", "transmit_angle_rad": "rad", "transmit_wavefront": "", "element_delay_s": "s"})

    def test_a_description_with_sequence_time_and_every_element_type_reaches_the_wire(self):
        matlab = self.matlab()
        pull, endpoint = self.bound(zmq.PULL, "ingest")
        sender = mirror.SonopipeSender(matlab, endpoint)
        self.addCleanup(sender.delete)
        axes = [SimpleNamespace(name="line", spacing=0, unit="", origin=0),
                SimpleNamespace(name="sample", spacing=1e-8, unit="s", origin=0)]
        description = SimpleNamespace(kind="rf", axes=axes, streamId=4, sequence=77, acquisitionTimeNs=1690000000000000001)
        for data, element_type in ((self.rng.integers(0, 255, (5, 3)).astype(np.uint8), common_pb2.ELEMENT_TYPE_UINT8),
                                   (self.rng.standard_normal((5, 3)), common_pb2.ELEMENT_TYPE_FLOAT64),
                                   (self.rng.standard_normal((5, 3)).astype(np.float32), common_pb2.ELEMENT_TYPE_FLOAT32),
                                   (self.rng.integers(-9, 9, (5, 3)).astype(np.int16), common_pb2.ELEMENT_TYPE_INT16)):
            data = np.asfortranarray(data)
            sender.send(data, description)
            header, payload = self.receive(pull)
            self.assertEqual([(a.name, a.size) for a in header.axes], [("line", 3), ("sample", 5)])  # reversed
            self.assertEqual(header.element_type, element_type)
            self.assertEqual(payload, data.tobytes(order="F"))  # MATLAB memory order as it is
            self.assertEqual((header.stream_id, header.sequence, header.acquisition_time_ns),
                             (4, 77, 1690000000000000001))

    def test_errors_carry_the_library_message_and_free_the_frame(self):
        matlab = self.matlab()
        _, endpoint = self.bound(zmq.PULL, "ingest")
        sender = mirror.SonopipeSender(matlab, endpoint)
        self.addCleanup(sender.delete)
        axes = [SimpleNamespace(name="line", spacing=0, unit="", origin=0),
                SimpleNamespace(name="sample", spacing=0, unit="", origin=0)]
        with self.assertRaises(mirror.MatlabError) as raised:  # fails inside the try: the catch frees the frame
            sender.send(np.zeros((4, 2), np.float32), SimpleNamespace(kind="doppler", axes=axes))
        self.assertEqual(str(raised.exception), "sp_frame_set_kind returned -1: sp_frame_set_kind: frame kind 'doppler' "
                                                "is not one of iq, rf, dce, channel_rf, channel_iq")
        with self.assertRaises(mirror.MatlabError) as raised:  # two axes named for a 3-D array
            sender.send(np.zeros((4, 2, 3), np.float32), SimpleNamespace(kind="rf", axes=axes))
        self.assertEqual(str(raised.exception), "sp_send returned -2: sp_send: payload has 96 bytes, shape "
                                                "float32[line=2, sample=4] needs 32")

    def test_curve_keys_reach_the_sender_and_the_subscriber(self):
        matlab = self.matlab()
        server_public, server_secret = zmq.curve_keypair()
        client_public, client_secret = zmq.curve_keypair()
        keys = SimpleNamespace(serverPublic=server_public.decode(), clientPublic=client_public.decode(),
                               clientSecret=client_secret.decode())
        pull, endpoint = self.bound(zmq.PULL, "curve-ingest", curve_server=1, curve_secretkey=server_secret)
        sender = mirror.SonopipeSender(matlab, endpoint, True, keys)
        self.addCleanup(sender.delete)
        sender.setSendTimeout(20000)
        axes = [SimpleNamespace(name="value", spacing=0, unit="", origin=0)]
        sender.send(np.arange(4, dtype=np.float32), SimpleNamespace(kind="rf", axes=axes))
        _, payload = self.receive(pull)
        self.assertEqual(payload, np.arange(4, dtype=np.float32).tobytes())
        pub, publish = self.bound(zmq.PUB, "curve-publish", curve_server=1, curve_secretkey=server_secret)
        subscriber = mirror.SonopipeSubscriber(matlab, publish, "result/", keys)
        self.addCleanup(subscriber.delete)
        header = result_pb2.ResultHeader(schema_version=1, pipeline="p", output="o", element_type=4)  # float64
        header.axes.add(name="value", size=2)
        result = None
        for _ in range(200):
            pub.send_multipart([b"result/p/o", header.SerializeToString(), np.array([1.5, -2.0]).tobytes()])
            result = subscriber.next(50)
            if result is not None:
                break
        self.assertIsNotNone(result)
        self.assertEqual(result.data.ravel().tolist(), [1.5, -2.0])


if __name__ == "__main__":
    unittest.main()
