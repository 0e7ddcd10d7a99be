"""Perfusion view: k_a, k_p, k_l maps of one slice with colour bars in ml/100g/min.

Two result layouts are understood:
- the `perfusion_fit` stage's single output `perfusion_maps`, float64 [voxel, parameter = 9] with
  columns k_a, k_p, k_l, tau_a, tau_p, cost, iterations, evaluations, converged
  (stages/perfusion/perfusion_fit/perfusion_fit.h);
- one output per parameter named k_a, k_p, k_l.
Maps with two or more spatial axes are shown as a plane (the middle slice of 3-D maps, or
--slice). A flat voxel axis is laid out as a slice of "rows x columns" from, in order: --slice-shape,
the input DCE frame's attribute "slice_shape" (from the results recording or --frames), the
result's attribute, a square when the voxel count is one, else one row. A batch holding several
such slices (voxels in NIfTI order: columns fastest, then rows, then slices) shows slice --slice
(default the middle one). When the input frame
carries a vector "voxel_index" (flat index of each voxel in the slice, e.g. only the voxels of a
liver mask), voxels are placed there and the rest of the slice is blank.
"""
import math

import numpy as np

from sonopipe.view import panels

RATE_OUTPUTS = ("k_a", "k_p", "k_l")
FIT_COLUMNS = ("k_a", "k_p", "k_l", "tau_a", "tau_p", "cost", "iterations", "evaluations", "converged")
ROW_NAMES = ("y", "row", "rows", "j", "phase")
COLUMN_NAMES = ("x", "column", "columns", "i", "read")
RATE_UNIT = "ml/100g/min"  # perfusion_fit reports rates in ml/100g/min (stages/perfusion/perfusion_units.h)


def _fit_table(group):
    """The [voxel, parameter] output of perfusion_fit, or None."""
    for result in group.outputs.values():
        if result.array is not None and result.array.ndim == 2 and result.axes[1].name == "parameter" \
                and result.axes[1].size >= len(RATE_OUTPUTS):
            return result
    return None


def accepts(group):
    return any(name in group.outputs for name in RATE_OUTPUTS) or _fit_table(group) is not None


def rate_maps(group):
    """[(name, values, result)] for k_a, k_p, k_l: columns of the fit table or separate outputs."""
    table = _fit_table(group)
    if table is not None:
        return [(name, np.asarray(table.array[:, FIT_COLUMNS.index(name)]), table) for name in RATE_OUTPUTS]
    return [(name, np.asarray(group.outputs[name].array), group.outputs[name])
            for name in RATE_OUTPUTS if name in group.outputs]


def _slice_layout(result, voxels, context, slice_shape):
    """(rows, columns, voxel_index or None) for a flat voxel axis."""
    frame = context.input_frame(result.header.stream_id, result.header.input_sequence) if context else None
    attributes = [dict(frame[0].attributes)] if frame is not None else []
    attributes.append(dict(result.header.attributes))
    text = slice_shape or next((a["slice_shape"] for a in attributes if a.get("slice_shape")), "")
    index = None
    if frame is not None:
        index = next((np.asarray(v.values, dtype=np.int64) for v in frame[0].vectors if v.name == "voxel_index"), None)
        if index is not None and index.size != voxels:
            index = None
    if text:
        rows, columns = (int(v) for v in text.lower().replace("x", ",").split(","))
    elif math.isqrt(voxels) ** 2 == voxels:
        rows = columns = math.isqrt(voxels)
    else:
        rows, columns = 1, voxels
    if index is None and voxels % (rows * columns):
        raise ValueError(f"slice shape {rows}x{columns} does not divide the batch of {voxels} voxels")
    return rows, columns, index


def slice_map(values, result, context=None, slice_index=None, slice_shape=None):
    """(map [rows, columns], x, x_label, y, y_label) of one parameter's values."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim >= 2:
        fixed = {result.axes[0].name: slice_index} if slice_index is not None and values.ndim == 3 else {}
        plane, rows, columns = panels.plane(values, result.axes, ROW_NAMES, COLUMN_NAMES, fixed)
        y, y_label = panels.axis_coordinates(rows, result.header)
        x, x_label = panels.axis_coordinates(columns, result.header, plane.shape[1])
        return plane, x, x_label, y, y_label
    rows, columns, index = _slice_layout(result, values.size, context, slice_shape)
    if index is None:
        slices = values.size // (rows * columns)
        chosen = slices // 2 if slice_index is None else min(max(slice_index, 0), slices - 1)
        plane = values.reshape(slices, rows, columns)[chosen]
    else:
        plane = np.full(rows * columns, np.nan)
        plane[index] = values
        plane = plane.reshape(rows, columns)
    return plane, np.arange(columns, dtype=float), "column (voxel)", np.arange(rows, dtype=float), "row (voxel)"


class PerfusionView:
    name = "perfusion"
    figure_size = (15, 4.6)

    def __init__(self, options):
        self.slice_index = getattr(options, "slice", None)
        self.slice_shape = getattr(options, "slice_shape", None)

    def draw(self, fig, group, context):
        maps = rate_maps(group)
        axes = list(np.atleast_1d(fig.subplots(1, len(maps))))
        for ax, (name, values, result) in zip(axes, maps):
            plane, x, x_label, y, y_label = slice_map(values, result, context, self.slice_index, self.slice_shape)
            unit = RATE_UNIT
            if result.header.output == name and result.header.unit:
                unit = result.header.unit
            low, high = panels.robust_limits(plane, low=1.0, high=99.0)
            panels.image(fig, ax, plane, x, x_label, y, y_label, f"{name}  (median {np.nanmedian(plane):.4g} {unit})",
                         f"{name} ({unit})", cmap="jet", limits=(min(0.0, low), high))
        header = maps[0][2].header
        fig.suptitle(f"Perfusion  {header.pipeline}  batch #{header.input_sequence}", fontsize=11)
