"""Plot building blocks shared by the chain views: an image with physical axes and a colour bar,
robust colour limits, and picking a 2-D slice out of an N-D result."""
import numpy as np

from sonopipe.view import units


def robust_limits(values, low=2.0, high=98.0, symmetric=False):
    """Colour limits from percentiles of the finite values (outliers at edges do not wash out the
    image); symmetric about 0 for signed quantities."""
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return -1.0, 1.0
    if symmetric:
        bound = float(np.percentile(np.abs(finite), high)) or 1.0
        return -bound, bound
    lo, hi = float(np.percentile(finite, low)), float(np.percentile(finite, high))
    return sensible_limits(lo, hi)


def sensible_limits(low, high):
    """Colour limits that span something: non-finite limits become (-1, 1); equal (or reversed)
    limits, e.g. of a constant image, are widened by half the value's magnitude (0.5 at 0) on each
    side, so the constant shows mid-map with its value on the colour bar instead of one end."""
    low, high = float(low), float(high)
    if not (np.isfinite(low) and np.isfinite(high)):
        return -1.0, 1.0
    if high <= low:
        middle = (low + high) / 2
        half = 0.5 * abs(middle) or 0.5
        return middle - half, middle + half
    return low, high


def image(fig, ax, values, x, x_label, y, y_label, title, colorbar_label, cmap="viridis", limits=None,
          aspect=None):
    """values[row, column] drawn with rows along y (downwards: depth) and columns along x; by
    default true aspect ratio when both axes are in mm (or both in voxels), else filling the axes."""
    values = np.asarray(values, dtype=np.float32)
    vmin, vmax = sensible_limits(*(limits if limits is not None else robust_limits(values)))
    x0, x1 = units.extent(x)
    y0, y1 = units.extent(y)
    if aspect is None:
        unit = units.unit_of(x_label)
        aspect = "equal" if unit == units.unit_of(y_label) and unit in ("mm", "voxel") else "auto"
    artist = ax.imshow(values, extent=(x0, x1, y1, y0), aspect=aspect, cmap=cmap,
                       vmin=vmin, vmax=vmax, interpolation="nearest")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title, fontsize=10)
    bar = fig.colorbar(artist, ax=ax, shrink=0.9)
    bar.set_label(colorbar_label)
    return artist


def plane(array, axes, row_names, column_names, fixed=None):
    """A 2-D plane [row axis, column axis] of an N-D array, with the two Axis objects.

    Rows: the first axis named in `row_names` (else the first axis); columns: the first other axis
    named in `column_names` (else the next one). Every other axis is fixed at `fixed[name]` or its
    middle index."""
    fixed = fixed or {}
    row = units.find_axis(axes, row_names, 0)
    others = [i for i in range(len(axes)) if i != row]
    column = next((i for i in others if units.is_named(axes[i].name, column_names)), others[0] if others else None)
    index = []
    for i, axis in enumerate(axes):
        if i in (row, column):
            index.append(slice(None))
        else:
            index.append(min(int(fixed.get(axis.name, axis.size // 2)), axis.size - 1))
    values = np.asarray(array)[tuple(index)]
    if column is None:
        return values[:, np.newaxis], axes[row], None
    if column < row:
        values = values.T
    return values, axes[row], axes[column]


def axis_coordinates(axis, header, size=None):
    """(values, label) of an axis (or plain indices when `axis` is None)."""
    if axis is None:
        return np.arange(size or 1, dtype=np.float64), ""
    return units.coordinates(axis, units.speed_of_sound(header))
