"""Strain view: B-mode of the pre-compression RF frame, the axial strain image with its colour bar,
and the correlation (quality) map. Axes in mm.

The pre-compression frame (input sequence - lag) is looked up by Context.input_frame (cli.py): in
the raw frames of the results recording, in the raw recording given with --frames (e.g. the
simulator's, which replay sent), and among the RF results the pipeline published itself (a
`convert` stage with `publish: true`, output name ending in "converted", as config/demo.yaml does).
Without it, the B-mode of the frame itself is shown when available (titled so), else none.

Strain (unit "1") is shown in %: compression is negative, a stiff inclusion strains less. A
"component" axis, when present, is indexed by --component (default 0 = axial, as the strain and
ncc_track stages order their components); 3-D results show the middle elevational plane.
"""
import numpy as np

from sonopipe.arrays import axes_from_proto
from sonopipe.view import bmode, panels, units


def find_output(group, key):
    for name, result in group.outputs.items():
        if key in name and result.array is not None:
            return result
    return None


def accepts(group):
    return find_output(group, "strain") is not None


def component_plane(result, component):
    fixed = {"component": component}
    values, rows, columns = panels.plane(result.array, result.axes, units.DEPTH_NAMES, units.LATERAL_NAMES, fixed)
    y, y_label = panels.axis_coordinates(rows, result.header)
    x, x_label = panels.axis_coordinates(columns, result.header, values.shape[1])
    return np.asarray(values, dtype=np.float32), x, x_label, y, y_label


BMODE_DYNAMIC_RANGE_DB = 50.0


def lag_of(header, lag=None):
    """Frames between reference and target: `lag` when given, else the result's attribute "lag", else 1."""
    return lag if lag is not None else int(header.attributes.get("lag", "1") or 1)


def bmode_image(header, context, lag):
    """(image dB [depth, lateral], x, x_label, y, y_label, title) of the pre-compression frame
    (input sequence - lag), else of the frame itself, else None when neither is kept."""
    rf = context.input_frame(header.stream_id, header.input_sequence - lag)
    title = f"B-mode, pre-compression frame #{header.input_sequence - lag}"
    if rf is None:  # e.g. the stream's first frame only primed ncc_track and published nothing
        rf = context.input_frame(header.stream_id, header.input_sequence)
        title = f"B-mode, frame #{header.input_sequence} (#{header.input_sequence - lag} not kept)"
    if rf is None:
        return None
    frame_header, frame = rf
    image_db, rows, columns, _ = bmode.image_db(frame, axes_from_proto(frame_header.axes),
                                                getattr(frame_header, "unit", ""), BMODE_DYNAMIC_RANGE_DB)
    y, y_label = panels.axis_coordinates(rows, frame_header, image_db.shape[0])
    x, x_label = panels.axis_coordinates(columns, frame_header, image_db.shape[1])
    return image_db, x, x_label, y, y_label, title


CORRELATION_MIN_SPAN = 0.1  # a correlation map shows at least 0.9 .. 1


def correlation_limits(values):
    """Colour limits of a peak-correlation map: from its smallest finite value (at least 0) to 1,
    spanning at least CORRELATION_MIN_SPAN, so a map of 1.0 everywhere (identical frames) is drawn
    at the top of the colour map, not as the bottom end of an empty range."""
    finite = np.asarray(values, np.float64)
    finite = finite[np.isfinite(finite)]
    low = max(0.0, float(finite.min())) if finite.size else 0.0
    return min(low, 1.0 - CORRELATION_MIN_SPAN), 1.0


def strain_display(values, unit):
    """(scale, unit shown, colour map) of a strain plane: unit "1" shown in %; elastogram convention
    stiff (strains less) = dark: under compression strain is negative, so less strain is the larger
    value and the map is reversed."""
    scale, shown = (100.0, "%") if unit in ("1", "") else (1.0, unit)
    compression = np.nanmedian(values) < 0
    return scale, shown, "viridis_r" if compression else "viridis"


class StrainView:
    name = "strain"
    figure_size = (15, 4.8)

    def __init__(self, options):
        self.component = getattr(options, "component", 0) or 0
        self.lag = getattr(options, "lag", None)

    def draw(self, fig, group, context):
        strain = find_output(group, "strain")
        correlation = find_output(group, "correlation")
        header = strain.header
        lag = lag_of(header, self.lag)
        bmode_view = bmode_image(header, context, lag)
        count = 1 + (bmode_view is not None) + (correlation is not None)
        axes = list(np.atleast_1d(fig.subplots(1, count)))

        if bmode_view is not None:
            image_db, x, x_label, y, y_label, bmode_title = bmode_view
            panels.image(fig, axes.pop(0), image_db, x, x_label, y, y_label, bmode_title, "dB", cmap="gray",
                         limits=(-BMODE_DYNAMIC_RANGE_DB, 0.0))

        values, x, x_label, y, y_label = component_plane(strain, self.component)
        scale, unit, cmap = strain_display(values, strain.header.unit)
        panels.image(fig, axes.pop(0), values * scale, x, x_label, y, y_label,
                     f"{strain.header.output} (component {self.component}), stiff = dark",
                     f"strain ({unit})", cmap=cmap,
                     limits=panels.robust_limits(values * scale))

        if correlation is not None:
            values, x, x_label, y, y_label = component_plane(correlation, self.component)
            panels.image(fig, axes.pop(0), values, x, x_label, y, y_label, "peak correlation",
                         "correlation", cmap="magma", limits=correlation_limits(values))
        fig.suptitle(f"Strain  {header.pipeline}  input #{header.input_sequence} vs #{header.input_sequence - lag}",
                     fontsize=11)
