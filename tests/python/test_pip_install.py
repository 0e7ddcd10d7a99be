"""`pip install .` as a user does it, offline on Debian: a fresh venv (--system-site-packages, for
Debian's numpy, zmq and protobuf), `pip install --no-build-isolation --no-index` of a copy of the
files the package is built from. The venv then holds sonopipe with its protobuf modules generated
at install time and the console programs, all answering the one version (VERSION); and its Python
client, run from the venv alone, sends frames through the real daemon and receives them back."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

from daemon_fixture import RF_SCALE, DaemonFixture, convert_reference

# What `pip install .` reads from the source tree (pyproject.toml, setup.py): copied, so the test
# leaves no build folder among the sources and runs beside other builds.
PACKAGE_SOURCES = ("pyproject.toml", "setup.py", "VERSION", "proto", "tools/python/sonopipe", "docs/clients.md")
PROGRAMS = ("sonopipe-view", "sonopipe-web", "sonopipe-cohort")


def source_dir():
    return os.environ.get("SONOPIPE_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def clean_environment():
    """The environment less everything that would make the build tree's package importable."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SONOPIPE_PROTO_PY", "PYTHONHOME")}
    env["PIP_NO_INDEX"] = "1"
    return env


class Venv:
    """The venv of this module's tests, made once (setUpModule)."""
    folder = venv = python = version = None


def run_checked(command):
    done = subprocess.run(command, env=clean_environment(), cwd="/", capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(command)} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def setUpModule():
    Venv.folder = tempfile.mkdtemp(prefix="sonopipe-pip-")
    source = os.path.join(Venv.folder, "source")
    for relative in PACKAGE_SOURCES:
        origin = os.path.join(source_dir(), relative)
        target = os.path.join(source, relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.isdir(origin):
            shutil.copytree(origin, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copyfile(origin, target)
    Venv.venv = os.path.join(Venv.folder, "venv")
    # Debian's interpreter: its python3-* packages are what --system-site-packages lends the venv.
    run_checked(["/usr/bin/python3", "-m", "venv", "--system-site-packages", Venv.venv])
    Venv.python = os.path.join(Venv.venv, "bin", "python")
    run_checked([Venv.python, "-m", "pip", "install", "--no-build-isolation", "--no-index", source])
    with open(os.path.join(source_dir(), "VERSION"), encoding="ascii") as f:
        Venv.version = f.readline().strip()


def tearDownModule():
    if Venv.folder:
        shutil.rmtree(Venv.folder, ignore_errors=True)


class PipInstall(unittest.TestCase):
    def venv_python(self, code):
        return run_checked([Venv.python, "-c", code]).strip()

    def test_the_venv_holds_the_package_its_generated_protobuf_modules_and_the_version(self):
        where = self.venv_python("import sonopipe, sonopipe.v1.frame_pb2 as f, sonopipe.v1.result_pb2, "
                                 "sonopipe.v1.control_pb2; print(sonopipe.__file__); print(f.__file__); "
                                 "print(sonopipe.__version__)").splitlines()
        site = os.path.join(Venv.venv, "lib")
        self.assertTrue(where[0].startswith(site), f"sonopipe imported from {where[0]}, not the venv")
        self.assertTrue(where[1].startswith(site), f"frame_pb2 imported from {where[1]}, not the venv")
        self.assertEqual(where[2], Venv.version)
        metadata = self.venv_python("import importlib.metadata as m; print(m.version('sonopipe'))")
        self.assertEqual(metadata, Venv.version)
        self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(where[0]), "web", "static", "index.html")))

    def test_every_console_program_answers_its_version(self):
        for program in PROGRAMS:
            with self.subTest(program=program):
                path = os.path.join(Venv.venv, "bin", program)
                self.assertTrue(os.access(path, os.X_OK), f"{path} missing")
                self.assertEqual(run_checked([path, "--version"]).strip(), f"{program} {Venv.version}")

    def test_no_generated_module_is_among_the_sources(self):
        # The protobuf modules come from protoc at install time, never from the source tree.
        package = os.path.join(source_dir(), "tools", "python", "sonopipe")
        generated = [os.path.join(d, f) for d, _, files in os.walk(package) for f in files if f.endswith("_pb2.py")]
        self.assertEqual(generated, [])


class PipInstalledClientThroughTheDaemon(DaemonFixture):
    def test_the_venv_client_sends_frames_through_convert_and_receives_them_byte_exact(self):
        out = os.path.join(Venv.folder, "client.npz")
        seed = int(self.rng.integers(2**31))
        run_checked([Venv.python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "pip_client.py"),
                     self.ingest, self.publish, out, str(seed)])
        data = np.load(out)
        self.assertTrue(str(data["package_file"]).startswith(Venv.venv))
        self.assertTrue(str(data["protobuf_file"]).startswith(Venv.venv))
        for index in range(3):
            self.assertIn(f"received_{index}", data.files,
                          f"result {index} missing; daemon log:\n{self.daemon.log_text()}")
            expected = convert_reference(data[f"sent_{index}"], RF_SCALE)
            received = data[f"received_{index}"]
            self.assertEqual(received.dtype, expected.dtype)
            self.assertEqual(received.shape, expected.shape)
            self.assertEqual(received.tobytes(), expected.tobytes())


if __name__ == "__main__":
    sys.exit(unittest.main())
