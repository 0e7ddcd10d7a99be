"""One line per chain for the README's main command (tools/demo.sh): frames through the daemon,
(ARFI, strain, perfusion and, with --doppler, ultrafast Doppler)
error of the published results against the simulators' ground truth, and time.

Run with the package importable (build/tools/python/sonopipe-python tools/demo_summary.py ...).
Exits non-zero when a chain published nothing, so the demo cannot pass silently.
"""
import argparse
import json
import sys

import numpy as np

from sonopipe.recording import read_recording

UPSAMPLE_FACTOR = 5  # config/demo.yaml: upsample factor 5, so IQ sample i is depth index 5 i


def pipeline_status(status, name):
    """(frames processed, results published, sum of the stages' p50 compute ms) of a pipeline."""
    for pipeline in status.get("pipelines", []):
        if pipeline.get("name") == name:
            stage_ms = sum(float(s.get("computeMsP50", 0)) for s in status.get("stages", [])
                           if s.get("pipeline") == name)
            return int(pipeline.get("framesProcessed", 0)), int(pipeline.get("resultsPublished", 0)), stage_ms
    return 0, 0, 0.0


def by_sequence(series):
    """{input sequence: result array}."""
    return {int(header.input_sequence): array for header, array in series}


def arfi_line(results, acquisition):
    series = results.results.get(("arfi", "displacement_filtered"))
    if series is None or len(series) == 0:
        return None
    truth = acquisition.truth["tissue_displacement_um"].values  # [frame, location, track, sample] um
    errors, peaks, true_peaks = [], [], []
    for sequence, displacement in by_sequence(series).items():
        measured = np.asarray(displacement, dtype=np.float64)[..., ::UPSAMPLE_FACTOR]
        expected = truth[sequence][..., :measured.shape[-1]]
        # The motion filter fits through the late tracks, which are not quite at rest: compare
        # where the push is (|truth| > 20 % of its peak) so the message is about the push itself.
        region = np.abs(expected) > 0.2 * np.abs(expected).max()
        errors.append(measured[region] - expected[region])
        # The push's core (|truth| > 80 % of its peak): a mean there is robust to speckle noise.
        core = np.abs(expected) > 0.8 * np.abs(expected).max()
        peaks.append(np.nanmean(measured[core]))
        true_peaks.append(np.mean(expected[core]))
    error = np.concatenate(errors)
    error = error[np.isfinite(error)]
    return (f"{len(series)} sets, push core {np.mean(peaks):.2f} um (truth {np.mean(true_peaks):.2f} um), "
            f"bias {error.mean():+.3f} um, rms error {np.sqrt(np.mean(error ** 2)):.3f} um in the push region")


def strain_line(results, acquisition):
    series = results.results.get(("strain2d", "strain"))
    if series is None or len(series) == 0:
        return None
    truth = acquisition.truth["axial_strain"]  # [frame, lateral, axial] on the RF grid, vs frame 0
    truth_axes = truth.axes[1:]
    ratios, backgrounds, true_backgrounds = [], [], []
    for header, strain in series:
        axes = list(header.axes)
        k = int(header.input_sequence)
        # The pair (k, k-1) sees the increment between the two frames' cumulative strains.
        increment = truth.values[k] - truth.values[k - 1]
        # Result grid point -> nearest RF sample of the truth (positions in metres from each axis'
        # origin and spacing); the last axis of the result is the strain component (axial first).
        index = []
        for axis, truth_axis in zip(axes[:-1], truth_axes):
            positions = axis.origin + axis.spacing * np.arange(axis.size)
            index.append(np.clip(np.rint((positions - truth_axis.origin) / truth_axis.spacing).astype(int),
                                 0, truth_axis.size - 1))
        expected = increment[np.ix_(*index)]
        measured = np.asarray(strain, dtype=np.float64)[..., 0]
        background = np.median(expected)
        inclusion = np.abs(expected) < 0.6 * np.abs(background)
        if not inclusion.any():
            continue
        backgrounds.append(np.median(measured[~inclusion]))
        true_backgrounds.append(background)
        ratios.append((np.median(measured[inclusion]) / backgrounds[-1],
                       np.median(expected[inclusion]) / background))
    if not ratios:
        return f"{len(series)} pairs, no inclusion found in the truth"
    measured_ratio = np.mean([r[0] for r in ratios])
    true_ratio = np.mean([r[1] for r in ratios])
    return (f"{len(series)} frame pairs, background strain {100 * np.mean(backgrounds):+.2f} % "
            f"(truth {100 * np.mean(true_backgrounds):+.2f} %), inclusion/background "
            f"{measured_ratio:.2f} (truth {true_ratio:.2f})")


