"""Cohorts on Dask distributed: sonopipe-run mapped over many recordings, one task per recording.

    sonopipe-cohort --config study.yaml 'study/*.h5' --out results/                # LocalCluster
    sonopipe-cohort --config study.yaml 'study/*.h5' --out results/ --scheduler tcp://host:8786

    from sonopipe.cohort import run_cohort
    rows = run_cohort(["a.h5", "b.h5"], "study.yaml", "results/", workers=2)

Each task runs `sonopipe-run --config C --out OUT INPUT` on a Dask worker and needs the worker
resource GPU=1, so a worker started with resources {"GPU": n} runs at most n recordings at once
(one per GPU; on the CPU backend a worker with GPU=1 runs one at a time). A task whose worker dies
(killed, out of memory, host lost) is scheduled again by Dask, up to `allowed_failures` losses
(distributed.scheduler.allowed-failures); a task whose sonopipe-run crashes (a signal, or it could
not start) is retried `retries` times. An input that sonopipe-run refuses (a bad file) is a failed
row, never retried: it fails the same way every time.

Inputs, the config and the output folder must be at the same paths on every worker (a shared file
system). Results: OUT/<input stem>.h5 per input (written atomically by sonopipe-run) and
OUT/summary.csv with sonopipe-run's columns plus the worker that ran the input.
Exit code of sonopipe-cohort: the number of failed inputs (capped at 125); 126 when nothing ran.
"""
import argparse
import csv
import ctypes
import glob
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from sonopipe._version import __version__

RUN_COLUMNS = ("input", "output", "status", "frames", "unmatched_frames", "results", "seconds", "frames_per_s",
               "error")  # sonopipe-run's summary.csv (tools/run/run_summary.h)
SUMMARY_COLUMNS = RUN_COLUMNS + ("worker",)
SUMMARY_FILE_NAME = "summary.csv"
RUN_BINARY_VARIABLE = "SONOPIPE_RUN"  # path of sonopipe-run; default: sonopipe-run on PATH
GPU_RESOURCE = "GPU"
MAX_FAILURE_CODE = 125
COULD_NOT_RUN = 126
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class CohortError(RuntimeError):
    """The cohort could not start (no inputs, no sonopipe-run, bad scheduler address)."""


class RunCrashed(RuntimeError):
    """sonopipe-run ended without a verdict on its input (a signal, or it could not start): retried."""


def expand_inputs(patterns):
    """Absolute paths of the inputs, in the order given; a glob pattern matches at least one file.

    A plain path is kept even when it does not exist: sonopipe-run fails that input alone.
    """
    paths = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            matches = sorted(glob.glob(pattern))
            if not matches:
                raise CohortError(f"'{pattern}' matches no file")
            paths.extend(matches)
        else:
            paths.append(pattern)
    unique = []
    for path in (os.path.abspath(p) for p in paths):
        if path not in unique:
            unique.append(path)
    return unique


def find_run_binary(run_binary=None):
    """sonopipe-run: the argument, else $SONOPIPE_RUN, else sonopipe-run on PATH."""
    candidate = run_binary or os.environ.get(RUN_BINARY_VARIABLE) or "sonopipe-run"
    found = shutil.which(candidate)
    if not found:
        raise CohortError(f"sonopipe-run not found ('{candidate}'; set {RUN_BINARY_VARIABLE} or --run)")
    return os.path.abspath(found)


def _die_with_worker():
    # Runs in the child before exec: a killed worker takes its sonopipe-run with it, so a retried
    # task never races an orphan writing the same output.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _worker_name():
    try:
        from distributed import get_worker
        return get_worker().address
    except (ImportError, ValueError):
        return f"{os.uname().nodename}:{os.getpid()}"


def read_run_summary(text):
    """Rows of a sonopipe-run summary.csv as dicts."""
    rows = list(csv.DictReader(io.StringIO(text)))
    for row in rows:
        if tuple(row) != RUN_COLUMNS:
            raise ValueError(f"unexpected summary columns {tuple(row)}")
    return rows


