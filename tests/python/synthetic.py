"""Recordings of results shaped like each chain's outputs (names, axes, units as the stages
publish them), for testing sonopipe-view without the daemon. Fields are analytic and known:
an ARFI push (Gaussian in depth and across locations, rise and recovery in time), a strain image
with a stiff circular inclusion over speckle RF frames, perfusion maps with two territories."""
import time

import numpy as np

import sonopipe
from sonopipe.v1 import frame_pb2, result_pb2


def result_header(pipeline, output, array, axes, sequence, unit, stream_id=0, attributes=None, vectors=None):
    now = time.time_ns()
    header = result_pb2.ResultHeader(schema_version=1, pipeline=pipeline, output=output, stream_id=stream_id,
                                     input_sequence=sequence, acquisition_time_ns=now,
                                     element_type=sonopipe.element_type_of(array.dtype), unit=unit, backend="cpu")
    header.input_kind = frame_pb2.FRAME_KIND_IQ
    base = 1_000_000_000 * (sequence + 1)  # recorded daemon clock: one result set per second
    header.timing.received_ns = base
    header.timing.compute_start_ns = base + 1_000_000
    header.timing.compute_end_ns = base + 4_000_000
    header.timing.published_ns = base + 5_000_000
    sonopipe.arrays.axes_to_proto(sonopipe.arrays.make_axes(array.shape, axes), header.axes)
    for key, value in (attributes or {}).items():
        header.attributes[key] = str(value)
    for name, values in (vectors or {}).items():
        header.vectors.add(name=name, values=list(values), unit="s")
    return header


def arfi_displacement_um(locations=52, tracks=40, depths=120, peak_um=8.0, focus_index=None):
    """[location, track, depth] displacement in um and the track times (s, reference first)."""
    focus = depths * 0.55 if focus_index is None else focus_index
    depth = np.exp(-0.5 * ((np.arange(depths) - focus) / (depths * 0.12)) ** 2)
    lateral = np.exp(-0.5 * ((np.arange(locations) - locations / 2) / (locations * 0.12)) ** 2)
    ensemble_time_s = np.concatenate([[-2e-4], np.arange(tracks) * 1e-4])
    t = ensemble_time_s[1:]
    course = (t / 0.8e-3) * np.exp(1 - t / 0.8e-3)  # rise to 1 at 0.8 ms, then recovery
    field = peak_um * lateral[:, None, None] * course[None, :, None] * depth[None, None, :]
    return field.astype(np.float32), ensemble_time_s


def write_arfi_results(path, sets=3, rng=None, frames_path=None):
    """Displacement and quality results; the track times travel as the vector "ensemble_time_s"
    in the results, or, with `frames_path`, only in the headers of raw IQ frames written there
    (as the daemon publishes them: results carry no frame vectors)."""
    rng = rng or np.random.default_rng(1)
    results, frames = [], []
    for sequence in range(sets):
        field, times = arfi_displacement_um()
        noisy = field + rng.normal(0, 0.1, field.shape).astype(np.float32)
        axes = [("location", 0.2e-3, "m", -5.2e-3), "track", ("depth", 1 / 44.4e6, "s", 0.0)]
        vectors = {"ensemble_time_s": times}
        if frames_path:
            iq = np.zeros((field.shape[0], field.shape[1] + 1, 8, 2), np.int16)
            frames.append((sonopipe.make_frame_header(iq, kind="iq", axes=["location", "ensemble", "sample", "iq"],
                                                      sequence=sequence, vectors={"ensemble_time_s": (times, "s")}),
                           iq))
            vectors = {}
        results.append((result_header("arfi", "displacement", noisy, axes, sequence, "um", vectors=vectors), noisy))
        quality = np.clip(1 - np.abs(rng.normal(0, 0.02, field.shape)), 0, 1).astype(np.float32)
        results.append((result_header("arfi", "quality", quality, axes, sequence, "1", vectors=vectors), quality))
    if frames_path:
        sonopipe.write_recording(frames_path, frames=frames)
    sonopipe.write_recording(path, results=results)
    return field


def speckle_rf(rng, samples=600, lines=64, f0_per_sample=0.125):
    """RF with speckle: random scatterers convolved with a Gaussian-enveloped pulse along depth."""
    scatterers = rng.standard_normal((samples, lines))
    n = np.arange(-24, 25)
    pulse = np.exp(-0.5 * (n / 6.0) ** 2) * np.cos(2 * np.pi * f0_per_sample * n)
    rf = np.apply_along_axis(lambda line: np.convolve(line, pulse, mode="same"), 0, scatterers)
    return rf


