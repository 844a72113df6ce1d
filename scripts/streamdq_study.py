"""Regenerate StreamDQ's evaluation (paper 002 §1 Fig. 1, §6.3 Fig. 16, §6.4 Figs. 17-18) with `sysmodel`, and put
our figure next to the paper's for every headline claim.

    python scripts/streamdq_study.py [--out DIR] [--quick] [--table PATH]

Per figure: `<fig>.csv` (one row per point: parameters, time, energy, what binds) and `<fig>.png`; then
`headline.csv` and `headline.md`. The DQB path is shown under both link assumptions the paper leaves open:
`expanded` (the die-to-die link carries the 16-bit weights at the stack's bandwidth) and `unbounded`. Nothing here
is fitted to the paper: the model lives in `sysmodel/quantized.py`, this only sweeps.
"""
import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

sys.path.insert(0, str(Path(__file__).parent))
from duopd_study import Claim, write_csv  # noqa: E402  (the DuoPD study's table helpers)
from duopd_study import write_headline as duopd_headline  # noqa: E402

from basedie import verified  # noqa: E402
from sysmodel.hardware import A100_PCIE_40GB  # noqa: E402
from sysmodel.presets import PRESETS  # noqa: E402
from sysmodel.llm import resolve_model  # noqa: E402
from sysmodel.operators import Shard, decode_work, prefill_work  # noqa: E402
from sysmodel.quantized import GemmCost, GemmModel, Quantization  # noqa: E402
from sysmodel.quantized_execution import QuantizedGPUExecution  # noqa: E402
from sysmodel.simulate import SimulationConfig, simulate  # noqa: E402
from sysmodel.workload import FixedBatch  # noqa: E402

K = N = 4096                                   # Fig. 16's GEMM (§6.3)
GROUP = 128
MODELS = ("Llama-3.1-8B", "Qwen3-8B", "Mistral-7B-v0.3")
LENGTH = 1024                                  # Figs. 17-18: input = output = 1,024 tokens (§6.4)
LINKS = {"expanded": True, "unbounded": False}
# Fig. 16's format pairs and the kernels that exist for each (§5.1, §6.3: fused kernels except TorchAO).
PAIRS = {("w4a16", "fp16"): ("gptq", "awq-v1", "awq-v2"), ("w4a16", "bf16"): (),
         ("w8a16", "fp16"): ("gptq",), ("w8a16", "bf16"): ("torchao",)}
PAIR_NAMES = {"w4a16": "INT4", "w8a16": "INT8"}


@dataclass(frozen=True)
class Scale:
    gemm_rows: tuple[int, ...]
    batches: tuple[int, ...]
    models: tuple[str, ...]


FULL = Scale((1, 2, 4, 8, 16, 32, 64, 128, 256), (1, 2, 4, 8, 16, 32, 64, 128), MODELS)
QUICK = Scale((1, 4, 8, 64, 256), (1, 4, 32, 128), ("Llama-3.1-8B",))


def gemm_models(table, weights: str, activations: str) -> dict[str, GemmModel]:
    """Fig. 16's contenders for one format pair: each fused (or, TorchAO, split) kernel, the DQB both ways, and
    the 16-bit GEMM."""
    kinds = {kernel: Quantization(weights, GROUP, "gpu-split" if kernel == "torchao" else "gpu-fused", kernel,
                                  activations) for kernel in PAIRS[(weights, activations)]}
    kinds.update({f"dqb-{link}": Quantization(weights, GROUP, "dqb", None, activations, expanded)
                  for link, expanded in LINKS.items()})
    models = {name: GemmModel.build(A100_PCIE_40GB, quant, table) for name, quant in kinds.items()}
    models[activations] = GemmModel.build(A100_PCIE_40GB, Quantization(activations="fp16"), table)
    return models


