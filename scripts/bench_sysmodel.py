"""How fast the system model runs: a 1,000-request Poisson workload on LLaMA2-70B, every system, one core.

    python scripts/bench_sysmodel.py [--requests 1000] [--qps 2] [--repeat 3] [--perf-model NAME] [--systems A,B]
                                     [--memory hbm|A|B|C|FILE] [--gpus N]

HBF's speed target (docs/design/hbf.md, "Speed"): `--model Qwen3-30B-A3B --systems chunked --gpus 1 --memory C --qps 20
--input-len 1024 --output-len 128`, beside the same run with `--memory A` (HBM only) in one invocation each.

Prints, per system, the best wall time of `simulate()` over the repeats (the verified table is loaded once,
beforehand, and timed separately) and how many output tokens per second of wall time that is.
"""
import argparse
import time

from basedie import verified
from sysmodel.hardware import PAPER_HARDWARE, with_overrides
from sysmodel.simulate import SimulationConfig, simulate
from sysmodel.systems import SYSTEMS
from sysmodel.workload import PoissonArrivals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--qps", type=float, default=2.0)
    parser.add_argument("--input-len", type=int, default=8192)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument("--model", default="llama2-70b")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--perf-model", default="roofline", help="roofline, measured or roofline-efficiency")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated (default: all)")
    parser.add_argument("--memory", default="hbm",
                        help="package layout: hbm, A, B, C or a layout file (docs/design/hbf.md)")
    parser.add_argument("--gpus", type=int, default=None, help="GPUs of the paper hardware (default: its 8)")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    table = verified.load()
    print(f"verified table loaded (digests of rtl/ checked) in {time.perf_counter() - start:.3f} s")
    workload = PoissonArrivals(args.qps, args.requests, args.input_len, args.output_len, seed=0)
    hardware = PAPER_HARDWARE if args.gpus is None else with_overrides(PAPER_HARDWARE, {"gpus": str(args.gpus)})
    print(f"{args.model}, {args.requests} requests, Poisson {args.qps} QPS, input {args.input_len}, "
          f"output {args.output_len} (means), --perf-model {args.perf_model}, {hardware.gpus} GPUs, "
          f"memory {args.memory}")
    print(f"{'system':9} {'wall s':>7} {'tokens out':>10} {'tokens/s of wall':>17}")
    for system in args.systems.split(","):
        best, result = float("inf"), None
        for _ in range(args.repeat):
            start = time.perf_counter()
            result = simulate(SimulationConfig(system=system, model=args.model, workload=workload, hardware=hardware,
                                               perf_model=args.perf_model,
                                               memory=args.memory), table)
            best = min(best, time.perf_counter() - start)
        tokens = sum(r.output_len for r in result.requests)
        print(f"{system:9} {best:7.3f} {tokens:10d} {tokens / best:17.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
