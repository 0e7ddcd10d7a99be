"""The MATLAB-facing API run for real in GNU Octave over the MEX gateway (sonopipe_mex), against
live daemons: one Octave process (tests/tools/clients/matlab/octave_client_checks.m) sends every
element type to a plain PULL socket (checked here byte for byte, with every header field), frames
through the daemon's `convert` that it receives back itself while this test's Python Subscriber
receives them too (both must agree, and match numpy's convert of what Octave sent), the
Verasonics external functions called as the sequencer calls them (RcvData as a real save holds
it), errors with the library's message, and a CURVE round trip through a daemon with
security.curve. Octave runs once (setUpClass); each test checks one part of what it left."""
import json
import os
import secrets
import subprocess
import sys
import threading
import time
import unittest

import numpy as np
import zmq
import zmq.auth

import sonopipe
from sonopipe.v1 import common_pb2, frame_pb2
import support
from daemon_fixture import convert_reference

SCALE = 0.37  # convert's scale in every pipeline: not a power of two, so rounding must agree exactly
CONFIG = """
ingest: {{endpoint: "{ingest}", pattern: pull}}
publish: {{endpoint: "{publish}", status_interval_s: 0.2}}
control: {{endpoint: "{control}"}}
backend: cpu
cpu_threads: 2
{security}
pipelines:
  - name: rf
    match: {{kinds: [rf]}}
    stages: [{{type: convert, params: {{scale: {scale}}}}}]
  - name: iq
    match: {{kinds: [iq]}}
    stages: [{{type: convert, params: {{scale: {scale}}}}}]
  - name: channel
    match: {{kinds: [channel_rf]}}
    stages: [{{type: convert, params: {{scale: {scale}}}}}]
"""
CURVE = "security:\n  curve: {server_secret_key_file: keys/server.key_secret, authorized_client_keys: [keys/clients]}"
TIME_SECONDS = 1690000000
PRECISION = {"int16": np.int16, "single": np.float32, "double": np.float64, "uint8": np.uint8, "uint16": np.uint16}
ELEMENT_TYPE = {"int16": common_pb2.ELEMENT_TYPE_INT16, "single": common_pb2.ELEMENT_TYPE_FLOAT32,
                "double": common_pb2.ELEMENT_TYPE_FLOAT64, "uint8": common_pb2.ELEMENT_TYPE_UINT8,
                "complex_single": common_pb2.ELEMENT_TYPE_COMPLEX64, "complex_double": common_pb2.ELEMENT_TYPE_COMPLEX64}
OCTAVE_TIMEOUT_S = 240


class ClassCleanup:
    """What support.Daemon needs of a test (addCleanup), for daemons that live as long as the class."""

    def __init__(self, cls):
        self.addCleanup = cls.addClassCleanup


def read_octave_array(folder, file, type_name, dims):
    """An array Octave wrote (write_array): MATLAB memory order; complex = real part, then imaginary."""
    complex_ = type_name.startswith("complex_")
    dtype = PRECISION[type_name.removeprefix("complex_")]
    values = np.fromfile(os.path.join(folder, file), dtype=dtype)
    if complex_:
        half = values.size // 2
        values = values[:half].astype(np.complex128) + 1j * values[half:].astype(np.complex128)
    return values.reshape([int(d) for d in np.atleast_1d(dims)], order="F")


def c_order(matlab_array):
    """The wire's C-order array of a MATLAB array: the same memory, its dimensions reversed."""
    return np.ascontiguousarray(matlab_array.transpose())


def as_list(value):
    """jsondecode/jsonencode turn a one-element array into a scalar object."""
    return value if isinstance(value, list) else [value]


class OctaveClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        mex = os.environ.get("SONOPIPE_OCTAVE_MEX", "")
        if not mex or not os.path.isfile(mex):
            raise AssertionError(f"SONOPIPE_OCTAVE_MEX='{mex}' names no built MEX gateway: install Octave "
                                 "(tools/install-deps.sh: octave liboctave-dev) and re-run cmake")
        cls.seed = int(os.environ.get("SONOPIPE_TEST_SEED", secrets.randbits(31)))
        print(f"{cls.__name__}: seed {cls.seed}", file=sys.stderr)
        cls.folder = support.TemporaryFolder(ClassCleanup(cls))
        cleanup = ClassCleanup(cls)
        keygen = support.tool("keygen")
        os.makedirs(cls.folder.file("keys/clients"))
        for base in ("keys/server", "keys/clients/octave"):
            subprocess.run([keygen, cls.folder.file(base)], check=True, stdout=subprocess.DEVNULL)
        server_public, _ = zmq.auth.load_certificate(cls.folder.file("keys/server.key"))
        client_public, client_secret = zmq.auth.load_certificate(cls.folder.file("keys/clients/octave.key_secret"))
        cls.daemons = {}
        for name, security in (("plain", ""), ("curve", CURVE)):
            endpoints = {n: cls.folder.endpoint(f"{name}-{n}") for n in ("ingest", "publish", "control")}
            config = cls.folder.file(f"{name}.yaml")
            with open(config, "w") as f:
                f.write(CONFIG.format(security=security, scale=SCALE, **endpoints))
            cls.daemons[name] = (support.Daemon(cleanup, config), endpoints)  # key files: relative to the config
        plain_daemon, plain = cls.daemons["plain"]
        control = sonopipe.Control(plain["control"], timeout_s=2.0)
        deadline = time.monotonic() + 30
        while True:
            try:
                control.status()
                break
            except sonopipe.ControlError:
                if plain_daemon.process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"sonopiped did not start:\n{plain_daemon.log_text()}")
                time.sleep(0.2)
        # This process's own subscriber, joined (a heartbeat came) before Octave sends anything.
        cls.subscriber = sonopipe.Subscriber(plain["publish"], ["result/", "status"], timeout_s=10.0)
        cls.addClassCleanup(cls.subscriber.close)
        while (first := cls.subscriber.receive(1.0)) is None or first.topic != "status":
            if time.monotonic() > deadline + 20:
                raise AssertionError("no status heartbeat on the daemon's publish socket")
        # The plain PULL socket of the wire check, drained by a thread while Octave runs.
        cls.context = zmq.Context()
        cls.addClassCleanup(cls.context.term)
        pull = cls.context.socket(zmq.PULL)
        pull.setsockopt(zmq.LINGER, 0)
        wire_endpoint = cls.folder.endpoint("wire")
        pull.bind(wire_endpoint)
        cls.wire_frames = []
        stop = threading.Event()

        def drain():
            while not stop.is_set():
                if pull.poll(100):
                    header, payload = pull.recv_multipart()
                    cls.wire_frames.append((frame_pb2.FrameHeader.FromString(header), payload))
            pull.close()

        thread = threading.Thread(target=drain)
        thread.start()
        cls.output = cls.folder.file("octave")
        os.makedirs(cls.output)
        config = {"seed": cls.seed, "outputFolder": cls.output, "wireEndpoint": wire_endpoint,
                  "ingest": plain["ingest"], "publish": plain["publish"],
                  "unreachableEndpoint": cls.folder.endpoint("nobody"),
                  "curveIngest": cls.daemons["curve"][1]["ingest"], "curvePublish": cls.daemons["curve"][1]["publish"],
                  "serverPublic": server_public.decode(), "clientPublic": client_public.decode(),
                  "clientSecret": client_secret.decode(), "timeSeconds": TIME_SECONDS}
        config_file = cls.folder.file("octave.json")
        with open(config_file, "w") as f:
            json.dump(config, f)
        source = os.environ.get("SONOPIPE_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
        paths = [os.path.dirname(mex), os.path.join(source, "tools", "clients", "matlab"),
                 os.path.join(source, "tests", "tools", "clients", "matlab")]
        script = "".join(f"addpath('{p}'); " for p in paths) + f"octave_client_checks('{config_file}');"
        try:
            cls.octave = subprocess.run(["octave-cli", "--no-gui", "--quiet", "--no-history", "--eval", script],
                                        capture_output=True, text=True, timeout=OCTAVE_TIMEOUT_S,
                                        env={**os.environ, "XDG_CACHE_HOME": cls.folder.file("cache")})
        finally:
            time.sleep(0.3)  # the last wire frames (sent before Octave's sender closed) are read
            stop.set()
            thread.join()
        if cls.octave.returncode != 0 or not os.path.isfile(os.path.join(cls.output, "report.json")):
            raise AssertionError(f"octave exited with {cls.octave.returncode}:\n{cls.octave.stdout}\n{cls.octave.stderr}"
                                 f"\nplain daemon:\n{plain_daemon.log_text()}")
        with open(os.path.join(cls.output, "report.json")) as f:
            cls.report = json.load(f)
        cls.python_results = []
        deadline = time.monotonic() + 10
        while len(cls.python_results) < 7 and time.monotonic() < deadline:  # 4 convert frames + 2 RcvData + 1 IQ
            result = cls.subscriber.receive(0.5)
            if result is not None and result.topic != "status" and result.header.stream_id != 99:
                cls.python_results.append(result)

    def octave_array(self, file, type_name, dims):
        return read_octave_array(self.output, file, type_name, dims)

    def python_result(self, pipeline, stream_id, sequence=None):
        found = [r for r in self.python_results if r.header.pipeline == pipeline and r.header.stream_id == stream_id
                 and (sequence is None or r.header.input_sequence == sequence)]
        self.assertEqual(len(found), 1, f"{pipeline}/{stream_id}: {[r.topic for r in self.python_results]}")
        return found[0]

    # ------------------------------------------------------------------ wire
    def test_every_element_type_reaches_the_wire_in_c_order_with_every_description_field(self):
        wire = as_list(self.report["wire"])
        self.assertEqual(len(self.wire_frames), len(wire) + 1)  # and the Verasonics frame
        self.assertEqual(self.report["wireStatus"]["framesSent"], len(wire))
        for k, (entry, (header, payload)) in enumerate(zip(wire, self.wire_frames), start=1):
            with self.subTest(type=entry["type"]):
                sent = self.octave_array(entry["file"], entry["type"], entry["dims"])
                self.assertEqual(sent.shape, (5, 3, 2))
                expected = c_order(sent)  # [2, 3, 5]: MATLAB's [5 3 2] reversed
                if entry["type"].startswith("complex_"):
                    expected = expected.astype(np.complex64)  # complex double goes as complex64
                self.assertEqual(payload, expected.tobytes())
                self.assertEqual(header.element_type, ELEMENT_TYPE[entry["type"]])
                self.assertEqual(header.kind, frame_pb2.FRAME_KIND_RF)
                self.assertEqual([(a.name, a.size, a.spacing, a.unit, a.origin) for a in header.axes],
                                 [("a", 2, 0.5, "", -1.0), ("b", 3, 1e-3, "m", 0.25), ("c", 5, 2.5e-8, "s", 1e-6)])
                self.assertEqual(header.stream_id, k)
                # Odd k fixes the sequence; even k numbers automatically (0: the stream's first frame).
                self.assertEqual(header.sequence, 100 + k if k % 2 == 1 else 0)
                self.assertEqual(header.acquisition_time_ns, TIME_SECONDS * 10**9 + k)  # int64, not rounded
                self.assertEqual((header.sampling_frequency_hz, header.center_frequency_hz,
                                  header.demodulation_frequency_hz, header.speed_of_sound_m_per_s),
                                 (40e6, 5.2e6, 1e6 * k, 1480.0))
                self.assertEqual(sorted((v.name, list(v.values), v.unit) for v in header.vectors),
                                 [("small", [4.0, 5.0], ""), ("weights", [1.5, 2.5, -3.0], "m")])
                self.assertEqual(dict(header.attributes), {"probe": "L11-5v", "site": f"lab{k}"})

    # ------------------------------------------------------------------ daemon
    def test_frames_through_convert_arrive_byte_exact_and_octave_receives_what_python_receives(self):
        sent_entries = as_list(self.report["daemonSent"])
        octave_results = {int(r["streamId"]): r for r in as_list(self.report["daemonResults"])}
        self.assertEqual(sorted(octave_results), [1, 2, 3, 4])
        for entry in sent_entries:
            stream = int(entry["streamId"])
            with self.subTest(stream=stream):
                sent = c_order(self.octave_array(entry["file"], entry["type"], entry["dims"]))
                pipeline = "iq" if stream in (3, 4) else "rf"
                python = self.python_result(pipeline, stream)
                if stream == 4:  # int16 I, Q on MATLAB's first dimension = the C-order last axis 'iq'
                    self.assertEqual(sent.shape, (4, 6, 2))
                    scaled = convert_reference(sent, SCALE)
                    expected = (scaled[..., 0] + 1j * scaled[..., 1]).astype(np.complex64)
                elif stream == 3:  # complex64 rescaled per part in float32
                    parts = sent.astype(np.complex64).view(np.float32)
                    expected = (np.float32(SCALE) * parts).view(np.complex64)
                else:
                    expected = convert_reference(sent, SCALE)
                self.assertEqual(python.array.shape, expected.shape)
                self.assertEqual(python.array.tobytes(), expected.tobytes())
                octave = octave_results[stream]
                received = self.octave_array(octave["file"], octave["dataClass"], octave["dataDims"])
                # Octave's array is [fliplr(sizes) 1]: reversed, it is the C-order payload.
                self.assertEqual(c_order(received).reshape(expected.shape).astype(expected.dtype).tobytes(),
                                 python.array.tobytes())
                self.assertEqual(octave["dataClass"], "complex_single" if pipeline == "iq" else "single")
                header = python.header
                self.assertEqual((octave["topic"], octave["pipeline"], octave["output"]),
                                 (python.topic, header.pipeline, header.output))
                self.assertEqual(int(octave["inputSequence"]), header.input_sequence)
                self.assertEqual(int(octave["acquisitionTimeNs"]), header.acquisition_time_ns)
                self.assertEqual(int(octave["receivedNs"]), header.timing.received_ns)
                self.assertEqual(int(octave["publishedNs"]), header.timing.published_ns)
                self.assertEqual((octave["inputKind"], octave["elementType"], octave["unit"], octave["backend"]),
                                 (pipeline, "complex64" if pipeline == "iq" else "float32", header.unit, header.backend))
                self.assertEqual([(a["name"], a["size"], a["spacing"], a["unit"], a["origin"]) for a in as_list(octave["axes"])],
                                 [(a.name, a.size, a.spacing, a.unit, a.origin) for a in header.axes])
                self.assertEqual(octave["attributes"], {"probe": f"P{stream}", "absent": ""})
                self.assertEqual(dict(header.attributes), {"probe": f"P{stream}"})
        self.assertEqual(self.report["senderStatus"]["framesSent"] >= 4, True)
        self.assertEqual(self.report["subscriberStatus"]["skipped"], 0)

    # ------------------------------------------------------------------ Verasonics
    def expected_channel_frame(self, rcv, frame):
        """Independent of the MATLAB reshape: [t, e, s] = RcvData(startSample(t) + s, Connector(e), frame)."""
        vera = self.report["verasonics"]
        connector = [int(c) for c in vera["connector"]]
        acquisitions = [i for i, f in enumerate(vera["framenum"]) if f == 1]
        samples = int(vera["endSample"][0]) - int(vera["startSample"][0]) + 1
        expected = np.empty((len(acquisitions), rcv.shape[1], samples), np.int16)
        for t, receive in enumerate(acquisitions):
            start = int(vera["startSample"][receive]) - 1
            for e in range(rcv.shape[1]):
                expected[t, e] = rcv[start:start + samples, connector[e] - 1, frame]
        return expected

    def test_the_rcvdata_function_called_as_the_sequencer_calls_it_sends_each_frame_with_its_geometry(self):
        rcv = self.octave_array("rcvdata.bin", "int16", self.report["verasonics"]["rcvDims"])
        rows, channels, frames = rcv.shape
        self.assertEqual((rows, channels, frames), (256, 8, 2))  # rows padded to 128 as in a real save
        wavelength = 1540.0 / 5.208e6
        # The frame sent to the plain PULL: the newest frame, with the whole header.
        header, payload = self.wire_frames[-1]
        self.assertEqual(payload, self.expected_channel_frame(rcv, frames - 1).tobytes())
        self.assertEqual(header.kind, frame_pb2.FRAME_KIND_CHANNEL_RF)
        self.assertEqual(header.element_type, common_pb2.ELEMENT_TYPE_INT16)
        self.assertEqual([(a.name, a.size) for a in header.axes], [("transmit", 3), ("element", channels), ("sample", 48)])
        self.assertAlmostEqual(header.sampling_frequency_hz, 20.8333e6, delta=1e-3)  # MHz * 1e6 in double
        self.assertAlmostEqual(header.center_frequency_hz, 5.208e6, delta=1e-3)
        self.assertEqual((header.demodulation_frequency_hz, header.speed_of_sound_m_per_s), (0.0, 1540.0))
        vectors = {v.name: (np.array(v.values), v.unit) for v in header.vectors}
        np.testing.assert_allclose(vectors["element_x_m"][0], (np.arange(channels) - 3.5) * wavelength,
                                   rtol=1e-15)  # one product per element, each side
        self.assertEqual(vectors["transmit_angle_rad"][0].tolist(), [-0.1, 0.0, 0.1])  # via Event(k).rcv -> .tx
        self.assertEqual(vectors["transmit_wavefront"][0].tolist(), [0.0] * 3)
        np.testing.assert_allclose(vectors["element_delay_s"][0], np.full(channels, 2 * 0.7 / 5.208e6), rtol=1e-15)
        self.assertEqual({name: unit for name, (_, unit) in vectors.items()},
                         {"element_x_m": "m", "transmit_angle_rad": "rad", "transmit_wavefront": "", "element_delay_s": "s"})
        self.assertEqual(dict(header.attributes), {"source": "verasonics"})
        # Both frames through the daemon: every sample and the sample axis's geometry.
        for frame in range(frames):
            with self.subTest(frame=frame):
                result = self.python_result("channel", 0, sequence=frame)
                expected = self.expected_channel_frame(rcv, frame)
                self.assertEqual(result.array.tobytes(), convert_reference(expected, SCALE).tobytes())
                self.assertEqual(result.header.input_kind, frame_pb2.FRAME_KIND_CHANNEL_RF)
                self.assertEqual(result.axis_names, ("transmit", "element", "sample"))
                sample = result.axis("sample")
                self.assertAlmostEqual(sample.spacing, 1 / 20.8333e6, delta=1e-20)  # 1/f_s, computed once each side
                self.assertAlmostEqual(sample.origin, 2 * 2.0 / 5.208e6, delta=1e-20)  # 2 startDepth / f_c
                self.assertEqual(dict(result.header.attributes), {"source": "verasonics"})
        octave = [r for r in as_list(self.report["verasonicsResults"]) if r["pipeline"] == "channel"]
        self.assertEqual(sorted(int(r["inputSequence"]) for r in octave), [0, 1])
        for entry in octave:
            self.assertEqual(entry["attributes"], {"source": "verasonics"})
            received = self.octave_array(entry["file"], entry["dataClass"], entry["dataDims"])
            python = self.python_result("channel", 0, sequence=int(entry["inputSequence"]))
            self.assertEqual(c_order(received).tobytes(), python.array.tobytes())

    def test_the_iq_function_sends_complex_frames_with_the_pdata_geometry(self):
        result = self.python_result("iq", 0)
        sent = c_order(self.octave_array("iq_sent.bin", "complex_double", [20, 6])).astype(np.complex64)
        expected = (np.float32(SCALE) * sent.view(np.float32)).view(np.complex64)
        self.assertEqual(result.array.tobytes(), expected.tobytes())
        wavelength = 1540.0 / 5.208e6
        self.assertEqual([(a.name, a.size) for a in result.header.axes], [("line", 6), ("sample", 20)])
        self.assertEqual(result.axis("line").spacing, 0.5 * wavelength)
        self.assertEqual(result.axis("sample").origin, 3.0 * wavelength)
        self.assertEqual(result.header.attributes["source"], "verasonics")

    # ------------------------------------------------------------------ errors and CURVE
    def test_errors_are_octave_errors_with_the_library_message(self):
        errors = {e["what"]: e for e in as_list(self.report["errors"])}
        expected = {
            "unknown kind": ("sonopipe:client", "sp_frame_set_kind returned -1: sp_frame_set_kind: frame kind 'doppler' "
                                                "is not one of iq, rf, dce, channel_rf, channel_iq"),
            "fewer axes than dimensions": ("sonopipe:client", "sp_send returned -2: sp_send: payload has 96 bytes, "
                                                              "shape float32[line=2, sample=4] needs 32"),
            "int32 data": ("sonopipe:payload", "class int32 has no sonopipe element type (int16, single, double, uint8, "
                                               "complex)"),
            "a closed sender": ("sonopipe:usage", "not an open sender handle"),
            "no daemon": ("sonopipe:client", "sp_send returned -4: sp_send: no daemon took the frame within the send "
                                             "timeout (200 ms): none is connected, or its queue is full; nothing was sent"),
            "bad key text": ("sonopipe:client", "sp_sender_set_curve returned -1: "),
        }
        self.assertEqual(sorted(errors), sorted(expected))
        for what, (identifier, message) in expected.items():
            with self.subTest(what=what):
                self.assertEqual(errors[what]["identifier"], identifier)
                # Octave puts "sonopipe_mex: " before a MEX file's messages; MATLAB does not.
                text = errors[what]["message"].removeprefix("sonopipe_mex: ")
                if message.endswith(": "):
                    self.assertTrue(text.startswith(message), text)
                else:
                    self.assertEqual(text, message)

    def test_curve_keys_carry_a_round_trip_through_a_curve_daemon_and_a_wrong_server_key_times_out(self):
        results = as_list(self.report["curveResults"])
        self.assertEqual(len(results), 1)
        received = self.octave_array(results[0]["file"], results[0]["dataClass"], results[0]["dataDims"])
        sent = self.octave_array("curve_sent.bin", "single", [9, 2])
        self.assertEqual(received.reshape(9, 2).tobytes(order="F"), convert_reference(sent, SCALE).tobytes(order="F"))
        self.assertEqual(int(results[0]["streamId"]), 5)
        wrong = self.report["curveWrongKey"]
        self.assertEqual(wrong["identifier"], "sonopipe:client")
        self.assertIn("sp_send returned -4", wrong["message"])

    def test_the_gateway_reports_the_library_version(self):
        with open(os.path.join(os.environ.get("SONOPIPE_SOURCE_DIR", "../.."), "VERSION")) as f:
            self.assertEqual(self.report["version"], f.readline().strip())


if __name__ == "__main__":
    unittest.main()
