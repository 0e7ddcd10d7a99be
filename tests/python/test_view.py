"""sonopipe-view on recordings of results shaped like each chain's outputs (synthetic.py):
`--png` writes one non-blank image of the expected size per result set, and the drawn images
hold the known fields at the right physical positions (mm / ms / um, ml/100g/min)."""
import os
import subprocess
import time
import unittest

import matplotlib

matplotlib.use("Agg")
import matplotlib.image  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import zmq  # noqa: E402

import sonopipe  # noqa: E402
from sonopipe.view import arfi, doppler, perfusion, strain  # noqa: E402
from sonopipe.view.cli import Context, parse_arguments  # noqa: E402
from sonopipe.view.sources import Grouper, RecordingSource  # noqa: E402
import support  # noqa: E402
import synthetic  # noqa: E402

DPI = 100


def run_view(*arguments):
    view = os.environ.get("SONOPIPE_VIEW", "")
    if not view:
        raise unittest.SkipTest("SONOPIPE_VIEW (the sonopipe-view launcher) is not set")
    completed = subprocess.run([view, *arguments], capture_output=True, text=True, timeout=300)
    return completed


def check_png(test, path, figure_size):
    """Expected pixel size, and not blank: enough non-white pixels and enough spread of values
    (a figure with empty axes has about 3 % non-white pixels and a grey-level SD near 0.1)."""
    pixels = matplotlib.image.imread(path)[..., :3]
    height, width = pixels.shape[:2]
    test.assertAlmostEqual(width, figure_size[0] * DPI, delta=1, msg=path)
    test.assertAlmostEqual(height, figure_size[1] * DPI, delta=1, msg=path)
    grey = pixels.mean(axis=2)
    test.assertGreater((grey < 0.95).mean(), 0.15, f"{path} is mostly white")
    test.assertGreater(grey.std(), 0.15, f"{path} has almost no contrast")


def groups_of(path):
    source = RecordingSource(path)
    grouper = Grouper(source.known_outputs())
    groups = [g for r in source.results() for g in grouper.add(r)] + grouper.flush()
    return groups, Context(source.recording, parse_arguments(["--recording", path]))


def images_by_title(fig):
    return {ax.get_title(): ax.images[0] for ax in fig.axes if ax.images}


class GrouperOfALiveSource(unittest.TestCase):
    def test_the_first_result_set_of_a_pipeline_holds_all_its_outputs_not_only_the_first_to_arrive(self):
        # Live, the outputs are learnt from what arrives. Before, the Doppler chain's first set was
        # taken for complete at its first output (the B-mode alone) and the rest came without it:
        # a one-ensemble run never showed power over the B-mode.
        from sonopipe.arrays import axes_from_proto
        from sonopipe.subscriber import Result
        rng = support.random_generator(self)
        results = [Result(f"result/{h.pipeline}/{h.output}", h, a, axes_from_proto(h.axes), local_received_ns=0)
                   for sequence in (0, 1) for h, a in synthetic.doppler_results(sequence, rng)]
        outputs = ["bmode", "velocity", "power", "power_db"]
        self.assertEqual([r.header.output for r in results[:4]], outputs)
        grouper = Grouper()
        done = [[g for g in grouper.add(r)] for r in results]
        # Nothing ends before the next input frame's first output (the set's size is not known yet).
        self.assertEqual([len(d) for d in done[:4]], [0, 0, 0, 0])
        self.assertEqual([(g.input_sequence, sorted(g.outputs)) for g in done[4]], [(0, sorted(outputs))])
        # From then on a set ends as soon as it holds every output learnt.
        self.assertEqual([len(d) for d in done[5:]], [0, 0, 1])
        self.assertEqual(sorted(done[7][0].outputs), sorted(outputs))
        self.assertEqual(grouper.flush(), [])


