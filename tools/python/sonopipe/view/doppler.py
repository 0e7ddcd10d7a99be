"""Doppler view (docs/doppler-viewing.md): power Doppler over the B-mode, colour velocity over the
B-mode, and the B-mode alone, from the doppler stage's outputs (stages/doppler, docs/doppler.md).

Outputs read, float32 [lateral, axial]: `velocity` (m/s, + = away from the probe, NaN = no
estimate), `power` (linear) and/or `power_db`; every header carries the attribute
`nyquist_velocity_m_per_s` (v_N = c PRF / (4 f_c)). The B-mode comes from the same result set:
the mean_bmode stage's `bmode` (dB of the ensemble's mean frame, what config/doppler.yaml
publishes) when present, else a beamformed output (a name ending in "beamformed", e.g. the
beamform stage with `publish: true`, or "mean"): IQ ensembles [frame, lateral, axial] are averaged
coherently over the frames (the mean frame), then |IQ|; a real beamformed RF image gets its
envelope along depth; all shown over BMODE_DYNAMIC_RANGE_DB below their maximum.

Display conventions, stated once here and used by sonopipe-view and sonopipe-web alike:
- power Doppler: dB relative to the largest power of the frame, colour map "hot" over
  [-POWER_DYNAMIC_RANGE_DB, 0]; pixels below that range are transparent (B-mode shows through);
- colour velocity: diverging map "RdBu" (negative = towards the probe = red, positive = away =
  blue, the clinical convention), limits exactly [-v_N, +v_N] from the header, shown where the
  pixel's power is within POWER_DYNAMIC_RANGE_DB of the frame's largest (the same gate) and the
  velocity is finite; elsewhere transparent.
"""
from dataclasses import dataclass

import numpy as np

from sonopipe.view import bmode, panels, units

NYQUIST_ATTRIBUTE = "nyquist_velocity_m_per_s"  # stages/doppler/doppler_conventions.h kNyquistAttribute
POWER_DYNAMIC_RANGE_DB = 15.0
BMODE_DYNAMIC_RANGE_DB = 50.0
POWER_MAP, VELOCITY_MAP = "hot", "RdBu"


def find(group, name):
    """The output called `name` or ending in "_<name>" (a stage's prefix), with an array; else None."""
    for output, result in group.outputs.items():
        if (output == name or output.endswith("_" + name)) and result.array is not None:
            return result
    return None


def accepts(group):
    return find(group, "velocity") is not None and (find(group, "power") or find(group, "power_db")) is not None


def nyquist_velocity_m_per_s(header):
    """v_N from the result header; raises ValueError when missing or not a positive number."""
    text = header.attributes.get(NYQUIST_ATTRIBUTE, "")
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or not np.isfinite(value):
        raise ValueError(f"result '{header.pipeline}/{header.output}' has no valid attribute "
                         f"{NYQUIST_ATTRIBUTE} ('{text}')")
    return value


def bmode_source(group):
    """The output the B-mode is made of (the mean_bmode stage's first, then any beamformed), else None."""
    stage_output = find(group, "bmode")
    if stage_output is not None:
        return stage_output
    for output, result in group.outputs.items():
        if result.array is not None and bmode.is_beamformed(output):
            return result
    return None


def bmode_plane(result, dynamic_range_db=BMODE_DYNAMIC_RANGE_DB):
    """(dB [depth, lateral], x, x_label, y, y_label, what) of a beamformed output (bmode.image_db)."""
    image, rows, columns, what = bmode.image_db(result.array, result.axes, result.header.unit, dynamic_range_db,
                                                result.header.attributes)
    y, y_label = panels.axis_coordinates(rows, result.header, image.shape[0])
    x, x_label = panels.axis_coordinates(columns, result.header, image.shape[1])
    return image, x, x_label, y, y_label, what


@dataclass
class DopplerFields:
    power_db: np.ndarray       # [depth, lateral], dB relative to the frame's largest power, NaN below the range
    velocity: np.ndarray       # [depth, lateral] m/s, NaN where not shown (no estimate or gated)
    nyquist_m_per_s: float
    x: np.ndarray
    x_label: str
    y: np.ndarray
    y_label: str
    bmode: tuple               # bmode_plane(...) or None
    header: object             # the velocity result's header