def fig16(scale: Scale, out: Path, table) -> list[Claim]:
    rows = []
    for (weights, activations) in PAIRS:
        for name, gemm in gemm_models(table, weights, activations).items():
            for m in scale.gemm_rows:
                cost: GemmCost = gemm.cost(m, K, N)
                rows.append({"pair": f"{PAIR_NAMES[weights]}->{activations.upper()}", "weights": weights,
                             "activations": activations, "kernel": name, "M": m, "time_us": cost.seconds * 1e6,
                             "energy_uj": gemm.energy_j(cost) * 1e6, "bound": cost.bound,
                             "memory_us": cost.memory_s * 1e6, "tensor_us": cost.tensor_s * 1e6,
                             "cuda_us": cost.cuda_s * 1e6, "hbm_bytes": cost.hbm_bytes})
    write_csv(out / "fig16.csv", rows)
    plot_fig16(out / "fig16.png", rows)
    claims = []
    for link in LINKS:
        dqb = f"dqb-{link}"
        speed, energy = {}, {}
        for r in rows:
            if r["kernel"] in ("gptq", "awq-v1", "awq-v2"):      # the fused kernels
                d = _find(rows, r["pair"], dqb, r["M"])
                speed[(r["pair"], r["kernel"], r["M"])] = r["time_us"] / d["time_us"]
                energy[(r["pair"], r["kernel"], r["M"])] = 100 * (1 - d["energy_uj"] / r["energy_uj"])
        key = max(speed, key=speed.get)
        claims.append(Claim("16", f"max DQB speed-up over the fused kernels (link {link})", 7.08, speed[key], "ratio",
                            f"fig16.csv: {key[0]} {key[1]} M={key[2]}"))
        key = max(energy, key=energy.get)
        claims.append(Claim("16", f"max DQB energy reduction vs the fused kernels, % (link {link})", 90.23,
                            energy[key], "points", f"fig16.csv: {key[0]} {key[1]} M={key[2]}"))
        small = max(m for m in scale.gemm_rows if m <= 4)
        ratio = _find(rows, "INT4->FP16", dqb, small)["time_us"] / _find(rows, "INT4->FP16", "awq-v2", small)["time_us"]
        claims.append(Claim("16", f"AWQ-v2 ahead at M <= 4: DQB time / AWQ-v2 time at M={small} (paper: slightly "
                                  f"above 1; link {link})", 1.0, ratio, "ratio", "fig16.csv: INT4->FP16", ">"))
        ahead = [m for m in scale.gemm_rows
                 if all(_find(rows, "INT4->FP16", dqb, m)["time_us"] <= _find(rows, "INT4->FP16", k, m)["time_us"]
                        for k in ("gptq", "awq-v1", "awq-v2"))]
        claims.append(Claim("16", f"smallest M from which the DQB beats every INT4 fused kernel (link {link})", 8,
                            min(ahead) if ahead else math.nan, "ratio", f"fig16.csv: ahead at M in {ahead}"))
        gain = {w: max(v for k, v in speed.items() if k[0] == f"{w}->FP16" and k[1] == "gptq") for w in ("INT4", "INT8")}
        claims.append(Claim("16", f"max speed-up over GPTQ, INT8 / INT4 (paper: larger for INT8; link {link})", 1.0,
                            gain["INT8"] / gain["INT4"], "ratio",
                            f"fig16.csv: INT8 {gain['INT8']:.2f}x, INT4 {gain['INT4']:.2f}x", ">"))
    return claims


def _find(rows, pair, kernel, m):
    return next(r for r in rows if r["pair"] == pair and r["kernel"] == kernel and r["M"] == m)


def plot_fig16(path: Path, rows) -> None:
    figure = Figure(figsize=(14, 7))
    axes = figure.subplots(2, len(PAIRS))
    for column, pair in enumerate(dict.fromkeys(r["pair"] for r in rows)):
        for name in dict.fromkeys(r["kernel"] for r in rows if r["pair"] == pair):
            points = [r for r in rows if r["pair"] == pair and r["kernel"] == name]
            for row_index, key in enumerate(("time_us", "energy_uj")):
                axes[row_index][column].plot([r["M"] for r in points], [r[key] for r in points], marker="o",
                                             label=name)
        for row_index, label in enumerate(("time (µs)", "energy (µJ)")):
            ax = axes[row_index][column]
            ax.set_xscale("log", base=2)
            ax.set_title(f"{pair}, K = N = 4096", fontsize=9)
            ax.set_xlabel("M")
            ax.set_ylabel(label)
        axes[0][column].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def run_seconds(execution, batch: int, length: int) -> float:
    """One fixed batch served alone: the prompts in chunks of 1,024 tokens, then `length` decode iterations at
    batch `batch` over the growing context (the `gpu` system's schedule without the interleaving)."""
    chunks = np.arange(0, length, 1024)
    prefill = batch * sum(execution.cost(prefill_work(min(1024, length - c), past=int(c),
                                                      last_chunk=c + 1024 >= length)).seconds for c in chunks)
    steps = np.arange(length)
    decode = float(np.sum(execution.cost(decode_work(batch, batch * (length + 1 + steps))).seconds))
    return prefill + decode


class FreeDequantization(GemmModel):
    """The same GEMMs with dequantization costing nothing: the packed weights read once at the HBM bandwidth
    feeding the tensor cores directly (what Fig. 1 subtracts)."""

    def cost(self, m, k, n, bandwidth=None) -> GemmCost:
        memory, tensor, nbytes = self.fp16_gemm(m, k, n, bandwidth, weight_bytes=self.weight_bytes(k, n))
        return GemmCost(np.maximum(memory, tensor), nbytes, memory, tensor, 0.0, "ideal")


