"""Regenerate StreamDQ's evaluation (paper 002 §1 Fig. 1, §6.3 Fig. 16, §6.4 Figs. 17-18) with `sysmodel`, and put
our figure next to the paper's for every headline claim.

    basedie study streamdq [--out DIR] [--quick] [--table PATH]

Per figure: `<fig>.csv` (one row per point: parameters, time, energy, what binds) and `<fig>.png`; then
`headline.csv` and `headline.md`. The DQB path is shown under both link assumptions the paper leaves open:
`expanded` (the die-to-die link carries the 16-bit weights at the stack's bandwidth) and `unbounded`. Nothing here
is fitted to the paper: the model lives in `sysmodel/quantized.py`, this only sweeps. Every figure runs under both
kernel models (`--kernel-model`): `roofline` (the kernels' instruction counts) and `measured` (public kernel
benchmarks, `sysmodel/quantized_measured.py`); a kernel nobody measured has no `measured` row. Energies come with
the DQB's synthesized power (`sysmodel/power.py`) and, in a `_paper` column and `[paper DQB power]` claims, with
Table 5's 0.355 W.
"""
import argparse
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from basedie import verified
from basedie.studies.tables import Claim, cell, write_csv
from sysmodel.hardware import A100_PCIE_40GB
from sysmodel.presets import PRESETS
from sysmodel.llm import resolve_model
from sysmodel.operators import Shard, decode_work, prefill_work
from sysmodel.power import POWER_SOURCES, dqb_power
from sysmodel import quantized_measured as measured
from sysmodel.errors import ConfigError
from sysmodel.quantized import GemmCost, GemmModel, Quantization, overtakes_from
from sysmodel.quantized_execution import QuantizedGPUExecution
from sysmodel.simulate import SimulationConfig, simulate
from sysmodel.workload import FixedBatch

K = N = 4096                                   # Fig. 16's GEMM (§6.3)
GROUP = 128
MODELS = ("Llama-3.1-8B", "Qwen3-8B", "Mistral-7B-v0.3")
LENGTH = 1024                                  # Figs. 17-18: input = output = 1,024 tokens (§6.4)
LINKS = {"expanded": True, "unbounded": False}
# Fig. 16's format pairs and the kernels that exist for each (§5.1, §6.3: fused kernels except TorchAO).
PAIRS = {("w4a16", "fp16"): ("gptq", "awq-v1", "awq-v2"), ("w4a16", "bf16"): (),
         ("w8a16", "fp16"): ("gptq",), ("w8a16", "bf16"): ("torchao",)}
PAIR_NAMES = {"w4a16": "INT4", "w8a16": "INT8"}
KERNEL_MODELS = measured.KERNEL_MODELS


@dataclass(frozen=True)
class Scale:
    gemm_rows: tuple[int, ...]
    batches: tuple[int, ...]
    models: tuple[str, ...]


FULL = Scale((1, 2, 4, 8, 16, 32, 64, 128, 256), (1, 2, 4, 8, 16, 32, 64, 128), MODELS)
QUICK = Scale((1, 4, 8, 64, 256), (1, 4, 32, 128), ("Llama-3.1-8B",))


class MeasuredFP16(GemmModel):
    """The 16-bit GEMM at its measured efficiency (the `measured` kernel model's baseline)."""

    def cost(self, m, k, n, bandwidth=None) -> GemmCost:
        memory, tensor, nbytes = self.fp16_gemm(m, k, n, bandwidth)
        seconds = measured.fp16_seconds(self.gpu, m, k, n, bandwidth or self.gpu.memory.bandwidth)
        return GemmCost(seconds, nbytes, memory, tensor, 0.0, "measured")


class MeasuredMarlin(GemmModel):
    """Marlin, the fastest published W4A16 kernel (not in the paper): the FP16 GEMM's measured time over Marlin's
    measured speed-up. A reference row of the measured Fig. 16, in no claim."""

    def cost(self, m, k, n, bandwidth=None) -> GemmCost:
        bandwidth = bandwidth or self.gpu.memory.bandwidth
        nbytes = self.weight_bytes(k, n) + 2 * m * (k + n)
        seconds = measured.fp16_seconds(self.gpu, m, k, n, bandwidth) / measured.series("marlin")(m)
        return GemmCost(seconds, nbytes, nbytes / bandwidth, 0.0, 0.0, "measured")