def run_recording(input_path, config, out_dir, run_binary, backend=None):
    """One task: sonopipe-run over one recording on this machine. Returns its summary row plus
    'worker'. Raises RunCrashed when sonopipe-run gave no verdict (Dask retries the task)."""
    with tempfile.TemporaryDirectory(prefix="sonopipe-cohort-") as folder:
        summary = os.path.join(folder, SUMMARY_FILE_NAME)
        command = [run_binary, "--config", config, "--out", out_dir, "--summary", summary, input_path]
        if backend:
            command += ["--backend", backend]
        completed = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   preexec_fn=_die_with_worker)
        # 0: the input went through; 1: sonopipe-run refused it (its row says why).
        if completed.returncode in (0, 1) and os.path.exists(summary):
            with open(summary, encoding="utf-8") as file:
                rows = read_run_summary(file.read())
            if len(rows) == 1:
                return dict(rows[0], worker=_worker_name())
        last_line = (completed.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RunCrashed(f"sonopipe-run exited with {completed.returncode} on {input_path}: {last_line}")


def failed_row(input_path, error, worker=""):
    row = dict.fromkeys(SUMMARY_COLUMNS, "")
    row.update(input=input_path, status="failed", frames="0", unmatched_frames="0", results="0", seconds="0",
               frames_per_s="0", error=error, worker=worker)
    return row


def write_summary(path, rows):
    """summary.csv, written beside its final name and renamed (never half-written)."""
    temporary = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".partial")
    with open(temporary, "w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=SUMMARY_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(temporary, path)


def _start_client(scheduler, workers, gpus_per_worker):
    from distributed import Client, LocalCluster
    if scheduler:
        return Client(scheduler), None
    # Loopback only, ephemeral ports, no dashboard: a private cluster for this cohort.
    cluster = LocalCluster(n_workers=workers, threads_per_worker=gpus_per_worker, processes=True,
                           resources={GPU_RESOURCE: gpus_per_worker}, host="127.0.0.1", scheduler_port=0,
                           dashboard_address=None)
    return Client(cluster), cluster


def run_cohort(inputs, config, out_dir, *, scheduler=None, workers=1, gpus_per_worker=1, retries=2,
               allowed_failures=3, run_binary=None, backend=None, progress=None):
    """Maps sonopipe-run over `inputs` (paths or glob patterns) on Dask; returns the summary rows in
    input order and writes OUT/summary.csv. `progress(row, done, total)` is called as inputs finish."""
    import dask
    from distributed import as_completed

    paths = expand_inputs(inputs)
    if not paths:
        raise CohortError("no inputs")
    config = os.path.abspath(config)
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    run_binary = find_run_binary(run_binary)

    rows = {}
    owners = {}  # output stem -> input: two inputs must not write one output
    to_run = []
    for path in paths:
        stem = os.path.splitext(os.path.basename(path))[0]
        if stem in owners:
            rows[path] = failed_row(path, f"{path}: its output {stem}.h5 is already written for {owners[stem]}")
        else:
            owners[stem] = path
            to_run.append(path)

    with dask.config.set({"distributed.scheduler.allowed-failures": allowed_failures}):
        client, cluster = _start_client(scheduler, workers, gpus_per_worker)
        try:
            futures = client.map(run_recording, to_run, config=config, out_dir=out_dir, run_binary=run_binary,
                                 backend=backend, resources={GPU_RESOURCE: 1}, retries=retries, pure=False,
                                 key=[f"sonopipe-run-{index}-{os.path.basename(p)}" for index, p in enumerate(to_run)])
            input_of = {future.key: path for future, path in zip(futures, to_run)}
            done = len(rows)
            for future in as_completed(futures):
                path = input_of[future.key]
                try:
                    rows[path] = future.result()
                except Exception as error:  # retries and worker losses used up: the input fails alone
                    rows[path] = failed_row(path, f"{path}: {type(error).__name__}: {error}")
                done += 1
                if progress:
                    progress(rows[path], done, len(paths))
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    ordered = [rows[path] for path in paths]
    write_summary(os.path.join(out_dir, SUMMARY_FILE_NAME), ordered)
    return ordered


def describe_row(row):
    if row["status"] != "ok":
        return f"failed {row['error']}"
    return (f"ok {row['input']} -> {row['output']}: {row['frames']} frames, {row['results']} results in "
            f"{row['seconds']} s on {row['worker']}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="sonopipe-cohort", description="Run sonopipe-run over recordings on Dask "
                                     "distributed, one task per recording, one GPU per task.")
    parser.add_argument("--version", action="version", version=f"sonopipe-cohort {__version__}")
    parser.add_argument("inputs", nargs="+", help="recordings or glob patterns (quoted: 'study/*.h5')")
    parser.add_argument("--config", required=True, help="sonopiped YAML config whose pipelines run")
    parser.add_argument("--out", required=True, help="folder for <stem>.h5 results and summary.csv (shared)")
    parser.add_argument("--scheduler", help="address of a running scheduler, e.g. tcp://host:8786 "
                        "(default: a LocalCluster on loopback)")
    parser.add_argument("--workers", type=int, default=1, help="LocalCluster: worker processes (default 1)")
    parser.add_argument("--gpus-per-worker", type=int, default=1,
                        help="LocalCluster: GPU resource of each worker = tasks it runs at once (default 1)")
    parser.add_argument("--retries", type=int, default=2, help="retries of a task whose sonopipe-run crashed")
    parser.add_argument("--allowed-failures", type=int, default=3,
                        help="worker losses a task survives (LocalCluster; a real scheduler has its own setting)")
    parser.add_argument("--run", dest="run_binary", help=f"sonopipe-run to use (default ${RUN_BINARY_VARIABLE}, PATH)")
    parser.add_argument("--backend", choices=("auto", "cuda", "cpu"), help="override the config's backend")
    args = parser.parse_args(argv)

    def show(row, done, total):
        print(f"[{done}/{total}] {describe_row(row)}", flush=True)

    try:
        rows = run_cohort(args.inputs, args.config, args.out, scheduler=args.scheduler, workers=args.workers,
                          gpus_per_worker=args.gpus_per_worker, retries=args.retries,
                          allowed_failures=args.allowed_failures, run_binary=args.run_binary, backend=args.backend,
                          progress=show)
    except (CohortError, OSError) as error:
        print(f"sonopipe-cohort: {error}", file=sys.stderr)
        return COULD_NOT_RUN
    failed = sum(row["status"] != "ok" for row in rows)
    print(f"sonopipe-cohort: {len(rows) - failed} of {len(rows)} inputs ok, {failed} failed; summary in "
          f"{os.path.join(os.path.abspath(args.out), SUMMARY_FILE_NAME)}", flush=True)
    return min(failed, MAX_FAILURE_CODE)


if __name__ == "__main__":
    sys.exit(main())
