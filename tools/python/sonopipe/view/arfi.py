"""ARFI view: displacement vs depth and time at one location, its time course at the peak depth,
and the peak displacement across locations (depth x lateral). Axes in mm / ms, values in um.

Input: a displacement result with a location axis, a slow-time axis (track/time/ensemble) and a
depth axis (depth/sample), positive = away from the transducer (stages/arfi/arfi_conventions.h). Track
times come from the vector "ensemble_time_s" (entry 0 = the reference) of the result or of its
input frame (results recording or --frames), else from the track axis.
"""
from dataclasses import dataclass

import numpy as np

from sonopipe.view import panels, units

DISPLACEMENT_UNITS = ("um", "µm", "m", "mm", "nm")


def _is_displacement(result):
    names = result.axis_names
    return (result.header.unit in DISPLACEMENT_UNITS and result.array is not None and result.array.ndim == 3
            and units.find_axis(result.axes, units.LATERAL_NAMES) is not None
            and units.find_axis(result.axes, units.TIME_NAMES) is not None and len(names) == 3)


def displacement_output(group, preferred=None):
    """The output to show: `preferred` if given, else the last stage's (a name with 'filter'),
    else 'displacement', else any displacement-like output; None when there is none."""
    if preferred:
        return group.outputs.get(preferred)
    candidates = [r for r in group.outputs.values() if _is_displacement(r)]
    for key in ("filter", "displacement"):
        for result in candidates:
            if key in result.header.output:
                return result
    return candidates[0] if candidates else None


def accepts(group):
    return displacement_output(group) is not None


def _track_times(result, tracks, context):
    """(values, label) of the slow-time axis: the vector "ensemble_time_s" of the result, else of
    its input frame (from a recording), else the track axis itself."""
    vectors = list(result.header.vectors)
    frame = context.input_frame(result.header.stream_id, result.header.input_sequence) if context else None
    if frame is not None:
        vectors += list(frame[0].vectors)
    for vector in vectors:
        if vector.name == "ensemble_time_s":
            times = np.asarray(vector.values)
            if len(times) == tracks + 1:
                times = times[1:]  # entry 0 is the pre-push reference
            if len(times) == tracks:
                return times * 1e3, "time after push (ms)"
    axis = result.axes[units.find_axis(result.axes, units.TIME_NAMES)]
    return units.coordinates(axis)


@dataclass
class ArfiFields:
    """What an ARFI view draws, in display units (um, mm, ms); shared by sonopipe-view and sonopipe-web."""
    at_location: np.ndarray   # [time, depth] displacement at the chosen location
    peak: np.ndarray          # [location, depth] peak over time, NaN where no window is finite
    peak_um: float            # largest finite displacement
    location: int             # index of the chosen location
    peak_depth: int           # depth index of the peak at that location
    lateral: np.ndarray
    lateral_label: str
    time: np.ndarray
    time_label: str
    depth: np.ndarray
    depth_label: str


def arfi_fields(result, context=None, location=None):
    """Peak displacement map and the depth-time image at `location` (default: the location holding
    the largest displacement) of a displacement result."""
    header = result.header
    axes = result.axes
    order = (units.find_axis(axes, units.LATERAL_NAMES), units.find_axis(axes, units.TIME_NAMES))
    depth_index = next(i for i in range(3) if i not in order)
    values = units.displacement_um(np.transpose(result.array, order + (depth_index,)), header.unit)
    locations, tracks, depths = values.shape  # [location, time, depth] in um
    lateral, lateral_label = units.coordinates(axes[order[0]])
    time, time_label = _track_times(result, tracks, context)
    depth, depth_label = units.coordinates(axes[depth_index], units.speed_of_sound(header))

    # NaN marks zero-energy windows: peaks over the finite values only, NaN where none is
    finite = np.where(np.isfinite(values), values, -np.inf)
    peak_finite = finite.max(axis=1)  # [location, depth]
    peak = np.where(np.isfinite(peak_finite), peak_finite, np.nan)
    if location is None:
        location = int(np.unravel_index(np.argmax(peak_finite), peak_finite.shape)[0])
    else:
        location = min(max(location, 0), locations - 1)
    return ArfiFields(values[location], peak, float(peak_finite.max()), location,
                      int(np.argmax(peak_finite[location])), lateral, lateral_label, time, time_label,
                      depth, depth_label)


class ArfiView:
    name = "arfi"
    figure_size = (15, 4.8)

    def __init__(self, options):
        self.output = getattr(options, "output", None)
        self.location = getattr(options, "location", None)

    def draw(self, fig, group, context):
        result = displacement_output(group, self.output)
        header = result.header
        fields = arfi_fields(result, context, self.location)
        at_location, peak, location, peak_depth = fields.at_location, fields.peak, fields.location, fields.peak_depth
        lateral, lateral_label = fields.lateral, fields.lateral_label
        time, time_label = fields.time, fields.time_label
        depth, depth_label = fields.depth, fields.depth_label

        left, middle, right = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1.2, 1, 1.2]})
        limits = panels.robust_limits(at_location, high=99.5, symmetric=True)
        panels.image(fig, left, at_location.T, time, time_label, depth, depth_label,
                     f"displacement at lateral {lateral[location]:.3g} {units.unit_of(lateral_label)}".rstrip(),
                     "displacement (µm)", cmap="RdBu_r", limits=limits)
        left.axhline(depth[peak_depth], color="k", lw=0.8, ls="--")

        middle.plot(time, at_location[:, peak_depth], "o-", ms=3, lw=1.2)
        middle.axhline(0, color="0.6", lw=0.8)
        middle.set_xlabel(time_label)
        middle.set_ylabel("displacement (µm)")
        middle.set_title(f"time course at depth {depth[peak_depth]:.3g} {units.unit_of(depth_label)}".rstrip(),
                         fontsize=10)
        middle.grid(True, alpha=0.3)

        panels.image(fig, right, peak.T, lateral, lateral_label, depth, depth_label,
                     "peak displacement over time", "peak displacement (µm)", cmap="inferno",
                     limits=(0.0, panels.robust_limits(peak, high=99.5)[1]), aspect="auto")  # ~5x deeper than wide
        right.axvline(lateral[location], color="c", lw=0.8, ls="--")
        fig.suptitle(f"ARFI  {header.pipeline}/{header.output}  (peak {fields.peak_um:.2f} µm)", fontsize=11)
