"""How fast `basedie sweep` runs points: a DuoPD grid serially in one process vs on a LocalCluster, and what Dask
costs per point.

    python scripts/bench_sweep.py [--points 2000] [--workers 2 | --workers 0 | --scheduler tcp://HOST:PORT]

The grid: LLaMA2-70B on DuoPD, a fixed batch of 4 requests of 2,048 tokens, PNM power 1, 2, ... W per stack x output
lengths 4..200 (the first `--points` of it). Timed: the points through `basedie.sweep.compute` (the engine `basedie
sweep` uses; the table, plots and part files are not included), serially and on the cluster (its start-up timed
apart), then the same number of no-op tasks, one per point (Dask's cost per task). Wall time and CPU time: on a
shared machine the kernel's autogroup scheduling gives all the processes of one session one share of the CPUs, so
wall time there says little about how the cluster scales, while CPU seconds per point (this process, which also runs
the LocalCluster's scheduler, plus the workers) show what Dask adds. With --scheduler the cluster is one started by
hand (workers started in sessions of their own each get a share, as separate machines would).

    python scripts/bench_sweep.py --points 1000 --faults [--workers 2]

--faults then runs the grid (rounded up to whole rows of 50) as whole sweeps (`basedie.sweep.sweep`: part files and
table, no plots) three times and checks the three tables are identical: uninterrupted on a LocalCluster (timed); on
a LocalCluster with one worker process SIGKILLed as soon as the first batch is saved (Dask reschedules its tasks,
the nanny restarts it); and as `basedie sweep` in a process group SIGKILLed mid-sweep, then run again into the same
folder (it resumes: only the points not yet saved are computed).
"""
import argparse
import logging
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from basedie import sweep
from basedie.simulation import simulate_parser
from basedie.spec import load

OUTPUTS = 50      # output lengths 4, 8, ..., 200; the PNM power axis (1, 2, ... W) grows to cover the points
# PNM power: any value simulates (a lane count needs a verified pnm_array entry of that many lanes).
SPEC = """[base]
system = "duopd"
model = "LLaMA2-70B"
input-len = 2048
requests = 4
batch = 4
[axes]
hw.pnm.power_w = {{start = 1, stop = {powers}, step = 1}}
output-len = {{start = 4, stop = 200, step = 4}}
"""


def spec_file(points: int, folder: Path) -> Path:
    """The grid's SPEC, as `basedie sweep` reads it, with at least `points` points."""
    path = folder / f"duopd-{points}.toml"
    path.write_text(SPEC.format(powers=max(1, math.ceil(points / OUTPUTS))))
    return path


def grid(points: int, folder: Path) -> tuple:
    """(Spec, its first `points` points) of `spec_file`."""
    parser = simulate_parser()
    spec = load(spec_file(points, folder), parser)
    return spec, spec.points(parser)[:points]


def timed(function, *args, client=None) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and of `client`'s workers)."""
    def cpu() -> float:
        return time.process_time() + (sum(client.run(time.process_time).values()) if client else 0.0)

    wall, used = time.perf_counter(), cpu()
    function(*args)
    return time.perf_counter() - wall, cpu() - used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="LocalCluster worker processes (0: the serial run only)")
    parser.add_argument("--scheduler", default=None, help="use this running cluster instead of a LocalCluster")
    parser.add_argument("--faults", action="store_true",
                        help="also run whole sweeps with a worker killed and with the sweep killed and resumed")
    args = parser.parse_args(argv)
    if args.workers < 0:
        parser.error("--workers must be >= 0")
    with tempfile.TemporaryDirectory(prefix="bench_sweep-") as folder:    # the SPEC and the --faults sweeps
        return bench(args, Path(folder))


