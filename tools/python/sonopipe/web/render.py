"""One pipeline's result set -> what the page draws: panels of quantised images with their axes,
colour bar and units, and line plots, as a JSON-ready dict.

The chain is recognised and its fields computed by sonopipe-view's views (sonopipe.view: arfi,
strain, perfusion, doppler, generic), so both viewers show the same quantities in the same units.
Images travel as one byte per pixel: 0..254 spread linearly over the colour limits, 255 = no value
(NaN); the page maps them through the colour map's table (colormaps.py). An image panel may carry
an `underlay` on the same pixel grid (the B-mode under power or colour Doppler): where the image
has no value, the page shows the underlay's pixel through its own map and limits.
Every beamformed image of a result set (bmode.is_beamformed) gets a B-mode panel, whatever the chain.
"""
import base64
import warnings

import numpy as np

from sonopipe.view import arfi, bmode, doppler, generic, panels, perfusion, strain, units

NO_VALUE = 255    # pixel code of NaN / non-finite values
LEVELS = 254      # codes 0..LEVELS span the colour limits
MAX_PIXELS_PER_AXIS = 512  # a panel's plot is ~300 CSS pixels: larger images are block-averaged


def quantise(values, low, high):
    """uint8 codes of `values` between `low` and `high` (clipped), NO_VALUE where not finite."""
    values = np.asarray(values, dtype=np.float64)
    span = (high - low) or 1.0
    with np.errstate(invalid="ignore"):
        codes = np.clip(np.rint((values - low) / span * LEVELS), 0, LEVELS)
    codes = np.where(np.isfinite(values), codes, NO_VALUE)
    return codes.astype(np.uint8)


