"""A block's power at its bench's own stimulus: run the bench with waves, count every bit's toggles per cycle in
dump.vcd, and analyse the mapped netlist at those rates (docs/results/ppa.md, "Power from a bench run").

    python scripts/bench_power.py fp32_add [--param NAME=VALUE ...]
"""
import argparse
import tempfile
from pathlib import Path

from rtl.registry import BLOCKS
from basedie.flow.runner import run_bench
from basedie.flow.synthesis import measured_power


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("block", choices=sorted(BLOCKS))
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    params = BLOCKS[args.block].params.from_strings(dict(p.split("=", 1) for p in args.param))
    with tempfile.TemporaryDirectory(prefix="basedie-bench-power-") as folder:
        runs = Path(folder)
        run_bench(args.block, BLOCKS[args.block].bench.module, params, waves=True, runs=runs)
        [vcd] = runs.glob("*/dump.vcd")
        p = measured_power(args.block, params, vcd)
    print(f"| {args.block} | {p['clock_hz'] / 1e6:g} MHz | {p['signals_toggle_rate']:.3f} | "
          f"{p['measured_w'] * 1e3:.3f} | {p['vectorless_w'] * 1e3:.3f} ({p['vectorless_toggle_rate']:.0%}) |")


if __name__ == "__main__":
    main()
