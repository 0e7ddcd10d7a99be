"""sonopipe: Python clients of the sonopiped daemon.

    from sonopipe import Subscriber, Publisher, Control, read_recording, write_recording

The protobuf modules (sonopipe.v1.*_pb2) are generated from proto/, never committed: by
`pip install .` (setup.py) and `cmake --install` into the installed package, and by the build into
the build tree, whose folder the environment variable SONOPIPE_PROTO_PY names (see _proto.py; the
launchers build/tools/python/sonopipe-python and env.sh set it). docs/clients.md.
"""
from sonopipe import _proto
from sonopipe._version import __version__

_proto.extend_package_path(__path__)

from sonopipe.arrays import Axis, PayloadError, dtype_of, element_type_of  # noqa: E402
from sonopipe.control import Control, ControlError  # noqa: E402
from sonopipe.publisher import Publisher, make_frame_header  # noqa: E402
from sonopipe.subscriber import Result, Subscriber, SubscriberStats  # noqa: E402

__all__ = ["__version__", "Axis", "Control", "ControlError", "PayloadError", "Publisher", "Recording", "RecordingError",
           "RecordingWriter", "Result", "Subscriber", "SubscriberStats", "dtype_of", "element_type_of",
           "make_frame_header", "read_recording", "write_recording"]

# Recordings need h5py (pip's extra `recordings`); they are imported on first use, so the clients
# (Subscriber, Publisher, Control) work without it.
_RECORDING_NAMES = ("Recording", "RecordingError", "RecordingWriter", "read_recording", "write_recording")


def __getattr__(name):
    if name in _RECORDING_NAMES:
        from sonopipe import recording
        return getattr(recording, name)
    raise AttributeError(f"module 'sonopipe' has no attribute {name!r}")
