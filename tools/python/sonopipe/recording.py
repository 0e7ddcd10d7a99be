"""HDF5 recordings of sonopipe-sim / sonopipe-record / sonopipe-replay (tools/common/recording.h).

Layout, format_version 1 (the C++ Reader and Writer are the reference; this module matches them):

  /                                 attrs format = "sonopipe-recording", format_version (int64) = 1,
                                    created_by, free-form string attributes
  /streams/<stream_id>/             raw frames of one stream, in arrival order
  /results/<pipeline>/<output>/     published results
      payload [N, frame axes...]    native type, one frame per chunk (complex64 = compound {r, i})
      header  [N] vlen uint8        serialized FrameHeader (streams) / ResultHeader (results)
      sequence [N] uint64           FrameHeader.sequence / ResultHeader.input_sequence
      acquisition_time_ns [N] int64
      received_ns [N] int64         daemon receive time (results: timing.received_ns; 0 from simulators)
      attrs element_type, axis_names, axis_units, axis_spacing, axis_origin, unit;
            streams: stream_id (int64), kind; results: pipeline, output
  /truth/<name>                     float64 ground truth (names may nest with '/'), axis attributes
                                    as above, unit, and stream_id when its first axis is the frame
"""
from dataclasses import dataclass, field

import h5py
import numpy as np

from sonopipe.arrays import Axis, axes_from_proto, dtype_of, element_type_name, make_axes, payload_of
from sonopipe.v1 import frame_pb2, result_pb2

FORMAT_NAME = "sonopipe-recording"
FORMAT_VERSION = 1
_KIND_NAMES = {frame_pb2.FRAME_KIND_IQ: "iq", frame_pb2.FRAME_KIND_RF: "rf", frame_pb2.FRAME_KIND_DCE: "dce",
               frame_pb2.FRAME_KIND_CHANNEL_RF: "channel_rf", frame_pb2.FRAME_KIND_CHANNEL_IQ: "channel_iq"}
_BYTES = h5py.vlen_dtype(np.dtype("uint8"))
_STRING = h5py.string_dtype()
_INDEX_CHUNK = 256  # elements per chunk of the per-frame datasets, as the C++ writer


class RecordingError(RuntimeError):
    """Not a recording, an unknown format version, or a frame that does not fit its series."""


@dataclass
class Series:
    """One stream's frames or one output's results, loaded into memory.

    payload[i] belongs to headers[i]; ``for header, array in series`` walks them in order."""
    path: str
    headers: list              # FrameHeader (streams) or ResultHeader (results)
    payload: np.ndarray        # [N, frame axes...]
    sequence: np.ndarray       # uint64 [N]
    acquisition_time_ns: np.ndarray
    received_ns: np.ndarray
    attributes: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.headers)

    def __iter__(self):
        return iter(zip(self.headers, self.payload))

    @property
    def axes(self):
        """Axes of one frame (from the first header)."""
        return axes_from_proto(self.headers[0].axes) if self.headers else ()

    def frame(self, index):
        return self.headers[index], self.payload[index]


@dataclass
class Truth:
    values: np.ndarray         # float64
    axes: tuple                # arrays.Axis
    unit: str = ""
    stream_id: int = None      # set when the first axis is the frame index of that stream


@dataclass
class Recording:
    path: str
    attributes: dict
    streams: dict              # stream_id -> Series of FrameHeader
    results: dict              # (pipeline, output) -> Series of ResultHeader
    truth: dict                # name -> Truth


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _axes_from_attributes(attrs, shape):
    def listed(name, default):
        values = list(attrs[name]) if name in attrs else []
        return [values[i] if i < len(values) else default(i) for i in range(len(shape))]
    names = listed("axis_names", lambda i: f"axis{i}")
    units = listed("axis_units", lambda i: "")
    spacing = listed("axis_spacing", lambda i: 0.0)
    origin = listed("axis_origin", lambda i: 0.0)
    return tuple(Axis(_text(n), int(s), float(d), _text(u), float(o))
                 for n, s, d, u, o in zip(names, shape, spacing, units, origin))