def strain_field(points_axial=60, points_lateral=40, strain=-0.01, inclusion_ratio=5.0):
    """Axial strain with a circular inclusion straining `inclusion_ratio` times less."""
    z, x = np.meshgrid(np.linspace(-1, 1, points_axial), np.linspace(-1, 1, points_lateral), indexing="ij")
    inside = np.hypot(z, x) < 0.4
    return np.where(inside, strain / inclusion_ratio, strain).astype(np.float32), inside


def write_strain_results(path, rng=None, frames_path=None):
    """Results (and the RF frames, into `frames_path` when given, else beside the results)."""
    rng = rng or np.random.default_rng(2)
    samples, lines = 600, 64
    frames = []
    rf0 = speckle_rf(rng, samples, lines)
    for sequence in range(2):
        rf = (rf0 * 1000).astype(np.int16)
        header = sonopipe.make_frame_header(rf, kind="rf", axes=[("sample", 1540 / 2 / 40e6, "m"), ("line", 0.3e-3, "m")],
                                            sequence=sequence, stream_id=5, sampling_frequency_hz=40e6)
        frames.append((header, rf))
    strain, _ = strain_field()
    strain = strain + rng.normal(0, 0.0005, strain.shape).astype(np.float32)
    correlation = np.clip(0.97 + rng.normal(0, 0.01, strain.shape), 0, 1).astype(np.float32)
    axial_step = 10 * 1540 / 2 / 40e6
    axes = [("sample", axial_step, "m", 30 * 1540 / 2 / 40e6), ("line", 1.5 * 0.3e-3, "m", 2 * 0.3e-3)]
    results = [(result_header("strain2d", "correlation", correlation, axes, 1, "1", stream_id=5, attributes={"lag": 1}),
                correlation),
               (result_header("strain2d", "strain", strain, axes, 1, "1", stream_id=5, attributes={"lag": 1}), strain)]
    if frames_path:
        sonopipe.write_recording(frames_path, frames=frames)
        frames = []
    sonopipe.write_recording(path, frames=frames, results=results)
    return strain


def perfusion_maps(rows=48, columns=64):
    """k_a, k_p, k_l maps (ml/100g/min): a tumour-like territory with arterial supply in a liver
    background supplied mostly by the portal vein."""
    y, x = np.mgrid[0:rows, 0:columns]
    tumour = np.hypot(y - rows * 0.4, x - columns * 0.65) < rows * 0.2
    k_a = np.where(tumour, 120.0, 20.0)
    k_p = np.where(tumour, 10.0, 100.0)
    k_l = np.where(tumour, 250.0, 400.0)
    return {"k_a": k_a, "k_p": k_p, "k_l": k_l}, tumour


def write_perfusion_results(path, rng=None):
    rng = rng or np.random.default_rng(3)
    maps, _ = perfusion_maps()
    results = []
    for name, values in maps.items():
        noisy = (values * (1 + rng.normal(0, 0.05, values.shape))).astype(np.float64)
        axes = [("y", 1.5e-3, "m"), ("x", 1.5e-3, "m")]
        results.append((result_header("perfusion", name, noisy, axes, 0, "ml/100g/min", stream_id=9), noisy))
    sonopipe.write_recording(path, results=results)
    return maps


def write_perfusion_fit_results(path, frames_path, rng=None, time_points=16):
    """As the perfusion_fit stage publishes: one output `perfusion_maps`, float64 [voxel, parameter
    = 9], for the voxels of a liver mask only; the DCE frame (written to `frames_path`) carries the
    slice layout as attribute "slice_shape" and the voxel positions as vector "voxel_index"."""
    rng = rng or np.random.default_rng(4)
    maps, tumour = perfusion_maps()
    rows, columns = tumour.shape
    y, x = np.mgrid[0:rows, 0:columns]
    liver = np.hypot((y - rows / 2) / (rows * 0.48), (x - columns / 2) / (columns * 0.48)) < 1
    index = np.flatnonzero(liver)
    table = np.zeros((index.size, 9))
    for column, name in enumerate(("k_a", "k_p", "k_l")):
        table[:, column] = maps[name].ravel()[index] * (1 + rng.normal(0, 0.05, index.size))
    table[:, 3:5] = (1.0, 2.0)
    table[:, 6] = 120
    table[:, 8] = 1
    curves = rng.random((index.size, time_points))
    frame_header = sonopipe.make_frame_header(curves, kind="dce", axes=["voxel", ("time", 5.0, "s")], stream_id=9,
                                              attributes={"slice_shape": f"{rows}x{columns}"},
                                              vectors={"voxel_index": index, "time_s": np.arange(time_points) * 5.0})
    sonopipe.write_recording(frames_path, frames=[(frame_header, curves)])
    header = result_header("perfusion", "perfusion_maps", table, ["voxel", "parameter"], 0, "", stream_id=9)
    header.input_kind = frame_pb2.FRAME_KIND_DCE
    sonopipe.write_recording(path, results=[(header, table)])
    return maps, liver


