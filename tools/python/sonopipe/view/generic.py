"""Fallback view for any other pipeline (e.g. `convert` alone): each output (up to four) as an
image with depth down when an axis is depth-like. A beamformed image (bmode.is_beamformed) is a
B-mode (its mean frame when it is an ensemble), other complex IQ is shown as magnitude in dB, real
data from RF input as a B-mode (envelope along depth, dB), anything else as values; axes beyond
two at their middle index."""
import numpy as np

from sonopipe.v1 import frame_pb2
from sonopipe.view import bmode, panels, units


def accepts(group):
    return any(r.array is not None for r in group.outputs.values())


def display(result):
    """(values [rows, columns], x, x_label, y, y_label, colour label, cmap, limits)."""
    values, rows, columns = panels.plane(result.array, result.axes, units.DEPTH_NAMES, units.LATERAL_NAMES)
    y, y_label = panels.axis_coordinates(rows, result.header, values.shape[0])
    x, x_label = panels.axis_coordinates(columns, result.header, values.shape[1])
    depth_down = rows is not None and units.is_named(rows.name, units.DEPTH_NAMES)
    if bmode.is_beamformed(result.header.output) and depth_down and values.shape[0] > 8:
        image, rows, columns, what = bmode.image_db(result.array, result.axes, result.header.unit,
                                                    attributes=result.header.attributes)
        y, y_label = panels.axis_coordinates(rows, result.header, image.shape[0])
        x, x_label = panels.axis_coordinates(columns, result.header, image.shape[1])
        return image, x, x_label, y, y_label, f"{what} (dB)", "gray", (-50.0, 0.0)
    if np.iscomplexobj(values):
        return (bmode.log_compress(np.abs(values)), x, x_label, y, y_label, "magnitude (dB)", "gray", (-50.0, 0.0))
    if result.header.input_kind == frame_pb2.FRAME_KIND_RF and depth_down and values.shape[0] > 8:
        image = bmode.log_compress(bmode.envelope(values, axis=0))
        return image, x, x_label, y, y_label, "B-mode (dB)", "gray", (-50.0, 0.0)
    values = values.astype(np.float32)
    return values, x, x_label, y, y_label, result.header.unit or "value", "viridis", panels.robust_limits(values)


class GenericView:
    name = "generic"
    figure_size = (7, 4.6)  # per panel width 6, see draw

    def __init__(self, options):
        pass

    def draw(self, fig, group, context):
        shown = [r for r in group.outputs.values() if r.array is not None][:4]
        fig.set_size_inches(1 + 6 * len(shown), self.figure_size[1])
        axes = list(np.atleast_1d(fig.subplots(1, len(shown))))
        for ax, result in zip(axes, shown):
            values, x, x_label, y, y_label, bar_label, cmap, limits = display(result)
            panels.image(fig, ax, values, x, x_label, y, y_label,
                         f"{result.header.output} {list(result.axis_names)}", bar_label, cmap=cmap, limits=limits)
        fig.suptitle(f"{group.pipeline}  input #{group.input_sequence}", fontsize=11)