def _read_series(group, header_type):
    headers = []
    for raw in group["header"][()]:
        header = header_type()
        header.ParseFromString(np.asarray(raw, dtype=np.uint8).tobytes())
        headers.append(header)
    payload = group["payload"][()]
    if len(headers) != payload.shape[0]:
        raise RecordingError(f"{group.name}: {len(headers)} headers but {payload.shape[0]} payload frames")
    if headers:  # h5py reads the {r, i} compound as complex64 and binary16 as float16 already
        payload = payload.astype(dtype_of(headers[0].element_type), copy=False)
    zeros = np.zeros(len(headers), dtype=np.int64)
    def optional(name, default):
        return group[name][()] if name in group else default
    return Series(group.name, headers, payload, optional("sequence", zeros.astype(np.uint64)),
                  optional("acquisition_time_ns", zeros), optional("received_ns", zeros),
                  {k: v for k, v in group.attrs.items()})


def read_recording(path):
    """Loads a whole recording (headers parsed, payloads as numpy arrays)."""
    try:
        file = h5py.File(path, "r")
    except (OSError, FileNotFoundError) as error:
        raise RecordingError(f"cannot open recording '{path}': {error}") from None
    with file:
        if _text(file.attrs.get("format", "")) != FORMAT_NAME:
            raise RecordingError(f"'{path}' is not a sonopipe recording (no format = \"{FORMAT_NAME}\")")
        version = int(file.attrs.get("format_version", 0))
        if not 1 <= version <= FORMAT_VERSION:
            raise RecordingError(f"'{path}' has format_version {version}, this reads up to {FORMAT_VERSION}")
        attributes = {k: (_text(v) if isinstance(v, (str, bytes)) else v) for k, v in file.attrs.items()}
        streams = {}
        for name, group in file.get("streams", {}).items():
            streams[int(name)] = _read_series(group, frame_pb2.FrameHeader)
        results = {}
        for pipeline, outputs in file.get("results", {}).items():
            for output, group in outputs.items():
                results[(pipeline, output)] = _read_series(group, result_pb2.ResultHeader)
        truth = {}
        if "truth" in file:
            def visit(name, item):
                if isinstance(item, h5py.Dataset):
                    stream = int(item.attrs["stream_id"]) if "stream_id" in item.attrs else None
                    truth[name] = Truth(item[()].astype(np.float64, copy=False),
                                        _axes_from_attributes(item.attrs, item.shape),
                                        _text(item.attrs.get("unit", "")), stream)
            file["truth"].visititems(visit)
    return Recording(str(path), attributes, streams, results, truth)


def _write_axis_attributes(attrs, element_type, axes, unit):
    attrs["element_type"] = element_type
    attrs.create("axis_names", [a.name for a in axes], dtype=_STRING)
    attrs.create("axis_units", [a.unit for a in axes], dtype=_STRING)
    attrs.create("axis_spacing", np.array([a.spacing for a in axes], dtype="<f8"))
    attrs.create("axis_origin", np.array([a.origin for a in axes], dtype="<f8"))
    attrs["unit"] = unit


def _check_component(name, what):
    if not name or name == "." or "/" in name:
        raise RecordingError(f"{what} '{name}' cannot name an HDF5 group (empty, '.' or contains '/')")


