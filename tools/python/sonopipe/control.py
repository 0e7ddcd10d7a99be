"""Control: the daemon's REQ/REP control socket (sonopipe.v1.ControlRequest / ControlReply)."""
import zmq

from sonopipe.security import apply_curve_client
from sonopipe.v1 import common_pb2, control_pb2


class ControlError(RuntimeError):
    """No reply within the timeout, an unparsable reply, or a reply with ok = false."""


class Control:
    """``Control("ipc:///tmp/sonopipe-control").status()`` -> sonopipe.v1.Status."""

    def __init__(self, endpoint, timeout_s=5.0, context=None, curve_server_key=None, curve_client_key_file=None):
        """curve_*: keys for a daemon with security.curve (see sonopipe.security)."""
        self.endpoint = endpoint
        self._curve = dict(curve_server_key=curve_server_key, curve_client_key_file=curve_client_key_file)
        self.timeout_s = timeout_s
        self._context = context or zmq.Context.instance()

    def request(self, command):
        """Sends `command`, returns the ControlReply. A fresh REQ socket per request, so a lost reply
        never leaves the socket stuck in its send/receive state machine."""
        request = control_pb2.ControlRequest(schema_version=common_pb2.SCHEMA_VERSION_CURRENT, command=command)
        socket = self._context.socket(zmq.REQ)
        socket.setsockopt(zmq.LINGER, 0)
        try:
            apply_curve_client(socket, **self._curve)
            socket.connect(self.endpoint)
            socket.send(request.SerializeToString())
            if not socket.poll(int(self.timeout_s * 1000), zmq.POLLIN):
                raise ControlError(f"no reply to '{command}' from {self.endpoint} within {self.timeout_s} s")
            reply = control_pb2.ControlReply()
            try:
                reply.ParseFromString(socket.recv())
            except Exception as error:  # protobuf DecodeError
                raise ControlError(f"unparsable reply to '{command}' from {self.endpoint}: {error}") from None
        finally:
            socket.close(linger=0)
        if not reply.ok:
            raise ControlError(f"'{command}' refused by {self.endpoint}: {reply.error}")
        return reply

    def status(self):
        """The daemon's counters and timings (sonopipe.v1.Status)."""
        return self.request("status").status

    def stop(self):
        """Asks the daemon to drain and exit; returns its counters at that moment."""
        return self.request("stop").status
