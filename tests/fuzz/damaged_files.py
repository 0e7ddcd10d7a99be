"""Random byte damage anywhere in valid HDF5 inputs, fed to the real programs: sonopipe-import
must never die by a signal (or hang, or answer anything but 0 or 1). Exit 1 must be one line on
stderr naming the damaged file, with no output file left; exit 0 a readable recording.

The valid files: a sonopipe recording (sonopipe-sim), a USTB UFF file (sonopipe-export of it), a
Verasonics MATLAB v7.3 save (tests/tools/formats/verasonics_files.py) and a MUST/PyMUST MATLAB v5
file (PyMUST's rotating disk, tests/data/pymust-pwi-disk/: written by another program than ours,
read by the MUST reader with libmatio in its child process). Each damaged copy gets one
kind of damage: 1-64 random bytes overwritten at random offsets, a run of up to 4 KiB overwritten
with random bytes or zeros, or the file truncated at a random offset. Every 10th damaged file also
goes through sonopipe-run (the same reader path replay takes). Run through the build's
sonopipe-python launcher; CTest runs 200 files (tests/fuzz/tests.cmake), the long run 1000:
    build/tools/python/sonopipe-python tests/fuzz/damaged_files.py --count 1000 --jobs 2
with SONOPIPE_IMPORT, SONOPIPE_SIM, SONOPIPE_EXPORT, SONOPIPE_RUN naming the programs (CTest sets
them). The seed is printed; --seed replays a run; --keep keeps the files of failures. Files that
once failed are kept in tests/fuzz/regressions/damaged_files/ and checked first on every run."""
import argparse
import collections
import concurrent.futures
import os
import random
import secrets
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VERBOSE = False  # --verbose: print the line of every file whose reader process died or hung
TIMEOUT_S = 300  # far above the reader child's own time limit (30 s per step, isolated_reader.h)
RUN_CONFIG = """
backend: cpu
cpu_threads: 1
pipelines:
  - name: any
    stages: [{type: convert, params: {scale: 0.5}}]
"""


def program(name):
    path = os.environ.get(f"SONOPIPE_{name.upper()}", "")
    if not path or not os.path.isfile(path):
        sys.exit(f"damaged_files: SONOPIPE_{name.upper()}='{path}' names no program")
    return path


def make_valid_files(folder):
    """The four valid inputs, each checked to import cleanly before it is damaged."""
    recording = os.path.join(folder, "valid_recording.h5")
    subprocess.run([program("sim"), "speckle", "--out", recording, "--frames", "3", "--shape", "4x64", "--kind", "rf",
                    "--type", "int16", "--seed", "7"], check=True, stdout=subprocess.DEVNULL)
    uff = os.path.join(folder, "valid_uff.uff")
    subprocess.run([program("export"), recording, "--out", uff], check=True, stdout=subprocess.DEVNULL)
    mat = os.path.join(folder, "valid_v73.mat")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "tools", "formats", "verasonics_files.py"), "plane",
                    "v73", mat, "5"], check=True)
    must = os.path.join(folder, "valid_must.mat")
    shutil.copy(os.path.join(ROOT, "tests", "data", "pymust-pwi-disk", "PWI_disk.mat"), must)
    # The valid files with the reader's default time limit: the short one the damaged files get
    # (SONOPIPE_READER_SECONDS_PER_STEP, so that a looping reader costs little) once stopped the
    # valid MAT file on a loaded machine.
    default_limits = {name: value for name, value in os.environ.items() if name != "SONOPIPE_READER_SECONDS_PER_STEP"}
    for path in (recording, uff, mat, must):
        done = subprocess.run([program("import"), path, "--out", path + ".imported.h5"], capture_output=True, text=True,
                              timeout=TIMEOUT_S, env=default_limits)
        if done.returncode != 0:
            sys.exit(f"damaged_files: the valid file {path} does not import: {done.stderr}")
    return [recording, uff, mat, must]


def damage(data, rng):
    """One kind of random damage; returns (bytes, description)."""
    data = bytearray(data)
    kind = rng.randrange(3)
    if kind == 0:
        count = rng.randint(1, 64)
        for _ in range(count):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data), f"{count} random bytes"
    if kind == 1:
        length = rng.randint(1, 4096)
        start = rng.randrange(len(data))
        fill = bytes(rng.randrange(256) for _ in range(length)) if rng.random() < 0.5 else bytes(length)
        data[start:start + length] = fill[:len(data) - start]
        return bytes(data), f"{min(length, len(data) - start)} bytes from offset {start} overwritten"
    cut = rng.randrange(len(data))
    return bytes(data[:cut]), f"truncated at {cut} of {len(data)} bytes"


