"""Fallback view for any other pipeline (e.g. convert alone): each output (up to four) as an image
of its last two axes, the magnitude of complex values; other axes at their middle index."""
import numpy as np

from sonopipe.view import panels


def accepts(group):
    return any(r.array is not None for r in group.outputs.values())


class GenericView:
    name = "generic"
    figure_size = (14, 4.6)

    def __init__(self, options):
        pass

    def draw(self, fig, group, context):
        shown = [r for r in group.outputs.values() if r.array is not None][:4]
        axes = list(np.atleast_1d(fig.subplots(1, len(shown))))
        for ax, result in zip(axes, shown):
            array = np.asarray(result.array)
            if np.iscomplexobj(array):
                array = np.abs(array)
            if array.ndim == 1:
                array = array[np.newaxis, :]
                result_axes = (None,) + tuple(result.axes)
            else:
                result_axes = result.axes
            names = [a.name if a is not None else "" for a in result_axes]
            if array.ndim > 2:
                fixed = tuple(a.size // 2 for a in result_axes[:-2])
                array = array[fixed]
            y, y_label = panels.axis_coordinates(result_axes[-2], result.header, array.shape[0])
            x, x_label = panels.axis_coordinates(result_axes[-1], result.header, array.shape[1])
            panels.image(fig, ax, array.astype(np.float32), x, x_label, y, y_label,
                         f"{result.header.output} {list(names)}", result.header.unit or "value")
        fig.suptitle(f"{group.pipeline}  input #{group.input_sequence}", fontsize=11)