def bench(args, folder: Path) -> int:
    """The measurements of `main`, their files in `folder`."""
    from basedie.sweep import Cluster

    spec, points = grid(args.points, folder)
    options = [p.options for p in points]
    failed = []

    def check(_, rows):
        failed.extend(r for r in rows if r["status"] != "ok")

    print(f"{len(options)} DuoPD points; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    n = len(options)
    load, _ = timed(sweep._context)  # the parser and verified table, once per process (each worker does the same)
    serial, serial_cpu = timed(sweep.compute, sweep.run_points, options, None, check, None, None, False)
    print(f"serial, one process:        {serial:7.1f} s  {n / serial:7.1f} points/s  "
          f"CPU {1e3 * serial_cpu / n:6.2f} ms/point  (table loaded once before, {load:.2f} s)")
    start = time.perf_counter()
    with Cluster(args.scheduler, args.workers) as client:
        if client is None:  # --workers 0 and no --scheduler: nothing to compare the serial run with
            print(f"load average {os.getloadavg()[0]:.1f} at the end; {len(failed)} points failed")
            return 1 if failed else 0
        started = time.perf_counter() - start
        workers = len(client.nthreads())
        client.run(sweep._context)   # what every worker pays once, like the serial run's table load
        warm = time.perf_counter() - start - started
        parallel, parallel_cpu = timed(sweep.compute, sweep.run_points, options, client, check, None, None, False,
                                       client=client)
        noop, noop_cpu = timed(sweep.compute, list, options, client, lambda b, r: None, None, 1, False,
                               client=client)
        name = f"{'cluster at --scheduler' if args.scheduler else 'LocalCluster'}, {workers} workers:"
        print(f"{name:27} {parallel:7.1f} s  {n / parallel:7.1f} points/s  "
              f"CPU {1e3 * parallel_cpu / n:6.2f} ms/point  (start-up {started:.1f} s and worker warm-up {warm:.1f} s "
              f"not included; wall speed-up {serial / parallel:.2f}x)")
        print(f"Dask's cost, batched:       {1e3 * (parallel_cpu - serial_cpu) / n:7.2f} CPU ms/point (cluster CPU "
              f"minus serial CPU, per point)")
        print(f"Dask's cost, one per task:  {1e3 * noop_cpu / n:7.2f} CPU ms/task, {1e3 * noop / n:.2f} ms wall/task "
              f"({n} no-op tasks)")
    problems = faults(spec_file(args.points, folder), args.workers or 2) if args.faults else []
    print(f"load average {os.getloadavg()[0]:.1f} at the end; {len(failed)} points failed"
          + "".join(f"; {p}" for p in problems))
    return 1 if failed or problems else 0


def faults(spec_path: Path, workers: int) -> list[str]:
    """The three whole sweeps of --faults over every point of `spec_path`; what differs from the uninterrupted
    one (nothing, when all is well)."""
    import pyarrow.parquet as pq

    parser, folder, problems = simulate_parser(), spec_path.parent, []
    spec = load(spec_path, parser)
    points, text = spec.points(parser), spec_path.read_text()
    started = time.perf_counter()
    with sweep.Cluster(None, workers) as client:
        up = time.perf_counter() - started
        counts = sweep.sweep(spec, points, text, folder / "whole", client, progress=False, plots=False)
    print(f"whole sweep of {len(points)} points, LocalCluster of {workers}: {time.perf_counter() - started:.1f} s "
          f"({up:.1f} s of it the cluster's start-up; {counts['failed']} failed)")
    reference = pq.read_table(folder / "whole" / "points.parquet")
    killed = killed_worker(spec, points, text, folder / "killed-worker", workers)
    same = pq.read_table(folder / "killed-worker" / "points.parquet").equals(reference)
    print(f"worker {killed['pid']} killed with {killed['parts']} of {killed['batches']} batches saved: "
          f"{killed['seconds']:.1f} s, {killed['counts']['points']} points, {killed['counts']['failed']} failed, "
          f"table identical to the uninterrupted one: {'yes' if same else 'NO'}")
    resumed = killed_sweep(spec_path, folder / "killed-sweep", workers)
    same_resumed = pq.read_table(folder / "killed-sweep" / "points.parquet").equals(reference)
    print(f"`basedie sweep` killed with {resumed['parts']} batches saved, then run again: {resumed['summary']}; "
          f"table identical to the uninterrupted one: {'yes' if same_resumed else 'NO'}")
    if not same:
        problems.append("the sweep with a killed worker differs")
    if not same_resumed:
        problems.append("the resumed sweep differs")
    return problems


def first_parts(parts: Path, at_least: int, stopped, poll_s: float = 0.005) -> int:
    """Wait until `parts` holds `at_least` part files (0 if `stopped()` first); how many it holds then."""
    while not stopped():
        count = len(list(parts.glob("part-*.parquet"))) if parts.exists() else 0
        if count >= at_least:
            return count
        time.sleep(poll_s)
    return 0


def killed_worker(spec, points, text: str, out: Path, workers: int = 2) -> dict:
    """Sweep `points` into `out` on a LocalCluster of `workers` processes, SIGKILLing one worker process as soon
    as the first batch is saved. Returns its pid, the parts saved then, the batches, the counts and the wall time."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.CRITICAL) as cluster, Client(cluster) as client:
        pid = next(iter(client.run(os.getpid).values()))
        stop, seen = threading.Event(), {}

        def kill() -> None:
            seen["parts"] = first_parts(out / "parts", 1, stop.is_set)
            if seen["parts"]:
                os.kill(pid, signal.SIGKILL)

        watcher = threading.Thread(target=kill, daemon=True)
        watcher.start()
        started = time.perf_counter()
        counts = sweep.sweep(spec, points, text, out, client, progress=False, plots=False)
        seconds = time.perf_counter() - started
        stop.set()
        watcher.join()
    batches = len(list((out / "parts").glob("part-*.parquet")))
    return {"pid": pid, "parts": seen["parts"], "batches": batches, "counts": counts, "seconds": seconds}


def killed_sweep(spec_path: Path, out: Path, workers: int = 2, after_parts: int = 2) -> dict:
    """`basedie sweep` SIGKILLed (its whole process group: driver, scheduler and workers) once `after_parts`
    batches are saved, then run again into the same folder; the parts saved at the kill and the second run's
    summary line."""
    basedie = Path(sys.executable).with_name("basedie")          # the console script of this environment
    command = [str(basedie), "sweep", str(spec_path), "-o", str(out), "--workers", str(workers)]
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    parts = first_parts(out / "parts", after_parts, lambda: first.poll() is not None)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    second = subprocess.run(command, capture_output=True, text=True, check=False)
    return {"parts": parts, "summary": second.stdout.splitlines()[0] if second.stdout else second.stderr.strip()}


if __name__ == "__main__":
    raise SystemExit(main())
