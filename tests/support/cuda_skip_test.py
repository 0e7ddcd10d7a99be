"""Without a usable GPU, a [cuda] entry reads "Skipped" in CTest, not "Passed".

Reads CTest's own list of entries (ctest --show-only=json-v1) and checks that every <name>_cuda
entry selects '[cuda]' with SKIP_RETURN_CODE 77 beside a <name> entry that selects '~[cuda]' (when
the program has other cases), runs each <name>_cuda command with the GPUs hidden
(CUDA_VISIBLE_DEVICES="") and checks its exit status 77 and the cases it names, and runs one of
them through ctest in a scratch folder to see CTest call it "Skipped".

    python3 cuda_skip_test.py <ctest> <build folder>
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

CTEST, BUILD = sys.argv[1:3] if len(sys.argv) >= 3 else ("ctest", ".")
SKIP_RETURN_CODE = "77"  # tests/support/test_support.h kSkipReturnCode


def entries():
    """CTest's entries of the build. ctest runs on a copy of the build's CTestTestfile.cmake files:
    run in the build folder itself, it would rewrite Testing/Temporary/LastTest.log, the log of the
    ctest run this test is part of."""
    with tempfile.TemporaryDirectory(prefix="sonopipe-ctest-list-") as copy:
        for folder, _, files in os.walk(BUILD):
            if "CTestTestfile.cmake" in files:
                target = os.path.join(copy, os.path.relpath(folder, BUILD))
                os.makedirs(target, exist_ok=True)
                shutil.copy(os.path.join(folder, "CTestTestfile.cmake"), target)
        listing = subprocess.run([CTEST, "--show-only=json-v1"], cwd=copy, capture_output=True, text=True, check=True)
    tests = json.loads(listing.stdout)["tests"]
    return {test["name"]: test for test in tests}


def properties(test):
    return {p["name"]: p["value"] for p in test.get("properties", [])}


def environment(test):
    env = dict(os.environ)
    for assignment in properties(test).get("ENVIRONMENT", []):
        key, _, value = assignment.partition("=")
        env[key] = value
    env["CUDA_VISIBLE_DEVICES"] = ""  # no GPU, also on a machine that has one
    return env


class CudaEntriesSkip(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.entries = entries()
        cls.cuda = {name: test for name, test in cls.entries.items() if name.endswith("_cuda")}

    def test_every_cuda_entry_selects_the_cuda_cases_with_skip_return_code_77(self):
        self.assertGreater(len(self.cuda), 0, "no <name>_cuda entry: the [cuda] split is gone")
        for name, test in self.cuda.items():
            with self.subTest(name):
                self.assertEqual(test["command"][-1], "[cuda]")
                self.assertEqual(str(properties(test).get("SKIP_RETURN_CODE")), SKIP_RETURN_CODE)
                twin = self.entries.get(name[: -len("_cuda")])
                if twin is not None:  # a program with other cases runs them without the [cuda] ones
                    self.assertEqual(twin["command"][-1], "~[cuda]")
                    self.assertEqual(twin["command"][0], test["command"][0])

    def test_each_cuda_entry_exits_77_naming_its_cases_when_no_gpu_is_visible(self):
        for name, test in self.cuda.items():
            with self.subTest(name):
                completed = subprocess.run(test["command"], env=environment(test), capture_output=True, text=True,
                                           timeout=120, cwd=BUILD)
                self.assertEqual(completed.returncode, int(SKIP_RETURN_CODE), completed.stdout + completed.stderr)
                self.assertIn("skipped: no CUDA device", completed.stdout)
                named = [line for line in completed.stdout.splitlines() if line.startswith("  ")]
                self.assertGreater(len(named), 0, completed.stdout)

    def test_ctest_reports_a_cuda_entry_as_skipped_and_not_passed(self):
        name, test = sorted(self.cuda.items())[0]
        with tempfile.TemporaryDirectory(prefix="sonopipe-cuda-skip-") as folder:
            command = " ".join(f"[==[{part}]==]" for part in test["command"])
            env = ";".join(f"{k}={v}" for k, v in environment(test).items() if k in ("SONOPIPE_CTEST", "CUDA_VISIBLE_DEVICES"))
            with open(os.path.join(folder, "CTestTestfile.cmake"), "w") as file:
                file.write(f"add_test({name} {command})\n")
                file.write(f"set_tests_properties({name} PROPERTIES SKIP_RETURN_CODE {properties(test)['SKIP_RETURN_CODE']} "
                           f"ENVIRONMENT [==[{env}]==])\n")
            completed = subprocess.run([CTEST], cwd=folder, capture_output=True, text=True, timeout=120)
        self.assertEqual(completed.returncode, 0, completed.stdout + completed.stderr)
        self.assertRegex(completed.stdout, rf"Test +#1: {name} \.+\*\*\*Skipped")
        self.assertIn(f"{name} (Skipped)", completed.stdout)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
