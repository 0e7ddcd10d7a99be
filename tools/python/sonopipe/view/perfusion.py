"""Perfusion view: k_a, k_p, k_l maps of one slice with colour bars in ml/100g/min.

Maps with two or more spatial axes are shown as a plane (the middle slice of 3-D maps, or
--slice). A flat voxel axis is reshaped with the result's attribute "slice_shape" ("rows,columns"),
else to a square when the voxel count is one, else shown as one row.
"""
import math

import numpy as np

from sonopipe.view import panels

RATE_OUTPUTS = ("k_a", "k_p", "k_l")
ROW_NAMES = ("y", "row", "rows", "j", "phase")
COLUMN_NAMES = ("x", "column", "columns", "i", "read")


def accepts(group):
    return any(name in group.outputs for name in RATE_OUTPUTS)


def slice_map(result, slice_index=None):
    """(values [rows, columns], x, x_label, y, y_label) of one parameter map."""
    array = np.asarray(result.array, dtype=np.float64)
    if array.ndim >= 2:
        fixed = {}
        if slice_index is not None and array.ndim == 3:
            fixed = {result.axes[0].name: slice_index}
        values, rows, columns = panels.plane(array, result.axes, ROW_NAMES, COLUMN_NAMES, fixed)
        y, y_label = panels.axis_coordinates(rows, result.header)
        x, x_label = panels.axis_coordinates(columns, result.header, values.shape[1])
        return values, x, x_label, y, y_label
    shape_text = result.header.attributes.get("slice_shape", "")
    if shape_text:
        rows, columns = (int(v) for v in shape_text.replace("x", ",").split(","))
    elif math.isqrt(array.size) ** 2 == array.size:
        rows = columns = math.isqrt(array.size)
    else:
        rows, columns = 1, array.size
    values = array.reshape(rows, columns)
    return values, np.arange(columns, dtype=float), "column (voxel)", np.arange(rows, dtype=float), "row (voxel)"


class PerfusionView:
    name = "perfusion"
    figure_size = (15, 4.6)

    def __init__(self, options):
        self.slice_index = getattr(options, "slice", None)

    def draw(self, fig, group, context):
        present = [group.outputs[name] for name in RATE_OUTPUTS if name in group.outputs]
        axes = list(np.atleast_1d(fig.subplots(1, len(present))))
        for ax, result in zip(axes, present):
            values, x, x_label, y, y_label = slice_map(result, self.slice_index)
            unit = result.header.unit or "ml/100g/min"
            low, high = panels.robust_limits(values, low=1.0, high=99.0)
            panels.image(fig, ax, values, x, x_label, y, y_label,
                         f"{result.header.output}  (median {np.nanmedian(values):.4g} {unit})", f"{result.header.output} ({unit})",
                         cmap="jet", limits=(min(0.0, low), high))
        header = present[0].header
        fig.suptitle(f"Perfusion  {header.pipeline}  batch #{header.input_sequence}", fontsize=11)
