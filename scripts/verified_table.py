"""Write docs/results/verified-blocks.md: the verified-figures table as `basedie run` summarizes it, one row per
entry, in the order `basedie run` proves them (entries verified by name with `--param` last).

    python scripts/verified_table.py [--table sysmodel/data/verified_blocks.json] [--out docs/results/verified-blocks.md]
"""
import argparse
import json
from pathlib import Path

from basedie.verified import TABLE_PATH, load
from rtl.registry import BLOCKS
from basedie.flow.runner import non_default
from basedie.flow.verify import bench_runs

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "results" / "verified-blocks.md"
HEADLINE = ("latency_cycles", "initiation_interval", "beats_per_cycle", "vectors_checked")
HEADER = ("block", "parameters", "latency", "II", "beats/cycle", "vectors", "cycles", "other figures")


def parameters(block: str, params: dict) -> str:
    """The parameters that differ from the paper's defaults, as `basedie run`'s summary shows them."""
    return ",".join(f"{k}={v}" for k, v in non_default(BLOCKS[block].params(**params)).items()) or "(defaults)"


def ordered(entries: list) -> list:
    """The entries in the order of `basedie run`'s bench runs; sets verified by name follow."""
    key = {(name, json.dumps(BLOCKS[name].params(**config).as_dict(), sort_keys=True)): k
           for k, (name, config) in enumerate(bench_runs(list(BLOCKS)))}
    return sorted(entries, key=lambda e: key.get((e.block, json.dumps(e.params, sort_keys=True)), len(key)))


def rows(entries: list) -> list[tuple[str, ...]]:
    return [(e.block, parameters(e.block, e.params), *(str(e.figures.get(name, "-")) for name in HEADLINE),
             str(e.provenance["cycles_simulated"]), str(len(set(e.figures) - set(HEADLINE))))
            for e in ordered(entries)]


def page(entries: list) -> str:
    tools = ", ".join(f"{name} {version}" for name, version in sorted(entries[0].provenance["tools"].items()))
    lines = ["# Verified blocks", "",
             "What `sysmodel/data/verified_blocks.json` holds, one row per bench run, as `basedie run` summarizes "
             "it: `parameters` are those that differ from the paper's defaults, `cycles` the cycles the bench "
             "simulated, `other figures` the number of block-specific figures in the entry (each block's design "
             "page says what they are). The `mmu` rows are measured behind an HBM4 pseudo channel, the others "
             f"behind a fixed-latency memory. Measured with {tools}.", "",
             "Regenerate: `basedie run` (or `basedie verify BLOCK ...`), then `python scripts/verified_table.py`.",
             "", "| " + " | ".join(HEADER) + " |", "| " + " | ".join("---" for _ in HEADER) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows(entries)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", type=Path, default=TABLE_PATH)
    parser.add_argument("--out", type=Path, default=PAGE)
    args = parser.parse_args()
    args.out.write_text(page(load(args.table).entries))


if __name__ == "__main__":
    main()
