"""Publisher: frames from numpy arrays to sonopiped's ingest socket, as ``[FrameHeader][payload]``.

``lossless=True`` uses PUSH (for the daemon's PULL ingest): a send blocks while the daemon's
queue is full instead of dropping. ``lossless=False`` uses PUB (for a SUB ingest, live data): a
frame nobody can take is dropped by ZeroMQ, as a scanner stream would be.

``shm://<name>`` (same host): the daemon's shared ingest pool (sonopipe.shm). ``buffer(shape,
dtype)`` is a numpy view of a slot to write the frame into, once; ``send_buffer(kind=..., axes=...)``
sends it. ``send`` copies the array into a slot. ``delivery()`` says how many frames the daemon took.

``ack_endpoint`` (the daemon's ``ingest.ack_endpoint``, lossless, one endpoint): frames are
numbered and the daemon's acknowledgements read (docs/wire-protocol.md, "Acknowledgement"), so
``delivery()`` and ``undelivered()`` say which frames the daemon took over ZeroMQ too; frames are
queued only while the daemon is connected.

Several endpoints (one daemon each) route by stream id, as ``sonopipe-replay --route``: every frame
of stream s goes to endpoint s mod N (tools/replay/stream_route.h), one socket per endpoint, so a
stream always meets the same daemon.
"""
import secrets
import time

import numpy as np
import zmq

from sonopipe.arrays import (PayloadError, array_from_payload, axes_to_proto, element_type_of, make_axes,
                             payload_of)
