"""Subscriber: results of a running sonopiped as (header, numpy array).

The daemon publishes ``[topic][ResultHeader][payload]`` with topics ``result/<pipeline>/<output>``
and ``[status][Status]`` once a second (proto/sonopipe/v1/result.proto).

- Sequence gaps: per (topic, stream) the input sequence numbers must increase by one; a jump is
  reported on the result that follows it (``result.gap``, ``stats.missing``) and logged.
- ``conflate=True`` keeps only the newest message per topic, for displays that render slower
  than results arrive. ZMQ_CONFLATE cannot be used (it breaks multipart messages), so each receive
  drains everything queued on the socket without blocking, keeps the newest per topic and counts
  the others as skipped (``result.skipped``, ``stats.skipped``). Skipped messages are not gaps:
  their sequence numbers were seen.
- Malformed messages (wrong part count, unparsable header, payload size not matching the header)
  are counted in ``stats.malformed``, logged, and never raise.
"""
from dataclasses import dataclass, field
import logging
import time

import numpy as np
import zmq

from sonopipe.arrays import PayloadError, array_from_payload, axes_from_proto, dtype_of
from sonopipe.security import apply_curve_client
from sonopipe.shm import ShmConsumer, is_shm_endpoint
from sonopipe.v1 import result_pb2

STATUS_TOPIC = "status"
RESULT_TOPIC_PREFIX = "result/"

log = logging.getLogger("sonopipe.subscriber")


@dataclass
class Result:
    """One delivered message. Unpacks as ``header, array = result``.

    For the status topic `header` is a sonopipe.v1.Status and `array` is None."""
    topic: str
    header: object
    array: object
    axes: tuple = ()         # arrays.Axis per array dimension, outermost first
    gap: int = 0             # input sequences missing on this (topic, stream) just before this one
    skipped: int = 0         # newer messages of this topic replaced this one's predecessors (conflation)
    local_received_ns: int = 0  # time.time_ns() when this process read it

    def __iter__(self):
        yield self.header
        yield self.array

    @property
    def axis_names(self):
        return tuple(a.name for a in self.axes)

    def axis(self, name):
        """The Axis called `name` (KeyError when absent)."""
        for a in self.axes:
            if a.name == name:
                return a
        raise KeyError(f"{self.topic}: no axis '{name}' in {self.axis_names}")

    @property
    def latency_ms(self):
        """Daemon receive -> this process receive, in ms (same-host clocks); None for status."""
        timing = getattr(self.header, "timing", None)
        if timing is None or not timing.received_ns:
            return None
        return (self.local_received_ns - timing.received_ns) / 1e6


@dataclass
class SubscriberStats:
    received: int = 0    # messages read from the socket
    delivered: int = 0   # messages handed to the caller
    skipped: int = 0     # replaced by a newer message of the same topic (conflation)
    missing: int = 0     # input sequences never seen (sum of all gaps)
    gaps: int = 0        # number of gap events
    malformed: int = 0   # messages that could not be decoded
    per_topic_skipped: dict = field(default_factory=dict)


class _Pending:
    """A message read from the socket whose payload is decoded only if it is delivered."""
    __slots__ = ("topic", "header", "payload", "gap", "skipped", "local_received_ns")

    def __init__(self, topic, header, payload, gap, local_received_ns):
        self.topic, self.header, self.payload = topic, header, payload
        self.gap, self.skipped, self.local_received_ns = gap, 0, local_received_ns


class _Part:
    """A message part as _accept reads it (ZeroMQ frames have .buffer too)."""

    def __init__(self, data):
        self.buffer = memoryview(data)


