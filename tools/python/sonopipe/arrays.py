"""Payload bytes <-> numpy arrays, and the named axes that travel in the headers.

Conventions of the wire schema (proto/sonopipe/v1/common.proto): payloads are raw little-endian,
C-ordered bytes, the last axis varies fastest; complex64 is interleaved float32 (real, imaginary);
int16 IQ keeps I and Q on a last axis named "iq" of size 2.
"""
from dataclasses import dataclass

import numpy as np

from sonopipe.v1 import common_pb2

# ElementType -> numpy dtype (always little-endian, as on the wire).
_DTYPES = {
    common_pb2.ELEMENT_TYPE_INT16: np.dtype("<i2"),
    common_pb2.ELEMENT_TYPE_FLOAT32: np.dtype("<f4"),
    common_pb2.ELEMENT_TYPE_COMPLEX64: np.dtype("<c8"),
    common_pb2.ELEMENT_TYPE_FLOAT64: np.dtype("<f8"),
    common_pb2.ELEMENT_TYPE_FLOAT16: np.dtype("<f2"),
    common_pb2.ELEMENT_TYPE_UINT8: np.dtype("u1"),
}
# The names sdk/tensor.h uses (dtype_name), as recordings store them.
_NAMES = {
    common_pb2.ELEMENT_TYPE_INT16: "int16",
    common_pb2.ELEMENT_TYPE_FLOAT32: "float32",
    common_pb2.ELEMENT_TYPE_COMPLEX64: "complex64",
    common_pb2.ELEMENT_TYPE_FLOAT64: "float64",
    common_pb2.ELEMENT_TYPE_FLOAT16: "float16",
    common_pb2.ELEMENT_TYPE_UINT8: "uint8",
}


class PayloadError(ValueError):
    """A payload that does not match its header (size, element type)."""


def dtype_of(element_type):
    """numpy dtype of a sonopipe.v1.ElementType value."""
    try:
        return _DTYPES[element_type]
    except KeyError:
        raise PayloadError(f"unknown element type {element_type}") from None


def element_type_name(element_type):
    """'int16', 'complex64', ... (the names of sdk/tensor.h)."""
    try:
        return _NAMES[element_type]
    except KeyError:
        raise PayloadError(f"unknown element type {element_type}") from None


def element_type_of(dtype):
    """sonopipe.v1.ElementType of a numpy dtype (any byte order)."""
    dtype = np.dtype(dtype)
    for element_type, candidate in _DTYPES.items():
        if dtype.kind == candidate.kind and dtype.itemsize == candidate.itemsize:
            return element_type
    raise PayloadError(f"numpy dtype {dtype} has no sonopipe element type "
                       "(int16, float16, float32, float64, complex64, uint8)")


def element_type_from_name(name):
    for element_type, known in _NAMES.items():
        if known == name:
            return element_type
    raise PayloadError(f"unknown element type name '{name}'")


@dataclass(frozen=True)
class Axis:
    """One named array axis, outermost first (mirrors sonopipe.v1.Axis)."""
    name: str
    size: int
    spacing: float = 0.0  # physical step in `unit`; 0 when the axis has none
    unit: str = ""
    origin: float = 0.0   # physical position of index 0, in `unit`

    def coordinates(self):
        """Physical position of every index (in `unit`); the index itself when spacing is 0."""
        index = np.arange(self.size, dtype=np.float64)
        return self.origin + self.spacing * index if self.spacing else index


def axes_from_proto(axes):
    return tuple(Axis(a.name, int(a.size), a.spacing, a.unit, a.origin) for a in axes)


def axes_to_proto(axes, repeated_field):
    """Appends `axes` (Axis objects) to a repeated sonopipe.v1.Axis field."""
    for axis in axes:
        repeated_field.add(name=axis.name, size=int(axis.size), spacing=float(axis.spacing),
                           unit=axis.unit, origin=float(axis.origin))


def make_axes(shape, axes):
    """Axis objects for an array of `shape` from names, (name, spacing, unit[, origin]) tuples or
    Axis objects; sizes come from the shape and must agree with given Axis objects."""
    axes = list(axes)
    if len(axes) != len(shape):
        raise PayloadError(f"{len(axes)} axes given for an array of {len(shape)} dimensions {tuple(shape)}")
    made = []
    for size, axis in zip(shape, axes):
        if isinstance(axis, Axis):
            if axis.size != size:
                raise PayloadError(f"axis '{axis.name}' has size {axis.size}, the array {size}")
            made.append(axis)
        elif isinstance(axis, str):
            made.append(Axis(axis, int(size)))
        else:
            name, spacing, unit, *origin = axis
            made.append(Axis(name, int(size), float(spacing), unit, float(origin[0]) if origin else 0.0))
    return tuple(made)


def array_from_payload(element_type, axes, payload):
    """Read-only numpy view of `payload` (bytes-like) with the header's dtype and shape."""
    dtype = dtype_of(element_type)
    shape = tuple(int(a.size) for a in axes)
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    size = memoryview(payload).nbytes
    if size != expected:
        raise PayloadError(f"payload has {size} bytes, the header says {expected} "
                           f"({element_type_name(element_type)}{list(shape)})")
    return np.frombuffer(payload, dtype=dtype).reshape(shape)


def payload_of(array):
    """C-ordered little-endian bytes of `array` (no copy when it already is)."""
    array = np.asarray(array)
    wire = dtype_of(element_type_of(array.dtype))
    return np.ascontiguousarray(array, dtype=wire)
