"""Publisher: frames from numpy arrays to sonopiped's ingest socket, as ``[FrameHeader][payload]``.

``lossless=True`` uses PUSH (for the daemon's PULL ingest): a send blocks while the daemon's
queue is full instead of dropping. ``lossless=False`` uses PUB (for a SUB ingest, live data): a
frame nobody can take is dropped by ZeroMQ, as a scanner stream would be.

Several endpoints (one daemon each) route by stream id, as ``sonopipe-replay --route``: every frame
of stream s goes to endpoint s mod N (tools/replay/stream_route.h), one socket per endpoint, so a
stream always meets the same daemon.
"""
import time

import numpy as np
import zmq

from sonopipe.arrays import (PayloadError, array_from_payload, axes_to_proto, element_type_of, make_axes,
                             payload_of)
from sonopipe.security import apply_curve_client
from sonopipe.v1 import common_pb2, frame_pb2

_KINDS = {"iq": frame_pb2.FRAME_KIND_IQ, "rf": frame_pb2.FRAME_KIND_RF, "dce": frame_pb2.FRAME_KIND_DCE,
          "channel_rf": frame_pb2.FRAME_KIND_CHANNEL_RF, "channel_iq": frame_pb2.FRAME_KIND_CHANNEL_IQ}


def frame_kind(kind):
    """FrameKind value of 'iq' | 'rf' | 'dce' | 'channel_rf' | 'channel_iq' (or the enum value itself)."""
    if isinstance(kind, str):
        try:
            return _KINDS[kind.lower()]
        except KeyError:
            raise ValueError(f"frame kind '{kind}' is not one of {sorted(_KINDS)}") from None
    return int(kind)


def make_frame_header(array, *, kind, axes, stream_id=0, sequence=0, acquisition_time_ns=None,
                      sampling_frequency_hz=0.0, center_frequency_hz=0.0, demodulation_frequency_hz=0.0,
                      speed_of_sound_m_per_s=1540.0, attributes=None, vectors=None):
    """A FrameHeader describing `array`.

    axes: one entry per array dimension, outermost first: a name, (name, spacing, unit[, origin]),
    or arrays.Axis. int16 IQ needs a last axis "iq" of size 2. vectors: {name: values} or
    {name: (values, unit)}."""
    array = np.asarray(array)
    header = frame_pb2.FrameHeader(
        schema_version=common_pb2.SCHEMA_VERSION_CURRENT, stream_id=stream_id, sequence=sequence,
        acquisition_time_ns=time.time_ns() if acquisition_time_ns is None else acquisition_time_ns,
        kind=frame_kind(kind), element_type=element_type_of(array.dtype),
        sampling_frequency_hz=sampling_frequency_hz, center_frequency_hz=center_frequency_hz,
        demodulation_frequency_hz=demodulation_frequency_hz, speed_of_sound_m_per_s=speed_of_sound_m_per_s)
    axes_to_proto(make_axes(array.shape, axes), header.axes)
    for key, value in (attributes or {}).items():
        header.attributes[key] = str(value)
    for name, value in (vectors or {}).items():
        values, unit = value if isinstance(value, tuple) else (value, "")
        header.vectors.add(name=name, values=[float(v) for v in np.ravel(values)], unit=unit)
    return header


def route_of(stream_id, endpoints):
    """Index of the endpoint that takes stream `stream_id` among `endpoints` (tools/replay/stream_route.h)."""
    return stream_id % endpoints


class Publisher:
    """Sends frames to `endpoint` (connects; bind=True binds instead), or routes them by stream id
    over a list of endpoints (see the module's doc).

    ``send`` numbers the frames of each stream 0, 1, 2, ... unless given a sequence."""

    def __init__(self, endpoint, lossless=True, bind=False, context=None, send_high_water_mark=1000,
                 linger_s=10.0, curve_server_key=None, curve_client_key_file=None):
        """curve_*: keys for a daemon with security.curve (see sonopipe.security)."""
        self.endpoints = [endpoint] if isinstance(endpoint, str) else list(endpoint)
        if not self.endpoints:
            raise ValueError("no endpoint to send to")
        self.endpoint = self.endpoints[0]
        self.lossless = lossless
        self.sent = 0
        self._next_sequence = {}  # stream_id -> next sequence number
        self._context = context or zmq.Context.instance()
        self._sockets = []
        for address in self.endpoints:
            socket = self._context.socket(zmq.PUSH if lossless else zmq.PUB)
            socket.setsockopt(zmq.SNDHWM, send_high_water_mark)
            socket.setsockopt(zmq.LINGER, int(linger_s * 1000))
            apply_curve_client(socket, curve_server_key, curve_client_key_file)
            (socket.bind if bind else socket.connect)(address)
            self._sockets.append(socket)
        self._socket = self._sockets[0]

    def send(self, array, *, kind, axes, stream_id=0, sequence=None, **header_fields):
        """Sends `array` with a header built by make_frame_header; returns the header sent."""
        if sequence is None:
            sequence = self._next_sequence.get(stream_id, 0)
        header = make_frame_header(array, kind=kind, axes=axes, stream_id=stream_id, sequence=sequence,
                                   **header_fields)
        self.send_frame(header, array)
        return header

    def send_frame(self, header, array):
        """Sends a ready FrameHeader with `array` as payload, after checking that they agree."""
        payload = payload_of(array)
        if header.element_type != element_type_of(payload.dtype):
            raise PayloadError(f"header element type {header.element_type} does not match dtype {payload.dtype}")
        array_from_payload(header.element_type, header.axes, payload)  # raises on a shape mismatch
        socket = self._sockets[route_of(header.stream_id, len(self._sockets))]
        socket.send_multipart([header.SerializeToString(), payload], copy=False)
        self._next_sequence[header.stream_id] = header.sequence + 1
        self.sent += 1

    def close(self):
        for socket in self._sockets:
            socket.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