def perfusion_line(results, acquisition):
    series = results.results.get(("perfusion", "perfusion_maps"))
    if series is None or len(series) == 0:
        return None
    parts, converged = [], []
    for column, name in enumerate(("k_a", "k_p", "k_l")):
        errors = []
        for sequence, table in by_sequence(series).items():
            expected = acquisition.truth[name].values[sequence]
            measured = np.asarray(table, dtype=np.float64)[:, column]
            errors.append(np.abs(measured - expected) / expected)
            if column == 0:
                converged.append(np.asarray(table)[:, 8])
        error = np.concatenate(errors)
        parts.append(f"{name} {100 * np.nanmedian(error):.1f} %")
    voxels = sum(len(c) for c in converged)
    return (f"{voxels} voxels, median error {', '.join(parts)} (ml/100g/min), "
            f"converged {100 * np.mean(np.concatenate(converged)):.0f} %")


def doppler_line(results, acquisition):
    """Velocity error in the tube's core (r <= 0.8 R, the phantom's lumen mask eroded by the pixels
    within 0.2 R of the wall, as docs/doppler.md reports it) against the truth on the same grid."""
    series = results.results.get(("doppler", "velocity"))
    if series is None or len(series) == 0:
        return None
    # [lateral, axial] m/s on the beamform grid, the same for every ensemble (the flow is steady)
    expected = acquisition.truth["axial_velocity_m_per_s"].values
    inside = acquisition.truth["lumen"].values > 0.5
    if expected.ndim == 3:  # one per frame of the recording: the same field
        expected, inside = expected[0], inside[0]
    errors, peaks, nyquist = [], [], None
    for header, velocity in series:
        peak = np.abs(expected[inside]).max()
        core = inside & (np.abs(expected) >= 0.36 * peak)  # parabolic: |v| >= 0.36 peak <=> r <= 0.8 R
        measured = np.asarray(velocity, dtype=np.float64)
        errors.append((measured - expected)[core])
        peaks.append(peak)
        nyquist = float(header.attributes.get("nyquist_velocity_m_per_s", "nan"))
    error = np.concatenate(errors)
    finite = error[np.isfinite(error)]
    rms = np.sqrt(np.mean(finite ** 2)) if finite.size else float("nan")
    return (f"{len(series)} ensembles, axial peak {100 * np.mean(peaks):.1f} cm/s, Nyquist {100 * nyquist:.1f} cm/s, "
            f"rms velocity error {100 * rms:.2f} cm/s ({100 * rms / np.mean(peaks):.1f} % of peak) in the tube core, "
            f"{100 * (1 - finite.size / max(1, error.size)):.0f} % of it without estimate")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", required=True, help="recording written by sonopipe-record")
    parser.add_argument("--arfi", required=True)
    parser.add_argument("--strain", required=True)
    parser.add_argument("--perfusion", required=True)
    parser.add_argument("--doppler", help="the flow phantom's recording (sonopipe-sim flow)")
    parser.add_argument("--status", required=True, help="sonopipe-ctl status --json output")
    parser.add_argument("--seconds", type=float, default=0.0, help="wall time of the whole demo")
    args = parser.parse_args()

    status = json.load(open(args.status))
    results = read_recording(args.results)
    print(f"== summary (backend {status.get('backend', '?')}: {status.get('backendReason', '')})")
    print(f"   frames received {int(status.get('framesReceived', 0))}, processed "
          f"{int(status.get('framesProcessed', 0))}, published {int(status.get('resultsPublished', 0))}, "
          f"rejected {int(status.get('framesRejected', 0))}, dropped {int(status.get('framesDropped', 0))}; "
          f"demo wall time {args.seconds:.0f} s")
    missing = []
    chains = [("arfi", arfi_line, args.arfi), ("strain2d", strain_line, args.strain),
              ("perfusion", perfusion_line, args.perfusion)]
    if args.doppler:
        chains.append(("doppler", doppler_line, args.doppler))
    for pipeline, line, acquisition in chains:
        processed, published, stage_ms = pipeline_status(status, pipeline)
        text = line(results, read_recording(acquisition))
        if text is None:
            missing.append(pipeline)
            text = "no results recorded"
        print(f"   {pipeline:10s} {processed} frames processed, {published} results, "
              f"stages {stage_ms:.1f} ms/frame (p50): {text}")
    if missing:
        print(f"demo_summary: no results from {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
