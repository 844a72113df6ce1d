"""How much of the DuoPD Fig. 15 deviation the unbatched prefill explains: the Fig. 15 runs of
`basedie/studies/duopd.py` (the same workload, systems and utilization figures) at several prefill token budgets
(`--chunk-tokens` on duopd and pd-1:1; none = one prompt per iteration, the default).

    basedie study prefill-batching [--budgets none,65536,1000000] [--out prefill_batching_fig15.csv]
"""
import argparse
import csv
from dataclasses import replace
from itertools import product
from pathlib import Path

from basedie.studies import duopd as study

from sysmodel.config import SimulationConfig

COLUMNS = ("model", "prefill_budget", "duopd_decode_batch", "pd_decode_batch", "duopd_gpu_compute",
           "pd_prefill_compute", "pd_decode_compute", "compute_ratio_duopd_over_pd_decode")


def measure(model: str, budget: int | None) -> dict:
    base = SimulationConfig(system="duopd", model=model, workload=study.FIG15_WORKLOAD, max_batch=16,
                            chunk_tokens=budget)
    duopd, pd = study.run(base), study.run(replace(base, system="pd-1:1"))
    decode = study.server_utilization(pd, "decode instance")["compute"]
    gpu = study.metric(duopd, "utilization", "gpu_compute")
    return {"model": model, "prefill_budget": budget or "one prompt",
            "duopd_decode_batch": study.mean_decode_batch(duopd), "pd_decode_batch": study.mean_decode_batch(pd),
            "duopd_gpu_compute": gpu, "pd_prefill_compute": study.server_utilization(pd, "prefill instance")["compute"],
            "pd_decode_compute": decode, "compute_ratio_duopd_over_pd_decode": gpu / decode}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="basedie study prefill-batching", description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="none,65536,1000000", help="comma-separated token budgets (none: one "
                                                                         "prompt per iteration)")
    parser.add_argument("--out", type=Path, default=Path("prefill_batching_fig15.csv"))
    args = parser.parse_args(argv)
    budgets = [None if b == "none" else int(b) for b in args.budgets.split(",")]
    rows = [measure(model, budget) for model, budget in product(study.MODELS, budgets)]
    with args.out.open("w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    for r in rows:
        print(" | ".join(f"{r[c]:.3g}" if isinstance(r[c], float) else str(r[c]) for c in COLUMNS))


if __name__ == "__main__":
    main()
