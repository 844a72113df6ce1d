"""Print the synthesis table (`basedie synth`) as Markdown: the table of docs/results/synthesis.md.

    python scripts/synthesis_table.py [--table sysmodel/data/synthesized_blocks.json]
"""
import argparse
from pathlib import Path

from rtl.registry import BLOCKS
from tb.runner import non_default
from tb.synthesis import TABLE_PATH, load

HEADER = ("block", "parameters", "cells", "flip-flops", "memory bits", "ROM bits", "NAND2-eq", "levels",
          "longest path starts at", "area µm² (memories as SRAM)", "clock ≤ MHz", "Yosys CPU s")


def rows(entries: list[dict]) -> list[tuple[str, ...]]:
    out = []
    for e in entries:
        label = ",".join(f"{k}={v}" for k, v in non_default(BLOCKS[e["block"]].params(**e["params"])).items())
        f, p = e["figures"], e["provenance"]
        if f is None:
            out.append((e["block"], label or "(defaults)", f"not finished in {p['wall_s']:.0f} s wall "
                        f"({p['cpu_s']:.0f} s CPU)", *[""] * 9))
            continue
        est = f["estimate"]
        area = f"{est['cell_area_um2']:,.0f}"
        if f["memory_bits"]:
            area += f" ({est['cell_area_with_sram_um2']:,.0f})"
        out.append((e["block"], label or "(defaults)", f"{f['cells']:,}", f"{f['flip_flops']:,}",
                    f"{f['memory_bits']:,}", f"{f['rom_bits']:,}", f"{f['nand2_equivalents']:,.0f}",
                    str(f["depth_levels"]), f"`{f['longest_path_starts_at']}`", area,
                    f"{est['max_clock_mhz']:,.0f}", f"{p['cpu_s']:.0f}"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", type=Path, default=TABLE_PATH)
    args = parser.parse_args()
    print("| " + " | ".join(HEADER) + " |")
    print("|" + " --- |" * len(HEADER))
    for row in rows(load(args.table)):
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
