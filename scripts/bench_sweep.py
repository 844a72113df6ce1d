"""How fast `basedie sweep` runs points: a DuoPD grid serially in one process vs on a LocalCluster, and what Dask
costs per point.

    python scripts/bench_sweep.py [--points 2000] [--workers 2 | --workers 0 | --scheduler tcp://HOST:PORT]

The grid: LLaMA2-70B on DuoPD, a fixed batch of 4 requests of 2,048 tokens, PNM power 1..40 W per stack x output
lengths 4..200 (the first `--points` of it). Timed: the points through `basedie.sweep.compute` (the engine `basedie sweep`
uses; the table, plots and part files are not included), serially and on the cluster (its start-up timed apart),
then the same number of no-op tasks, one per point (Dask's cost per task). Wall time and CPU time: on a shared
machine the kernel's autogroup scheduling gives all the processes of one session one share of the CPUs, so wall
time there says little about how the cluster scales, while CPU seconds per point (this process, which also runs
the LocalCluster's scheduler, plus the workers) show what Dask adds. With --scheduler the cluster is one started
by hand (workers started in sessions of their own each get a share, as separate machines would).
"""
import argparse
import os
import time

from basedie import sweep
from basedie.simulation import simulate_parser
from basedie.spec import Axis, Spec

BASE = {"system": "duopd", "model": "LLaMA2-70B", "input-len": 2048, "requests": 4, "batch": 4}
# PNM power: any value simulates (a lane count needs a verified pnm_array entry of that many lanes).
POWERS_W = range(1, 41)
OUTPUTS = range(4, 201, 4)


def grid(points: int) -> list[tuple[str, ...]]:
    spec = Spec(BASE, (Axis("hw.pnm.power_w", tuple({"hw.pnm.power_w": n} for n in POWERS_W), tuple(POWERS_W)),
                       Axis("output-len", tuple({"output-len": n} for n in OUTPUTS), tuple(OUTPUTS))))
    return [p.options for p in spec.points(simulate_parser())[:points]]


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
    args = parser.parse_args(argv)
    if args.workers < 0:
        parser.error("--workers must be >= 0")
    from basedie.sweep import Cluster

    options = grid(args.points)
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
    print(f"load average {os.getloadavg()[0]:.1f} at the end; {len(failed)} points failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