def fig1(scale: Scale, out: Path, table) -> list[Claim]:
    hw = PRESETS["a100-pcie-40gb"]
    shard = Shard(resolve_model("Llama-3.1-8B"), 1)
    rows = []
    for kernel in ("gptq", "awq-v1"):
        gemm = GemmModel.build(A100_PCIE_40GB, Quantization("w4a16", GROUP, "gpu", kernel), table)
        free = FreeDequantization(gemm.gpu, gemm.quant, gemm.sz)
        for length in ((256, LENGTH) if scale is FULL else (LENGTH,)):
            for batch in scale.batches:
                total, ideal = (run_seconds(QuantizedGPUExecution(hw, shard, g), batch, length) for g in (gemm, free))
                rows.append({"kernel": kernel, "len": length, "batch": batch, "time_s": total,
                             "dequant_free_s": ideal, "dequant_s": total - ideal,
                             "dequant_share_pct": 100 * (total - ideal) / total})
    write_csv(out / "fig1.csv", rows)
    figure = Figure(figsize=(6, 4))
    ax = figure.subplots()
    for kernel, length in dict.fromkeys((r["kernel"], r["len"]) for r in rows):
        points = [r for r in rows if r["kernel"] == kernel and r["len"] == length]
        ax.plot([r["batch"] for r in points], [r["dequant_share_pct"] for r in points], marker="o",
                label=f"{kernel}, len = {length}")
    ax.axhspan(40, 80, color="grey", alpha=0.2, label="paper: 40-80 %")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch")
    ax.set_ylabel("dequantization share of inference time (%)")
    ax.set_title("Fig. 1: Llama-3.1-8B W4A16 on the A100", fontsize=9)
    ax.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out / "fig1.png", dpi=100)
    gptq = [r for r in rows if r["kernel"] == "gptq" and r["len"] == LENGTH]
    low, high = min(gptq, key=lambda r: r["dequant_share_pct"]), max(gptq, key=lambda r: r["dequant_share_pct"])
    return [Claim("1", "GPTQ W4A16: dequantization share of inference time, lowest over batches (%)", 40,
                  low["dequant_share_pct"], "points", f"fig1.csv: batch {low['batch']}, len {LENGTH}"),
            Claim("1", "GPTQ W4A16: dequantization share of inference time, highest over batches (%)", 80,
                  high["dequant_share_pct"], "points", f"fig1.csv: batch {high['batch']}, len {LENGTH}")]


def end_to_end(scale: Scale, table) -> list[dict]:
    rows = []
    variants = {"gptq": ("gpu", "gptq", True), "awq": ("gpu", "awq-v1", True),
                **{f"dqb-{link}": ("dqb", None, expanded) for link, expanded in LINKS.items()}}
    for model in scale.models:
        for weights in ("w4a16", "w8a16"):
            for name, (dequant, kernel, expanded) in variants.items():
                if kernel == "awq-v1" and weights != "w4a16":
                    continue                                   # AWQ kernels are INT4 only
                quant = Quantization(weights, GROUP, dequant, kernel, link_expanded=expanded)
                for batch in scale.batches:
                    config = SimulationConfig(system="gpu", model=resolve_model(model),
                                              workload=FixedBatch(batch, LENGTH, LENGTH),
                                              hardware="a100-pcie-40gb", max_batch=batch, quantization=quant)
                    summary = simulate(config, table).summary
                    rows.append({"model": model, "weights": weights, "system": name, "batch": batch,
                                 "latency_s": summary["e2e_s"]["mean"],
                                 "decode_tok_s": batch / summary["tpot_s"]["p50"],
                                 "output_tok_s": summary["throughput"]["output_tokens_per_s"],
                                 "energy_j_per_token": summary["energy_j"]["per_output_token"]})
    return rows