from sonopipe.security import apply_curve_client
from sonopipe.shm import ShmProducer, is_shm_endpoint
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
                 linger_s=10.0, curve_server_key=None, curve_client_key_file=None, ack_endpoint=None):
        """curve_*: keys for a daemon with security.curve (see sonopipe.security). ack_endpoint: see
        the module's doc."""
        self.endpoints = [endpoint] if isinstance(endpoint, str) else list(endpoint)
        if not self.endpoints:
            raise ValueError("no endpoint to send to")
        self.endpoint = self.endpoints[0]
        self.lossless = lossless
        self.sent = 0
        self._next_sequence = {}  # stream_id -> next sequence number
        self._shm = None
        self._buffer = None  # buffer(): the array being filled
        self.send_timeout_s = linger_s
        if any(is_shm_endpoint(address) for address in self.endpoints):
            if len(self.endpoints) != 1 or bind or curve_server_key:
                raise ValueError("an shm:// endpoint is one daemon's pool: no routing, bind or CURVE")
            self._shm = ShmProducer(self.endpoint)
            return
        self._context = context or zmq.Context.instance()
        self._acks = None
        if ack_endpoint is not None:
            if len(self.endpoints) != 1 or bind or not lossless:
                raise ValueError("ack_endpoint is for one daemon's lossless ingest: no routing, bind or live mode")
            self._ledger = _DeliveryLedger()
            self._acks = self._context.socket(zmq.SUB)
            self._acks.setsockopt(zmq.RCVHWM, 0)
            self._acks.setsockopt(zmq.LINGER, 0)
            self._acks.setsockopt(zmq.SUBSCRIBE, f"ack/{self._ledger.sender_id:016x}".encode())
            apply_curve_client(self._acks, curve_server_key, curve_client_key_file)
            self._acks.connect(ack_endpoint)
        self._sockets = []
        for address in self.endpoints:
            socket = self._context.socket(zmq.PUSH if lossless else zmq.PUB)
            socket.setsockopt(zmq.SNDHWM, send_high_water_mark)
            socket.setsockopt(zmq.LINGER, int(linger_s * 1000))
            if self._acks is not None:
                socket.setsockopt(zmq.IMMEDIATE, 1)  # queued only while the daemon is connected
                socket.setsockopt(zmq.SNDTIMEO, int(linger_s * 1000))
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
        if self._shm is not None:
            if self._buffer is not None:
                raise RuntimeError("a buffer() is open: send_buffer() it first")
            self._shm.claim(self.send_timeout_s)
            self._commit(header, payload)
            return
        socket = self._sockets[route_of(header.stream_id, len(self._sockets))]
        if self._acks is not None:
            self._read_acknowledgements()
            header.sender_id, header.send_index = self._ledger.sender_id, self._ledger.next_index
            try:
                socket.send_multipart([header.SerializeToString(), payload], copy=False)
            except zmq.Again:
                raise TimeoutError(f"no daemon took the frame within {self.send_timeout_s} s "
                                   "(none is connected, or its queue is full); nothing was sent") from None
            self._ledger.sent(header.stream_id, header.sequence)
        else:
            socket.send_multipart([header.SerializeToString(), payload], copy=False)
        self._next_sequence[header.stream_id] = header.sequence + 1
        self.sent += 1

    def buffer(self, shape, dtype):
        """A C-ordered array of `shape` and `dtype` to write the next frame into: on shm://, a view
        of a slot of the daemon's pool (written once, read there by the daemon and the GPU copy);
        otherwise a plain array. Send it with send_buffer()."""
        if self._buffer is not None:
            raise RuntimeError("a buffer() is open already: send_buffer() it first")
        dtype = np.dtype(dtype)
        element_type_of(dtype)  # raises for a type the wire does not carry
        nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        if self._shm is None:
            self._buffer = np.empty(shape, dtype)
            return self._buffer
        slot = self._shm.claim(self.send_timeout_s)
        if nbytes > slot.size:
            self._shm.abandon()
            raise PayloadError(f"a frame of {nbytes} bytes does not fit a slot of {self.endpoint} ({slot.size})")
        self._buffer = slot[:nbytes].view(dtype).reshape(shape)
        return self._buffer

    def send_buffer(self, *, kind, axes, stream_id=0, sequence=None, **header_fields):
        """Sends the array of the last buffer() call; returns the header sent."""
        if self._buffer is None:
            raise RuntimeError("no buffer() is open")
        array, self._buffer = self._buffer, None
        if sequence is None:
            sequence = self._next_sequence.get(stream_id, 0)
        try:
            header = make_frame_header(array, kind=kind, axes=axes, stream_id=stream_id, sequence=sequence,
                                       **header_fields)
            array_from_payload(header.element_type, header.axes, array)  # raises on a shape mismatch
        except Exception:
            if self._shm is not None:
                self._shm.abandon()
            raise
        if self._shm is None:
            self.send_frame(header, array)
        else:
            self._commit(header, None, array.nbytes)
        return header

    def delivery(self, timeout_s=0.0):
        """shm://, or ZeroMQ with ack_endpoint: (delivered, undelivered) frames, waiting up to
        `timeout_s` for the daemon to take every frame sent (the acknowledgement: frames it did not
        take were not delivered; over ZeroMQ, frames it read and refused count as neither)."""
        if self._shm is not None:
            return self._shm.delivery(timeout_s)
        if self._acks is None:
            raise RuntimeError("delivery is acknowledged on shm:// endpoints or with ack_endpoint only")
        deadline = time.monotonic() + timeout_s
        while True:
            self._read_acknowledgements(max(0.0, min(0.05, deadline - time.monotonic())))
            if not self._ledger.outstanding or time.monotonic() >= deadline:
                return self._ledger.delivered, len(self._ledger.outstanding)

    def undelivered(self):
        """ZeroMQ with ack_endpoint: (stream_id, sequence) of every frame sent and not acknowledged,
        in send order."""
        if self._acks is None:
            raise RuntimeError("undelivered() needs ack_endpoint")
        self._read_acknowledgements()
        return list(self._ledger.outstanding.values())

    def _read_acknowledgements(self, timeout_s=0.0):
        if not self._acks.poll(int(timeout_s * 1000)):
            return
        while True:
            try:
                parts = self._acks.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            ack = frame_pb2.Acknowledgement()
            if len(parts) == 2:
                ack.ParseFromString(parts[1])
                self._ledger.apply(ack)

    def _commit(self, header, payload, payload_bytes=None):
        """Writes the header (and `payload`, unless it is already in the slot) and commits the slot."""
        header_bytes = header.SerializeToString()
        if len(header_bytes) > self._shm.header.size:
            self._shm.abandon()
            raise PayloadError(f"header of {len(header_bytes)} bytes exceeds the slot's {self._shm.header.size}")
        self._shm.header[:len(header_bytes)] = np.frombuffer(header_bytes, dtype=np.uint8)
        if payload is not None:
            raw = np.ascontiguousarray(payload).reshape(-1).view(np.uint8)
            if raw.size > self._shm.payload.size:
                self._shm.abandon()
                raise PayloadError(f"a frame of {raw.size} bytes does not fit a slot of {self.endpoint}")
            self._shm.payload[:raw.size] = raw
            payload_bytes = raw.size
        self._shm.commit(len(header_bytes), payload_bytes)
        self._next_sequence[header.stream_id] = header.sequence + 1
        self.sent += 1

    def close(self):
        if self._shm is not None:
            self._shm.close()
            return
        for socket in self._sockets:
            socket.close()
        if self._acks is not None:
            self._acks.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _DeliveryLedger:
    """What a sender sent and what the daemon acknowledged (wire/delivery.h, the C++ twin)."""

    def __init__(self):
        self.sender_id = secrets.randbits(64) or 1
        self.next_index = 1
        self.outstanding = {}  # send index -> (stream_id, sequence)
        self.delivered = 0
        self.refused = 0

    def sent(self, stream_id, sequence):
        self.outstanding[self.next_index] = (stream_id, sequence)
        self.next_index += 1

    def apply(self, ack):
        if ack.sender_id != self.sender_id:
            return
        for ranges, accepted in ((ack.accepted, True), (ack.refused, False)):
            for span in ranges:
                for index in [i for i in self.outstanding if span.first <= i <= span.last]:
                    del self.outstanding[index]
                    if accepted:
                        self.delivered += 1
                    else:
                        self.refused += 1