class RecordingWriter:
    """Writes a recording incrementally, as the C++ recording::Writer does."""

    def __init__(self, path, created_by="sonopipe (python)"):
        self.path = str(path)
        self._file = h5py.File(self.path, "w")
        self._file.attrs["format"] = FORMAT_NAME
        self._file.attrs["format_version"] = np.int64(FORMAT_VERSION)
        self._file.attrs["created_by"] = created_by
        self._series = {}  # group path -> (group, frame shape, dtype)

    def set_attribute(self, key, value):
        if key in ("format", "format_version"):
            raise RecordingError(f"attribute '{key}' is reserved for the recording format")
        self._file.attrs[key] = str(value)

    def append_frame(self, header, array, received_ns=0):
        """A raw frame (FrameHeader + payload array) under /streams/<stream_id>/."""
        path = f"/streams/{header.stream_id}"
        group = self._open_series(path, header, array, unit="")
        if "kind" not in group.attrs:
            group.attrs["stream_id"] = np.int64(header.stream_id)
            group.attrs["kind"] = _KIND_NAMES.get(header.kind, "")
        self._append(group, header, array, header.sequence, header.acquisition_time_ns, received_ns)

    def append_result(self, header, array):
        """A result (ResultHeader + payload array) under /results/<pipeline>/<output>/."""
        _check_component(header.pipeline, "pipeline name")
        _check_component(header.output, "output name")
        path = f"/results/{header.pipeline}/{header.output}"
        group = self._open_series(path, header, array, unit=header.unit)
        if "pipeline" not in group.attrs:
            group.attrs["pipeline"] = header.pipeline
            group.attrs["output"] = header.output
        self._append(group, header, array, header.input_sequence, header.acquisition_time_ns,
                     header.timing.received_ns)

    def write_truth(self, name, values, axes, unit="", stream_id=None):
        """Ground truth as float64 under /truth/<name>; axes as for make_axes (names or Axis)."""
        if not name or name.startswith("/") or name.endswith("/"):
            raise RecordingError(f"truth name '{name}' is empty or starts/ends with '/'")
        values = np.asarray(values, dtype="<f8")
        path = f"/truth/{name}"
        if path in self._file:
            raise RecordingError(f"truth '{name}' written twice")
        dataset = self._file.create_dataset(path, data=values)
        _write_axis_attributes(dataset.attrs, "float64", make_axes(values.shape, axes), unit)
        if stream_id is not None:
            dataset.attrs["stream_id"] = np.int64(stream_id)

    def close(self):
        if self._file:
            self._file.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _open_series(self, path, header, array, unit):
        shape = tuple(int(a.size) for a in header.axes)
        dtype = dtype_of(header.element_type)
        if path in self._series:
            group, series_shape, series_dtype = self._series[path]
            if shape != series_shape or dtype != series_dtype:
                raise RecordingError(f"{path}: frame {dtype}{list(shape)} differs from the series' "
                                     f"{series_dtype}{list(series_shape)} (a series keeps one shape)")
            return group
        if path in self._file:
            raise RecordingError(f"{path} exists but is not open for appending")
        if not shape:
            raise RecordingError(f"{path}: payload has no axes")
        group = self._file.create_group(path)
        _write_axis_attributes(group.attrs, element_type_name(header.element_type), axes_from_proto(header.axes), unit)
        group.create_dataset("payload", shape=(0,) + shape, maxshape=(None,) + shape, chunks=(1,) + shape,
                             dtype=dtype)
        group.create_dataset("header", shape=(0,), maxshape=(None,), chunks=(64,), dtype=_BYTES)
        for name, index_dtype in (("sequence", "<u8"), ("acquisition_time_ns", "<i8"), ("received_ns", "<i8")):
            group.create_dataset(name, shape=(0,), maxshape=(None,), chunks=(_INDEX_CHUNK,), dtype=index_dtype)
        self._series[path] = (group, shape, dtype)
        return group

    @staticmethod
    def _append(group, header, array, sequence, acquisition_time_ns, received_ns):
        payload = payload_of(array)
        shape = group["payload"].shape[1:]
        if payload.dtype != group["payload"].dtype or payload.shape != shape:
            raise RecordingError(f"{group.name}: array {payload.dtype}{list(payload.shape)} does not match its "
                                 f"header {group['payload'].dtype}{list(shape)}")
        index = group["payload"].shape[0]
        for name in ("payload", "header", "sequence", "acquisition_time_ns", "received_ns"):
            group[name].resize(index + 1, axis=0)
        group["payload"][index] = payload
        group["header"][index] = np.frombuffer(header.SerializeToString(), dtype=np.uint8)
        group["sequence"][index] = sequence
        group["acquisition_time_ns"][index] = acquisition_time_ns
        group["received_ns"][index] = received_ns


def write_recording(path, frames=(), results=(), truth=None, attributes=None, created_by="sonopipe (python)"):
    """Writes a whole recording at once.

    frames: iterable of (FrameHeader, array[, received_ns]); results: iterable of (ResultHeader,
    array); truth: {name: (values, axes, unit[, stream_id])}; attributes: {key: value}."""
    with RecordingWriter(path, created_by) as writer:
        for key, value in (attributes or {}).items():
            writer.set_attribute(key, value)
        for header, array, *received in frames:
            writer.append_frame(header, array, received[0] if received else 0)
        for header, array in results:
            writer.append_result(header, array)
        for name, (values, axes, unit, *stream) in (truth or {}).items():
            writer.write_truth(name, values, axes, unit, stream[0] if stream else None)
