"""USTB UFF files written by an independent h5py writer (uff_files.py, from USTB's class
definitions) imported by sonopipe-import and replayed by sonopipe-replay: frames equal the written
arrays bit for bit and every mapped header field is checked; bad files end with one line naming
file, object and expectation, exit status 1 and no output file."""
import os
import subprocess
import sys
import unittest

import h5py
import numpy as np

import sonopipe
import support
import uff_files
from daemon_fixture import IQ_SCALE, RF_SCALE, DaemonFixture

F32 = np.float32


def run_import(path, out, *options):
    return subprocess.run([support.tool("import"), path, "--out", out, *options], capture_output=True, text=True,
                          timeout=120)


def vector(header, name):
    for v in header.vectors:
        if v.name == name:
            return np.asarray(v.values)
    raise AssertionError(f"header has no vector '{name}' (has {[v.name for v in header.vectors]})")


def as_stored(values):
    """What a float32 dataset gives back as double."""
    return np.asarray(values, dtype=np.float32).astype(np.float64)


class ImportedChannelData(unittest.TestCase):
    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)

    def imported(self, path, *options, stream=0):
        out = self.folder.file("imported.h5")
        completed = run_import(path, out, *options)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        recording = sonopipe.read_recording(out)
        return recording, recording.streams[stream]

    def test_channel_rf_plane_waves_v1_2_import_bit_exact_with_every_mapped_field(self):
        samples, elements, waves, frames = 50, 8, 3, 4
        data = self.rng.standard_normal((samples, elements, waves, frames)).astype(F32) * 1000
        angles = np.array([-0.1, 0.0, 0.12])
        geometry = uff_files.linear_geometry(elements, 0.3e-3)
        path = self.folder.file("channel_rf.uff")
        with uff_files.UffWriter(path, "v1.2.0") as w:
            g = w.group(None, "channel_data", "uff.channel_data")
            w.number(g, "sampling_frequency", 20e6)
            w.number(g, "initial_time", 2.5e-6)
            w.number(g, "sound_speed", 1480.0)
            w.number(g, "modulation_frequency", 0.0)
            w.number(g, "PRF", 3000.0)
            w.number(g, "data", data)
            w.probe(g, geometry)
            w.sequence(g, [{"wavefront": 0, "azimuth": a, "delay": 1e-7 * i, "origin": (0.0, 0.0)}
                           for i, a in enumerate(angles)])
            w.pulse(g, 5.2e6)
            w.text(g, "name", "phantom A")
        recording, stream = self.imported(path)
        self.assertEqual(recording.attributes["uff_version"], "v1.2.0")
        self.assertEqual(recording.attributes["uff_object"], "/channel_data")
        self.assertEqual(recording.attributes["uff_name"], "phantom A")
        self.assertEqual(len(stream), frames)
        self.assertEqual(stream.payload.dtype, np.float32)
        for f, (header, frame) in enumerate(stream):
            # MATLAB data(s, c, w, f) is our frame[w, c, s]
            np.testing.assert_array_equal(frame, data[:, :, :, f].transpose(2, 1, 0))
            self.assertEqual(header.kind, sonopipe.publisher.frame_kind("channel_rf"))
            self.assertEqual(header.sequence, f)
            # PRF is per transmit: a frame of 3 waves takes 3 / 3000 s
            self.assertEqual(header.acquisition_time_ns, round(f * waves / 3000.0 * 1e9))
        header = stream.headers[0]
        self.assertEqual([(a.name, a.size) for a in header.axes], [("transmit", 3), ("element", 8), ("sample", 50)])
        sample = header.axes[2]
        self.assertEqual((sample.unit, sample.spacing, sample.origin), ("s", 1 / as_stored(20e6)[()], as_stored(2.5e-6)[()]))
        self.assertEqual(header.sampling_frequency_hz, 20e6)
        self.assertEqual(header.demodulation_frequency_hz, 0.0)
        self.assertEqual(header.center_frequency_hz, as_stored(5.2e6)[()])
        self.assertEqual(header.speed_of_sound_m_per_s, 1480.0)
        np.testing.assert_array_equal(vector(header, "element_x_m"), as_stored(geometry[:, 0]))
        np.testing.assert_array_equal(vector(header, "element_width_m"), as_stored(geometry[:, 5]))
        np.testing.assert_array_equal(vector(header, "transmit_wavefront"), [0, 0, 0])
        np.testing.assert_array_equal(vector(header, "transmit_angle_rad"), as_stored(angles))
        np.testing.assert_array_equal(vector(header, "transmit_delay_s"), as_stored([0, 1e-7, 2e-7]))
        np.testing.assert_array_equal(vector(header, "transmit_source_z_m"), [0, 0, 0])

    def test_channel_iq_v1_0_1_focused_waves_with_trailing_singletons_dropped(self):
        samples, elements = 40, 6
        data = (self.rng.standard_normal((samples, elements)) + 1j * self.rng.standard_normal((samples, elements)))
        data = data.astype(np.complex64)  # one wave, one frame: MATLAB keeps [samples x elements]
        path = self.folder.file("channel_iq.uff")
        with uff_files.UffWriter(path, "v1.0.1", fixed_length_version=False) as w:
            g = w.group(None, "chan", "uff.channel_data")
            w.number(g, "sampling_frequency", 10e6)
            w.number(g, "initial_time", 0.0)
            w.number(g, "modulation_frequency", 4e6)
            w.number(g, "data", data)
            w.probe(g, uff_files.linear_geometry(elements, 0.2e-3))
            w.sequence(g, [{"wavefront": 1, "distance": 0.03, "azimuth": 0.2, "origin": (0.001, 0.0)}],
                       origin_name="origo")
        with h5py.File(path, "r") as f:
            self.assertEqual(f["chan/data/real"].shape, (elements, samples), "the writer dropped the singletons")
        recording, stream = self.imported(path)
        self.assertEqual(recording.attributes["uff_version"], "v1.0.1")
        header, frame = stream.frame(0)
        self.assertEqual(len(stream), 1)
        self.assertEqual(header.kind, sonopipe.publisher.frame_kind("channel_iq"))
        self.assertEqual(stream.payload.dtype, np.complex64)
        np.testing.assert_array_equal(frame, data.T[None, :, :])
        self.assertEqual(header.demodulation_frequency_hz, 4e6)
        self.assertEqual(header.center_frequency_hz, 4e6, "no pulse: f_c = modulation frequency")
        self.assertEqual(header.speed_of_sound_m_per_s, 1540.0, "UFF's default sound speed")
        np.testing.assert_array_equal(vector(header, "transmit_wavefront"), [1])
        # USTB's point: x = d sin(az) cos(el), z = d cos(az) cos(el) (float32 d, az)
        d, az = as_stored(0.03)[()], as_stored(0.2)[()]
        np.testing.assert_allclose(vector(header, "transmit_source_x_m"), [d * np.sin(az)], rtol=1e-15)
        np.testing.assert_allclose(vector(header, "transmit_source_z_m"), [d * np.cos(az)], rtol=1e-15)
        # the old name `origo` of the wave origin is read
        np.testing.assert_allclose(vector(header, "transmit_origin_x_m"), [0.001], rtol=1e-6)

    def test_int16_iq_channel_data_keeps_int16_with_an_iq_axis(self):
        samples, elements, waves, frames = 16, 4, 2, 3
        real = self.rng.integers(-32768, 32767, size=(samples, elements, waves, frames), endpoint=True)
        imag = self.rng.integers(-32768, 32767, size=(samples, elements, waves, frames), endpoint=True)
        path = self.folder.file("channel_int16.uff")
        with uff_files.UffWriter(path, "v1.2.0") as w:
            g = w.group(None, "channel_data", "uff.channel_data")
            w.number(g, "sampling_frequency", 5e6)
            w.number(g, "initial_time", 0.0)
            w.number(g, "modulation_frequency", 5e6)
            w.number(g, "data", real + 1j * imag, dtype=np.int16, class_name="int16")
            w.probe(g, uff_files.linear_geometry(elements, 0.3e-3))
            w.sequence(g, [{"wavefront": 0, "azimuth": a} for a in (-0.05, 0.05)])
        _, stream = self.imported(path)
        self.assertEqual(stream.payload.dtype, np.int16)
        self.assertEqual([a.name for a in stream.axes], ["transmit", "element", "sample", "iq"])
        expected = np.stack([real, imag], axis=-1).astype(np.int16)  # [s, c, w, f, iq]
        np.testing.assert_array_equal(stream.payload, expected.transpose(3, 2, 1, 0, 4))

    def test_picmus_layout_rf_reads_real_only_and_iq_reads_both(self):
        samples, elements, angles = 30, 5, 3
        rf = self.rng.standard_normal((samples, elements, angles)).astype(F32)
        geometry3 = uff_files.linear_geometry(elements, 0.3e-3)[:, :3]
        path = self.folder.file("picmus_rf.hdf5")
        uff_files.picmus(path, rf + 0j, [-0.1, 0, 0.1], geometry3, 20.832e6, 0.0, 1540.0, 1e-6)
        recording, stream = self.imported(path)
        self.assertEqual(recording.attributes["source_format"], "picmus")
        header, frame = stream.frame(0)
        self.assertEqual(header.kind, sonopipe.publisher.frame_kind("channel_rf"))
        np.testing.assert_array_equal(frame, rf.transpose(2, 1, 0))
        np.testing.assert_array_equal(vector(header, "transmit_angle_rad"), as_stored([-0.1, 0, 0.1]))
        np.testing.assert_array_equal(vector(header, "element_x_m"), as_stored(geometry3[:, 0]))
        self.assertEqual(header.sampling_frequency_hz, as_stored(20.832e6)[()])
        iq = (rf + 1j * self.rng.standard_normal(rf.shape)).astype(np.complex64)
        path = self.folder.file("picmus_iq.hdf5")
        uff_files.picmus(path, iq, [-0.1, 0, 0.1], geometry3, 5.2e6, 5.2e6, 1540.0, 1e-6)
        _, stream = self.imported(path)
        header, frame = stream.frame(0)
        self.assertEqual(header.kind, sonopipe.publisher.frame_kind("channel_iq"))
        np.testing.assert_array_equal(frame, iq.transpose(2, 1, 0))
        self.assertEqual(header.demodulation_frequency_hz, as_stored(5.2e6)[()])


