#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/<harness>/ (committed; re-run after a format change).

    SONOPIPE_PROTO_PY=build/tools/python/proto_py /usr/bin/python3 tests/fuzz/make_corpus.py

Seeds are small valid inputs plus a few near misses, so the fuzzers start from the real formats.
"""
import os
import random
import shutil
import struct
import sys


sys.path.insert(0, os.environ["SONOPIPE_PROTO_PY"])
from sonopipe.v1 import control_pb2, frame_pb2, result_pb2  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def write(harness, name, data):
    folder = os.path.join(HERE, "corpus", harness)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def frame_header(kind, element_type, axes, sequence=0, **extra):
    header = frame_pb2.FrameHeader(schema_version=1, stream_id=1, sequence=sequence, kind=kind,
                                   element_type=element_type, acquisition_time_ns=123456789)
    for name, size, unit in axes:
        header.axes.add(name=name, size=size, spacing=1e-4, unit=unit, origin=0.0)
    for key, value in extra.get("attributes", {}).items():
        header.attributes[key] = value
    for name, values in extra.get("vectors", {}).items():
        header.vectors.add(name=name, values=values)
    header.sampling_frequency_hz = extra.get("fs", 20e6)
    header.center_frequency_hz = 5e6
    return header.SerializeToString()


def frames():
    cases = {
        "iq_int16_single_axis": (4, frame_header(frame_pb2.FRAME_KIND_IQ, 1, [("iq", 2, "")])),
        "rf_float32": (16 * 4 * 4, frame_header(frame_pb2.FRAME_KIND_RF, 2, [("sample", 16, "s"), ("channel", 4, "")],
                                                attributes={"probe": "L11-5v"},
                                                vectors={"element_x_m": [0.0, 1e-4, 2e-4, 3e-4]})),
        "iq_complex64": (8 * 3 * 8, frame_header(frame_pb2.FRAME_KIND_IQ, 3, [("sample", 8, "s"), ("line", 3, "m")])),
        "dce_float16": (5 * 2, frame_header(frame_pb2.FRAME_KIND_DCE, 5, [("time", 5, "s")])),
        "size_mismatch": (7, frame_header(frame_pb2.FRAME_KIND_RF, 2, [("sample", 16, "s")])),
        "negative_frequency": (64, frame_header(frame_pb2.FRAME_KIND_RF, 2, [("sample", 16, "s")], fs=-1.0)),
    }
    for name, (payload, header) in cases.items():
        write("frame_header", name, struct.pack("<I", payload) + header)


def control():
    for name, command, version in [("status", "status", 1), ("stop", "stop", 1), ("unknown", "reboot", 1),
                                   ("old_schema", "status", 0)]:
        write("control_request", name, control_pb2.ControlRequest(schema_version=version, command=command)
              .SerializeToString())


def config():
    for name in ["live.yaml", "strain2d.yaml", "arfi.yaml"]:
        shutil.copy(os.path.join(ROOT, "config", name), os.path.join(HERE, "corpus", "config", name))
    write("config", "security.yaml", b"""security:
  control_stop: disabled
pipelines:
  - name: a
    match: {kinds: [iq], streams: [1, 2]}
    stages:
      - {type: convert, params: {scale: 0.5}}
""")


def recording():
    """The recording harness reads its input as a list of things to write into a file (see
    recording_fuzzer.cpp), so its seeds are plain bytes: a fixed pseudo-random few."""
    rng = random.Random(14)
    for i in range(6):
        write("recording", f"layout_{i}", bytes(rng.randrange(256) for _ in range(200 + 100 * i)))


def uff():
    """The UFF harness reads its input as a choice of valid file and a list of edits (see
    uff_fuzzer.cpp), so its seeds are plain bytes: no edit on each kind of file, then a
    fixed pseudo-random few."""
    for kind in range(4):
        write("uff", f"valid_{kind}", bytes([kind, 0, 1, 0]))
    rng = random.Random(13)
    for i in range(6):
        write("uff", f"edits_{i}", bytes(rng.randrange(256) for _ in range(40 + 40 * i)))


def mat():
    """The .mat harness reads its input as a MAT v5 file: the Verasonics saves of verasonics_test
    (tests/tools/formats/verasonics_files.py), compressed (small) and plain (the uncompressed
    parser, which libmatio walks differently)."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "tools", "formats"))
    import tempfile
    import verasonics_files  # noqa: E402
    with tempfile.TemporaryDirectory() as scratch:
        for name, scenario, compress in [("plane_v5z", "plane", True), ("focused_v5z", "focused", True),
                                         ("plane_v5", "plane", False)]:
            path = os.path.join(scratch, name + ".mat")
            verasonics_files.write_v5(path, verasonics_files.scenario(scenario, 5), compress)
            with open(path, "rb") as f:
                write("mat", name, f.read())
    must()


def must():
    """MUST/PyMUST saves for the same harness (its MUST reader, tools/formats/must_reader.h): `RF`
    int16 [samples, elements, frames] and `param` (fs, fc, c, t0, pitch, PRF, TXdelay, Nelements) as
    PyMUST's PWI_disk.mat holds them, 64 samples x 8 elements x 2 frames, plain and compressed."""
    import tempfile
    import numpy as np
    import scipy.io
    rng = np.random.default_rng(24)
    rf = rng.integers(-2000, 2000, size=(64, 8, 2), dtype=np.int16)
    param = {"fs": 20e6 / 3, "fc": 5e6, "c": 1480.0, "t0": 9.95e-6, "pitch": 0.298e-3, "PRF": 10e3,
             "TXdelay": np.zeros((1, 8)), "Nelements": 8.0}
    with tempfile.TemporaryDirectory() as scratch:
        for name, compress in [("must_v5", False), ("must_v5z", True)]:
            path = os.path.join(scratch, name + ".mat")
            scipy.io.savemat(path, {"RF": rf, "param": param}, format="5", do_compression=compress)
            with open(path, "rb") as f:
                write("mat", name, f.read())


def host_path_switches():
    """host_path_switches_fuzzer.cpp: one line per switch (STAGING, PUBLISH_COPY, PUBLISH_TOUCH,
    COPY_HUGE_PAGES, PINNED_POOL, MAX_SPARE_RESULTS, MAX_SPARE_BYTES, SPARE_WAIT_US)."""
    write("host_path_switches", "unset", b"")
    write("host_path_switches", "empty", b"\n" * 7)
    write("host_path_switches", "every_value", b"slot\nfresh\n0\n1\n0\n3\n33554432\n250")
    write("host_path_switches", "other_values", b"driver\nall\n1\n0\n1\n0\n0\n0")
    write("host_path_switches", "near_misses", b"Slot\nal\nyes\n00\n \n12abc\n32MiB\n9223372036854775808")


if __name__ == "__main__":
    frames()
    control()
    os.makedirs(os.path.join(HERE, "corpus", "config"), exist_ok=True)
    config()
    recording()
    uff()
    mat()
    host_path_switches()
