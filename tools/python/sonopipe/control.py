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

    def request(self, command, parameter="", value=""):
        """Sends `command`, returns the ControlReply. A fresh REQ socket per request, so a lost reply
        never leaves the socket stuck in its send/receive state machine."""
        request = control_pb2.ControlRequest(schema_version=common_pb2.SCHEMA_VERSION_CURRENT, command=command,
                                             parameter=parameter, value=value)
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

    # Live parameters (docs/live-parameters.md): names are "<pipeline>.<stage>.<parameter>".

    def list(self, prefix=""):
        """Every parameter under `prefix` ("", "<pipeline>", "<pipeline>.<stage>"): a list of
        sonopipe.v1.Parameter (name, value as YAML, type, min, max, unit, choices, live, generation)."""
        return list(self.request("list", prefix).parameters)

    def get(self, name):
        """The current value of one parameter, as a Python value (int, float, bool, str or list)."""
        return parameter_value(self.request("get", name).parameters[0])

    def describe(self, name):
        """One parameter with its declaration (sonopipe.v1.Parameter)."""
        return self.request("get", name).parameters[0]

    def set(self, name, value):
        """Changes a live parameter; returns the pipeline's new generation (results of frames it starts
        from now on carry it in ResultHeader.param_generation). ControlError names the parameter and
        the rule when the daemon refuses the value; nothing changes then."""
        return self.request("set", name, yaml_text(value)).generation

    def save(self, path=None):
        """The running configuration as YAML (written to `path` when given): it starts the same daemon."""
        text = self.request("save").config_yaml
        if path is not None:
            with open(path, "w", encoding="utf-8") as file:
                file.write(text)
        return text


def yaml_text(value):
    """A Python value as the YAML the daemon reads: True -> "true", [61, 11] -> "[61, 11]"."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_text(item) for item in value) + "]"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def parameter_value(parameter):
    """sonopipe.v1.Parameter -> its value as a Python value, by its declared type."""
    text = parameter.value
    kind = parameter.type
    if kind == "integer":
        return int(text)
    if kind == "real":
        return float(text)
    if kind == "boolean":
        return text == "true"
    if kind in ("integer list", "real list"):
        items = [item.strip() for item in text.strip("[]").split(",") if item.strip()]
        return [int(item) if kind == "integer list" else float(item) for item in items]
    return text