def relative_power_db(group):
    """[depth, lateral] power in dB relative to its largest finite value, with the plane's axes."""
    power_db = find(group, "power_db")
    if power_db is not None:
        values, rows, columns = panels.plane(power_db.array, power_db.axes, units.DEPTH_NAMES, units.LATERAL_NAMES)
        values = np.asarray(values, np.float64)
        header = power_db.header
    else:
        power = find(group, "power")
        values, rows, columns = panels.plane(power.array, power.axes, units.DEPTH_NAMES, units.LATERAL_NAMES)
        with np.errstate(divide="ignore", invalid="ignore"):
            values = 10 * np.log10(np.asarray(values, np.float64))
        header = power.header
    finite = values[np.isfinite(values)]
    peak = float(finite.max()) if finite.size else 0.0
    return values - peak, rows, columns, header


def doppler_fields(group):
    velocity_result = find(group, "velocity")
    nyquist = nyquist_velocity_m_per_s(velocity_result.header)
    power_db, rows, columns, header = relative_power_db(group)
    velocity, _, _ = panels.plane(velocity_result.array, velocity_result.axes, units.DEPTH_NAMES, units.LATERAL_NAMES)
    velocity = np.asarray(velocity, np.float64)
    if velocity.shape != power_db.shape:
        raise ValueError(f"pipeline '{group.pipeline}': velocity {velocity.shape} and power {power_db.shape} differ")
    with np.errstate(invalid="ignore"):
        shown = np.isfinite(power_db) & (power_db >= -POWER_DYNAMIC_RANGE_DB)
    y, y_label = panels.axis_coordinates(rows, header, power_db.shape[0])
    x, x_label = panels.axis_coordinates(columns, header, power_db.shape[1])
    source = bmode_source(group)
    return DopplerFields(power_db=np.where(shown, power_db, np.nan), velocity=np.where(shown, velocity, np.nan),
                         nyquist_m_per_s=nyquist, x=x, x_label=x_label, y=y, y_label=y_label,
                         bmode=bmode_plane(source) if source is not None else None, header=velocity_result.header)


def velocity_scale(nyquist_m_per_s):
    """(factor, unit) to show velocities in: cm/s below 2 m/s, else m/s."""
    return (100.0, "cm/s") if nyquist_m_per_s < 2.0 else (1.0, "m/s")


def underlay_of(fields):
    """The B-mode as an underlay when it lies on the Doppler grid (same shape), else None."""
    if fields.bmode is None or fields.bmode[0].shape != fields.power_db.shape:
        return None
    return fields.bmode[0]


class DopplerView:
    name = "doppler"
    figure_size = (16, 5)

    def __init__(self, options):
        pass

    def draw(self, fig, group, context):
        fields = doppler_fields(group)
        underlay = underlay_of(fields)
        count = 2 + (fields.bmode is not None)
        axes = list(np.atleast_1d(fig.subplots(1, count)))
        if fields.bmode is not None:
            image, x, x_label, y, y_label, what = fields.bmode
            panels.image(fig, axes.pop(0), image, x, x_label, y, y_label, what, "echo (dB)", cmap="gray",
                         limits=(-BMODE_DYNAMIC_RANGE_DB, 0.0))
        scale, unit = velocity_scale(fields.nyquist_m_per_s)
        for ax, values, title, bar, cmap, limits in (
                (axes[0], fields.power_db, "power Doppler over B-mode", "power (dB re max)", POWER_MAP,
                 (-POWER_DYNAMIC_RANGE_DB, 0.0)),
                (axes[1], fields.velocity * scale, f"velocity (+ = away), ±Nyquist {fields.nyquist_m_per_s * scale:.3g} {unit}",
                 f"velocity ({unit})", VELOCITY_MAP, (-fields.nyquist_m_per_s * scale, fields.nyquist_m_per_s * scale))):
            if underlay is not None:
                x0, x1 = units.extent(fields.x)
                y0, y1 = units.extent(fields.y)
                unit_x = units.unit_of(fields.x_label)
                aspect = "equal" if unit_x == units.unit_of(fields.y_label) and unit_x in ("mm", "voxel") else "auto"
                ax.imshow(underlay, extent=(x0, x1, y1, y0), aspect=aspect, cmap="gray",
                          vmin=-BMODE_DYNAMIC_RANGE_DB, vmax=0.0, interpolation="nearest")
            panels.image(fig, ax, values, fields.x, fields.x_label, fields.y, fields.y_label,
                         title, bar, cmap=cmap, limits=limits)
        header = fields.header
        fig.suptitle(f"Doppler  {header.pipeline}  input #{header.input_sequence}", fontsize=11)
