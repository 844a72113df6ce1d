"""How fast `basedie sweep` runs points: a DuoPD grid serially in one process vs on a LocalCluster, and what Dask
costs per point.

    python scripts/bench_sweep.py [--points 2000] [--workers 2]

The grid: LLaMA2-70B on DuoPD, a fixed batch of 4 requests of 2,048 tokens, PNM lanes 1..40 x output lengths
4..200 (the first `--points` of it). Timed: the points through `basedie.sweep.compute` (the engine `basedie sweep`
uses; the table, plots and part files are not included), serially and on the cluster (its start-up timed apart),
then the same number of no-op tasks one per point (Dask's cost per task) and the batched sweep's extra time per
point over a perfect split of the serial time.
"""
import argparse
import os
import time

from basedie import sweep
from basedie.cli import simulate_parser
from basedie.spec import Axis, Spec

BASE = {"system": "duopd", "model": "LLaMA2-70B", "input-len": 2048, "requests": 4, "batch": 4}
LANES = range(1, 41)
OUTPUTS = range(4, 201, 4)


def grid(points: int) -> list[tuple[str, ...]]:
    spec = Spec(BASE, (Axis("hw.pnm.lanes", tuple({"hw.pnm.lanes": n} for n in LANES), tuple(LANES)),
                       Axis("output-len", tuple({"output-len": n} for n in OUTPUTS), tuple(OUTPUTS))))
    return [p.options for p in spec.points(simulate_parser())[:points]]


def timed(function, *args) -> float:
    start = time.perf_counter()
    function(*args)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    from distributed import Client, LocalCluster

    options = grid(args.points)
    failed = []

    def check(_, rows):
        failed.extend(r for r in rows if r["status"] != "ok")

    print(f"{len(options)} DuoPD points; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    load = timed(sweep._context)  # the parser and verified table, once per process (each worker does the same)
    serial = timed(sweep.compute, sweep.run_points, options, None, check, None, None, False)
    print(f"serial, one process:        {serial:7.1f} s  {len(options) / serial:7.1f} points/s  "
          f"({1e3 * serial / len(options):.1f} ms/point; table loaded once before, {load:.2f} s)")
    start = time.perf_counter()
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        started = time.perf_counter() - start
        client.run(sweep._context)   # what every worker pays once, like the serial run's table load
        warm = time.perf_counter() - start - started
        parallel = timed(sweep.compute, sweep.run_points, options, client, check, None, None, False)
        noop = timed(sweep.compute, list, options, client, lambda b, r: None, None, 1, False)
        ideal = serial / args.workers
        print(f"LocalCluster, {args.workers} workers:    {parallel:7.1f} s  {len(options) / parallel:7.1f} points/s  "
              f"(start-up {started:.1f} s and worker warm-up {warm:.1f} s not included; speed-up "
              f"{serial / parallel:.2f}x, ideal {args.workers}x)")
        print(f"Dask cost per task:         {1e3 * noop / len(options):7.2f} ms  ({len(options)} no-op tasks, one per "
              f"point, {noop:.1f} s)")
        print(f"batched sweep over ideal:   {1e3 * (parallel - ideal) * args.workers / len(options):7.2f} ms/point "
              f"(worker-seconds beyond serial / {args.workers} per point)")
    print(f"load average {os.getloadavg()[0]:.1f} at the end; {len(failed)} points failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