def dce_curves(time_s, arterial, portal, k_a, k_p, k_l, tau_a=1.0, tau_p=2.0, refine=40):
    """Dual-input single-compartment tissue curves (wang2012; rates in ml/100g/min, k = 400 is
    4 /min), the integral evaluated by the trapezoid rule on a grid `refine` times finer, inputs
    linear between samples and zero before the first (the perfusion_fit stage's conventions)."""
    fine = np.linspace(time_s[0], time_s[-1], (len(time_s) - 1) * refine + 1)
    step = fine[1] - fine[0]
    delayed_a = np.interp(fine - tau_a, time_s, arterial, left=0.0)
    delayed_p = np.interp(fine - tau_p, time_s, portal, left=0.0)
    per_s = 1 / 100 / 60  # ml/100g/min -> 1/s
    curves = []
    for a, p, l in zip(np.ravel(k_a), np.ravel(k_p), np.ravel(k_l)):
        source = a * per_s * delayed_a + p * per_s * delayed_p
        decay = np.exp(-l * per_s * step)
        tissue = np.zeros_like(fine)
        for i in range(1, len(fine)):  # exact recursion of the trapezoid-rule convolution
            tissue[i] = tissue[i - 1] * decay + 0.5 * step * (source[i - 1] * decay + source[i])
        curves.append(tissue[::refine])
    return np.array(curves)


def write_dce_batches(path, rng=None, time_points=64, dt_s=1.5, cnr=100.0):
    """One DCE frame (kind dce, float64 [voxel, time], vectors time_s, arterial_input,
    portal_input, attribute slice_shape) of the perfusion_maps() slice: what the perfusion_fit
    stage takes. Returns the true maps and the tumour mask."""
    rng = rng or np.random.default_rng(5)
    maps, tumour = perfusion_maps(rows=24, columns=32)
    time_s = np.arange(time_points) * dt_s
    arterial = 6.0 * (time_s / 8) ** 2 * np.exp(-time_s / 8) + 0.3 * (1 - np.exp(-time_s / 30))  # mM
    kernel = np.exp(-time_s / 6.0)
    portal = np.convolve(np.interp(time_s - 4.0, time_s, arterial, left=0.0), kernel / kernel.sum())[:time_points]
    curves = dce_curves(time_s, arterial, portal, maps["k_a"], maps["k_p"], maps["k_l"])
    curves = curves + rng.normal(0.0, curves.max() / cnr, curves.shape)
    rows, columns = tumour.shape
    header = sonopipe.make_frame_header(curves, kind="dce", axes=["voxel", ("time", dt_s, "s")], stream_id=0,
                                        sequence=0, acquisition_time_ns=0,
                                        attributes={"slice_shape": f"{rows}x{columns}"},
                                        vectors={"time_s": time_s, "arterial_input": arterial, "portal_input": portal})
    sonopipe.write_recording(path, frames=[(header, curves)])
    return maps, tumour


NYQUIST_M_PER_S = 0.385  # c PRF / (4 f_c) at 1540 m/s, 5 kHz, 5 MHz


