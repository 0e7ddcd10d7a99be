"""shm:// endpoints (same host, docs/shared-memory.md) through libsonopipe-client's sp_shm_* calls.

A frame is written once into a slot of the daemon's shared pool and read there: ``ShmProducer``
claims a slot and hands out numpy views of its header and payload areas, ``commit`` publishes it;
``ShmConsumer.take`` hands out a message read in place until ``release``. The library is found
through $SONOPIPE_CLIENT_LIBRARY, then the loader's search path (libsonopipe-client.so.1).
"""
import ctypes
import ctypes.util
import os

import numpy as np

SP_ERROR_TIMEOUT = -4


class ShmError(RuntimeError):
    """A pool that cannot be opened or used; the message names the fix."""


class ShmTimeout(ShmError):
    """No slot came free, or no message came, within the timeout."""


def is_shm_endpoint(endpoint):
    return isinstance(endpoint, str) and endpoint.startswith("shm://")


_library = None


def library():
    global _library
    if _library is None:
        path = (os.environ.get("SONOPIPE_CLIENT_LIBRARY") or ctypes.util.find_library("sonopipe-client")
                or "libsonopipe-client.so.1")
        lib = ctypes.CDLL(path)
        p, u64, vp = ctypes.POINTER, ctypes.c_uint64, ctypes.c_void_p
        signatures = {
            "sp_last_error": (ctypes.c_char_p, []),
            "sp_shm_producer_open": (ctypes.c_int, [ctypes.c_char_p, p(vp)]),
            "sp_shm_claim": (ctypes.c_int, [vp, ctypes.c_int, p(vp), p(u64), p(vp), p(u64)]),
            "sp_shm_commit": (ctypes.c_int, [vp, u64, u64]),
            "sp_shm_abandon": (ctypes.c_int, [vp]),
            "sp_shm_delivery": (ctypes.c_int, [vp, ctypes.c_int, p(u64), p(u64)]),
            "sp_shm_producer_close": (ctypes.c_int, [vp]),
            "sp_shm_consumer_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int, p(vp)]),
            "sp_shm_take": (ctypes.c_int, [vp, ctypes.c_int, p(ctypes.c_uint32), p(vp), p(u64), p(vp), p(u64)]),
            "sp_shm_release": (ctypes.c_int, [vp, ctypes.c_uint32]),
            "sp_shm_consumer_close": (ctypes.c_int, [vp]),
        }
        for name, (restype, argtypes) in signatures.items():
            function = getattr(lib, name)
            function.restype, function.argtypes = restype, argtypes
        _library = lib
    return _library


def _check(status):
    if status != 0:
        message = library().sp_last_error().decode("utf-8", errors="replace")
        raise (ShmTimeout if status == SP_ERROR_TIMEOUT else ShmError)(message)


def _timeout_ms(timeout_s):
    return -1 if timeout_s is None else max(0, int(timeout_s * 1000))


def _view(address, size):
    """A writable numpy uint8 view of `size` bytes at `address` (shared memory)."""
    if size == 0:
        return np.zeros(0, dtype=np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(address))


class ShmProducer:
    """Writes messages into the pool at `endpoint` (the daemon's ingest pool)."""

    def __init__(self, endpoint):
        self.endpoint = endpoint
        self._handle = ctypes.c_void_p()
        _check(library().sp_shm_producer_open(endpoint.encode(), ctypes.byref(self._handle)))
        self.header = self.payload = None  # views of the claimed slot

    def claim(self, timeout_s=10.0):
        """Claims a slot: self.header and self.payload become uint8 views of its areas."""
        header, header_capacity = ctypes.c_void_p(), ctypes.c_uint64()
        payload, payload_capacity = ctypes.c_void_p(), ctypes.c_uint64()
        _check(library().sp_shm_claim(self._handle, _timeout_ms(timeout_s), ctypes.byref(header),
                                      ctypes.byref(header_capacity), ctypes.byref(payload),
                                      ctypes.byref(payload_capacity)))
        self.header = _view(header.value, header_capacity.value)
        self.payload = _view(payload.value, payload_capacity.value)
        return self.payload

    def commit(self, header_bytes, payload_bytes):
        self.header = self.payload = None
        _check(library().sp_shm_commit(self._handle, header_bytes, payload_bytes))

    def abandon(self):
        self.header = self.payload = None
        _check(library().sp_shm_abandon(self._handle))

    def delivery(self, timeout_s=0.0):
        """(delivered, undelivered): messages the daemon took, and committed ones it has not (yet);
        waits up to `timeout_s` for the latter to reach 0."""
        delivered, undelivered = ctypes.c_uint64(), ctypes.c_uint64()
        _check(library().sp_shm_delivery(self._handle, _timeout_ms(timeout_s), ctypes.byref(delivered),
                                         ctypes.byref(undelivered)))
        return delivered.value, undelivered.value

    def close(self):
        if self._handle:
            library().sp_shm_producer_close(self._handle)
            self._handle = ctypes.c_void_p()


class ShmConsumer:
    """Takes messages from the pool at `endpoint` (the daemon's publish.shm pool); live by default."""

    def __init__(self, endpoint, lossless=False):
        self.endpoint = endpoint
        self._handle = ctypes.c_void_p()
        _check(library().sp_shm_consumer_open(endpoint.encode(), 1 if lossless else 0, ctypes.byref(self._handle)))

    def take(self, timeout_s=None):
        """(slot, header bytes, payload uint8 view) or None at the timeout; release(slot) after."""
        slot, header, header_bytes = ctypes.c_uint32(), ctypes.c_void_p(), ctypes.c_uint64()
        payload, payload_bytes = ctypes.c_void_p(), ctypes.c_uint64()
        status = library().sp_shm_take(self._handle, _timeout_ms(timeout_s), ctypes.byref(slot), ctypes.byref(header),
                                       ctypes.byref(header_bytes), ctypes.byref(payload), ctypes.byref(payload_bytes))
        if status == SP_ERROR_TIMEOUT:
            return None
        _check(status)
        return slot.value, ctypes.string_at(header.value, header_bytes.value), _view(payload.value, payload_bytes.value)

    def release(self, slot):
        _check(library().sp_shm_release(self._handle, slot))

    def close(self):
        if self._handle:
            library().sp_shm_consumer_close(self._handle)
            self._handle = ctypes.c_void_p()
