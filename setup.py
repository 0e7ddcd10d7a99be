"""Build steps pyproject.toml cannot state: the protobuf modules and the VERSION copy.

build_py runs protoc (Debian's protobuf-compiler; PROTOC names another) on proto/sonopipe/v1/*.proto
with --python_out into the build folder, so the wheel holds sonopipe/v1/*_pb2.py, and copies the
top folder's VERSION to sonopipe/VERSION (read by sonopipe._version). Build folders go under
build/python-package, beside CMake's build tree, never among the sources."""
import glob
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.egg_info import egg_info

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_BASE = os.path.join("build", "python-package")


class BuildWithProtobuf(build_py):
    def run(self):
        super().run()
        protoc = os.environ.get("PROTOC") or shutil.which("protoc")
        if not protoc:
            raise SystemExit("sonopipe: protoc not found (Debian: apt-get install protobuf-compiler, or set PROTOC)")
        protos = sorted(glob.glob(os.path.join(HERE, "proto", "sonopipe", "v1", "*.proto")))
        if not protos:
            raise SystemExit(f"sonopipe: no proto/sonopipe/v1/*.proto under {HERE}")
        os.makedirs(self.build_lib, exist_ok=True)
        subprocess.run([protoc, f"--python_out={self.build_lib}", "-I", os.path.join(HERE, "proto"), *protos],
                       check=True)
        # A regular package, so the generated modules' `from sonopipe.v1 import ...` resolve in any layout.
        open(os.path.join(self.build_lib, "sonopipe", "v1", "__init__.py"), "w").close()
        shutil.copyfile(os.path.join(HERE, "VERSION"), os.path.join(self.build_lib, "sonopipe", "VERSION"))


class EggInfoInBuild(egg_info):
    def initialize_options(self):
        super().initialize_options()
        self.egg_base = BUILD_BASE
        os.makedirs(os.path.join(HERE, BUILD_BASE), exist_ok=True)


setup(cmdclass={"build_py": BuildWithProtobuf, "egg_info": EggInfoInBuild},
      options={"build": {"build_base": BUILD_BASE}, "bdist_wheel": {"bdist_dir": os.path.join(BUILD_BASE, "wheel")}})