def beamformed_file(path, data, scan, version="v1.2.0", modulation=0.0, sampling_frequency=None):
    """data: MATLAB [pixels x channels x waves x frames]; scan: ("linear", x, z) or ("sector", az, depth, origin_name, origin)."""
    with uff_files.UffWriter(path, version) as w:
        g = w.group(None, "beamformed_data", "uff.beamformed_data")
        w.number(g, "data", data)
        w.number(g, "modulation_frequency", modulation)
        if sampling_frequency:
            w.number(g, "sampling_frequency", sampling_frequency)
        if scan[0] == "linear":
            s = w.group(g, "scan", "uff.linear_scan")
            w.number(s, "x_axis", scan[1][:, None], dtype=np.float64)
            w.number(s, "z_axis", scan[2][:, None], dtype=np.float64)
        else:
            s = w.group(g, "scan", "uff.sector_scan")
            w.number(s, "azimuth_axis", scan[1][:, None], dtype=np.float64)
            w.number(s, "depth_axis", scan[2][:, None], dtype=np.float64)
            ox, oz = scan[4]
            w.point(s, scan[3], np.hypot(ox, oz), np.arctan2(ox, oz))
        w.pulse(g, 5e6)


class ImportedBeamformedData(unittest.TestCase):
    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)

    def imported(self, path, *options):
        out = self.folder.file("imported.h5")
        completed = run_import(path, out, *options)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        return sonopipe.read_recording(out).streams[0]

    def test_iq_on_a_linear_scan_v1_1_several_frames_is_lateral_by_axial_with_z_fastest(self):
        nx, nz, frames = 7, 33, 5
        x, z = np.linspace(-5e-3, 5e-3, nx), np.linspace(10e-3, 20e-3, nz)
        data = (self.rng.standard_normal((nx * nz, 1, 1, frames)) + 1j * self.rng.standard_normal((nx * nz, 1, 1, frames)))
        data = data.astype(np.complex64)
        path = self.folder.file("bf_iq.uff")
        beamformed_file(path, data, ("linear", x, z), "v1.1.1", modulation=5e6, sampling_frequency=20e6)
        stream = self.imported(path)
        self.assertEqual(len(stream), frames)
        for f, (header, frame) in enumerate(stream):
            # pixel p = ix * nz + iz (USTB's meshgrid(x, z)(:)): z runs fastest
            np.testing.assert_array_equal(frame, data[:, 0, 0, f].reshape(nx, nz))
            self.assertEqual(header.kind, sonopipe.publisher.frame_kind("iq"))
        header = stream.headers[0]
        lateral, axial = header.axes
        self.assertEqual((lateral.name, lateral.size, lateral.unit, lateral.origin), ("lateral", nx, "m", x[0]))
        self.assertEqual((axial.name, axial.size, axial.unit, axial.origin), ("axial", nz, "m", z[0]))
        self.assertAlmostEqual(lateral.spacing, x[1] - x[0], delta=1e-18)
        self.assertAlmostEqual(axial.spacing, z[1] - z[0], delta=1e-18)
        np.testing.assert_array_equal(vector(header, "scan_z_m"), z)
        self.assertEqual((header.demodulation_frequency_hz, header.sampling_frequency_hz, header.center_frequency_hz),
                         (5e6, 20e6, 5e6))

    def test_rf_on_a_sector_scan_one_frame_with_apex_v1_0_and_origin_v1_2(self):
        na, nd = 9, 21
        azimuth, depth = np.linspace(-0.4, 0.4, na), np.linspace(0.0, 0.05, nd)
        data = self.rng.standard_normal((na * nd, 1)).astype(F32)  # one frame: MATLAB keeps [pixels x 1]
        for version, name in (("v1.0.1", "apex"), ("v1.2.0", "origin")):
            with self.subTest(version=version):
                path = self.folder.file(f"sector_{version}.uff")
                beamformed_file(path, data, ("sector", azimuth, depth, name, (0.0, -0.01)), version)
                stream = self.imported(path)
                header, frame = stream.frame(0)
                self.assertEqual(header.kind, sonopipe.publisher.frame_kind("rf"))
                np.testing.assert_array_equal(frame, data[:, 0].reshape(na, nd))
                self.assertEqual([(a.name, a.unit) for a in header.axes], [("angle", "rad"), ("radius", "m")])
                np.testing.assert_allclose(vector(header, "scan_origin_z_m"), [-0.01], rtol=1e-6)
                np.testing.assert_array_equal(vector(header, "scan_azimuth_rad"), azimuth)
                # no sampling_frequency in the file: USTB's c / (2 dz)
                self.assertAlmostEqual(header.sampling_frequency_hz, 1540 / (2 * (depth[1] - depth[0])), delta=1e-3)

    def test_ensemble_option_groups_frames_into_arfi_sets_location_ensemble_sample(self):
        nx, nz, ensemble, sets = 4, 25, 3, 2
        data = (self.rng.standard_normal((nx * nz, 1, 1, ensemble * sets))
                + 1j * self.rng.standard_normal((nx * nz, 1, 1, ensemble * sets))).astype(np.complex64)
        path = self.folder.file("bf_ensemble.uff")
        beamformed_file(path, data, ("linear", np.linspace(-1e-3, 1e-3, nx), np.linspace(5e-3, 9e-3, nz)),
                        modulation=4e6, sampling_frequency=12e6)
        stream = self.imported(path, "--ensemble", str(ensemble))
        self.assertEqual(len(stream), sets)
        self.assertEqual([(a.name, a.size) for a in stream.axes], [("location", nx), ("ensemble", ensemble), ("sample", nz)])
        for s, (header, frame) in enumerate(stream):
            expected = np.stack([data[:, 0, 0, s * ensemble + e].reshape(nx, nz) for e in range(ensemble)], axis=1)
            np.testing.assert_array_equal(frame, expected)
        out = self.folder.file("not_divisible.h5")
        completed = run_import(path, out, "--ensemble", "4")
        self.assertEqual(completed.returncode, 1)
        self.assertIn("6 frames do not divide into ensembles of 4", completed.stderr)
        self.assertFalse(os.path.exists(out))


