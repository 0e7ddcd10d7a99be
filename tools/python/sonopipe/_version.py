"""The sonopipe version, read from the one file that holds it, VERSION (also read by CMake).

An installed package (pip, `cmake --install`, the .deb) carries a copy as sonopipe/VERSION; the
source tree's package (tools/python/sonopipe, run through the build's launchers) reads the top
folder's VERSION."""
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_CANDIDATES = (os.path.join(_HERE, "VERSION"), os.path.join(_HERE, os.pardir, os.pardir, os.pardir, "VERSION"))


def _read_version():
    for path in _CANDIDATES:
        if os.path.isfile(path):
            with open(path, encoding="ascii") as f:
                return f.readline().strip()
    raise ImportError(f"sonopipe: no VERSION file at {' or '.join(_CANDIDATES)}")


__version__ = _read_version()