def gemm_models(table, weights: str, activations: str, kernel_model: str) -> dict[str, GemmModel]:
    """Fig. 16's contenders for one format pair under one kernel model: each fused (or, TorchAO, split) kernel
    that model can price, the DQB both ways, and the 16-bit GEMM."""
    kinds = {}
    for kernel in PAIRS[(weights, activations)]:
        try:
            kinds[kernel] = Quantization(weights, GROUP, "gpu-split" if kernel == "torchao" else "gpu-fused", kernel,
                                         activations, kernel_model=kernel_model)
        except ConfigError:
            continue                                     # measured: nobody published this kernel's timings
    kinds.update({f"dqb-{link}": Quantization(weights, GROUP, "dqb", None, activations, expanded,
                                              kernel_model=kernel_model) for link, expanded in LINKS.items()})
    models = {name: GemmModel.build(A100_PCIE_40GB, quant, table) for name, quant in kinds.items()}
    fp16 = MeasuredFP16 if kernel_model == "measured" else GemmModel
    models[activations] = fp16.build(A100_PCIE_40GB, Quantization(activations="fp16"), table)
    if kernel_model == "measured" and (weights, activations) == ("w4a16", "fp16"):
        models["marlin"] = MeasuredMarlin.build(A100_PCIE_40GB, Quantization(weights, GROUP, "gpu-fused", "gptq",
                                                                             kernel_model=kernel_model), table)
    return models


def with_power(gemm: GemmModel, source: str) -> GemmModel:
    """`gemm` with the DQB power of `source` (`sysmodel.power`): the DQB's power changes its energy, not its time;
    the GPU kernels draw no DQB power."""
    return replace(gemm, dqb_power_w=dqb_power(source).watts) if gemm.quant.dequant == "dqb" else gemm


# The energy column of each power source, and the label of its claims.
ENERGY = {"synthesized": "energy_uj", "paper": "energy_uj_paper"}
POWER_LABEL = {"synthesized": "", "paper": " [paper DQB power]"}


def fig16(scale: Scale, out: Path, table) -> list[Claim]:
    rows, crossover = [], {}
    for kernel_model in KERNEL_MODELS:
        int4 = gemm_models(table, "w4a16", "fp16", kernel_model)
        fused = [int4[k] for k in ("gptq", "awq-v1", "awq-v2") if k in int4]
        for link in LINKS:         # at every integer M, not only the figure's powers of two
            crossover[(kernel_model, link)] = overtakes_from(int4[f"dqb-{link}"], fused, K, N,
                                                             range(1, max(scale.gemm_rows) + 1))
        for (weights, activations) in PAIRS:
            for name, gemm in gemm_models(table, weights, activations, kernel_model).items():
                for m in scale.gemm_rows:
                    cost: GemmCost = gemm.cost(m, K, N)
                    rows.append({"kernel_model": kernel_model, "pair": f"{PAIR_NAMES[weights]}->{activations.upper()}",
                                 "weights": weights,
                                 "activations": activations, "kernel": name, "M": m, "time_us": cost.seconds * 1e6,
                                 **{ENERGY[s]: with_power(gemm, s).energy_j(cost) * 1e6 for s in POWER_SOURCES},
                                 "bound": cost.bound,
                                 "memory_us": cost.memory_s * 1e6, "tensor_us": cost.tensor_s * 1e6,
                                 "cuda_us": cost.cuda_s * 1e6, "hbm_bytes": cost.hbm_bytes})
    write_csv(out / "fig16.csv", rows)
    for kernel_model in KERNEL_MODELS:
        plot_fig16(out / f"fig16{SUFFIX[kernel_model]}.png", [r for r in rows if r["kernel_model"] == kernel_model])
    return [claim for kernel_model in KERNEL_MODELS
            for claim in fig16_claims(scale, [r for r in rows if r["kernel_model"] == kernel_model], kernel_model,
                                      {link: crossover[(kernel_model, link)] for link in LINKS})]


SUFFIX = {"roofline": "", "measured": "_measured"}     # file names and claim labels of each kernel model
LABEL = {"roofline": "", "measured": " [kernels measured]"}


