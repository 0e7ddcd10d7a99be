"""read_recording / write_recording: round trips of every element type, and the on-disk layout the
C++ recording::Reader expects (tools/common/recording.h), checked with h5py at the HDF5 level."""
import unittest

import h5py
import numpy as np

import sonopipe
from sonopipe.v1 import common_pb2, result_pb2
import support
from test_sockets import random_array


def result_header(pipeline, output, array, axes, sequence, unit):
    header = result_pb2.ResultHeader(schema_version=1, pipeline=pipeline, output=output, input_sequence=sequence,
                                     acquisition_time_ns=1000 + sequence, element_type=sonopipe.element_type_of(array.dtype),
                                     unit=unit, backend="cpu")
    header.timing.received_ns = 2000 + sequence
    sonopipe.arrays.axes_to_proto(sonopipe.arrays.make_axes(array.shape, axes), header.axes)
    return header


class RecordingRoundTrip(unittest.TestCase):
    def setUp(self):
        self.rng = support.random_generator(self)
        self.path = support.TemporaryFolder(self).file("recording.h5")

    def test_frames_results_truth_and_attributes_read_back_exactly(self):
        iq = [random_array(self.rng, "int16", (3, 4, 5, 2)) for _ in range(3)]
        frames = [(sonopipe.make_frame_header(a, kind="iq", axes=["location", "ensemble", ("sample", 1e-7, "s"), "iq"],
                                              sequence=i, acquisition_time_ns=100 * i, stream_id=7), a, 55 + i)
                  for i, a in enumerate(iq)]
        results = []
        for dtype in ("float32", "float16", "complex64", "float64", "uint8", "int16"):
            for sequence in range(2):
                array = random_array(self.rng, dtype, (4, 6))
                results.append((result_header("chain", dtype, array, [("depth", 1e-4, "m"), "location"], sequence, "um"),
                                array))
        truth_values = self.rng.standard_normal((3, 4, 6))
        sonopipe.write_recording(self.path, frames=frames, results=results,
                                 truth={"displacement/axial": (truth_values, ["frame", "depth", "location"], "um", 7)},
                                 attributes={"simulator": "test"})

        recording = sonopipe.read_recording(self.path)
        self.assertEqual(recording.attributes["format"], "sonopipe-recording")
        self.assertEqual(recording.attributes["simulator"], "test")
        stream = recording.streams[7]
        self.assertEqual(len(stream), 3)
        self.assertEqual(stream.payload.dtype, np.dtype("<i2"))
        for i, (header, array) in enumerate(stream):
            self.assertEqual(header, frames[i][0])
            np.testing.assert_array_equal(array, iq[i])
        np.testing.assert_array_equal(stream.sequence, [0, 1, 2])
        np.testing.assert_array_equal(stream.acquisition_time_ns, [0, 100, 200])
        np.testing.assert_array_equal(stream.received_ns, [55, 56, 57])
        self.assertEqual([a.name for a in stream.axes], ["location", "ensemble", "sample", "iq"])
        for header, array in results:
            series = recording.results[("chain", header.output)]
            index = header.input_sequence
            self.assertEqual(series.headers[index], header)
            self.assertEqual(series.payload.dtype, array.dtype)
            np.testing.assert_array_equal(series.payload[index], array)
            self.assertEqual(series.received_ns[index], header.timing.received_ns)
        truth = recording.truth["displacement/axial"]
        np.testing.assert_array_equal(truth.values, truth_values)
        self.assertEqual((truth.unit, truth.stream_id), ("um", 7))
        self.assertEqual([a.name for a in truth.axes], ["frame", "depth", "location"])

    def test_layout_matches_the_cpp_reader(self):
        array = random_array(self.rng, "complex64", (2, 3))
        header = result_header("arfi", "iq", array, [("depth", 2e-4, "m", 1e-3), "location"], 4, "1")
        frame = random_array(self.rng, "float16", (5,))
        frame_header = sonopipe.make_frame_header(frame, kind="rf", axes=["sample"], stream_id=1, sequence=9)
        sonopipe.write_recording(self.path, frames=[(frame_header, frame)], results=[(header, array)],
                                 truth={"strain": (np.ones((2, 2)), ["depth", "location"], "1")})
        with h5py.File(self.path, "r") as f:
            self.assertEqual(f.attrs["format"], "sonopipe-recording")
            self.assertEqual(f.attrs["format_version"].dtype, np.dtype("int64"))
            group = f["results/arfi/iq"]
            # complex64 as compound {r, i} of little-endian float32, one frame per chunk
            self.assertEqual(group["payload"].id.get_type().get_class(), h5py.h5t.COMPOUND)
            self.assertEqual(group["payload"].id.get_type().get_member_name(0), b"r")
            self.assertEqual(group["payload"].chunks, (1, 2, 3))
            self.assertEqual(group["payload"].maxshape, (None, 2, 3))
            # headers: vlen sequences of uint8
            self.assertEqual(h5py.check_vlen_dtype(group["header"].dtype), np.dtype("uint8"))
            parsed = result_pb2.ResultHeader()
            parsed.ParseFromString(group["header"][0].tobytes())
            self.assertEqual(parsed, header)
            self.assertEqual(group["sequence"].dtype, np.dtype("<u8"))
            self.assertEqual(group["sequence"][0], 4)
            self.assertEqual(group["received_ns"].dtype, np.dtype("<i8"))
            self.assertEqual(group.attrs["element_type"], "complex64")
            self.assertEqual(list(group.attrs["axis_names"]), ["depth", "location"])
            np.testing.assert_array_equal(group.attrs["axis_spacing"], [2e-4, 0.0])
            np.testing.assert_array_equal(group.attrs["axis_origin"], [1e-3, 0.0])
            self.assertEqual(list(group.attrs["axis_units"]), ["m", ""])
            self.assertEqual((group.attrs["unit"], group.attrs["pipeline"], group.attrs["output"]), ("1", "arfi", "iq"))
            stream = f["streams/1"]
            self.assertEqual((stream.attrs["stream_id"], stream.attrs["kind"]), (1, "rf"))
            self.assertEqual(stream["payload"].dtype, np.dtype("<f2"))
            self.assertEqual(f["truth/strain"].dtype, np.dtype("<f8"))

    def test_a_frame_of_another_shape_is_refused(self):
        with sonopipe.RecordingWriter(self.path) as writer:
            a = np.zeros((2, 3), np.float32)
            writer.append_frame(sonopipe.make_frame_header(a, kind="rf", axes=["sample", "line"]), a)
            b = np.zeros((2, 4), np.float32)
            with self.assertRaises(sonopipe.RecordingError):
                writer.append_frame(sonopipe.make_frame_header(b, kind="rf", axes=["sample", "line"]), b)

    def test_a_file_that_is_not_a_recording_is_refused_with_its_name(self):
        with h5py.File(self.path, "w") as f:
            f.attrs["format"] = "something else"
        with self.assertRaisesRegex(sonopipe.RecordingError, "not a sonopipe recording"):
            sonopipe.read_recording(self.path)
        with self.assertRaisesRegex(sonopipe.RecordingError, "cannot open"):
            sonopipe.read_recording(self.path + ".missing")


if __name__ == "__main__":
    unittest.main()
