"""Runs the test cases of one module as `python -m unittest -v <module>` does, for CTest: exits 1
when any failed or none ran, 77 (the python_* entries' SKIP_RETURN_CODE) when every case was
skipped, so the entry reads "Skipped" and not "Passed", and 0 otherwise. A skip of some cases
only is listed at the end of the output; the entry counts as passed."""
import sys
import unittest

SKIP_RETURN_CODE = 77


def main(module):
    suite = unittest.defaultTestLoader.loadTestsFromName(module)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        return 1
    if result.testsRun == 0 and not result.skipped:
        print(f"{module}: no test case ran", file=sys.stderr)
        return 1
    # A skip in setUpClass or setUpModule stands for a whole class and is not counted in testsRun.
    skipped_cases = sum(1 for test, _ in result.skipped if isinstance(test, unittest.TestCase))
    if result.skipped:
        print(f"{module}: {len(result.skipped)} skipped:", file=sys.stderr)
        for test, reason in result.skipped:
            print(f"  {test}: {reason}", file=sys.stderr)
    if result.skipped and result.testsRun == skipped_cases:
        return SKIP_RETURN_CODE
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: run_module.py <test module>")
    sys.exit(main(sys.argv[1]))