class ViewWritesPngs(unittest.TestCase):
    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)

    def test_arfi_recording_gives_one_image_per_set_every_nth_on_request(self):
        path = self.folder.file("arfi.h5")
        synthetic.write_arfi_results(path, sets=4, rng=self.rng)
        out = self.folder.file("png")
        completed = run_view("--recording", path, "--png", out, "--dpi", str(DPI))
        self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)
        self.assertEqual(sorted(os.listdir(out)), [f"arfi_{i:06d}.png" for i in range(4)])
        for name in os.listdir(out):
            check_png(self, os.path.join(out, name), arfi.ArfiView.figure_size)
        every = self.folder.file("every")
        completed = run_view("--recording", path, "--png", every, "--every", "3")
        self.assertEqual(completed.returncode, 0, completed.stderr)
        self.assertEqual(sorted(os.listdir(every)), ["arfi_000000.png", "arfi_000003.png"])

    def test_strain_and_perfusion_recordings_give_non_blank_images(self):
        for name, write, size in (("strain", synthetic.write_strain_results, strain.StrainView.figure_size),
                                  ("perfusion", synthetic.write_perfusion_results, perfusion.PerfusionView.figure_size)):
            path = self.folder.file(f"{name}.h5")
            write(path, rng=self.rng)
            out = self.folder.file(f"png_{name}")
            completed = run_view("--recording", path, "--png", out)
            self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)
            images = os.listdir(out)
            self.assertEqual(len(images), 1, images)
            check_png(self, os.path.join(out, images[0]), size)

    def test_doppler_recording_gives_a_non_blank_image_in_the_doppler_view(self):
        path = self.folder.file("doppler.h5")
        synthetic.write_doppler_results(path, rng=self.rng)
        out = self.folder.file("png_doppler")
        completed = run_view("--recording", path, "--png", out, "--dpi", str(DPI))
        self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)
        self.assertIn("(DopplerView view)", completed.stdout)
        self.assertEqual(os.listdir(out), ["doppler_000000.png"])
        check_png(self, os.path.join(out, "doppler_000000.png"), doppler.DopplerView.figure_size)

    def test_a_file_that_is_not_a_recording_fails_with_one_line(self):
        path = self.folder.file("empty.h5")
        open(path, "wb").close()
        completed = run_view("--recording", path, "--png", self.folder.file("png"))
        self.assertNotEqual(completed.returncode, 0)
        self.assertIn("cannot open recording", completed.stderr)


