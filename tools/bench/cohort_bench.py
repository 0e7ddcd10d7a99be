"""Recordings per minute of sonopipe-cohort on 1 vs N LocalCluster workers (CPU backend).

    build/tools/python/sonopipe-python tools/bench/cohort_bench.py --sim build/tools/sim/sonopipe-sim \
        --run build/tools/run/sonopipe-run [--recordings 8] [--workers 1 2]

Simulates ARFI recordings (sets as in tests/daemon/arfi_daemon_test.cpp), then for each worker count
starts a LocalCluster (one GPU resource per worker, one CPU thread per sonopipe-run so a worker
stands for one device), and times sonopipe.cohort.run_cohort over all recordings against it (the
cluster's start is not timed). A benchmark, not a test: it prints a table and asserts nothing.
"""
import argparse
import os
import shutil
import subprocess
import tempfile
import time

from distributed import LocalCluster

from sonopipe.cohort import GPU_RESOURCE, run_cohort

ARFI_SET = ["--locations", "6", "--tracks", "30", "--samples", "240", "--focus-m", "0.015", "--depth-sigma-m", "0.003",
            "--lateral-sigma-m", "0.001", "--recovery-s", "0.001", "--threads", "1"]


def arfi_config(source_dir, path):
    """config/arfi.yaml's pipeline on the CPU with one thread per run."""
    with open(os.path.join(source_dir, "config", "arfi.yaml")) as file:
        text = file.read()
    pipelines = text[text.index("pipelines:"):]
    with open(path, "w") as file:
        file.write("backend: cpu\ncpu_threads: 1\nslots: 2\n" + pipelines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim", required=True, help="sonopipe-sim")
    parser.add_argument("--run", required=True, help="sonopipe-run")
    parser.add_argument("--recordings", type=int, default=8)
    parser.add_argument("--sets", type=int, default=6, help="ARFI sets per recording")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=2, help="timed passes per worker count (best kept)")
    args = parser.parse_args()
    source_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    folder = tempfile.mkdtemp(prefix="sonopipe-cohort-bench-")
    try:
        config = os.path.join(folder, "arfi.yaml")
        arfi_config(source_dir, config)
        inputs = []
        for index in range(args.recordings):
            path = os.path.join(folder, f"arfi{index:03d}.h5")
            subprocess.run([args.sim, "arfi", "--out", path, "--sets", str(args.sets), "--seed", str(index + 1),
                            *ARFI_SET], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            inputs.append(path)
        print(f"cohort benchmark: {args.recordings} recordings x {args.sets} ARFI sets, CPU backend, "
              f"{os.cpu_count()} CPUs here")
        print(f"{'workers':>8} {'seconds':>8} {'recordings/min':>15} {'speed-up':>9}")
        first = None
        for workers in args.workers:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   resources={GPU_RESOURCE: 1}, host="127.0.0.1", scheduler_port=0,
                                   dashboard_address=None)
            try:
                best = None
                for repeat in range(args.repeats):
                    out = os.path.join(folder, f"out-{workers}-{repeat}")
                    start = time.perf_counter()
                    rows = run_cohort(inputs, config, out, scheduler=cluster.scheduler_address, run_binary=args.run)
                    elapsed = time.perf_counter() - start
                    failed = [row for row in rows if row["status"] != "ok"]
                    if failed:
                        raise SystemExit(f"cohort failed: {failed[0]['error']}")
                    best = elapsed if best is None else min(best, elapsed)
            finally:
                cluster.close()
            rate = args.recordings / best * 60
            first = first or rate
            print(f"{workers:>8} {best:>8.2f} {rate:>15.1f} {rate / first:>8.2f}x", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
