"""The MATLAB wrapper of tools/clients/matlab, mirrored call for call in Python over ctypes.

MATLAB is not available here, so each MATLAB function has a Python twin below (marked with
@mirrors("<file>.<function>")) that makes the same library calls, in the same order, with the
same argument classes. `Matlab.calllib` plays MATLAB's calllib: it checks every argument against the
header's declared C type exactly as the MATLAB code casts it (int32 for int, uint64 for uint64_t and
size_t, char for const char*, a libpointer for a handle, ...), converts as MATLAB does (a handle
libpointer passed for `sp_x**` is passed by address) and records which MATLAB function made the call.
MatlabSource reads the .m files so that tests can hold the twins to the MATLAB text."""
import ctypes
import os
import re
from types import SimpleNamespace

import numpy as np

import client_library

MATLAB_DIR = os.path.join(os.path.dirname(client_library.HEADER), "..", "tools", "clients", "matlab")

# ------------------------------------------------------------------------------------------------
# The MATLAB text


def _code_without_comments(text):
    """MATLAB code with comments removed and `...` continuations joined (strings kept intact)."""
    lines, out = [], []
    for line in text.splitlines():
        kept, in_string, i = [], False, 0
        while i < len(line):
            c = line[i]
            if in_string:
                kept.append(c)
                if c == "'":
                    if i + 1 < len(line) and line[i + 1] == "'":
                        kept.append("'")
                        i += 1
                    else:
                        in_string = False
            elif c == "'":
                previous = "".join(kept).rstrip()[-1:]
                in_string = not (previous.isalnum() or previous in ")]}_.'")  # else a transpose
                kept.append(c)
            elif c == "%":
                break
            elif line.startswith("...", i):
                kept.append(" ")
                out.append("".join(kept))
                kept = None
                break
            else:
                kept.append(c)
            i += 1
        if kept is None:
            continue  # continued on the next line
        out.append("".join(kept))
        lines.append("".join(out))
        out = []
    return "\n".join(lines)


def _arguments(text, start):
    """The top-level comma-separated arguments of the call whose '(' is at text[start]."""
    depth, current, arguments, i, in_string = 0, [], [], start, False
    while i < len(text):
        c = text[i]
        if in_string:
            in_string = c != "'"
        elif c == "'" and not (current and "".join(current).rstrip()[-1:].isalnum()):
            in_string = True
        elif c in "([{":
            depth += 1
            if depth == 1:
                i += 1
                continue
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                arguments.append("".join(current).strip())
                return arguments
        elif c == "," and depth == 1:
            arguments.append("".join(current).strip())
            current = []
            i += 1
            continue
        current.append(c)
        i += 1
    raise ValueError("unbalanced call")


class MatlabSource:
    """Every function of the .m files and its calllib call sites in textual order:
    functions["SonopipeSender.send"] = [(library function, [argument texts]), ...]."""

    def __init__(self, folder=MATLAB_DIR):
        self.functions = {}
        self.text = {}
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".m"):
                continue
            stem = name[:-2]
            with open(os.path.join(folder, name)) as f:
                code = _code_without_comments(f.read())
            self.text[stem] = code
            starts = [(m.start(), m.group(1)) for m in
                      re.finditer(r"^\s*function\s+(?:(?:\[[^\]]*\]|\w+)\s*=\s*)?(\w+)", code, flags=re.M)]
            for index, (begin, function) in enumerate(starts):
                end = starts[index + 1][0] if index + 1 < len(starts) else len(code)
                body = code[begin:end]
                sites = []
                for call in re.finditer(r"\bcalllib\s*\(", body):
                    arguments = _arguments(body, call.end() - 1)
                    sites.append((arguments[1].strip("'"), arguments[2:], arguments[0]))
                self.functions[f"{stem}.{function}"] = sites


# ------------------------------------------------------------------------------------------------
# calllib


class LibPointer:
    """MATLAB's libpointer('voidPtr'): a pointer that a `sp_x**` argument fills in."""

    def __init__(self):
        self.value = ctypes.c_void_p()


