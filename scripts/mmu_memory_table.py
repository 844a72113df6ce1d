"""The MMU's arbitration grid behind two memory models, side by side, as the Markdown tables of docs/design/dram.md.

    basedie verify mmu --table /tmp/dram_ideal.json
    basedie verify mmu --memory-model hbm3 --table /tmp/dram.json
    basedie verify mmu --memory-model hbm3 --param gpu_outstanding=32 --table /tmp/sweep.json   # a sweep point
    python scripts/mmu_memory_table.py --ideal /tmp/dram_ideal.json --dram /tmp/dram.json \
        [--param out_of_order=true] [--sweep gpu_outstanding --sweep-table /tmp/sweep.json] [--summary]

`--ideal` may be any table measured behind the ideal memory: the committed one holds the figures of the earlier
traffic (uniformly random GPU reads, 256-byte PNM tensors), a run of today's bench the address streams'.

Reads the `mmu` entries of the two tables without checking their digests (scratch tables may lag the sources).
For every policy and pair of offered loads (requests per cycle): each source's requests per cycle issued to the
memory controller within the measured window (and, behind the DRAM, answered within it), the GPU's latency from
entering the MMU to its response and the PNM instruction's latency to its completion (p50/p99, cycles), and
behind the DRAM what each source was served in GB/s (32-byte answers per cycle at the design clock), its own
latency for GPU requests and its row-hit rate. `--summary`: four points per policy, both tables' issued rates and
GPU latencies. With `--sweep NAME`, also the
GPU-saturated prefill-first points of every `--dram` entry that differs from the chosen one in NAME alone, with
`gpu_outstanding` / the mean DRAM latency (Little's law's rate for a GPU that keeps every slot busy).
"""
import argparse
import json
from pathlib import Path

from rtl.mmu.params import MMUParams


def entry(path: Path, params: dict) -> dict:
    found = [e for e in json.loads(path.read_text())["entries"] if e["block"] == "mmu" and e["params"] == params]
    if len(found) != 1:
        raise SystemExit(f"{path}: {len(found)} mmu entries with {params}, expected one")
    return found[0]


