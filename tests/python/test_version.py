"""One version everywhere: every built program answers --version with "<program> <VERSION>", the C
client library's sp_version and the Python package's __version__ are the top folder's VERSION
(which CMake's project version and pip's metadata read too; the .deb and the installed tree are
checked by tests/package/run_installed.sh)."""
import ctypes
import os
import subprocess
import unittest

import sonopipe
import support

PROGRAMS = {"daemon": "sonopiped", "sim": "sonopipe-sim", "record": "sonopipe-record", "replay": "sonopipe-replay",
            "ctl": "sonopipe-ctl", "import": "sonopipe-import", "export": "sonopipe-export", "run": "sonopipe-run",
            "keygen": "sonopipe-keygen", "igtl": "sonopipe-igtl", "bench": "sonopipe-bench",
            "perfusion": "sonopipe-perfusion"}


def version_file():
    source = os.environ.get("SONOPIPE_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(source, "VERSION"), encoding="ascii") as f:
        return f.readline().strip()


class OneVersion(unittest.TestCase):
    def setUp(self):
        self.version = version_file()

    def test_the_version_file_holds_a_dotted_version(self):
        parts = self.version.split(".")
        self.assertEqual(len(parts), 3, self.version)
        self.assertTrue(all(part.isdigit() for part in parts), self.version)

    def test_every_program_answers_version_with_its_name_and_the_version(self):
        for variable, name in PROGRAMS.items():
            with self.subTest(program=name):
                done = subprocess.run([support.tool(variable), "--version"], capture_output=True, text=True,
                                      timeout=60)
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertEqual(done.stdout.strip(), f"{name} {self.version}")

    def test_the_python_package_and_its_programs_carry_the_version(self):
        self.assertEqual(sonopipe.__version__, self.version)
        for launcher in ("SONOPIPE_VIEW", "SONOPIPE_WEB"):
            with self.subTest(launcher=launcher):
                path = os.environ.get(launcher, "")
                if not path:
                    self.skipTest(f"{launcher} not set")
                done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=120)
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertTrue(done.stdout.strip().endswith(" " + self.version), done.stdout)

    def test_the_client_library_reports_the_version(self):
        library = ctypes.CDLL(support.tool("client_library"))
        library.sp_version.restype = ctypes.c_char_p
        self.assertEqual(library.sp_version().decode(), self.version)


if __name__ == "__main__":
    unittest.main()