class ReturnedPointer:
    """The lib.pointer calllib returns for `const void*`: setdatatype, then Value."""

    def __init__(self, address):
        self.address = address
        self.Value = None

    def setdatatype(self, pointer_type, rows, columns):
        dtypes = {"int16Ptr": np.int16, "uint16Ptr": np.uint16, "singlePtr": np.float32, "doublePtr": np.float64,
                  "uint8Ptr": np.uint8}
        dtype = np.dtype(dtypes[pointer_type])
        count = int(rows) * int(columns)
        self.Value = np.frombuffer(ctypes.string_at(self.address, count * dtype.itemsize), dtype=dtype).copy()


# Declared C type -> the MATLAB class the wrapper must pass (numpy scalar types stand for MATLAB's).
_NUMERIC = {"int": np.int32, "uint32_t": np.uint32, "uint64_t": np.uint64, "size_t": np.uint64,
            "int64_t": np.int64, "double": float}
# Declared C type -> MATLAB's cast function in the .m text.
MATLAB_CASTS = {"int": "int32", "uint32_t": "uint32", "uint64_t": "uint64", "size_t": "uint64", "int64_t": "int64",
                "double": "double"}


class MatlabError(Exception):
    """error(...) raised by the MATLAB code."""


class Matlab:
    """calllib over the ctypes library, recording (MATLAB function, library function) per call."""

    def __init__(self, lib, workspace=None):
        self.lib = lib
        self.calls = []       # (calling MATLAB function, its invocation number, library function)
        self.context = []     # MATLAB function stack: (function, invocation number)
        self.invocations = 0
        self.workspace = workspace or {}  # evalin('base', name)

    def evalin_base(self, name):
        return self.workspace[name]

    def calllib(self, library, name, *args):
        assert library == "sonopipe_client", library
        returns, parameters = self.lib.prototypes[name]
        assert len(args) == len(parameters), f"{name}: {len(args)} arguments, the header declares {len(parameters)}"
        converted = [self._argument(name, i, declared, value) for i, (declared, value) in enumerate(zip(parameters, args))]
        function, invocation = self.context[-1] if self.context else (None, None)
        self.calls.append((function, invocation, name))
        result = getattr(self.lib, name)(*converted)
        return self._returned(returns, result)

    @staticmethod
    def _argument(name, index, declared, value):
        declared = re.sub(r"\s*\*", "*", declared)
        where = f"{name} argument {index + 1} ({declared})"
        base = declared.replace("const ", "").rstrip("*")
        if base.startswith("sp_"):
            assert isinstance(value, LibPointer), f"{where}: expected a libpointer, got {type(value)}"
            return ctypes.byref(value.value) if declared.endswith("**") else value.value
        if declared == "const char*":
            assert isinstance(value, str), f"{where}: expected char, got {type(value)}"
            return value.encode()
        if declared == "const void*":
            assert isinstance(value, np.ndarray), f"{where}: expected an array, got {type(value)}"
            return value.ctypes.data_as(ctypes.c_void_p)
        if declared == "const double*":
            assert isinstance(value, np.ndarray) and value.dtype == np.float64, f"{where}: expected double"
            return value.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
        expected = _NUMERIC[declared]
        if expected is float:
            assert isinstance(value, float), f"{where}: expected double, got {type(value)}"
            return value
        assert type(value) is expected, f"{where}: expected {expected.__name__}, got {type(value).__name__}"
        return int(value)

    @staticmethod
    def _returned(declared, value):
        declared = re.sub(r"\s*\*", "*", declared)
        if declared == "const char*":
            return "" if value is None else value.decode()
        if declared == "const void*":
            return ReturnedPointer(value)
        if declared in _NUMERIC and _NUMERIC[declared] is not float:
            return _NUMERIC[declared](value)
        return value