class BadFiles(unittest.TestCase):
    """Each bad file: exit 1, one line naming the file, the object and the expectation, no output."""

    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)

    def good_file(self, path, version="v1.2.0", data=None, elements=4):
        data = self.rng.standard_normal((20, 4, 1, 2)).astype(F32) if data is None else data
        with uff_files.UffWriter(path, version) as w:
            g = w.group(None, "channel_data", "uff.channel_data")
            w.number(g, "sampling_frequency", 10e6)
            w.number(g, "initial_time", 0.0)
            w.number(g, "data", data)
            w.probe(g, uff_files.linear_geometry(elements, 0.3e-3))
            w.sequence(g, [{"wavefront": 0, "azimuth": 0.0}])
        return path

    def assert_refused(self, path, *expected):
        out = self.folder.file("out.h5")
        completed = run_import(path, out)
        self.assertEqual(completed.returncode, 1, completed.stdout)
        lines = completed.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, completed.stderr)
        self.assertIn(path, lines[0])
        for text in expected:
            self.assertIn(text, lines[0])
        self.assertEqual(sorted(os.listdir(self.folder.path)), [os.path.basename(path)], "nothing else written")
        os.remove(path)

    def test_a_good_file_imports_so_the_bad_ones_fail_for_their_defect(self):
        path = self.good_file(self.folder.file("good.uff"))
        completed = run_import(path, self.folder.file("out.h5"))
        self.assertEqual(completed.returncode, 0, completed.stderr)

    def test_missing_dataset(self):
        path = self.good_file(self.folder.file("missing.uff"))
        with h5py.File(path, "a") as f:
            del f["channel_data/initial_time"]
        self.assert_refused(path, "/channel_data/initial_time", "missing dataset")

    def test_missing_imag_of_complex_data(self):
        path = self.good_file(self.folder.file("imag.uff"), data=(np.ones((20, 4)) + 1j).astype(np.complex64))
        with h5py.File(path, "a") as f:
            del f["channel_data/data/imag"]
        self.assert_refused(path, "/channel_data/data/imag", "missing dataset")

    def test_wrong_rank(self):
        path = self.good_file(self.folder.file("rank.uff"))
        with h5py.File(path, "a") as f:
            del f["channel_data/data"]
            f["channel_data"].create_dataset("data", data=np.zeros((2, 1, 1, 4, 20), dtype=F32))
        self.assert_refused(path, "/channel_data/data", "wrong rank", "found 5")

    def test_unsupported_version(self):
        path = self.good_file(self.folder.file("version.uff"), version="v2.0.0")
        self.assert_refused(path, ": /:", "unsupported version 'v2.0.0'", "v1.0.x, v1.1.x, v1.2.x")

    def test_inconsistent_sizes(self):
        path = self.good_file(self.folder.file("sizes.uff"), elements=5)
        self.assert_refused(path, "/channel_data/probe/geometry", "inconsistent sizes", "5 elements", "4 channels")

    def test_replay_refuses_a_bad_file_with_the_same_line(self):
        path = self.good_file(self.folder.file("replay_version.uff"), version="v0.3")
        completed = subprocess.run([support.tool("replay"), path, "--endpoint", "ipc://" + self.folder.file("nobody"),
                                    "--connect-timeout-s", "1"], capture_output=True, text=True, timeout=60)
        self.assertEqual(completed.returncode, 1)
        self.assertEqual(completed.stderr.strip().splitlines()[-1],
                         f"sonopipe-replay: {path}: /: unsupported version 'v0.3' (accepted: v1.0.x, v1.1.x, v1.2.x)")

    def test_truncated_file(self):
        path = self.good_file(self.folder.file("truncated.uff"))
        with open(path, "rb") as f:
            content = f.read()
        with open(path, "wb") as f:
            f.write(content[: len(content) // 2])
        self.assert_refused(path, "truncated or damaged")


class UffReplayedThroughTheDaemon(DaemonFixture):
    def test_beamformed_iq_and_rf_uff_replay_into_the_iq_and_rf_chains(self):
        folder = support.TemporaryFolder(self)
        nx, nz, frames = 5, 40, 6
        x, z = np.linspace(-2e-3, 2e-3, nx), np.linspace(5e-3, 15e-3, nz)
        iq = (self.rng.standard_normal((nx * nz, 1, 1, frames))
              + 1j * self.rng.standard_normal((nx * nz, 1, 1, frames))).astype(np.complex64)
        rf = self.rng.standard_normal((nx * nz, 1, 1, frames)).astype(F32)
        for name, data, modulation, scale in (("iq", iq, 5e6, IQ_SCALE), ("rf", rf, 0.0, RF_SCALE)):
            path = folder.file(f"{name}.uff")
            beamformed_file(path, data, ("linear", x, z), modulation=modulation)
            sub = self.subscriber([f"result/{name}/"])
            completed = subprocess.run([support.tool("replay"), path, "--endpoint", self.ingest, "--lossless", "--max",
                                        "--stream-id", "3"], capture_output=True, text=True, timeout=120)
            self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)
            self.assertIn("is a uff v1.2.0 (/beamformed_data: uff.beamformed_data)", completed.stdout + completed.stderr)
            results = self.results(sub, frames)
            for f, result in enumerate(results):
                self.assertEqual(result.header.input_sequence, f)
                expected = np.float32(scale) * data[:, 0, 0, f].reshape(nx, nz)
                np.testing.assert_array_equal(result.array, expected)


class ChannelDataThroughUff(unittest.TestCase):
    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)

    def test_simulated_channel_data_exports_as_ustb_channel_data_and_imports_back_unchanged(self):
        for transmits, extra in (("plane", []), ("focused", ["--iq", "--aperture", "8"]), ("diverging", [])):
            with self.subTest(transmits=transmits):
                native, uff, imported = (self.folder.file(f"{transmits}{n}") for n in (".h5", ".uff", "_imported.h5"))
                completed = subprocess.run([support.tool("sim"), "channel", "--out", native, "--frames", "2",
                                            "--transmits", transmits, "--count", "3", "--elements", "16",
                                            "--phantom", "points", *extra], capture_output=True, text=True, timeout=300)
                self.assertEqual(completed.returncode, 0, completed.stderr)
                completed = subprocess.run([support.tool("export"), native, "--out", uff], capture_output=True,
                                           text=True, timeout=120)
                self.assertEqual(completed.returncode, 0, completed.stderr)
                (stream_id, stream), = sonopipe.read_recording(native).streams.items()
                header = stream.headers[0]
                with h5py.File(uff, "r") as f:
                    c = f["channel_data"]
                    self.assertEqual(c.attrs["class"], b"uff.channel_data")
                    data = c["data/real"][()] + 1j * c["data/imag"][()] if "--iq" in extra else c["data"][()]
                    # MATLAB [samples x elements x transmits x frames] reversed is our [frame, transmit, element, sample]
                    np.testing.assert_array_equal(data, stream.payload)
                    geometry = c["probe/geometry"][()]  # (7, elements)
                    np.testing.assert_array_equal(geometry[0], vector(header, "element_x_m"))
                    self.assertEqual(c["initial_time"][()].item(), header.axes[2].origin)
                    self.assertEqual(c["sampling_frequency"][()].item(), header.sampling_frequency_hz)
                    waves = sorted(k for k in c["sequence"].keys())
                    self.assertEqual(len(waves), 3)
                    wavefront = [c[f"sequence/{w}/wavefront"][()].item() for w in waves]
                    np.testing.assert_array_equal(wavefront, vector(header, "transmit_wavefront"))
                    if transmits == "plane":
                        azimuth = [c[f"sequence/{w}/source/azimuth"][()].item() for w in waves]
                        np.testing.assert_array_equal(azimuth, vector(header, "transmit_angle_rad"))
                    else:  # USTB's point: distance and azimuth of the source (focus or virtual source)
                        x, z = vector(header, "transmit_source_x_m"), vector(header, "transmit_source_z_m")
                        distance = [c[f"sequence/{w}/source/distance"][()].item() for w in waves]
                        np.testing.assert_allclose(distance, np.hypot(x, z), rtol=1e-15)
                completed = run_import(uff, imported)
                self.assertEqual(completed.returncode, 0, completed.stderr)
                back = sonopipe.read_recording(imported).streams[stream_id]
                np.testing.assert_array_equal(back.payload, stream.payload)
                for name in ("element_x_m", "transmit_wavefront", "transmit_angle_rad"):
                    np.testing.assert_array_equal(vector(back.headers[0], name), vector(header, name), err_msg=name)
                # an absent optional vector means zeros (channel_conventions.h); UFF always has wave.delay
                np.testing.assert_array_equal(vector(back.headers[0], "transmit_delay_s"), [0, 0, 0])
                # sources go through USTB's spherical point (distance, azimuth): exact to rounding
                for name in ("transmit_source_x_m", "transmit_source_z_m"):
                    np.testing.assert_allclose(vector(back.headers[0], name), vector(header, name), rtol=1e-12,
                                               atol=1e-15, err_msg=name)
                self.assertEqual(back.headers[0].kind, header.kind)
                self.assertEqual([(a.name, a.size, a.unit) for a in back.axes], [(a.name, a.size, a.unit) for a in stream.axes])
                # the element axis comes back from the element positions (pitch = their mean step)
                np.testing.assert_allclose([(a.spacing, a.origin) for a in back.axes],
                                           [(a.spacing, a.origin) for a in stream.axes], rtol=1e-12, atol=0)
                self.assertEqual(list(back.acquisition_time_ns), list(stream.acquisition_time_ns))