def fig17_18(scale: Scale, out: Path, table) -> list[Claim]:
    rows = end_to_end(scale, table)
    write_csv(out / "fig17.csv", rows)
    speedups = []
    for r in rows:
        if r["system"].startswith("dqb"):
            for base in ("gptq", "awq"):
                b = next((x for x in rows if x["system"] == base and all(x[k] == r[k] for k in ("model", "weights",
                                                                                                  "batch"))), None)
                if b:
                    speedups.append({"model": r["model"], "weights": r["weights"], "dqb": r["system"],
                                     "baseline": base, "batch": r["batch"],
                                     "decode_speedup": r["decode_tok_s"] / b["decode_tok_s"],
                                     "latency_reduction_pct": 100 * (1 - r["latency_s"] / b["latency_s"])})
    write_csv(out / "fig18.csv", speedups)
    plot_e2e(out, rows, speedups, scale)
    claims = []
    for link in LINKS:
        mine = [s for s in speedups if s["dqb"] == f"dqb-{link}"]
        best = max(mine, key=lambda s: s["latency_reduction_pct"])
        claims.append(Claim("17", f"max end-to-end latency reduction vs GPTQ/AWQ, % (link {link})", 54.68,
                            best["latency_reduction_pct"], "points", _where(best)))
        best = max(mine, key=lambda s: s["decode_speedup"])
        claims.append(Claim("18", f"max decode-throughput speed-up vs GPTQ/AWQ (link {link})", 2.20,
                            best["decode_speedup"], "ratio", _where(best)))
        small = [s for s in mine if s["baseline"] == "gptq" and s["weights"] == "w4a16" and s["batch"] <= 4]
        worst = min(small, key=lambda s: s["decode_speedup"])
        claims.append(Claim("18", f"INT4: GPTQ ahead at batch <= 4, lowest DQB/GPTQ decode speed-up (paper: "
                                  f"slightly below 1; link {link})", 1.0, worst["decode_speedup"], "ratio",
                            _where(worst), "<"))
        ahead = sorted({s["batch"] for s in mine if s["baseline"] == "gptq" and s["weights"] == "w8a16"
                        and s["decode_speedup"] >= 1
                        and all(t["decode_speedup"] >= 1 for t in mine if t["baseline"] == "gptq"
                                and t["weights"] == "w8a16" and t["batch"] >= s["batch"])})
        claims.append(Claim("18", f"INT8: smallest batch from which the DQB beats GPTQ (every model; link {link})", 4,
                            min(ahead) if ahead else math.nan, "ratio", f"fig18.csv: ahead at batches {ahead}"))
        awq = [s for s in mine if s["baseline"] == "awq"]
        best = max(awq, key=lambda s: s["decode_speedup"])
        claims.append(Claim("18", f"batch of the largest decode gap over AWQ (link {link})", 128, best["batch"],
                            "ratio", _where(best)))
    return claims


def _where(s: dict) -> str:
    return f"fig18.csv: {s['model']} {s['weights']} vs {s['baseline']}, batch {s['batch']}"


def plot_e2e(out: Path, rows, speedups, scale: Scale) -> None:
    for name, key, ylabel in (("fig17", "latency_s", "end-to-end latency (s)"),
                              ("fig17_throughput", "decode_tok_s", "decode throughput (tokens/s)")):
        figure = Figure(figsize=(5 * len(scale.models), 7))
        axes = figure.subplots(2, len(scale.models), squeeze=False)
        for column, model in enumerate(scale.models):
            for row_index, weights in enumerate(("w4a16", "w8a16")):
                ax = axes[row_index][column]
                for system in dict.fromkeys(r["system"] for r in rows):
                    points = [r for r in rows if (r["model"], r["weights"], r["system"]) == (model, weights, system)]
                    if points:
                        ax.plot([r["batch"] for r in points], [r[key] for r in points], marker="o", label=system)
                ax.set_xscale("log", base=2)
                ax.set_title(f"{model} {PAIR_NAMES[weights]}", fontsize=9)
                ax.set_xlabel("batch")
                ax.set_ylabel(ylabel)
                ax.legend(fontsize=7)
        figure.tight_layout()
        figure.savefig(out / f"{name}.png", dpi=100)
    figure = Figure(figsize=(7, 4))
    ax = figure.subplots()
    for series in dict.fromkeys((s["model"], s["weights"], s["baseline"]) for s in speedups
                                if s["dqb"] == "dqb-expanded"):
        points = [s for s in speedups if (s["model"], s["weights"], s["baseline"]) == series
                  and s["dqb"] == "dqb-expanded"]
        ax.plot([s["batch"] for s in points], [s["decode_speedup"] for s in points], marker="o",
                label=" ".join(series))
    ax.axhline(1, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch")
    ax.set_ylabel("DQB decode speed-up (link expanded)")
    ax.legend(fontsize=6)
    figure.tight_layout()
    figure.savefig(out / "fig18.png", dpi=100)


def write_headline(out: Path, claims: list[Claim], quick: bool) -> str:
    """The DuoPD study's headline.csv / headline.md, titled for this study."""
    text = duopd_headline(out, claims, quick).replace("# DuoPD study", "# StreamDQ study", 1)
    (out / "headline.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/study/streamdq"), help="output folder")
    parser.add_argument("--quick", action="store_true", help="fewer points (a smoke run)")
    parser.add_argument("--table", type=Path, default=verified.TABLE_PATH, help="the verified-figures table")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    table = verified.load(args.table)
    args.out.mkdir(parents=True, exist_ok=True)
    scale = QUICK if args.quick else FULL
    claims = fig16(scale, args.out, table) + fig1(scale, args.out, table) + fig17_18(scale, args.out, table)
    print(write_headline(args.out, claims, args.quick))
    print(f"wall time {time.perf_counter() - start:.1f} s; results in {args.out}")


if __name__ == "__main__":
    main()