def mirrors(function):
    """Marks a twin of the MATLAB function `function` ("<file>.<function>"): its library calls are
    recorded as made by that function."""
    def wrap(twin):
        def run(*args, **kwargs):
            arguments = list(args) + list(kwargs.values())
            matlab = next((a for a in arguments if isinstance(a, Matlab)), None)
            if matlab is None:
                matlab = next(a for a in arguments if isinstance(a, MatlabObject)).matlab
            matlab.invocations += 1
            matlab.context.append((function, matlab.invocations))
            try:
                return twin(*args, **kwargs)
            finally:
                matlab.context.pop()
        run.mirrors = function
        return run
    return wrap


class MatlabObject:
    def __init__(self, matlab):
        self.matlab = matlab


def isfield(structure, name):
    return hasattr(structure, name)


def field_or(structure, name, default):  # SonopipeSender.field_or (no library call)
    return getattr(structure, name) if hasattr(structure, name) else default


def matlab_size(data, dimension):
    """size(data, dimension), 1-based; 1 beyond the array's dimensions."""
    return data.shape[dimension - 1] if dimension <= data.ndim else 1


def column(data):
    """data(:): the array's elements in MATLAB (column-major) order."""
    return np.asarray(data).ravel(order="F")


# ------------------------------------------------------------------------------------------------
# Twins of tools/clients/matlab


@mirrors("sonopipe_check.sonopipe_check")
def sonopipe_check(m, status, what):
    if status != 0:
        raise MatlabError(f"{what} returned {status}: {m.calllib('sonopipe_client', 'sp_last_error')}")


def sonopipe_payload(data):  # sonopipe_payload.sonopipe_payload (no library call)
    if np.iscomplexobj(data):
        data = data.astype(np.complex64)
        payload = np.zeros(2 * data.size, np.float32)
        payload[0::2] = column(data).real
        payload[1::2] = column(data).imag
        element_type = "complex64"
    else:
        names = {np.dtype(np.int16): "int16", np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
                 np.dtype(np.uint8): "uint8"}
        if data.dtype not in names:
            raise MatlabError(f"class {data.dtype} has no sonopipe element type")
        element_type = names[data.dtype]
        payload = column(data)
    return payload, element_type, np.uint64(payload.size * payload.itemsize)


class SonopipeSender(MatlabObject):
    @mirrors("SonopipeSender.SonopipeSender")
    def __init__(self, m, endpoint, lossless=True, curve_keys=None):
        super().__init__(m)
        self.Handle = LibPointer()
        sonopipe_check(m, m.calllib("sonopipe_client", "sp_sender_create", np.int32(lossless), self.Handle),
                       "sp_sender_create")
        if curve_keys is not None:
            sonopipe_check(m, m.calllib("sonopipe_client", "sp_sender_set_curve", self.Handle, curve_keys.serverPublic,
                                        curve_keys.clientPublic, curve_keys.clientSecret), "sp_sender_set_curve")
        sonopipe_check(m, m.calllib("sonopipe_client", "sp_sender_connect", self.Handle, endpoint), "sp_sender_connect")

    @mirrors("SonopipeSender.setSendTimeout")
    def setSendTimeout(self, timeout_ms):
        m = self.matlab
        sonopipe_check(m, m.calllib("sonopipe_client", "sp_sender_set_send_timeout", self.Handle, np.int32(timeout_ms)),
                       "sp_sender_set_send_timeout")

    @mirrors("SonopipeSender.send")
    def send(self, data, description):
        m = self.matlab
        payload, element_type, size_bytes = sonopipe_payload(data)
        frame = LibPointer()
        sonopipe_check(m, m.calllib("sonopipe_client", "sp_frame_create", frame), "sp_frame_create")
        try:
            describe(m, frame, data, element_type, description)
            status = m.calllib("sonopipe_client", "sp_send", self.Handle, frame, payload, size_bytes)
        except Exception:
            m.calllib("sonopipe_client", "sp_frame_destroy", frame)
            raise
        m.calllib("sonopipe_client", "sp_frame_destroy", frame)
        sonopipe_check(m, status, "sp_send")

    @mirrors("SonopipeSender.delete")
    def delete(self):
        if self.Handle is not None:
            self.matlab.calllib("sonopipe_client", "sp_sender_close", self.Handle)
            self.Handle = None