def check_import(path, work):
    """None when the program behaved, else what went wrong."""
    out = os.path.join(work, os.path.basename(path) + ".out.h5")
    try:
        # Damaged object names reach the message: bytes that are not UTF-8 are shown escaped.
        done = subprocess.run([program("import"), path, "--out", out], capture_output=True, text=True,
                              errors="backslashreplace", timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"sonopipe-import: no exit within {TIMEOUT_S} s", "hang"
    if done.returncode < 0:
        return f"sonopipe-import: killed by signal {-done.returncode}: {done.stderr.strip()}", "signal"
    if done.returncode == 0:
        if not os.path.isfile(out):
            return "sonopipe-import: exit 0 without an output file", "exit 0"
        os.remove(out)
        return None, "imported"
    lines = done.stderr.strip().splitlines()
    if done.returncode != 1:
        return f"sonopipe-import: exit {done.returncode}: {done.stderr.strip()}", "exit"
    if len(lines) != 1 or path not in lines[0]:
        return f"sonopipe-import: exit 1 but stderr is not one line naming the file: {done.stderr!r}", "message"
    leftovers = [name for name in os.listdir(work) if name.startswith(os.path.basename(out))]
    if leftovers:
        return f"sonopipe-import: exit 1 left {leftovers}", "leftover"
    kind = refusal_kind(lines[0])
    if kind != "a format error" and VERBOSE:
        print(f"damaged_files: {lines[0]}", flush=True)
    return None, "refused: " + kind


def refusal_kind(line):
    if "failed detecting its format" in line or "failed reading it" in line:
        return "the reader process died or hung"
    return "a format error"


def check_run(path, work, config):
    out = os.path.join(work, "run-" + os.path.basename(path))
    try:
        done = subprocess.run([program("run"), "--config", config, path, "--out", out], capture_output=True, text=True,
                              errors="backslashreplace", timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"sonopipe-run: no exit within {TIMEOUT_S} s"
    shutil.rmtree(out, ignore_errors=True)
    if done.returncode < 0:
        return f"sonopipe-run: killed by signal {-done.returncode}: {done.stderr.strip()[-500:]}"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200, help="damaged files (default 200)")
    parser.add_argument("--seed", type=int, default=None, help="replay the damage of an earlier run")
    parser.add_argument("--jobs", type=int, default=2, help="files checked at once (default 2)")
    parser.add_argument("--keep", metavar="FOLDER", help="copy the files of failures here")
    parser.add_argument("--verbose", action="store_true", help="print the line of every reader process that died")
    args = parser.parse_args()
    global VERBOSE
    VERBOSE = args.verbose
    seed = args.seed if args.seed is not None else secrets.randbits(32)
    print(f"damaged_files: seed {seed}, {args.count} files", flush=True)
    folder = tempfile.mkdtemp(prefix="sonopipe-damage-")
    try:
        originals = make_valid_files(folder)
        contents = {path: open(path, "rb").read() for path in originals}
        config = os.path.join(folder, "run.yaml")
        with open(config, "w") as f:
            f.write(RUN_CONFIG)
        rng = random.Random(seed)
        jobs = []
        # Files that once failed here (tests/fuzz/regressions/damaged_files/) come first, as they are.
        regressions = os.path.join(HERE, "regressions", "damaged_files")
        for name in sorted(os.listdir(regressions)) if os.path.isdir(regressions) else []:
            work = os.path.join(folder, f"regression-{name}")
            os.makedirs(work)
            shutil.copy(os.path.join(regressions, name), work)
            jobs.append((-1, os.path.join(work, name), work, f"regression {name}", "regression"))
        for index in range(args.count):
            original = originals[index % len(originals)]
            data, how = damage(contents[original], rng)
            work = os.path.join(folder, f"case{index}")
            os.makedirs(work)
            path = os.path.join(work, f"damaged_{index}{os.path.splitext(original)[1]}")
            with open(path, "wb") as f:
                f.write(data)
            jobs.append((index, path, work, f"{os.path.basename(original)}: {how}", os.path.basename(original)))

        def check(job):
            index, path, work, how, source = job
            problem, outcome = check_import(path, work)
            if problem is None and index % 10 == 0:  # regression files (index -1) go through import only
                problem = check_run(path, work, config)
            return index, path, how, problem, f"{source}: {outcome}"

        outcomes = collections.Counter()
        failures = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for index, path, how, problem, outcome in pool.map(check, jobs):
                outcomes[outcome] += 1
                if problem:
                    failures.append((index, path, how, problem))
                    if args.keep:
                        os.makedirs(args.keep, exist_ok=True)
                        shutil.copy(path, args.keep)
        for outcome, count in sorted(outcomes.items()):
            print(f"damaged_files: {count:5d} {outcome}")
        for index, path, how, problem in failures:
            print(f"damaged_files: FAILED case {index} ({how}): {problem}")
        print(f"damaged_files: {len(failures)} failures of {args.count} (seed {seed})")
        return 1 if failures else 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
