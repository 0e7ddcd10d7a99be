"""Colour tables of the maps the page uses, taken from matplotlib (the same maps sonopipe-view
draws with), sent once to the page as 256 RGB triplets per map."""
import numpy as np

from sonopipe.web.render import LEVELS

NAMES = ("inferno", "RdBu_r", "RdBu", "gray", "viridis", "viridis_r", "magma", "jet", "hot")


def tables():
    """{map name: [[r, g, b] x (LEVELS + 1)]}, 0..255 per channel; code i of a quantised image
    (render.quantise) takes entry i."""
    import matplotlib
    positions = np.linspace(0.0, 1.0, LEVELS + 1)
    return {name: np.rint(matplotlib.colormaps[name](positions)[:, :3] * 255).astype(int).tolist()
            for name in NAMES}