def fig16_claims(scale: Scale, rows: list[dict], kernel_model: str, crossover: dict) -> list[Claim]:
    """`crossover`: per link, the smallest integer M from which the DQB stays ahead of every INT4 fused kernel."""
    fused = [k for k in ("gptq", "awq-v1", "awq-v2") if any(r["kernel"] == k for r in rows)]
    tag = LABEL[kernel_model]
    claims = []
    for link in LINKS:
        dqb = f"dqb-{link}"
        speed, energy = {}, {source: {} for source in POWER_SOURCES}
        for r in rows:
            if r["kernel"] in fused:
                d = _find(rows, r["pair"], dqb, r["M"])
                speed[(r["pair"], r["kernel"], r["M"])] = r["time_us"] / d["time_us"]
                for source, column in ENERGY.items():
                    energy[source][(r["pair"], r["kernel"], r["M"])] = 100 * (1 - d[column] / r[column])
        key = max(speed, key=speed.get)
        claims.append(Claim("16", f"max DQB speed-up over the fused kernels (link {link}){tag}", 7.08, speed[key],
                            "ratio", f"fig16.csv: {key[0]} {key[1]} M={key[2]}"))
        for source, reduction in energy.items():
            key = max(reduction, key=reduction.get)
            claims.append(Claim("16", f"max DQB energy reduction vs the fused kernels, % (link {link}){tag}"
                                      f"{POWER_LABEL[source]}", 90.23, reduction[key], "points",
                                f"fig16.csv: {key[0]} {key[1]} M={key[2]}"))
        small = max(m for m in scale.gemm_rows if m <= 4)
        # The paper's kernel here is AWQ-v2; nobody published its timings, so measured compares the best measured.
        rival = "awq-v2" if "awq-v2" in fused else min(
            fused, key=lambda k: _find(rows, "INT4->FP16", k, small)["time_us"])
        ratio = _find(rows, "INT4->FP16", dqb, small)["time_us"] / _find(rows, "INT4->FP16", rival, small)["time_us"]
        claims.append(Claim("16", f"AWQ-v2 (measured: the best measured kernel) ahead at M <= 4: DQB time / its time "
                                  f"at M={small} (paper: slightly above 1; link {link}){tag}", 1.0, ratio, "ratio",
                            f"fig16.csv: INT4->FP16 {rival}", ">"))
        ahead = [m for m in scale.gemm_rows
                 if all(_find(rows, "INT4->FP16", dqb, m)["time_us"] <= _find(rows, "INT4->FP16", k, m)["time_us"]
                        for k in fused)]
        claims.append(Claim("16", f"smallest M from which the DQB beats every INT4 fused kernel (link {link}){tag}",
                            8, min(ahead) if ahead else math.nan, "ratio",
                            f"fig16.csv: ahead at M in {ahead} of {', '.join(fused)}"))
        top = max(scale.gemm_rows)
        claims.append(Claim("16", f"smallest integer M from which the DQB stays ahead of every INT4 fused kernel "
                                  f"(paper: its grid's 8; link {link}){tag}", 8,
                            math.nan if crossover[link] is None else crossover[link], "ratio",
                            f"every M from 1 to {top}, kernels {', '.join(fused)}"))
        gain = {w: max((v for k, v in speed.items() if k[0] == f"{w}->FP16" and k[1] == "gptq"), default=math.nan)
                for w in ("INT4", "INT8")}
        claims.append(Claim("16", f"max speed-up over GPTQ, INT8 / INT4 (paper: larger for INT8; link {link}){tag}",
                            1.0, gain["INT8"] / gain["INT4"], "ratio",
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
    feeding the tensor cores directly (what Fig. 1 subtracts); under measured kernels, at the FP16 GEMM's
    measured efficiency."""

    def cost(self, m, k, n, bandwidth=None) -> GemmCost:
        memory, tensor, nbytes = self.fp16_gemm(m, k, n, bandwidth, weight_bytes=self.weight_bytes(k, n))
        if self.quant.kernel_model == "measured":
            seconds = measured.fp16_seconds(self.gpu, m, k, n, bandwidth or self.gpu.memory.bandwidth,
                                            self.weight_bytes(k, n))
        else:
            seconds = np.maximum(memory, tensor)
        return GemmCost(seconds, nbytes, memory, tensor, 0.0, "ideal")


def fig1(scale: Scale, out: Path, table) -> list[Claim]:
    hw = PRESETS["a100-pcie-40gb"]
    shard = Shard(resolve_model("Llama-3.1-8B"), 1)
    rows = []
    for kernel_model in KERNEL_MODELS:
        for kernel in ("gptq", "awq-v1"):
            quant = Quantization("w4a16", GROUP, "gpu", kernel, kernel_model=kernel_model)
            gemm = GemmModel.build(A100_PCIE_40GB, quant, table)
            free = FreeDequantization(gemm.gpu, gemm.quant, gemm.sz)
            for length in ((256, LENGTH) if scale is FULL else (LENGTH,)):
                for batch in scale.batches:
                    total, ideal = (run_seconds(QuantizedGPUExecution(hw, shard, g), batch, length)
                                    for g in (gemm, free))
                    rows.append({"kernel_model": kernel_model, "kernel": kernel, "len": length, "batch": batch,
                                 "time_s": total, "dequant_free_s": ideal, "dequant_s": total - ideal,
                                 "dequant_share_pct": 100 * (total - ideal) / total})
    write_csv(out / "fig1.csv", rows)
    figure = Figure(figsize=(6, 4))
    ax = figure.subplots()
    for kernel_model, kernel, length in dict.fromkeys((r["kernel_model"], r["kernel"], r["len"]) for r in rows):
        points = [r for r in rows if (r["kernel_model"], r["kernel"], r["len"]) == (kernel_model, kernel, length)]
        ax.plot([r["batch"] for r in points], [r["dequant_share_pct"] for r in points], marker="o",
                label=f"{kernel}, len = {length}, {kernel_model}")
    ax.axhspan(40, 80, color="grey", alpha=0.2, label="paper: 40-80 %")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch")
    ax.set_ylabel("dequantization share of inference time (%)")
    ax.set_title("Fig. 1: Llama-3.1-8B W4A16 on the A100", fontsize=9)
    ax.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out / "fig1.png", dpi=100)
    claims = []
    for kernel_model in KERNEL_MODELS:
        gptq = [r for r in rows if r["kernel"] == "gptq" and r["len"] == LENGTH and r["kernel_model"] == kernel_model]
        low, high = min(gptq, key=lambda r: r["dequant_share_pct"]), max(gptq, key=lambda r: r["dequant_share_pct"])
        tag = LABEL[kernel_model]
        claims += [Claim("1", f"GPTQ W4A16: dequantization share of inference time, lowest over batches (%){tag}",
                         40, low["dequant_share_pct"], "points", f"fig1.csv: batch {low['batch']}, len {LENGTH}"),
                   Claim("1", f"GPTQ W4A16: dequantization share of inference time, highest over batches (%){tag}",
                         80, high["dequant_share_pct"], "points", f"fig1.csv: batch {high['batch']}, len {LENGTH}")]
    return claims


def end_to_end(scale: Scale, table) -> list[dict]:
    rows = []
    variants = {"gptq": ("gpu", "gptq", True), "awq": ("gpu", "awq-v1", True),
                **{f"dqb-{link}": ("dqb", None, expanded) for link, expanded in LINKS.items()}}
    for kernel_model in KERNEL_MODELS:
        for model in scale.models:
            for weights in ("w4a16", "w8a16"):
                for name, (dequant, kernel, expanded) in variants.items():
                    if kernel == "awq-v1" and weights != "w4a16":
                        continue                                   # AWQ kernels are INT4 only
                    try:
                        quant = Quantization(weights, GROUP, dequant, kernel, link_expanded=expanded,
                                             kernel_model=kernel_model)
                    except ConfigError:
                        continue                                   # measured: nobody published this kernel
                    for batch in scale.batches:
                        config = SimulationConfig(system="gpu", model=resolve_model(model),
                                                  workload=FixedBatch(batch, LENGTH, LENGTH),
                                                  hardware="a100-pcie-40gb", max_batch=batch, quantization=quant,
                                                  power_source="synthesized")
                        summary = simulate(config, table).summary
                        # Only the DQBs' power differs between the power sources.
                        paper = (simulate(replace(config, power_source="paper"), table).summary
                                 if dequant == "dqb" else summary)
                        rows.append({"kernel_model": kernel_model, "model": model, "weights": weights,
                                     "system": name, "batch": batch, "latency_s": summary["e2e_s"]["mean"],
                                     "decode_tok_s": batch / summary["tpot_s"]["p50"],
                                     "output_tok_s": summary["throughput"]["output_tokens_per_s"],
                                     "energy_j_per_token": summary["energy_j"]["per_output_token"],
                                     "energy_j_per_token_paper": paper["energy_j"]["per_output_token"]})
    return rows


def fig17_18(scale: Scale, out: Path, table) -> list[Claim]:
    rows = end_to_end(scale, table)
    write_csv(out / "fig17.csv", rows)
    speedups = []
    for r in rows:
        if r["system"].startswith("dqb"):
            for base in ("gptq", "awq"):
                b = next((x for x in rows if x["system"] == base and all(
                    x[k] == r[k] for k in ("kernel_model", "model", "weights", "batch"))), None)
                if b:
                    speedups.append({"kernel_model": r["kernel_model"], "model": r["model"], "weights": r["weights"],
                                     "dqb": r["system"],
                                     "baseline": base, "batch": r["batch"],
                                     "decode_speedup": r["decode_tok_s"] / b["decode_tok_s"],
                                     "latency_reduction_pct": 100 * (1 - r["latency_s"] / b["latency_s"])})
    write_csv(out / "fig18.csv", speedups)
    plot_e2e(out, rows, speedups, scale)
    claims = []
    for kernel_model in KERNEL_MODELS:
        for link in LINKS:
            mine = [s for s in speedups if s["dqb"] == f"dqb-{link}" and s["kernel_model"] == kernel_model]
            claims += e2e_claims(mine, f"link {link}){LABEL[kernel_model]}")
    return claims


def e2e_claims(mine: list[dict], tag: str) -> list[Claim]:
    """Figs. 17-18's claims from one kernel model's and one link's DQB speed-ups (`tag` closes each label)."""
    best = max(mine, key=lambda s: s["latency_reduction_pct"])
    claims = [Claim("17", f"max end-to-end latency reduction vs GPTQ/AWQ, % ({tag}", 54.68,
                    best["latency_reduction_pct"], "points", _where(best))]
    best = max(mine, key=lambda s: s["decode_speedup"])
    claims.append(Claim("18", f"max decode-throughput speed-up vs GPTQ/AWQ ({tag}", 2.20, best["decode_speedup"],
                        "ratio", _where(best)))
    small = [s for s in mine if s["baseline"] == "gptq" and s["weights"] == "w4a16" and s["batch"] <= 4]
    worst = min(small, key=lambda s: s["decode_speedup"])
    claims.append(Claim("18", f"INT4: GPTQ ahead at batch <= 4, lowest DQB/GPTQ decode speed-up (paper: "
                              f"slightly below 1; {tag}", 1.0, worst["decode_speedup"], "ratio", _where(worst), "<"))
    int8 = [s for s in mine if s["baseline"] == "gptq" and s["weights"] == "w8a16"]
    ahead = sorted({s["batch"] for s in int8 if s["decode_speedup"] >= 1
                    and all(t["decode_speedup"] >= 1 for t in int8 if t["batch"] >= s["batch"])})
    claims.append(Claim("18", f"INT8: smallest batch from which the DQB beats GPTQ (every model; {tag}", 4,
                        min(ahead) if ahead else math.nan, "ratio",
                        f"fig18.csv: ahead at batches {ahead}" if int8 else "no INT8 GPTQ kernel measured"))
    awq = [s for s in mine if s["baseline"] == "awq"]
    best = max(awq, key=lambda s: s["decode_speedup"])
    claims.append(Claim("18", f"batch of the largest decode gap over AWQ ({tag}", 128, best["batch"], "ratio",
                        _where(best)))
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
                for kernel_model, system in dict.fromkeys((r["kernel_model"], r["system"]) for r in rows):
                    points = [r for r in rows if (r["kernel_model"], r["model"], r["weights"], r["system"])
                              == (kernel_model, model, weights, system)]
                    if points:
                        ax.plot([r["batch"] for r in points], [r[key] for r in points], marker="o",
                                label=f"{system}, {kernel_model}", ls="-" if kernel_model == "roofline" else "--")
                ax.set_xscale("log", base=2)
                ax.set_title(f"{model} {PAIR_NAMES[weights]}", fontsize=9)
                ax.set_xlabel("batch")
                ax.set_ylabel(ylabel)
                ax.legend(fontsize=7)
        figure.tight_layout()
        figure.savefig(out / f"{name}.png", dpi=100)
    figure = Figure(figsize=(7, 4))
    ax = figure.subplots()
    for series in dict.fromkeys((s["kernel_model"], s["model"], s["weights"], s["baseline"]) for s in speedups
                                if s["dqb"] == "dqb-expanded"):
        points = [s for s in speedups if (s["kernel_model"], s["model"], s["weights"], s["baseline"]) == series
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


WITHIN = 0.20      # a cell is "within" when ours / paper is within ±20 % (issue 36)


def within(c: Claim) -> str:
    """yes / no / n/a: ours within ±20 % of the paper's value; for a stated relation ("more than", "at most"),
    the relation holds (and, for "slightly", within ±20 % too)."""
    if not math.isfinite(c.ours):
        return "n/a"
    close = abs(c.ours / c.paper - 1) <= WITHIN
    if c.relation == "=":
        return "yes" if close else "no"
    holds = c.ours > c.paper if c.relation == ">" else c.ours < c.paper
    return "yes" if holds and (close or "slightly" not in c.claim) else "no"


# Why a cell is not within ±20 %, per claim (a distinctive part of its text) and kernel model; the sensitivity run
# that shows it is the row's other columns (the other kernel model, the other link assumption). Written from the
# figures' CSVs, not fitted.
MECHANISMS = {
    "max DQB speed-up over the fused kernels": {
        "measured": "no INT8 GPTQ kernel was measured (the paper's 7.08x is against it); measured INT4 AWQ-v1 is held "
                    "at its M = 128 speed-up beyond Marlin's range, and the DQB's FP16 GEMM runs at Vidur's measured "
                    "efficiency, not at its roofline"},
    "max DQB energy reduction": {
        "measured": "follows the speed-up: the measured fused kernels are compared without INT8 GPTQ"},
    "ahead at M <= 4": {
        "roofline": "memory bound at M <= 4: the DQBs return 16-bit weights (3.9x the INT4 bytes) at the stack's "
                    "interface rate, so the DQB path runs at FP16-GEMM speed; the paper's 'slightly' needs a stream "
                    "faster than the interface (link unbounded: the DQB output port, 64 B per cycle at 328 MHz per "
                    "pseudo-channel, binds instead)",
        "measured": "as under roofline: the DQB path is an FP16 GEMM; the measured INT4 kernels run 3.4-3.8x faster "
                    "than FP16 at M = 1 and exllamav2 still 2.9x at M = 4 (Marlin's benchmark)"},
    "smallest M from which the DQB beats": {
        "roofline": "the roofline overlaps CUDA-core dequantization perfectly with the weight stream, so the fused "
                    "kernels stay at INT4 speed until their dequantization binds (M >= 64-256); measured kernels "
                    "fall behind much earlier (kernel model measured)",
        "measured": "exllamav2 (vLLM's GPTQ) still runs 1.5x faster than FP16 at M = 8 in Marlin's measurement, so "
                    "the FP16-speed DQB overtakes it between 8 and 16; AWQ-v1 is overtaken from M = 4. Against "
                    "Marlin (not in the paper; fig16.csv, kernel marlin) the DQB is behind at every M measured (1-128)"},
    "smallest integer M from which": {
        "roofline": "as at the figure's M: the roofline's fused kernels stay at INT4 speed until their dequantization "
                    "binds",
        "measured": "the paper's powers of two put its crossover in (4, 8]; in Marlin's measurement exllamav2 still "
                    "runs 1.5x faster than FP16 at M = 8 and 0.72x at 16 (interpolated in log M between), so the "
                    "FP16-speed DQB overtakes it above 8"},
    "max speed-up over GPTQ, INT8 / INT4": {
        "measured": "no public INT8 GPTQ kernel timings"},
    "share of inference time, lowest": {
        "roofline": "at batch 1 decode is memory bound and a fused kernel's dequantization hides under the weight "
                    "stream; the measured kernels agree (exllamav2 at 0.97x of the ideal INT4 speed-up at M = 1)",
        "measured": "as under roofline: Marlin's benchmark shows the fused kernels near the ideal speed-up at M = 1"},
    "share of inference time, highest": {
        "roofline": "the roofline's fused GPTQ is dequantization-bound only from M = 16 (HFMA2 dot products on CUDA "
                    "cores), the split kernel from 64; measured kernels lose more (kernel model measured)"},
    "max end-to-end latency reduction": {
        "roofline": "the roofline's fused kernels are near INT4 speed up to M = 64, so the DQB gains only where "
                    "dequantization binds (kernel model measured: 61-63 %)"},
    "max decode-throughput speed-up": {
        "roofline": "as Fig. 17: the roofline's fused kernels are too fast (kernel model measured: 2.6-2.8x)",
        "measured": "with the link unbounded the DQBs' stream exceeds the stack interface, beyond the paper's "
                    "(expanded link: 2.63x, within)"},
    "INT4: GPTQ ahead at batch <= 4": {
        "roofline": "at batch <= 4 the DQB path streams 16-bit weights at the interface rate (see Fig. 16, M <= 4): "
                    "GPTQ's INT4 kernel is ~3.5x faster, not 'slightly'",
        "measured": "as under roofline"},
    "INT8: smallest batch from which the DQB beats GPTQ": {
        "roofline": "the roofline prices GPTQ's INT8 kernel (I2F conversion, integer subtract per weight) with full "
                    "overlap: it stays ahead of the FP16-speed DQB until batch 32",
        "measured": "no public INT8 GPTQ kernel timings"},
    "batch of the largest decode gap over AWQ": {
        "measured": "measured AWQ-v1 falls to 0.3x FP16 already at M = 16 and stays there, so its gap to the DQB "
                    "peaks at batch 16, where decode is still weight-bound; attention grows with batch after that"},
}


def mechanism(c: Claim, kernel_model: str) -> str:
    if within(c) == "yes":
        return ""
    text = next((m.get(kernel_model, "") for key, m in MECHANISMS.items() if key in c.claim), "")
    return text or "(no mechanism recorded)"


def write_headline(out: Path, claims: list[Claim], quick: bool) -> str:
    """headline.csv (one row per claim and kernel model, what tests/sysmodel/pinned/streamdq_headline.json pins)
    and headline.md (one row per claim, ours under each kernel model beside the paper's value)."""
    models = {c.claim: next((k for k in KERNEL_MODELS if k != "roofline" and LABEL[k] in c.claim), "roofline")
              for c in claims}
    write_csv(out / "headline.csv", [
        {"figure": c.figure, "claim": c.claim, "kernel_model": models[c.claim], "paper_relation": c.relation,
         "paper": c.paper, "ours": c.ours, "deviation": c.deviation,
         "deviation_kind": "ours/paper" if c.kind == "ratio" else "ours-paper (points)", "within_20pct": within(c),
         "simulation": c.simulation, "mechanism": mechanism(c, models[c.claim])} for c in claims])
    rows = {}
    for c in claims:
        rows.setdefault(c.claim.replace(LABEL[models[c.claim]], ""), {})[models[c.claim]] = c
    heads = " | ".join(f"{k} | ratio | ±20 %" for k in KERNEL_MODELS)
    lines = [f"# StreamDQ study: our figures next to the paper's{' (quick mode: fewer points)' * quick}", "",
             "Ours under each GPU kernel model (`--kernel-model`): `roofline` (instruction counts, perfect overlap) "
             "and `measured` (public kernel benchmarks). Ratio: ours ÷ paper. ±20 %: the ratio within 0.8-1.2 "
             "(for a stated relation, `>` more than or `<` less than, that it holds; 'slightly' also within ±20 %). "
             "Mechanism: why a cell is not; the other columns are its sensitivity runs.", "",
             f"| fig | claim | paper | {heads} | mechanism |",
             "| --- | --- | --- | " + " | ".join("--- | --- | ---" for _ in KERNEL_MODELS) + " | --- |"]
    for base, by_model in rows.items():
        first = next(iter(by_model.values()))
        cells = []
        for k in KERNEL_MODELS:
            c = by_model.get(k)
            ratio = c.ours / c.paper if c and math.isfinite(c.ours) else math.nan
            cells.append(f"{c.ours:.4g} | {ratio:.2f} | {within(c)}" if c and math.isfinite(c.ours)
                         else "n/a | | n/a")
        why = "; ".join(f"{k}: {mechanism(c, k)}" for k, c in by_model.items() if mechanism(c, k))
        paper = f"{'' if first.relation == '=' else first.relation}{first.paper:.4g}"
        lines.append(f"| {first.figure} | {cell(base)} | {paper} | {' | '.join(cells)} | {cell(why)} |")
    text = "\n".join(lines) + "\n"
    (out / "headline.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="basedie study streamdq", description=__doc__.splitlines()[0])
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