@mirrors("SonopipeSender.describe")
def describe(m, frame, data, element_type, description):
    sonopipe_check(m, m.calllib("sonopipe_client", "sp_frame_set_kind", frame, description.kind), "sp_frame_set_kind")
    sonopipe_check(m, m.calllib("sonopipe_client", "sp_frame_set_element_type", frame, element_type),
                   "sp_frame_set_element_type")
    count = len(description.axes)
    for i in range(1, count + 1):
        axis = description.axes[i - 1]
        sonopipe_check(m, m.calllib("sonopipe_client", "sp_frame_add_axis", frame, axis.name,
                                    np.uint64(matlab_size(data, count - i + 1)), float(axis.spacing), axis.unit,
                                    float(axis.origin)), "sp_frame_add_axis")
    sonopipe_check(m, m.calllib("sonopipe_client", "sp_frame_set_stream_id", frame,
                                np.uint32(field_or(description, "streamId", 0))), "sp_frame_set_stream_id")
    if isfield(description, "sequence"):
        sonopipe_check(m, m.calllib("sonopipe_client", "sp_frame_set_sequence", frame, np.uint64(description.sequence)),
                       "sp_frame_set_sequence")
    if isfield(description, "acquisitionTimeNs"):
        sonopipe_check(m, m.calllib("sonopipe_client", "sp_frame_set_acquisition_time_ns", frame,
                                    np.int64(description.acquisitionTimeNs)), "sp_frame_set_acquisition_time_ns")
    sonopipe_check(m, m.calllib("sonopipe_client", "sp_frame_set_sampling_frequency", frame,
                                float(field_or(description, "samplingFrequencyHz", 0))), "sp_frame_set_sampling_frequency")
    sonopipe_check(m, m.calllib("sonopipe_client", "sp_frame_set_center_frequency", frame,
                                float(field_or(description, "centerFrequencyHz", 0))), "sp_frame_set_center_frequency")
    sonopipe_check(m, m.calllib("sonopipe_client", "sp_frame_set_demodulation_frequency", frame,
                                float(field_or(description, "demodulationFrequencyHz", 0))),
                   "sp_frame_set_demodulation_frequency")
    sonopipe_check(m, m.calllib("sonopipe_client", "sp_frame_set_speed_of_sound", frame,
                                float(field_or(description, "speedOfSoundMPerS", 1540))), "sp_frame_set_speed_of_sound")
    for vector in field_or(description, "vectors", []):
        values = column(np.asarray(vector.values, dtype=np.float64))
        sonopipe_check(m, m.calllib("sonopipe_client", "sp_frame_set_vector", frame, vector.name, values,
                                    np.uint64(values.size), vector.unit), "sp_frame_set_vector")
    for attribute in field_or(description, "attributes", []):
        sonopipe_check(m, m.calllib("sonopipe_client", "sp_frame_set_attribute", frame, attribute.key, attribute.value),
                       "sp_frame_set_attribute")


