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


def _find(group, key):
    for name, result in group.outputs.items():
        if key in name and result.array is not None:
            return result
    return None


def accepts(group):
    return _find(group, "strain") is not None


def _plane(result, component):
    fixed = {"component": component}
    values, rows, columns = panels.plane(result.array, result.axes, units.DEPTH_NAMES, units.LATERAL_NAMES, fixed)
    y, y_label = panels.axis_coordinates(rows, result.header)
    x, x_label = panels.axis_coordinates(columns, result.header, values.shape[1])
    return np.asarray(values, dtype=np.float32), x, x_label, y, y_label


class StrainView:
    name = "strain"
    figure_size = (15, 4.8)

    def __init__(self, options):
        self.component = getattr(options, "component", 0) or 0
        self.lag = getattr(options, "lag", None)

    def draw(self, fig, group, context):
        strain = _find(group, "strain")
        correlation = _find(group, "correlation")
        header = strain.header
        lag = self.lag if self.lag is not None else int(header.attributes.get("lag", "1") or 1)
        rf = context.input_frame(header.stream_id, header.input_sequence - lag)
        bmode_title = f"B-mode, pre-compression frame #{header.input_sequence - lag}"
        if rf is None:  # e.g. the stream's first frame only primed ncc_track and published nothing
            rf = context.input_frame(header.stream_id, header.input_sequence)
            bmode_title = f"B-mode, frame #{header.input_sequence} (#{header.input_sequence - lag} not kept)"
        count = 1 + (rf is not None) + (correlation is not None)
        axes = list(np.atleast_1d(fig.subplots(1, count)))

        if rf is not None:
            frame_header, frame = rf
            frame_axes = axes_from_proto(frame_header.axes)
            values, rows, columns = panels.plane(np.asarray(frame, np.float64), frame_axes,
                                                 units.DEPTH_NAMES, units.LATERAL_NAMES)
            image_db = bmode.log_compress(bmode.envelope(values, axis=0))
            y, y_label = panels.axis_coordinates(rows, frame_header)
            x, x_label = panels.axis_coordinates(columns, frame_header, values.shape[1])
            panels.image(fig, axes.pop(0), image_db, x, x_label, y, y_label, bmode_title, "dB", cmap="gray",
                         limits=(-50.0, 0.0))

        values, x, x_label, y, y_label = _plane(strain, self.component)
        scale, unit = (100.0, "%") if strain.header.unit in ("1", "") else (1.0, strain.header.unit)
        # Elastogram convention: stiff (strains less) dark. Under compression strain is negative,
        # so less strain is the larger value: reverse the map.
        compression = np.nanmedian(values) < 0
        panels.image(fig, axes.pop(0), values * scale, x, x_label, y, y_label,
                     f"{strain.header.output} (component {self.component}), stiff = dark",
                     f"strain ({unit})", cmap="viridis_r" if compression else "viridis",
                     limits=panels.robust_limits(values * scale))

        if correlation is not None:
            values, x, x_label, y, y_label = _plane(correlation, self.component)
            panels.image(fig, axes.pop(0), values, x, x_label, y, y_label, "peak correlation",
                         "correlation", cmap="magma", limits=(max(0.0, float(np.nanmin(values))), 1.0))
        fig.suptitle(f"Strain  {header.pipeline}  input #{header.input_sequence} vs #{header.input_sequence - lag}",
                     fontsize=11)
