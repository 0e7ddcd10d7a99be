"""Finds the protobuf modules generated from proto/ at build time.

protoc writes them as the package ``sonopipe.v1`` (``sonopipe/v1/frame_pb2.py``, ...) into a
folder of the build tree (``build/tools/python/proto_py``); the environment variable
SONOPIPE_PROTO_PY names that folder. The launchers CMake generates (``sonopipe-python``,
``sonopipe-view``, ``env.sh``) set it. The folder's ``sonopipe/`` is appended to this package's
search path, so the generated code's own imports (``from sonopipe.v1 import common_pb2``) resolve.
An installed package (``cmake --install``, the .deb) holds them as its subpackage ``sonopipe.v1``.
"""
import os

ENVIRONMENT_VARIABLE = "SONOPIPE_PROTO_PY"


def extend_package_path(package_path):
    """Appends <SONOPIPE_PROTO_PY>/sonopipe to `package_path` (the package's __path__)."""
    # An installed package carries its generated modules inside it (sonopipe/v1, tools/package).
    if any(os.path.isfile(os.path.join(path, "v1", "frame_pb2.py")) for path in package_path):
        return
    folder = os.environ.get(ENVIRONMENT_VARIABLE, "")
    if not folder:
        raise ImportError(
            f"sonopipe: {ENVIRONMENT_VARIABLE} is not set; it must name the folder of the generated "
            "protobuf modules (build/tools/python/proto_py after building the target sonopipe_python). "
            "Run through build/tools/python/sonopipe-python or source build/tools/python/env.sh")
    generated = os.path.join(folder, "sonopipe")
    if not os.path.isfile(os.path.join(generated, "v1", "frame_pb2.py")):
        raise ImportError(
            f"sonopipe: {ENVIRONMENT_VARIABLE}={folder} holds no sonopipe/v1/frame_pb2.py; "
            "build the target sonopipe_python (ninja -C build sonopipe_python)")
    if generated not in package_path:
        package_path.append(generated)