class ImagesThroughUff(unittest.TestCase):
    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)

    def test_sector_and_int16_iq_images_export_as_ustb_beamformed_data_and_import_back(self):
        angles, radii = 11, 30
        sector = [self.rng.standard_normal((angles, radii)).astype(F32) for _ in range(3)]
        lines = [self.rng.integers(-32768, 32767, size=(6, 20, 2), endpoint=True).astype(np.int16) for _ in range(2)]
        for name, frames, kind, axes in (
                ("sector", sector, "rf", [("angle", 0.05, "rad", -0.25), ("radius", 2e-4, "m", 0.004)]),
                ("lines", lines, "iq", [("lateral", 3e-4, "m", -8e-4), ("axial", 1e-7, "s", 4e-6), "iq"])):
            with self.subTest(name=name):
                native, uff, imported = (self.folder.file(f"{name}{n}") for n in (".h5", ".uff", "_imported.h5"))
                sonopipe.write_recording(native, frames=[
                    (sonopipe.make_frame_header(f, kind=kind, axes=axes, stream_id=9, sequence=i,
                                                acquisition_time_ns=1000 + 50_000_000 * i, demodulation_frequency_hz=3e6,
                                                speed_of_sound_m_per_s=1500.0), f) for i, f in enumerate(frames)])
                completed = subprocess.run([support.tool("export"), native, "--out", uff], capture_output=True,
                                           text=True, timeout=120)
                self.assertEqual(completed.returncode, 0, completed.stderr)
                with h5py.File(uff, "r") as f:
                    b = f["beamformed_data"]
                    if name == "sector":
                        self.assertEqual(b["scan"].attrs["class"], b"uff.sector_scan")
                        np.testing.assert_allclose(b["scan/azimuth_axis"][()].ravel(), -0.25 + 0.05 * np.arange(angles),
                                                   rtol=1e-15)
                        np.testing.assert_array_equal(b["data"][()][:, 0, 0, :], np.stack(frames).reshape(3, -1))
                    else:
                        self.assertEqual(b["scan"].attrs["class"], b"uff.linear_scan")
                        # axial in s -> depth c t / 2
                        np.testing.assert_allclose(b["scan/z_axis"][()].ravel(), 1500.0 * (4e-6 + 1e-7 * np.arange(20)) / 2,
                                                   rtol=1e-15)
                        np.testing.assert_array_equal(b["data/real"][()][:, 0, 0, :], np.stack(frames)[..., 0].reshape(2, -1))
                        np.testing.assert_array_equal(b["data/imag"][()][:, 0, 0, :], np.stack(frames)[..., 1].reshape(2, -1))
                completed = run_import(uff, imported)
                self.assertEqual(completed.returncode, 0, completed.stderr)
                back = sonopipe.read_recording(imported).streams[9]
                expected = np.stack(frames)
                if name == "lines":  # int16 I/Q stored as single complex: complex64 now, same values
                    expected = (expected[..., 0] + 1j * expected[..., 1].astype(np.float32)).astype(np.complex64)
                np.testing.assert_array_equal(back.payload, expected)
                self.assertEqual(list(back.acquisition_time_ns), [1000 + 50_000_000 * i for i in range(len(frames))])
                self.assertEqual(back.headers[0].speed_of_sound_m_per_s, 1500.0)
                self.assertEqual(back.headers[0].demodulation_frequency_hz, 3e6)


