"""Run by test_pip_install.py with the interpreter of a venv that `pip install`ed sonopipe, with no
PYTHONPATH or SONOPIPE_PROTO_PY: sends float32 RF frames to the daemon's ingest with the installed
Publisher, receives the `rf` pipeline's results with the installed Subscriber and saves what it
sent and received, and where sonopipe came from, into an .npz file for the test to check.
    python pip_client.py INGEST PUBLISH OUT.npz SEED"""
import sys
import time

import numpy as np

import sonopipe
from sonopipe.v1 import frame_pb2

ingest, publish, out, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rng = np.random.default_rng(seed)
frames = [rng.standard_normal((3, 5 + index)).astype(np.float32) for index in range(3)]  # sizes all differ
received = []
with sonopipe.Subscriber(publish, ["result/rf/", "status"], timeout_s=10.0) as subscriber:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # joined once a status heartbeat arrives (ZeroMQ's slow joiner)
        result = subscriber.receive(1.0)
        if result is not None and result.topic == "status":
            break
    else:
        sys.exit("pip_client: no status heartbeat")
    with sonopipe.Publisher(ingest, lossless=True) as publisher:
        for frame in frames:
            publisher.send(frame, kind="rf", axes=[("line", 3e-4, "m"), ("sample", 1 / 40e6, "s")])
    while len(received) < len(frames) and time.monotonic() < deadline:
        result = subscriber.receive(1.0)
        if result is not None and result.topic != "status":
            received.append(result.array)
arrays = {f"sent_{i}": frame for i, frame in enumerate(frames)}
arrays.update({f"received_{i}": data for i, data in enumerate(received)})
np.savez(out, package_file=sonopipe.__file__, protobuf_file=frame_pb2.__file__, version=sonopipe.__version__,
         **arrays)