def doppler_fields(lateral=64, axial=80, frames=16, rng=None):
    """The doppler stage's outputs of a tube across the image (docs/doppler.md's flow phantom, in
    short): velocity [lateral, axial] m/s, parabolic across the tube, the upper half flowing away
    (+) and the lower half towards the probe (-) by construction, NaN outside the tube (no
    estimate); power 30 dB above the tissue's in the tube; and the beamformed IQ ensemble
    [frame, lateral, axial] of stationary speckle (the mean frame is the tissue). Pixels 0.2 mm."""
    rng = rng or np.random.default_rng(6)
    x, z = np.meshgrid(np.arange(lateral) - lateral / 2, np.arange(axial) - axial / 2, indexing="ij")
    radius = axial * 0.15
    distance = np.abs(z - 0.3 * x)  # a tube at a slant, axis through the centre
    lumen = distance < radius
    profile = np.clip(1 - (distance / radius) ** 2, 0, 1)
    direction = np.where(x < 0, 1.0, -1.0)  # left half away, right half towards
    velocity = np.where(lumen, 0.9 * NYQUIST_M_PER_S * profile * direction, np.nan).astype(np.float32)
    power = np.where(lumen, 1e3 * (0.1 + profile), 1.0) * (1 + 0.1 * rng.random((lateral, axial)))
    speckle = (rng.standard_normal((lateral, axial)) + 1j * rng.standard_normal((lateral, axial)))
    ensemble = (speckle[None] + 0.05 * (rng.standard_normal((frames, lateral, axial))
                                        + 1j * rng.standard_normal((frames, lateral, axial)))).astype(np.complex64)
    return velocity, power.astype(np.float32), ensemble, lumen


def doppler_results(sequence=0, rng=None, stream_id=3, pipeline="doppler", bmode="stage"):
    """[(ResultHeader, array)] as config/doppler.yaml publishes them. The B-mode: bmode="stage" the
    mean_bmode stage's `bmode` (20 log10 |mean frame|, dB, attribute mean_of_frames), "ensemble" the
    beamformed ensemble itself (beamform with publish: true), None none."""
    velocity, power, ensemble, _ = doppler_fields(rng=rng)
    grid = [("lateral", 0.2e-3, "m", -6.4e-3), ("axial", 0.2e-3, "m", 10e-3)]
    attributes = {"nyquist_velocity_m_per_s": repr(NYQUIST_M_PER_S)}
    power_db = (10 * np.log10(power)).astype(np.float32)
    results = [(result_header(pipeline, name, array, grid, sequence, unit, stream_id=stream_id, attributes=attributes),
                array) for name, array, unit in (("velocity", velocity, "m/s"), ("power", power, ""),
                                                  ("power_db", power_db, "dB"))]
    if bmode == "ensemble":
        axes = [("frame", 2e-4, "s")] + grid
        results.insert(0, (result_header(pipeline, "beamform_beamformed", ensemble, axes, sequence, "",
                                         stream_id=stream_id), ensemble))
    elif bmode == "stage":
        image = mean_bmode_db(ensemble)
        results.insert(0, (result_header(pipeline, "bmode", image, grid, sequence, "dB", stream_id=stream_id,
                                         attributes={"mean_of_frames": str(ensemble.shape[0])}), image))
    return results


def mean_bmode_db(ensemble):
    """The mean_bmode stage's output (stages/doppler/mean_bmode): 20 log10 |mean over frames|, float32."""
    return (20 * np.log10(np.abs(ensemble.astype(np.complex128).mean(axis=0)))).astype(np.float32)


def write_doppler_results(path, rng=None, sequences=1, bmode="stage"):
    rng = rng or np.random.default_rng(6)
    results = [r for sequence in range(sequences) for r in doppler_results(sequence, rng, bmode=bmode)]
    sonopipe.write_recording(path, results=results)
    return doppler_fields(rng=np.random.default_rng(0))


def beamform_strain_results(sequence=1, rng=None, stream_id=4, constant_correlation=True):
    """As config/beamform_strain.yaml publishes: the beamformed RF image `bmode_beamformed`
    [lateral, axial] (m), strain and ncc_track's correlation, here 1.0 everywhere (identical
    frames: what a constant image looks like)."""
    rng = rng or np.random.default_rng(7)
    lateral, axial = 41, 600
    rf = speckle_rf(rng, axial, lateral).T.astype(np.float32)  # [lateral, axial]
    image_axes = [("lateral", 0.2e-3, "m", -4e-3), ("axial", 18.5e-6, "m", 15e-3)]
    strain, _ = strain_field(30, 20)
    grid = [("axial", 20 * 18.5e-6, "m", 15.4e-3), ("lateral", 0.2e-3, "m", -2e-3)]
    correlation = np.ones_like(strain) if constant_correlation else np.clip(0.95 + 0.01 * rng.standard_normal(
        strain.shape), 0, 1).astype(np.float32)
    header = lambda name, array, axes, unit: result_header("channel_strain", name, array, axes, sequence, unit,  # noqa: E731
                                                           stream_id=stream_id, attributes={"lag": 1})
    return [(header("bmode_beamformed", rf, image_axes, ""), rf),
            (header("ncc_track_correlation", correlation, grid, "1"), correlation),
            (header("strain", strain, grid, "1"), strain)]
