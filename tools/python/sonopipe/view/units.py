"""Physical coordinates of result axes for plotting: metres -> mm, slow time -> ms, fast time -> depth.

Axes carry spacing/origin in SI units (proto Axis). A fast-time axis (a depth-like name with unit
"s") becomes depth = c t / 2 with the speed of sound of the result (attribute
"speed_of_sound_m_per_s", else 1540 m/s).
"""
import numpy as np

DEFAULT_SPEED_OF_SOUND_M_PER_S = 1540.0
DEPTH_NAMES = ("depth", "sample", "axial", "z", "range")
LATERAL_NAMES = ("location", "lateral", "line", "x", "element", "beam", "column")
ELEVATION_NAMES = ("elevation", "elevational", "plane", "y", "slice")
TIME_NAMES = ("track", "time", "ensemble", "frame")


def is_named(axis_name, names):
    return axis_name.lower() in names


def speed_of_sound(header):
    try:
        return float(header.attributes.get("speed_of_sound_m_per_s", DEFAULT_SPEED_OF_SOUND_M_PER_S))
    except (AttributeError, ValueError):
        return DEFAULT_SPEED_OF_SOUND_M_PER_S


def coordinates(axis, speed_of_sound_m_per_s=DEFAULT_SPEED_OF_SOUND_M_PER_S):
    """(values, label) of an arrays.Axis in display units."""
    index = np.arange(axis.size, dtype=np.float64)
    if not axis.spacing and not axis.origin:
        return index, f"{axis.name} (index)"
    values = axis.origin + axis.spacing * index
    if axis.unit == "m":
        return values * 1e3, f"{spatial_name(axis.name)} (mm)"
    if axis.unit == "s" and is_named(axis.name, DEPTH_NAMES):
        return values * speed_of_sound_m_per_s / 2 * 1e3, "depth (mm)"
    if axis.unit == "s":
        return values * 1e3, f"{axis.name} (ms)"
    return values, f"{axis.name} ({axis.unit})" if axis.unit else axis.name


def spatial_name(axis_name):
    """'depth' / 'lateral' for the axis names the chains use for those directions."""
    if is_named(axis_name, ("depth", "sample", "axial", "range")):
        return "depth"
    if is_named(axis_name, ("location", "lateral", "line", "beam", "element")):
        return "lateral"
    return axis_name


def unit_of(label):
    """'mm' from 'depth (mm)'; '' when the label has no unit."""
    return label[label.rfind("(") + 1:-1] if label.endswith(")") else ""


def extent(values):
    """imshow extent edges for pixel-centre coordinates `values` (uniform spacing assumed)."""
    if len(values) < 2:
        return values[0] - 0.5, values[0] + 0.5
    step = (values[-1] - values[0]) / (len(values) - 1)
    return values[0] - step / 2, values[-1] + step / 2


def displacement_um(array, unit):
    """Displacement values in micrometres from `unit` ("um", "m", "mm", "nm")."""
    scale = {"um": 1.0, "µm": 1.0, "m": 1e6, "mm": 1e3, "nm": 1e-3}.get(unit, 1.0)
    return np.asarray(array, dtype=np.float32) * scale


def find_axis(axes, names, default=None):
    """Index of the first axis whose name is one of `names`, else `default`."""
    for index, axis in enumerate(axes):
        if is_named(axis.name, names):
            return index
    return default