class Subscriber:
    """Iterates results of `endpoint` (the daemon's publish endpoint, or a list: one SUB connected to
    several daemons, their results merged, each daemon's in its order) on topic prefixes `topics`.

    ``for header, array in Subscriber("tcp://127.0.0.1:5556", ["result/arfi/"], timeout_s=5)``
    stops when nothing arrives for `timeout_s` (None: waits forever)."""

    def __init__(self, endpoint, topics=(RESULT_TOPIC_PREFIX,), conflate=False, timeout_s=None,
                 bind=False, context=None, receive_high_water_mark=1000, curve_server_key=None,
                 curve_client_key_file=None):
        """curve_*: keys for a daemon with security.curve (see sonopipe.security)."""
        if isinstance(topics, str):
            topics = [topics]
        self.endpoint = endpoint
        self.conflate = conflate
        self.timeout_s = timeout_s
        self.stats = SubscriberStats()
        self._last_sequence = {}   # (topic, stream_id) -> last input_sequence seen
        self._pending = {}         # conflation: topic -> newest _Pending, in arrival order
        self._malformed_logged_at = 0.0
        self._shm = None
        if is_shm_endpoint(endpoint):
            # The daemon's publish.shm pool: results read in place (see _receive_shm).
            self._shm = ShmConsumer(endpoint)
            self._topics = tuple(topics)
            self._held = None  # slot of the last result handed out
            return
        self._context = context or zmq.Context.instance()
        self._socket = self._context.socket(zmq.SUB)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.RCVHWM, receive_high_water_mark)
        for topic in topics:
            self._socket.setsockopt(zmq.SUBSCRIBE, topic.encode())
        apply_curve_client(self._socket, curve_server_key, curve_client_key_file)
        for address in [endpoint] if isinstance(endpoint, str) else endpoint:
            (self._socket.bind if bind else self._socket.connect)(address)

    # -- public ---------------------------------------------------------------------------------

    def receive(self, timeout_s=None):
        """The next Result, or None when nothing arrived within `timeout_s` (None: wait forever).

        On shm:// the result's array is a view into the daemon's pool, valid until the next
        receive() or close(): copy it to keep it."""
        if self._shm is not None:
            return self._receive_shm(timeout_s)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            message = self._take_newest() if self.conflate else self._read_one()
            if message is not None:
                result = self._decode(message)
                if result is not None:
                    return result
                continue
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            poll_ms = None if remaining is None else max(1, int(remaining * 1000))
            if not self._socket.poll(poll_ms, zmq.POLLIN):
                return None

    def queued(self):
        """Conflation only: reads what has arrived on the socket into the per-topic buffer,
        delivering nothing, and returns {topic: messages the buffered one stands for (itself and
        those it replaced)}. A caller (a test) can wait for a burst to have arrived this way."""
        if not self.conflate:
            raise ValueError("queued() needs conflate=True: without conflation every message is delivered")
        self._drain()
        return {topic: message.skipped + 1 for topic, message in self._pending.items()}

    def __iter__(self):
        while True:
            result = self.receive(self.timeout_s)
            if result is None:
                return
            yield result

    def close(self):
        if self._shm is not None:
            self._release_held()
            self._shm.close()
            return
        self._socket.close(linger=0)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- internals ------------------------------------------------------------------------------

    def _release_held(self):
        if self._held is not None:
            self._shm.release(self._held)
            self._held = None

    def _receive_shm(self, timeout_s):
        """shm://: slots hold [topic NUL ResultHeader][payload]; the payload is viewed in place."""
        self._release_held()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            taken = self._shm.take(remaining)
            if taken is None:
                return None
            slot, header, payload = taken
            topic, separator, header_bytes = header.partition(b"\0")
            topic = topic.decode("utf-8", errors="replace")
            if not any(topic.startswith(prefix) for prefix in self._topics):
                self._shm.release(slot)
                continue
            message = self._accept([_Part(topic.encode()), _Part(header_bytes), _Part(memoryview(payload))]) \
                if separator else None
            result = self._decode(message) if message is not None else None
            if result is None:
                if not separator:
                    self._malformed(topic, ValueError("slot header has no topic separator"))
                self._shm.release(slot)
                continue
            self._held = slot
            return result

    def _read_one(self):
        """The next decodable message already queued on the socket, or None."""
        while True:
            try:
                parts = self._socket.recv_multipart(flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return None
            message = self._accept(parts)
            if message is not None:
                return message

    def _take_newest(self):
        """Conflation: drains the socket, keeping the newest message per topic, and hands out the
        topic whose newest message arrived first."""
        self._drain()
        if not self._pending:
            return None
        return self._pending.pop(next(iter(self._pending)))

    def _drain(self):
        """Conflation: moves everything queued on the socket into the per-topic buffer."""
        while True:
            message = self._read_one()
            if message is None:
                break
            previous = self._pending.pop(message.topic, None)  # re-insert: dict order = arrival order
            if previous is not None:
                message.skipped = previous.skipped + 1
                message.gap += previous.gap
                self.stats.skipped += 1
                skipped = self.stats.per_topic_skipped
                skipped[message.topic] = skipped.get(message.topic, 0) + 1
            self._pending[message.topic] = message

    def _accept(self, parts):
        now_ns = time.time_ns()
        self.stats.received += 1
        topic = bytes(parts[0].buffer).decode("utf-8", errors="replace")
        try:
            header, payload = self._parse_header(topic, parts)
        except (ValueError, PayloadError) as error:
            self._malformed(topic, error)
            return None
        gap = self._check_sequence(topic, header)
        return _Pending(topic, header, payload, gap, now_ns)

    @staticmethod
    def _parse_header(topic, parts):
        if topic == STATUS_TOPIC:
            if len(parts) != 2:
                raise ValueError(f"status message has {len(parts)} parts, expected 2")
            status = result_pb2.Status()
            status.ParseFromString(bytes(parts[1].buffer))
            return status, None
        if len(parts) != 3:
            raise ValueError(f"result message has {len(parts)} parts, expected 3 [topic][header][payload]")
        header = result_pb2.ResultHeader()
        try:
            header.ParseFromString(bytes(parts[1].buffer))
        except Exception as error:  # protobuf raises DecodeError, a plain Exception subclass
            raise ValueError(f"unparsable ResultHeader: {error}") from None
        dtype = dtype_of(header.element_type)
        expected = dtype.itemsize * int(np.prod([a.size for a in header.axes], dtype=np.int64))
        if parts[2].buffer.nbytes != expected:
            raise PayloadError(f"payload has {parts[2].buffer.nbytes} bytes, the header says {expected}")
        return header, parts[2]

    def _check_sequence(self, topic, header):
        if topic == STATUS_TOPIC:
            return 0
        key = (topic, header.stream_id)
        sequence = header.input_sequence
        last = self._last_sequence.get(key)
        self._last_sequence[key] = sequence
        if last is None or sequence <= last + 1:
            if last is not None and sequence <= last:
                log.warning("%s stream %d: sequence did not increase (%d then %d; stream restarted?)",
                            topic, header.stream_id, last, sequence)
            return 0
        missing = sequence - last - 1
        self.stats.missing += missing
        self.stats.gaps += 1
        log.warning("%s stream %d: %d input sequence(s) missing between %d and %d",
                    topic, header.stream_id, missing, last, sequence)
        return missing

    def _decode(self, message):
        header = message.header
        array, axes = None, ()
        if message.payload is not None:
            axes = axes_from_proto(header.axes)
            try:
                array = array_from_payload(header.element_type, axes, message.payload.buffer)
            except PayloadError as error:
                self._malformed(message.topic, error)
                return None
        self.stats.delivered += 1
        return Result(message.topic, header, array, axes, message.gap, message.skipped,
                      message.local_received_ns)

    def _malformed(self, topic, error):
        self.stats.malformed += 1
        now = time.monotonic()
        if now - self._malformed_logged_at >= 1.0:  # at most one line a second
            self._malformed_logged_at = now
            log.warning("malformed message on '%s' (%d so far): %s", topic, self.stats.malformed, error)