def grid(ideal: dict, dram: dict) -> list[str]:
    rows = ["| policy | offered GPU / PNM | issued GPU / PNM, ideal | issued GPU / PNM, DRAM | served GPU / PNM, DRAM "
            "| GPU latency p50 / p99,"
            " ideal | GPU latency p50 / p99, DRAM | PNM instr. latency p50 / p99, ideal | PNM instr. latency p50 / p99,"
            " DRAM | served GB/s GPU / PNM, DRAM | DRAM latency (GPU) p50 / p99 | row hits |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    gbps = dram["params"]["data_bits"] / 8 * dram["params"]["design_clock_hz"] / 1e9
    for i, d in zip(ideal["figures"]["arbitration"], dram["figures"]["arbitration"], strict=True):
        assert (i["policy"], i["gpu_offered"], i["pnm_offered"]) == (d["policy"], d["gpu_offered"], d["pnm_offered"])
        rows.append(f"| {i['policy']} | {i['gpu_offered']} / {i['pnm_offered']} "
                    f"| {i['gpu_share']:.3f} / {i['pnm_share']:.3f} | {d['gpu_share']:.3f} / {d['pnm_share']:.3f} "
                    f"| {d['gpu_served']:.3f} / {d['pnm_served']:.3f} "
                    f"| {i['gpu_latency_p50']:g} / {i['gpu_latency_p99']:g} "
                    f"| {d['gpu_latency_p50']:g} / {d['gpu_latency_p99']:g} "
                    f"| {i['pnm_latency_p50']:g} / {i['pnm_latency_p99']:g} "
                    f"| {d['pnm_latency_p50']:g} / {d['pnm_latency_p99']:g} "
                    f"| {d['gpu_served'] * gbps:.1f} / {d['pnm_served'] * gbps:.1f} "
                    f"| {d['gpu_memory_latency_p50']:g} / {d['gpu_memory_latency_p99']:g} | {d['row_hit_rate']:.2f} |")
    return rows


SUMMARY_POINTS = ((0.25, 0.25), (0.5, 0.5), (1.0, 0.25), (1.0, 1.0))


def summary(ideal: dict, dram: dict) -> list[str]:
    """Per policy, at four offered loads: issued GPU / PNM requests per cycle in both tables, and the GPU's latency
    (entering the MMU to its response, p50 / p99) at both saturated."""
    points = {(p["policy"], p["gpu_offered"], p["pnm_offered"]): p
              for p in ideal["figures"]["arbitration"]}
    rows = ["| policy | " + " | ".join(f"offered {g:g} / {q:g}" for g, q in SUMMARY_POINTS)
            + " | GPU latency at 1.0 / 1.0 |", "| --- " * (len(SUMMARY_POINTS) + 2) + "|"]
    for policy in dict.fromkeys(p["policy"] for p in dram["figures"]["arbitration"]):
        cells = []
        new = {(p["gpu_offered"], p["pnm_offered"]): p for p in dram["figures"]["arbitration"] if p["policy"] == policy}
        for load in SUMMARY_POINTS:
            i, d = points[(policy, *load)], new[load]
            cells.append(f"{i['gpu_share']:.3f} / {i['pnm_share']:.3f} → {d['gpu_share']:.3f} / {d['pnm_share']:.3f}")
        i, d = points[(policy, 1.0, 1.0)], new[(1.0, 1.0)]
        before = f"{i['gpu_latency_p50']:g} / {i['gpu_latency_p99']:g}" if "gpu_latency_p50" in i else "–"
        latency = f"{before} → {d['gpu_latency_p50']:g} / {d['gpu_latency_p99']:g}"
        rows.append(f"| {policy} | " + " | ".join(cells) + f" | {latency} |")
    return rows


def sweep(path: Path, name: str, base: dict) -> list[str]:
    """The GPU's achieved rate and latencies at each value of `name` found in the table, at the grid's
    prefill-first points with the GPU saturated."""
    entries = sorted((e for e in json.loads(path.read_text())["entries"] if e["block"] == "mmu"
                      and all(e["params"].get(k) == v for k, v in base.items() if k != name)),
                     key=lambda e: e["params"][name])
    rows = [f"| {name} | offered GPU / PNM | GPU issued / served | PNM issued / served | GPU latency p50 / p99 "
            "| DRAM latency (GPU) p50 / p99 / mean | gpu_outstanding / mean DRAM latency |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for e in entries:
        for p in e["figures"]["arbitration"]:
            if p["policy"] == "prefill_first" and p["gpu_offered"] == 1.0:
                rows.append(f"| {e['params'][name]} | {p['gpu_offered']} / {p['pnm_offered']} "
                            f"| {p['gpu_share']:.3f} / {p['gpu_served']:.3f} | {p['pnm_share']:.3f} / {p['pnm_served']:.3f} "
                            f"| {p['gpu_latency_p50']:g} / {p['gpu_latency_p99']:g} "
                            f"| {p['gpu_memory_latency_p50']:g} / {p['gpu_memory_latency_p99']:g} / "
                            f"{p['gpu_memory_latency_mean']:g} | {e['params']['gpu_outstanding'] / p['gpu_memory_latency_mean']:.3f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ideal", type=Path, required=True, help="table measured behind the ideal memory")
    parser.add_argument("--dram", type=Path, required=True, help="table measured behind a DRAM model")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="which mmu entry: the parameters that differ from the defaults (repeatable)")
    parser.add_argument("--sweep", default=None, metavar="NAME", help="also tabulate the sweep's entries over NAME")
    parser.add_argument("--sweep-table", type=Path, default=None, help="the sweep's table (default: --dram)")
    parser.add_argument("--summary", action="store_true", help="the per-policy summary instead of the full grid")
    args = parser.parse_args()
    params = MMUParams.from_strings(dict(p.split("=", 1) for p in args.param)).as_dict()
    tabulate = summary if args.summary else grid
    print("\n".join(tabulate(entry(args.ideal, params), entry(args.dram, params))))
    if args.sweep:
        print()
        print("\n".join(sweep(args.sweep_table or args.dram, args.sweep, params)))


if __name__ == "__main__":
    main()