class ArfiSetThroughUff(unittest.TestCase):
    """The ARFI simulator's sets exported as beamformed IQ UFF, imported back as ARFI sets, and
    replayed through config/arfi.yaml: the same displacement as the native recording."""

    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)

    def test_export_import_round_trip_and_the_same_displacement_through_config_arfi(self):
        import test_chains  # its daemon and record helpers, used on this test (no tests of its own run here)
        chain = test_chains.ChainThroughTheDaemon
        config = chain.require(self, "arfi.yaml", ["upsample", "loupas", "motion_filter"])
        native, uff, imported = (self.folder.file(n) for n in ("arfi_sim.h5", "arfi.uff", "arfi_imported.h5"))
        sets, locations, tracks, samples = 2, 8, 12, 200
        ensemble = tracks + 1
        completed = subprocess.run([support.tool("sim"), "arfi", "--out", native, "--sets", str(sets), "--threads", "2",
                                    "--locations", str(locations), "--tracks", str(tracks), "--samples", str(samples),
                                    "--seed", str(self.rng.integers(1, 2**31))], capture_output=True, text=True, timeout=300)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        completed = subprocess.run([support.tool("export"), native, "--out", uff],
                                   capture_output=True, text=True, timeout=120)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        (stream_id, stream), = sonopipe.read_recording(native).streams.items()
        iq = stream.payload  # int16 [set, location, ensemble, sample, iq]
        header = stream.headers[0]

        # What a UFF reader sees (USTB's layout, read with h5py): MATLAB [pixels x 1 x 1 x frames].
        with h5py.File(uff, "r") as f:
            self.assertEqual(f.attrs["version"].decode() if isinstance(f.attrs["version"], bytes) else f.attrs["version"],
                             "v1.2.0")
            b = f["beamformed_data"]
            self.assertEqual(b.attrs["class"], b"uff.beamformed_data")
            self.assertEqual(b["data"].attrs["complex"], 1)
            self.assertEqual(b["scan"].attrs["class"], b"uff.linear_scan")
            real, imag = b["data/real"][()], b["data/imag"][()]
            self.assertEqual(real.shape, (sets * ensemble, 1, 1, locations * samples))
            self.assertEqual(real.dtype, np.float32)
            # UFF frame s * E + e holds set s, ensemble entry e; pixel l * samples + k (z fastest)
            expected = iq.transpose(0, 2, 1, 3, 4).reshape(sets * ensemble, 1, 1, locations * samples, 2)
            np.testing.assert_array_equal(real, expected[..., 0])
            np.testing.assert_array_equal(imag, expected[..., 1])
            x = b["scan/x_axis"][()].ravel()
            sample_axis = header.axes[2]
            np.testing.assert_allclose(x, header.axes[0].origin + np.arange(locations) * header.axes[0].spacing, rtol=1e-15)
            t = sample_axis.origin + np.arange(samples) * sample_axis.spacing
            np.testing.assert_allclose(b["scan/z_axis"][()].ravel(), header.speed_of_sound_m_per_s * t / 2, rtol=1e-15)
            self.assertEqual(b["modulation_frequency"][()].item(), header.demodulation_frequency_hz)
            self.assertEqual(b["sampling_frequency"][()].item(), header.sampling_frequency_hz)
            self.assertEqual(b["pulse/center_frequency"][()].item(), header.center_frequency_hz)

        completed = run_import(uff, imported, "--ensemble", str(ensemble))
        self.assertEqual(completed.returncode, 0, completed.stderr)
        back = sonopipe.read_recording(imported).streams[stream_id]  # the stream id travels in sonopipe_stream_id
        self.assertEqual([(a.name, a.size) for a in back.axes],
                         [("location", locations), ("ensemble", ensemble), ("sample", samples)])
        np.testing.assert_array_equal(back.payload, (iq[..., 0].astype(np.float32) + 1j * iq[..., 1]).astype(np.complex64))
        np.testing.assert_array_equal(vector(back.headers[0], "ensemble_time_s"), vector(header, "ensemble_time_s"))
        self.assertEqual(list(back.sequence), list(stream.sequence))
        self.assertEqual(list(back.acquisition_time_ns), list(stream.acquisition_time_ns))

        daemon, endpoints = chain.start_daemon(self, config)
        displacement = {}
        for name, path, options in (("native", native, []), ("uff", uff, ["--ensemble", str(ensemble)])):
            results = chain.record_replay_with(self, path, sets, endpoints, daemon, options)
            displacement[name] = sonopipe.read_recording(results).results[("arfi", "displacement_filtered")].payload
        self.assertEqual(displacement["native"].shape, displacement["uff"].shape)
        self.assertGreater(np.nanmax(np.abs(displacement["native"])), 1.0, "a push, not zeros")
        # The UFF sample axis is depth in m, so loupas takes T_s = 2 dz / c where the native frame
        # gives T_s directly: the two differ by double rounding (~1e-16 relative), which may move a
        # float32 displacement by an ulp (~1e-6 um at 10 um); 1e-4 um bounds that with room and is
        # far below the estimator's own error (~0.1 um).
        # Results out as UFF too: [location, track, depth] -> one UFF frame per track, depth fastest.
        exported = self.folder.file("displacement.uff")
        completed = subprocess.run([support.tool("export"), results, "--out", exported, "--result",
                                    "arfi/displacement_filtered"], capture_output=True, text=True, timeout=120)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        with h5py.File(exported, "r") as f:
            stored_values = f["beamformed_data/data"][()]  # real: float32 [frames, 1, 1, pixels]
            result = displacement["uff"]  # [set, location, track, depth]
            self.assertEqual(stored_values.shape, (sets * result.shape[2], 1, 1, result.shape[1] * result.shape[3]))
            np.testing.assert_array_equal(stored_values[:, 0, 0, :],
                                          result.transpose(0, 2, 1, 3).reshape(stored_values.shape[0], -1))
        difference = np.nanmax(np.abs(displacement["uff"] - displacement["native"]))
        print(f"ARFI via UFF: max |displacement difference| {difference:.3g} um", file=sys.stderr)
        np.testing.assert_allclose(displacement["uff"], displacement["native"], rtol=0, atol=1e-4)


if __name__ == "__main__":
    unittest.main()