def reduce_axis(values, coordinates, axis):
    """Block means of `values` along `axis` (and of the pixel-centre `coordinates`) so that at most
    MAX_PIXELS_PER_AXIS remain; the last (size mod factor) rows, fewer than the factor, are left out."""
    size = values.shape[axis]
    factor = -(-size // MAX_PIXELS_PER_AXIS)
    if factor <= 1:
        return values, np.asarray(coordinates, dtype=np.float64)
    kept = size // factor * factor
    values = np.take(values, np.arange(kept), axis=axis)
    shape = values.shape[:axis] + (kept // factor, factor) + values.shape[axis + 1:]
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN block stays NaN (no value)
        blocks = np.nanmean(values.reshape(shape), axis=axis + 1)
    centres = np.asarray(coordinates, dtype=np.float64)[:kept].reshape(-1, factor).mean(axis=1)
    return blocks, centres


def _axis(values, label):
    values = np.asarray(values, dtype=np.float64)
    return {"first": float(values[0]), "last": float(values[-1]) if values.size else float(values[0]),
            "label": label, "unit": units.unit_of(label)}


def image_panel(values, x, x_label, y, y_label, title, colour_label, colour_map, limits, aspect=None,
                markers=(), underlay=None):
    """values[row, column]: rows along y (downwards, depth), columns along x. `aspect` "equal" keeps
    the physical proportions (default when both axes share a length unit, as panels.image does).
    Limits that span nothing (a constant image) are widened (panels.sensible_limits). `underlay`:
    (values of the same shape, colour map, limits) shown where `values` has none."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, np.newaxis]
    if underlay is not None and np.shape(underlay[0]) != values.shape:
        raise ValueError(f"'{title}': underlay {np.shape(underlay[0])} is not on the image's grid {values.shape}")
    x_full, y_full = x, y
    values, y = reduce_axis(values, y, 0)
    values, x = reduce_axis(values, x, 1)
    low, high = panels.sensible_limits(*limits)
    if aspect is None:
        unit = units.unit_of(x_label)
        aspect = "equal" if unit == units.unit_of(y_label) and unit in ("mm", "voxel") else "auto"
    codes = quantise(values, low, high)
    return {"kind": "image", "title": title, "rows": int(codes.shape[0]), "columns": int(codes.shape[1]),
            "pixels": base64.b64encode(np.ascontiguousarray(codes).tobytes()).decode("ascii"),
            "x": _axis(x, x_label), "y": _axis(y, y_label), "aspect": aspect,
            "colour": {"map": colour_map, "low": low, "high": high, "label": colour_label},
            "markers": list(markers), **({"underlay": _underlay(underlay, x_full, y_full)} if underlay is not None else {})}


def _underlay(underlay, x, y):
    values, colour_map, limits = underlay
    values, _ = reduce_axis(np.asarray(values, dtype=np.float64), y, 0)
    values, _ = reduce_axis(values, x, 1)
    low, high = panels.sensible_limits(*limits)
    return {"pixels": base64.b64encode(np.ascontiguousarray(quantise(values, low, high)).tobytes()).decode("ascii"),
            "colour": {"map": colour_map, "low": low, "high": high}}


def line_panel(x, x_label, y, y_label, title):
    finite = [float(v) if np.isfinite(v) else None for v in np.asarray(y, dtype=np.float64)]
    return {"kind": "line", "title": title, "x": {"values": [float(v) for v in x], "label": x_label},
            "y": {"values": finite, "label": y_label}}


def _marker(axis, value, colour):
    return {"axis": axis, "value": float(value), "colour": colour}


def arfi_panels(group, context):
    result = arfi.displacement_output(group)
    fields = arfi.arfi_fields(result, context)
    lateral_unit = units.unit_of(fields.lateral_label)
    depth_unit = units.unit_of(fields.depth_label)
    peak_depth = fields.depth[fields.peak_depth]
    at_lateral = fields.lateral[fields.location]
    limits = panels.robust_limits(fields.at_location, high=99.5, symmetric=True)
    return [
        image_panel(fields.peak.T, fields.lateral, fields.lateral_label, fields.depth, fields.depth_label,
                    "peak displacement over time", "peak displacement (µm)", "inferno",
                    (0.0, panels.robust_limits(fields.peak, high=99.5)[1]), aspect="auto",
                    markers=[_marker("x", at_lateral, "#00e5ff")]),
        image_panel(fields.at_location.T, fields.time, fields.time_label, fields.depth, fields.depth_label,
                    f"depth-time at lateral {at_lateral:.3g} {lateral_unit}".rstrip(), "displacement (µm)",
                    "RdBu_r", limits, aspect="auto", markers=[_marker("y", peak_depth, "#000000")]),
        line_panel(fields.time, fields.time_label, fields.at_location[:, fields.peak_depth], "displacement (µm)",
                   f"time course at depth {peak_depth:.3g} {depth_unit}".rstrip()),
    ], f"{result.header.output}, peak {fields.peak_um:.2f} µm", result.header


def strain_panels(group, context):
    result = strain.find_output(group, "strain")
    correlation = strain.find_output(group, "correlation")
    header = result.header
    lag = strain.lag_of(header)
    shown = []
    bmode_view = strain.bmode_image(header, context, lag)
    if bmode_view is not None:
        image_db, x, x_label, y, y_label, title = bmode_view
        shown.append(image_panel(image_db, x, x_label, y, y_label, title, "echo (dB)", "gray",
                                 (-strain.BMODE_DYNAMIC_RANGE_DB, 0.0)))
    values, x, x_label, y, y_label = strain.component_plane(result, 0)
    scale, unit, colour_map = strain.strain_display(values, header.unit)
    shown.append(image_panel(values * scale, x, x_label, y, y_label, f"{header.output} (axial), stiff = dark",
                             f"strain ({unit})", colour_map, panels.robust_limits(values * scale)))
    if correlation is not None:
        values, x, x_label, y, y_label = strain.component_plane(correlation, 0)
        shown.append(image_panel(values, x, x_label, y, y_label, "peak correlation", "correlation", "magma",
                                 strain.correlation_limits(values)))
    return shown, f"input #{header.input_sequence} vs #{header.input_sequence - lag}", header


def perfusion_panels(group, context):
    shown = []
    maps = perfusion.rate_maps(group)
    for name, values, result in maps:
        plane, x, x_label, y, y_label = perfusion.slice_map(values, result, context)
        unit = result.header.unit if result.header.output == name and result.header.unit else perfusion.RATE_UNIT
        low, high = panels.robust_limits(plane, low=1.0, high=99.0)
        median = float(np.nanmedian(plane)) if np.isfinite(plane).any() else float("nan")
        shown.append(image_panel(plane, x, x_label, y, y_label, f"{name}  (median {median:.4g})",
                                 f"{name} ({unit})", "jet", (min(0.0, low), high), aspect="equal"))
    header = maps[0][2].header
    return shown, f"batch #{header.input_sequence}", header


def bmode_panel(result, title=None):
    image, x, x_label, y, y_label, what = doppler.bmode_plane(result)
    return image_panel(image, x, x_label, y, y_label, title or f"{what}, {result.header.output}", "echo (dB)", "gray",
                       (-doppler.BMODE_DYNAMIC_RANGE_DB, 0.0))


def doppler_panels(group, context):
    """B-mode (when a beamformed output is published), power Doppler over it, colour velocity over
    it spanning exactly +-Nyquist (the header's attribute); conventions in sonopipe.view.doppler."""
    fields = doppler.doppler_fields(group)
    shown = []
    underlay = doppler.underlay_of(fields)
    if fields.bmode is not None:
        image, x, x_label, y, y_label, what = fields.bmode
        shown.append(image_panel(image, x, x_label, y, y_label, what, "echo (dB)", "gray",
                                 (-doppler.BMODE_DYNAMIC_RANGE_DB, 0.0)))
    under = (underlay, "gray", (-doppler.BMODE_DYNAMIC_RANGE_DB, 0.0)) if underlay is not None else None
    shown.append(image_panel(fields.power_db, fields.x, fields.x_label, fields.y, fields.y_label,
                             "power Doppler" + (" over B-mode" if under else ""), "power (dB re max)",
                             doppler.POWER_MAP, (-doppler.POWER_DYNAMIC_RANGE_DB, 0.0), underlay=under))
    scale, unit = doppler.velocity_scale(fields.nyquist_m_per_s)
    nyquist = fields.nyquist_m_per_s * scale
    shown.append(image_panel(fields.velocity * scale, fields.x, fields.x_label, fields.y, fields.y_label,
                             f"velocity, + = away, ±Nyquist {nyquist:.3g} {unit}", f"velocity ({unit})",
                             doppler.VELOCITY_MAP, (-nyquist, nyquist), underlay=under))
    header = fields.header
    return shown, f"input #{header.input_sequence}, Nyquist {nyquist:.3g} {unit}", header


def generic_panels(group, context):
    shown = []
    for result in [r for r in group.outputs.values() if r.array is not None][:4]:
        values, x, x_label, y, y_label, colour_label, colour_map, limits = generic.display(result)
        shown.append(image_panel(values, x, x_label, y, y_label, f"{result.header.output} {list(result.axis_names)}",
                                 colour_label, colour_map, limits))
    return shown, f"input #{group.input_sequence}", group.header()


# Tried in this order, as sonopipe-view --chain auto does (sonopipe.view.cli.VIEWS).
CHAINS = (("perfusion", perfusion.accepts, perfusion_panels), ("doppler", doppler.accepts, doppler_panels),
          ("strain", strain.accepts, strain_panels),
          ("arfi", arfi.accepts, arfi_panels), ("generic", generic.accepts, generic_panels))


def chain_of(group):
    return next((name for name, accepts, _ in CHAINS if accepts(group)), None)


def render_group(group, context):
    """{"pipeline", "chain", "panels", ...} for one complete result set; raises on a result set its
    chain cannot draw (the caller counts and logs it)."""
    chain = chain_of(group)
    if chain is None:
        raise ValueError(f"pipeline '{group.pipeline}' input #{group.input_sequence}: no output to draw")
    build = next(function for name, _, function in CHAINS if name == chain)
    shown, caption, header = build(group, context)
    if chain in ("arfi", "perfusion"):  # their views draw no beamformed image: each gets its B-mode first
        shown = [bmode_panel(result) for name, result in sorted(group.outputs.items())
                 if result.array is not None and bmode.is_beamformed(name)] + shown
    timing = header.timing
    latency_ms = (timing.published_ns - timing.received_ns) / 1e6 if timing.received_ns and timing.published_ns else None
    return {"pipeline": group.pipeline, "chain": chain, "caption": caption, "panels": shown,
            "input_sequence": int(group.input_sequence), "stream_id": int(group.stream_id),
            "backend": header.backend, "daemon_latency_ms": latency_ms, "outputs": sorted(group.outputs)}
