"""Half of the C++ <-> Python recording interop test (tests/python/recording_interop_test.cpp).

    recording_interop.py write FILE   writes the reference content with sonopipe.write_recording
    recording_interop.py check FILE   reads FILE (written by the C++ recording::Writer) with
                                      sonopipe.read_recording; exits 1 naming the first difference

The content is defined by formulas both sides compute (keep them in step with the .cpp):
  stream 4: 3 int16 IQ frames [location=2, ensemble=3, sample=5, iq=2], value k of frame f =
            ((f * 1000 + k * 37) % 65536) - 32768, sequence 10 + f, acquisition time 1000 f,
            received_ns 7 + f, sample spacing 1e-7 s, attribute probe = "L7-4"
  results p/c: 2 complex64 [depth=3, location=4], element k of result r = (r + k/8) + i(-k/4),
            input_sequence 20 + r, unit "um"
  results p/h: 1 float16 [depth=3, location=4], element k = k / 4 - 1, unit "1"
  truth nested/x: float64 [a=2, b=3], element k = k + 0.5, unit "mm", stream_id 4
  attribute simulator = "interop"
"""
import sys

import numpy as np

import sonopipe
from sonopipe.v1 import result_pb2


def iq_frame(f):
    k = np.arange(2 * 3 * 5 * 2)
    return (((f * 1000 + k * 37) % 65536) - 32768).astype(np.int16).reshape(2, 3, 5, 2)


def complex_result(r):
    k = np.arange(12)
    values = np.empty(12, np.complex64)  # parts set separately: 1j * x would turn -0.0 into +0.0
    values.real = r + k / 8
    values.imag = -(k / 4)
    return values.reshape(3, 4)


def half_result():
    return (np.arange(12) / 4 - 1).astype(np.float16).reshape(3, 4)


def truth_values():
    return np.arange(6, dtype=np.float64).reshape(2, 3) + 0.5


def result_header(output, array, sequence, unit):
    header = result_pb2.ResultHeader(schema_version=1, pipeline="p", output=output, input_sequence=sequence,
                                     element_type=sonopipe.element_type_of(array.dtype), unit=unit)
    sonopipe.arrays.axes_to_proto(sonopipe.arrays.make_axes(array.shape, ["depth", "location"]), header.axes)
    return header


def write(path):
    frames = []
    for f in range(3):
        header = sonopipe.make_frame_header(iq_frame(f), kind="iq",
                                            axes=["location", "ensemble", ("sample", 1e-7, "s"), "iq"], stream_id=4,
                                            sequence=10 + f, acquisition_time_ns=1000 * f, attributes={"probe": "L7-4"})
        frames.append((header, iq_frame(f), 7 + f))
    results = [(result_header("c", complex_result(r), 20 + r, "um"), complex_result(r)) for r in range(2)]
    results.append((result_header("h", half_result(), 0, "1"), half_result()))
    sonopipe.write_recording(path, frames=frames, results=results,
                             truth={"nested/x": (truth_values(), ["a", "b"], "mm", 4)},
                             attributes={"simulator": "interop"})


def check(path):
    recording = sonopipe.read_recording(path)
    def expect(condition, what):
        if not condition:
            print(f"recording_interop: {path}: {what}", file=sys.stderr)
            sys.exit(1)
    expect(recording.attributes.get("simulator") == "interop", f"attribute simulator = {recording.attributes}")
    expect(list(recording.streams) == [4], f"streams {list(recording.streams)}")
    stream = recording.streams[4]
    expect(len(stream) == 3, f"{len(stream)} frames")
    for f, (header, array) in enumerate(stream):
        expect(array.dtype == np.int16 and array.shape == (2, 3, 5, 2), f"frame {f}: {array.dtype}{array.shape}")
        expect(np.array_equal(array, iq_frame(f)), f"frame {f} values")
        expect(header.sequence == 10 + f and header.acquisition_time_ns == 1000 * f, f"frame {f} header {header}")
        expect(header.attributes["probe"] == "L7-4", f"frame {f} attributes")
        expect(abs(header.axes[2].spacing - 1e-7) < 1e-20 and header.axes[3].name == "iq", f"frame {f} axes")
    expect(list(stream.received_ns) == [7, 8, 9], f"received_ns {stream.received_ns}")
    expect(list(stream.sequence) == [10, 11, 12], f"sequence {stream.sequence}")
    complex_series = recording.results[("p", "c")]
    for r, (header, array) in enumerate(complex_series):
        expect(array.dtype == np.complex64, f"p/c dtype {array.dtype}")
        expect(np.array_equal(array, complex_result(r)), f"p/c {r} values {array}")
        expect(header.input_sequence == 20 + r and header.unit == "um", f"p/c {r} header")
    header, array = recording.results[("p", "h")].frame(0)
    expect(array.dtype == np.float16 and np.array_equal(array, half_result()), f"p/h {array.dtype} {array}")
    truth = recording.truth["nested/x"]
    expect(np.array_equal(truth.values, truth_values()), f"truth values {truth.values}")
    expect(truth.unit == "mm" and truth.stream_id == 4 and [a.name for a in truth.axes] == ["a", "b"],
           f"truth {truth.unit} {truth.stream_id} {truth.axes}")
    print(f"recording_interop: {path} matches")


if __name__ == "__main__":
    {"write": write, "check": check}[sys.argv[1]](sys.argv[2])