class ViewLiveConflates(unittest.TestCase):
    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)

    def test_a_burst_faster_than_drawing_is_skipped_and_counted_and_the_newest_is_drawn(self):
        view = os.environ.get("SONOPIPE_VIEW", "")
        if not view:
            raise unittest.SkipTest("SONOPIPE_VIEW is not set")
        context = zmq.Context()
        self.addCleanup(context.term)
        publisher = context.socket(zmq.XPUB)  # XPUB: we see the viewer's subscription arrive
        publisher.setsockopt(zmq.LINGER, 0)
        publisher.setsockopt(zmq.SNDHWM, 100000)
        self.addCleanup(publisher.close)
        endpoint = self.folder.endpoint("publish")
        publisher.bind(endpoint)
        out = self.folder.file("png")
        process = subprocess.Popen([view, "--endpoint", endpoint, "--png", out, "--idle-exit", "3"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        self.assertTrue(publisher.poll(60000), "the viewer never subscribed")
        self.assertEqual(publisher.recv(), b"\x01result/")
        field, times = synthetic.arfi_displacement_um(locations=16, tracks=20, depths=60)
        axes = [("location", 0.2e-3, "m"), "track", ("depth", 1 / 44.4e6, "s")]
        sets = 300
        for sequence in range(sets):  # about 1000 sets/s; drawing one takes ~0.3 s
            header = synthetic.result_header("arfi", "displacement", field, axes, sequence, "um",
                                             vectors={"ensemble_time_s": times})
            publisher.send_multipart([b"result/arfi/displacement", header.SerializeToString(), field.tobytes()])
            time.sleep(0.001)
        stdout, stderr = process.communicate(timeout=120)
        self.assertEqual(process.returncode, 0, stdout + stderr)
        images = sorted(os.listdir(out))
        self.assertIn(f"arfi_{sets - 1:06d}.png", images, "conflation must keep the newest set")
        self.assertLess(len(images), sets / 2, "drawing every set of the burst means nothing was skipped")
        skipped = int(stdout.split("skipped ")[1].split()[0])
        self.assertEqual(skipped + len(images), sets, stdout)  # every set drawn or counted as skipped
        self.assertIn("missing 0", stdout)
        check_png(self, os.path.join(out, images[-1]), arfi.ArfiView.figure_size)


class ViewDrawsTheFields(unittest.TestCase):
    """In-process: the image arrays and extents the views draw, against the synthetic truth."""

    def setUp(self):
        self.rng = support.random_generator(self)
        self.folder = support.TemporaryFolder(self)
        self.addCleanup(plt.close, "all")

    def test_arfi_peak_image_peaks_at_the_push_in_mm_and_the_time_axis_is_in_ms(self):
        path = self.folder.file("arfi.h5")
        truth = synthetic.write_arfi_results(path, sets=1, rng=self.rng)  # [location, track, depth] um
        (group,), context = groups_of(path)
        fig = plt.figure()
        arfi.ArfiView(context.options).draw(fig, group, context)
        images = images_by_title(fig)
        peak = images["peak displacement over time"].get_array()  # [depth, location]
        depth_index, location_index = np.unravel_index(np.nanargmax(peak), peak.shape)
        true_location, _, true_depth = np.unravel_index(np.argmax(truth), truth.shape)
        # noise of 0.1 um on a Gaussian 8 um peak moves the argmax by a few samples at most
        self.assertLessEqual(abs(location_index - true_location), 3)
        self.assertLessEqual(abs(depth_index - true_depth), 6)
        self.assertAlmostEqual(float(np.nanmax(peak)), float(truth.max()), delta=0.5)
        left, right, bottom, top = images["peak displacement over time"].get_extent()
        self.assertAlmostEqual(left, -5.2 - 0.1, places=6)   # origin -5.2 mm, pitch 0.2 mm, pixel edges
        self.assertAlmostEqual(right, -5.2 + 51 * 0.2 + 0.1, places=6)
        self.assertAlmostEqual(top, -0.5 * 1540 / 2 / 44.4e6 * 1e3, places=6)  # fast time -> depth mm
        depth_time = [t for t in images if t.startswith("displacement at")][0]
        t_left, t_right, _, _ = images[depth_time].get_extent()
        self.assertAlmostEqual(t_left, -0.05, places=6)       # tracks every 0.1 ms from 0 ms
        self.assertAlmostEqual(t_right, 3.95, places=6)

    def test_doppler_overlays_on_the_bmode_and_velocity_spans_exactly_plus_minus_nyquist(self):
        path = self.folder.file("doppler.h5")
        synthetic.write_doppler_results(path, rng=self.rng)
        (group,), context = groups_of(path)
        fig = plt.figure()
        doppler.DopplerView(context.options).draw(fig, group, context)
        axes = {ax.get_title(): ax for ax in fig.axes if ax.images}
        self.assertEqual([t.split(",")[0].split(" (")[0] for t in axes],
                         ["B-mode of the mean frame", "power Doppler over B-mode", "velocity"])
        velocity_axes = next(ax for title, ax in axes.items() if title.startswith("velocity"))
        underlay, overlay = velocity_axes.images  # the B-mode first, the velocity over it
        self.assertEqual(underlay.get_cmap().name, "gray")
        self.assertEqual(overlay.get_cmap().name, "RdBu")
        nyquist_cm_s = synthetic.NYQUIST_M_PER_S * 100
        self.assertEqual(overlay.get_clim(), (-nyquist_cm_s, nyquist_cm_s))
        power_db = group.outputs["power_db"].array.T.astype(np.float64)
        gated = power_db - power_db.max() >= -doppler.POWER_DYNAMIC_RANGE_DB
        expected = np.where(gated, group.outputs["velocity"].array.T * 100.0, np.nan)
        # float32 drawing of float32 m/s times 100: a few ulp
        np.testing.assert_allclose(np.ma.filled(overlay.get_array().astype(np.float64), np.nan), expected,
                                   rtol=1e-6, atol=1e-5)
        left, right, bottom, top = overlay.get_extent()
        self.assertAlmostEqual(left, -6.4 - 0.1, places=6)  # origin -6.4 mm, 0.2 mm pixels, edges
        self.assertAlmostEqual(top, 10.0 - 0.1, places=6)
        self.assertEqual(underlay.get_extent(), overlay.get_extent())

    def test_arfi_with_nan_windows_draws_and_still_finds_the_push(self):
        path = self.folder.file("arfi.h5")
        field, times = synthetic.arfi_displacement_um()
        field[:, :, :10] = np.nan  # zero-energy windows near the probe (loupas gives NaN there)
        field[0] = np.nan          # one whole location without signal
        axes = [("location", 0.2e-3, "m"), "track", ("depth", 2e-5, "m")]
        header = synthetic.result_header("arfi", "displacement", field, axes, 0, "um",
                                         vectors={"ensemble_time_s": times})
        sonopipe.write_recording(path, results=[(header, field)])
        (group,), context = groups_of(path)
        fig = plt.figure()
        arfi.ArfiView(context.options).draw(fig, group, context)
        peak = images_by_title(fig)["peak displacement over time"].get_array()
        true_location, _, true_depth = np.unravel_index(np.nanargmax(field), field.shape)
        self.assertEqual(np.unravel_index(np.argmax(np.ma.filled(peak, -1)), peak.shape), (true_depth, true_location))

    def test_arfi_track_times_come_from_the_input_frames_when_results_lack_them(self):
        path, frames_path = self.folder.file("arfi.h5"), self.folder.file("iq.h5")
        synthetic.write_arfi_results(path, sets=1, rng=self.rng, frames_path=frames_path)
        (group,), context = groups_of(path)
        for frames, expected in ((None, (-0.5, 39.5)), (frames_path, (-0.05, 3.95))):  # index, then ms
            context.frames_recordings = [sonopipe.read_recording(frames)] if frames else []
            fig = plt.figure()
            arfi.ArfiView(context.options).draw(fig, group, context)
            images = images_by_title(fig)
            depth_time = [t for t in images if t.startswith("displacement at")][0]
            t_left, t_right, _, _ = images[depth_time].get_extent()
            self.assertAlmostEqual(t_left, expected[0], places=6)
            self.assertAlmostEqual(t_right, expected[1], places=6)

    def test_strain_image_shows_the_inclusion_in_percent_beside_the_bmode(self):
        path = self.folder.file("strain.h5")
        synthetic.write_strain_results(path, rng=self.rng)
        (group,), context = groups_of(path)
        fig = plt.figure()
        strain.StrainView(context.options).draw(fig, group, context)
        images = images_by_title(fig)
        self.assertIn("B-mode, pre-compression frame #0", images)
        strain_image = [a for t, a in images.items() if t.startswith("strain")][0].get_array()
        _, inside = synthetic.strain_field()
        # background -1 %, inclusion 5x stiffer -0.2 %; noise SD 0.05 % -> medians within 0.05 %
        self.assertAlmostEqual(float(np.median(strain_image[~inside])), -1.0, delta=0.05)
        self.assertAlmostEqual(float(np.median(strain_image[inside])), -0.2, delta=0.05)
        self.assertIn("peak correlation", images)

    def test_strain_bmode_comes_from_a_separate_raw_recording_given_with_frames(self):
        path, frames_path = self.folder.file("strain.h5"), self.folder.file("rf.h5")
        synthetic.write_strain_results(path, rng=self.rng, frames_path=frames_path)
        (group,), context = groups_of(path)
        fig = plt.figure()
        strain.StrainView(context.options).draw(fig, group, context)
        self.assertNotIn("B-mode, pre-compression frame #0", images_by_title(fig), "no frames: no B-mode")
        context.frames_recordings = [sonopipe.read_recording(frames_path)]
        fig = plt.figure()
        strain.StrainView(context.options).draw(fig, group, context)
        bmode_image = images_by_title(fig)["B-mode, pre-compression frame #0"].get_array()
        self.assertEqual(bmode_image.shape, (600, 64))  # the RF frame's samples x lines
        self.assertAlmostEqual(float(bmode_image.max()), 0.0)  # dB relative to the maximum

    def test_strain_bmode_comes_from_the_rf_the_pipeline_published_for_the_previous_frame(self):
        path, frames_path = self.folder.file("strain.h5"), self.folder.file("rf.h5")
        synthetic.write_strain_results(path, rng=self.rng, frames_path=frames_path)
        # as config/demo.yaml publishes it: result/strain2d/rf_converted for every frame, float32
        rf = sonopipe.read_recording(frames_path).streams[5]
        results = sonopipe.read_recording(path).results
        converted = [(synthetic.result_header("strain2d", "rf_converted", a.astype(np.float32),
                                              sonopipe.arrays.axes_from_proto(h.axes), h.sequence, "", stream_id=5),
                      a.astype(np.float32)) for h, a in rf]
        sonopipe.write_recording(path, results=converted + [(h, a) for series in results.values() for h, a in series])
        groups, context = groups_of(path)
        self.assertEqual([sorted(g.outputs) for g in groups], [["rf_converted"], ["correlation", "rf_converted", "strain"]])
        context.remember(groups[0])
        fig = plt.figure()
        strain.StrainView(context.options).draw(fig, groups[1], context)
        bmode_image = images_by_title(fig)["B-mode, pre-compression frame #0"].get_array()
        self.assertEqual(bmode_image.shape, (600, 64))
        png = self.folder.file("png")
        completed = run_view("--recording", path, "--png", png)
        self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)
        self.assertEqual(sorted(os.listdir(png)), ["strain2d_000000.png", "strain2d_000001.png"])  # 0: the RF alone

    def test_perfusion_maps_show_both_territories_in_ml_per_100g_per_min(self):
        path = self.folder.file("perfusion.h5")
        maps = synthetic.write_perfusion_results(path, rng=self.rng)
        (group,), context = groups_of(path)
        fig = plt.figure()
        perfusion.PerfusionView(context.options).draw(fig, group, context)
        _, tumour = synthetic.perfusion_maps()
        drawn = {ax.get_title().split()[0]: ax.images[0].get_array() for ax in fig.axes if ax.images}
        self.assertEqual(sorted(drawn), ["k_a", "k_l", "k_p"])
        for name, values in maps.items():
            # 5 % multiplicative noise: medians within 3 % of the territory values
            self.assertAlmostEqual(float(np.median(drawn[name][tumour])), values[tumour][0], delta=0.03 * values[tumour][0])
            self.assertAlmostEqual(float(np.median(drawn[name][~tumour])), values[~tumour][0],
                                   delta=0.03 * values[~tumour][0])
        labels = [ax.get_ylabel() for ax in fig.axes if not ax.images]  # the colour bars
        self.assertTrue(all("ml/100g/min" in label for label in labels), labels)

    def test_perfusion_batch_of_several_slices_shows_the_chosen_slice(self):
        rows, columns, slices = 4, 5, 3
        table = np.zeros((slices * rows * columns, 9))
        table[:, 2] = np.arange(table.shape[0])  # k_l = flat voxel index (NIfTI order)
        header = synthetic.result_header("perfusion", "perfusion_maps", table, ["voxel", "parameter"], 0, "")
        path = self.folder.file("perfusion.h5")
        sonopipe.write_recording(path, results=[(header, table)])
        (group,), context = groups_of(path)
        for slice_index, expected_first in ((None, 20), (2, 40)):  # default: the middle slice
            context.options.slice, context.options.slice_shape = slice_index, f"{rows}x{columns}"
            fig = plt.figure()
            perfusion.PerfusionView(context.options).draw(fig, group, context)
            k_l = [ax.images[0].get_array() for ax in fig.axes if ax.images and ax.get_title().startswith("k_l")][0]
            np.testing.assert_array_equal(k_l, expected_first + np.arange(rows * columns).reshape(rows, columns))

    def test_perfusion_fit_table_of_masked_voxels_is_placed_into_its_slice(self):
        path, frames_path = self.folder.file("perfusion.h5"), self.folder.file("dce.h5")
        maps, liver = synthetic.write_perfusion_fit_results(path, frames_path, rng=self.rng)
        (group,), context = groups_of(path)
        context.frames_recordings = [sonopipe.read_recording(frames_path)]
        self.assertTrue(perfusion.accepts(group))
        fig = plt.figure()
        perfusion.PerfusionView(context.options).draw(fig, group, context)
        drawn = {ax.get_title().split()[0]: np.ma.filled(ax.images[0].get_array().astype(float), np.nan)
                 for ax in fig.axes if ax.images}  # imshow masks NaN
        _, tumour = synthetic.perfusion_maps()
        for name, values in maps.items():
            self.assertEqual(drawn[name].shape, liver.shape)
            self.assertTrue(np.all(np.isnan(drawn[name][~liver])), "outside the mask stays blank")
            inside = liver & tumour
            # 5 % multiplicative noise: the median within 3 % of the territory value
            self.assertAlmostEqual(float(np.median(drawn[name][inside])), values[inside][0], delta=0.03 * values[inside][0])
        labels = [ax.get_ylabel() for ax in fig.axes if not ax.images]
        self.assertTrue(all("ml/100g/min" in label for label in labels), labels)
        png = self.folder.file("png")
        unrelated = self.folder.file("unrelated.h5")  # --frames repeats: one recording per simulated stream
        synthetic.write_strain_results(self.folder.file("other.h5"), rng=self.rng, frames_path=unrelated)
        completed = run_view("--recording", path, "--frames", unrelated, "--frames", frames_path, "--png", png)
        self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)
        check_png(self, os.path.join(png, "perfusion_000000.png"), perfusion.PerfusionView.figure_size)


if __name__ == "__main__":
    unittest.main()