class SonopipeSubscriber(MatlabObject):
    @mirrors("SonopipeSubscriber.SonopipeSubscriber")
    def __init__(self, m, endpoint, topic_prefix="result/", curve_keys=None):
        super().__init__(m)
        self.Handle = LibPointer()
        sonopipe_check(m, m.calllib("sonopipe_client", "sp_subscriber_create", self.Handle), "sp_subscriber_create")
        if curve_keys is not None:
            sonopipe_check(m, m.calllib("sonopipe_client", "sp_subscriber_set_curve", self.Handle,
                                        curve_keys.serverPublic, curve_keys.clientPublic, curve_keys.clientSecret),
                           "sp_subscriber_set_curve")
        sonopipe_check(m, m.calllib("sonopipe_client", "sp_subscriber_connect", self.Handle, endpoint, topic_prefix),
                       "sp_subscriber_connect")

    @mirrors("SonopipeSubscriber.next")
    def next(self, timeout_ms, attribute_keys=()):
        m = self.matlab
        pointer = LibPointer()
        status = m.calllib("sonopipe_client", "sp_subscriber_next", self.Handle, np.int32(timeout_ms), pointer)
        if status == -4:
            return None
        sonopipe_check(m, status, "sp_subscriber_next")
        result = read_result(m, pointer, list(attribute_keys))
        m.calllib("sonopipe_client", "sp_result_release", pointer)
        return result

    @mirrors("SonopipeSubscriber.delete")
    def delete(self):
        if self.Handle is not None:
            self.matlab.calllib("sonopipe_client", "sp_subscriber_close", self.Handle)
            self.Handle = None


@mirrors("SonopipeSubscriber.read_result")
def read_result(m, pointer, attribute_keys):
    call = lambda name, *args: m.calllib("sonopipe_client", name, pointer, *args)  # noqa: E731
    result = SimpleNamespace()
    result.topic = call("sp_result_topic")
    result.pipeline = call("sp_result_pipeline")
    result.output = call("sp_result_output")
    result.streamId = call("sp_result_stream_id")
    result.inputSequence = call("sp_result_input_sequence")
    result.acquisitionTimeNs = call("sp_result_acquisition_time_ns")
    result.inputKind = call("sp_result_input_kind")
    result.elementType = call("sp_result_element_type")
    result.unit = call("sp_result_unit")
    result.backend = call("sp_result_backend")
    indices = [np.uint32(i) for i in range(int(call("sp_result_axis_count")))]
    names = [call("sp_result_axis_name", i) for i in indices]
    sizes = [float(call("sp_result_axis_size", i)) for i in indices]
    spacings = [call("sp_result_axis_spacing", i) for i in indices]
    units = [call("sp_result_axis_unit", i) for i in indices]
    origins = [call("sp_result_axis_origin", i) for i in indices]
    result.axes = [SimpleNamespace(name=n, size=s, spacing=p, unit=u, origin=o)
                   for n, s, p, u, o in zip(names, sizes, spacings, units, origins)]
    values = [call("sp_result_attribute", key) for key in attribute_keys]
    result.attributes = dict(zip(attribute_keys, values))
    data = call("sp_result_data")
    size_bytes = float(call("sp_result_bytes"))
    readers = {"int16": ("int16Ptr", 2), "float16": ("uint16Ptr", 2), "float32": ("singlePtr", 4),
               "complex64": ("singlePtr", 4), "float64": ("doublePtr", 8), "uint8": ("uint8Ptr", 1)}
    reader = readers[result.elementType]
    data.setdatatype(reader[0], size_bytes / reader[1], 1)
    values = data.Value
    if result.elementType == "complex64":
        values = values[0::2] + 1j * values[1::2]
    result.data = values.reshape([int(s) for s in reversed(sizes)] + [1], order="F")  # reshape(values, [fliplr(sizes) 1])
    return result


def sonopipe_verasonics_description(Trans, Receive, TX, Event, Resource):  # no library call
    speed_of_sound = Resource.Parameters.speedOfSound
    center_frequency_hz = Trans.frequency * 1e6
    wavelength = speed_of_sound / center_frequency_hz
    acquisitions = [i + 1 for i, r in enumerate(Receive) if r.bufnum == 1 and r.framenum == 1]
    sampling_frequency_hz = Receive[acquisitions[0] - 1].decimSampleRate * 1e6
    first_sample_s = 2 * Receive[acquisitions[0] - 1].startDepth / center_frequency_hz
    if getattr(Trans, "units", "") == "mm":
        element_x = Trans.ElementPos[:, 0] * 1e-3
    else:
        element_x = Trans.ElementPos[:, 0] * wavelength
    steering = [TX[next(e.tx for e in Event if e.rcv == i) - 1].Steer[0] for i in acquisitions]
    axis = lambda name, spacing, unit, origin: SimpleNamespace(name=name, spacing=spacing, unit=unit, origin=origin)  # noqa: E731
    vector = lambda name, values, unit: SimpleNamespace(name=name, values=np.asarray(values, float), unit=unit)  # noqa: E731
    description = SimpleNamespace(
        kind="channel_rf",
        axes=[axis("transmit", 0, "", 0), axis("element", 0, "", 0), axis("sample", 1 / sampling_frequency_hz, "s",
                                                                           first_sample_s)],
        samplingFrequencyHz=sampling_frequency_hz, centerFrequencyHz=center_frequency_hz, demodulationFrequencyHz=0,
        speedOfSoundMPerS=speed_of_sound,
        vectors=[vector("element_x_m", element_x, "m"), vector("transmit_angle_rad", steering, "rad"),
                 vector("transmit_wavefront", np.zeros(len(steering)), "")])
    if hasattr(Trans, "lensCorrection"):
        description.vectors.append(vector("element_delay_s", np.full(len(element_x), 2 * Trans.lensCorrection /
                                                                     center_frequency_hz), "s"))
    description.attributes = [SimpleNamespace(key="source", value="verasonics")]
    return description


class VerasonicsExternal:
    """sonopipe_verasonics_external with its persistent variables."""

    def __init__(self, m):
        self.m = m
        self.sender = None

    def __call__(self, RData):
        m = self.m
        if self.sender is None:
            Trans = m.evalin_base("Trans")
            Receive = m.evalin_base("Receive")
            self.description = sonopipe_verasonics_description(Trans, Receive, m.evalin_base("TX"),
                                                               m.evalin_base("Event"), m.evalin_base("Resource"))
            acquisitions = [r for r in Receive if r.bufnum == 1 and r.framenum == 1]
            self.rows = np.concatenate([np.arange(r.startSample, r.endSample + 1) for r in acquisitions])
            self.connector = np.asarray(Trans.Connector)
            self.transmits = len(acquisitions)
            self.sender = SonopipeSender(m, os.environ["SONOPIPE_INGEST"], True)
            self.sender.setSendTimeout(1000)
        samples = self.rows.size // self.transmits
        selected = RData[np.ix_(self.rows - 1, self.connector - 1)]  # RData(rows, connector)
        data = np.transpose(selected.reshape((samples, self.transmits, self.connector.size), order="F"), (0, 2, 1))
        self.sender.send(data, self.description)


class VerasonicsExternalIq:
    """sonopipe_verasonics_external_iq with its persistent variables."""

    def __init__(self, m):
        self.m = m
        self.sender = None

    def __call__(self, IData, QData):
        m = self.m
        if self.sender is None:
            PData = m.evalin_base("PData")
            Trans = m.evalin_base("Trans")
            Resource = m.evalin_base("Resource")
            speed_of_sound = Resource.Parameters.speedOfSound
            center_frequency_hz = Trans.frequency * 1e6
            wavelength = speed_of_sound / center_frequency_hz
            axis = lambda name, spacing, unit, origin: SimpleNamespace(name=name, spacing=spacing, unit=unit, origin=origin)  # noqa: E731
            self.description = SimpleNamespace(
                kind="iq",
                axes=[axis("line", PData[0].PDelta[0] * wavelength, "m", PData[0].Origin[0] * wavelength),
                      axis("sample", PData[0].PDelta[2] * wavelength, "m", PData[0].Origin[2] * wavelength)],
                centerFrequencyHz=center_frequency_hz, demodulationFrequencyHz=center_frequency_hz,
                speedOfSoundMPerS=speed_of_sound, attributes=[SimpleNamespace(key="source", value="verasonics")])
            self.sender = SonopipeSender(m, os.environ["SONOPIPE_INGEST"], True)
            self.sender.setSendTimeout(1000)
        self.sender.send(IData.astype(np.float32) + 1j * QData.astype(np.float32), self.description)
