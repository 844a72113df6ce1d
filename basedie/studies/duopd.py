"""Regenerate the DuoPD paper's studies (§4.3 Fig. 9, §6.2–6.7 Figs. 11, 12, 13, 14, 15, 16) with `sysmodel`, and
put our figure next to the paper's for every headline claim.

    basedie study duopd [--out DIR] [--quick] [--only fig11,fig12,...] [--scheduler tcp://HOST:PORT]
                                  [--workers N] [--perf-model M] [--allreduce M] [--allreduce-overlap]
    basedie study duopd --side-by-side DIR1 DIR2 ...   # finished studies' headlines as one table

Per figure: `<fig>.csv` (one row per simulation: its parameters, `status` = "ok" or why it is impossible, the
metrics used) and `<fig>.png`; then `headline.csv` and `headline.md` (claim, paper value, ours, deviation, the
simulation behind ours). Nothing here is fitted to the paper: the model lives in `sysmodel/`, this only sweeps.
Each figure's grid runs through `basedie sweep`'s engine: on a LocalCluster (one worker per core), the Dask cluster
at --scheduler, or in this process with --workers 0.
"""
import argparse
import csv
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import product
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure  # the object API renders PNGs with Agg, no GUI backend involved

from basedie.studies.tables import TOLERANCE, Claim, cell, write_csv
from basedie.sweep import Cluster, compute, simulate_configs
from sysmodel.metrics import qps_at_ttft_multiple, time_between_tokens
from sysmodel.errors import ConfigError
from sysmodel.perf import ALL_REDUCE_MODELS, PERF_MODELS, perf_model
from sysmodel.power import POWER_SOURCES
from sysmodel.config import resolve_hardware
from sysmodel.hardware import with_overrides
from sysmodel.simulate import Result, SimulationConfig
from sysmodel.systems import SYSTEMS
from sysmodel.workload import DEFAULT_LENGTH_CV, FixedBatch, PoissonArrivals

# The paper's three models (§6.1) and the systems of Figs. 11/12 (§6.1 baselines).
MODELS = ("GPT3-175B", "LLaMA2-70B", "Qwen3-235B-A22B")
BASELINES = ("pd-1:1", "pd-3:1", "chunked")
COMPARED = ("duopd", *BASELINES)
POLICIES = ("prefill-first", "decode-first", "mixed")
SM_SYSTEMS = ("duopd", "sm-9:1", "sm-7:3", "sm-5:5")
# Fig. 12 / 9 / 14 requests: Gaussian lengths around the middle of the paper's 8K–32K / 32–512 range (§6.1, §6.3),
# of the workload's default spread (the paper states none).
LATENCY_INPUT, LATENCY_OUTPUT, LATENCY_CV, SEED = 16384, 256, DEFAULT_LENGTH_CV, 0
# A QPS knee is where TTFT reaches this multiple of its lowest-QPS value (§6.3).
KNEE_FACTOR = 3.0
# Fig. 9's load: the paper evaluates the policies "under prefill–decode interference" (§4.3) without a rate. Our
# default (--fig9-load) is half of DuoPD's fixed-batch throughput, so prefill and decode overlap but queues stay short.
FIG9_LOAD = 0.5
# Fig. 9 TBT: the paper's batch 16 at 16K context (§4.3); the request count and output length are our choice:
# 48 requests of 16K → 256 tokens, decode batch capped at 16.
FIG9_TBT = FixedBatch(requests=48, input_len=16384, output_len=256)
# The paper's TBT condition is decode at batch 16 (§4.3). With 256-token outputs a request finishes decoding
# (~1.3 s) before the next 16 prompts are prefilled (~0.5 s each on 8 GPUs), so decode never gets past batch 3;
# with 1,024-token outputs 16 requests decode while the GPU still prefills the queue. TBT is taken over the
# iterations that ran at exactly this batch.
FIG9_TBT_BATCH16 = FixedBatch(requests=48, input_len=16384, output_len=1024)
TBT_BATCH = 16
# Fig. 14 uses the low end of the Fig. 12 grid (§6.5 "even at the lowest QPS"): multiples of the estimate up to this.
FIG14_MODELS = ("GPT3-175B", "Qwen3-235B-A22B")
FIG14_MAX_LOAD = 0.5
# Fig. 15, our workload (the paper does not state one): 32 prompts of 16K → 128 tokens, decode batch capped at
# 16. Prefill-bound: each answer is decoded before the next prompt is prefilled, so decode batches stay near 1
# (`decode_batch_mean`).
FIG15_WORKLOAD = FixedBatch(requests=32, input_len=16384, output_len=128)
# Fig. 13 (§6.4): the paper names its workloads prefill- and decode-heavy without their lengths; §6.2 calls
# L_o = 32 prefill-heavy and L_o = 512 its long outputs, so those two, at the middle input of §6.1's 8K–32K.
# Systems: PD 1:1 on GPUs (the normalization), on bank-level PIM and on Duplex, DuoPD and the 4x variants.
FIG13_INPUT = 16384
FIG13_WORKLOADS = (("prefill-heavy", 32), ("decode-heavy", 512))
FIG13_SYSTEMS = ("pd-1:1", "pd-1:1-pim", "pd-1:1-duplex", "pd-1:1-duplex-4x-compute", "duopd", "duopd-4x-bw",
                 "duopd-4x-bw-4x-compute")
# Fig. 16: GPT3-175B, one batch of 16 requests per output length (§6.7).
FIG16_OUTPUTS = (32, 128, 512)
FIG16_INPUT, FIG16_REQUESTS = 16384, 16
# The label of a Fig. 16 claim per power source of the PNMs (`--power-source`; the default first).
POWER_LABEL = {"synthesized": "", "paper": " [paper PNM power]"}


@dataclass(frozen=True)
class Scale:
    """What `--quick` shrinks: the Fig. 11 grid, the QPS grid (multiples of DuoPD's fixed-batch throughput) and
    the number of Poisson requests."""
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    batches: tuple[int, ...]
    qps_multiples: tuple[float, ...]
    requests: int


# Full: the paper's Fig. 11 grid (§6.1: 8K–32K in, 32–512 out, batch 16/32); QPS from 10 % of the estimate (no
# queueing: the knee's baseline) to 3x, past every system's knee (each fig12.csv series has a finite ttft_3x_qps).
FULL = Scale((8192, 16384, 32768), (32, 128, 512), (16, 32), (0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0), 200)
# Quick: the corners every headline row needs, four QPS points, 40 requests.
QUICK = Scale((16384,), (32, 512), (16, 32), (0.1, 0.5, 1.0, 3.0), 40)


@dataclass(frozen=True)
class Run:
    """One simulation: its configuration and result, or why it is impossible (`ConfigError`)."""
    config: SimulationConfig
    result: Result | None
    error: str = ""

    @property
    def summary(self) -> dict:
        return self.result.summary if self.result else {}


RUNS: dict[SimulationConfig, Run] = {}    # every simulation once (figures share some runs)
CLIENT = []                               # the Dask client main() runs the grids on (none: this process)
# How a GPU operator is priced in every run (`--perf-model`; `sysmodel.perf`), and its all-reduces
# (`--allreduce`, `--allreduce-overlap`).
PERF_MODEL = "roofline"
COLLECTIVES = {"all_reduce": "bandwidth", "overlap": False}
# The what-if every run is changed by while a sensitivity reruns its figures (none: the study itself).
CHANGE: list[Callable[[SimulationConfig], SimulationConfig]] = []


def prepared(config: SimulationConfig) -> SimulationConfig:
    """`config` as the study runs it: under `PERF_MODEL` and `COLLECTIVES`, then the current sensitivity's change."""
    config = replace(config, perf_model=PERF_MODEL, **COLLECTIVES)
    return CHANGE[0](config) if CHANGE else config


def prefetch(configs: Iterable[SimulationConfig]) -> None:
    """Simulate the configurations not yet run (as `prepared`), in batches on the cluster (a figure's whole grid at
    once)."""
    todo = list(dict.fromkeys(c for c in map(prepared, configs) if c not in RUNS))

    def done(batch: list, results: list) -> None:
        RUNS.update((config, Run(config, *outcome)) for config, outcome in zip(batch, results))

    compute(simulate_configs, todo, CLIENT[0] if CLIENT else None, done, progress=False)


def run(config: SimulationConfig) -> Run:
    """The run of `config` (as `prepared`), or why it is impossible (`ConfigError`)."""
    config = prepared(config)
    prefetch([config])
    return RUNS[config]


def metric(run: Run, *path: str) -> float:
    """A value from the summary, NaN for an impossible run."""
    value = run.summary
    for key in path:
        if key not in value:
            return math.nan
        value = value[key]
    return float(value)


def row(run: Run, **metrics: float | str) -> dict:
    """A CSV row: the simulation's parameters, its status, and the metrics a figure uses."""
    config, workload = run.config, run.config.workload
    return {"model": config.model, "system": config.system, "mmu_policy": config.mmu_policy,
            "max_batch": config.max_batch, "workload": type(workload).__name__, "requests": workload.requests,
            "input_len": workload.input_len, "output_len": workload.output_len,
            "qps": getattr(workload, "qps", math.nan), "status": "ok" if run.result else f"impossible: {run.error}",
            **metrics}


def geomean(values: Iterable[float]) -> float:
    values = [v for v in values if math.isfinite(v)]
    return float(np.exp(np.mean(np.log(values)))) if values else math.nan


def extreme(values: dict, pick: Callable = max) -> tuple:
    """(key, value) of the largest (or smallest) finite value; (None, NaN) when there is none."""
    finite = {k: v for k, v in values.items() if math.isfinite(v)}
    if not finite:
        return None, math.nan
    key = pick(finite, key=finite.get)
    return key, finite[key]


def poisson(qps: float, requests: int) -> PoissonArrivals:
    return PoissonArrivals(qps, requests, LATENCY_INPUT, LATENCY_OUTPUT, LATENCY_CV, SEED)


def estimate_config(model: str) -> SimulationConfig:
    return SimulationConfig(system="duopd", model=model, workload=FixedBatch(16, LATENCY_INPUT, LATENCY_OUTPUT),
                            max_batch=16)


def qps_estimate(model: str) -> float:
    """A first estimate of capacity (QPS grids are multiples of it): DuoPD's throughput on one batch of 16
    latency-study requests."""
    return metric(run(estimate_config(model)), "throughput", "requests_per_s")


def decode_batches(result: Result) -> dict[float, int]:
    """Batch size of every decode iteration: the tokens (after each request's first) that share its end time."""
    counts: dict[float, int] = {}
    for request in result.requests:
        for t in request.token_times[1:]:
            counts[t] = counts.get(t, 0) + 1
    return counts


def mean_decode_batch(run: Run) -> float:
    """How full decode iterations were on average (`max_batch` is only a cap)."""
    return float(np.mean(list(decode_batches(run.result).values()))) if run.result else math.nan


def tbt_at_batch(result: Result, batch: int) -> np.ndarray:
    """Gaps between consecutive tokens of a request whose iteration ran at exactly `batch` requests."""
    counts = decode_batches(result)
    return np.array([b - a for r in result.requests for a, b in zip(r.token_times, r.token_times[1:])
                     if counts[b] == batch])


def note_impossible(ax, rows: Sequence[dict], label: Callable[[dict], str]) -> None:
    """Name the impossible runs on the plot instead of dropping them silently."""
    missing = [label(r) for r in rows if r["status"] != "ok"]
    if missing:
        ax.text(0.01, 0.01, "impossible: " + ", ".join(missing), transform=ax.transAxes, fontsize=6, color="red",
                va="bottom", wrap=True)


def latency_sweep(figure: str, models: Sequence[str], systems: Sequence[str], multiples: Sequence[float],
                  requests: int) -> list[dict]:
    """Poisson runs at `multiples` of each model's QPS estimate; p50 TTFT/TPOT/E2E and each series' knee (the QPS
    at which p50 TTFT reaches `KNEE_FACTOR` x its lowest-QPS value)."""
    rows = []
    prefetch(estimate_config(model) for model in models)
    prefetch(SimulationConfig(system=system, model=model, workload=poisson(m * qps_estimate(model), requests))
             for model, system, m in product(models, systems, multiples))
    for model, system in product(models, systems):
        estimate = qps_estimate(model)
        runs = [run(SimulationConfig(system=system, model=model,
                                     workload=poisson(m * estimate, requests))) for m in multiples]
        ok = [(r.config.workload.qps, metric(r, "ttft_s", "p50")) for r in runs if r.result]
        knee = qps_at_ttft_multiple(*zip(*ok), factor=KNEE_FACTOR) if len(ok) > 1 else math.nan
        rows += [row(r, figure=figure, qps_multiple=m, ttft_p50_s=metric(r, "ttft_s", "p50"),
                     tpot_p50_s=metric(r, "tpot_s", "p50"), e2e_p50_s=metric(r, "e2e_s", "p50"), ttft_3x_qps=knee)
                 for m, r in zip(multiples, runs)]
    return rows


def series(rows: Sequence[dict], key: str, **match) -> tuple[list[float], list[float]]:
    """(qps, value) of the rows matching `match`, in QPS order."""
    chosen = sorted((r["qps"], r[key]) for r in rows if all(r[k] == v for k, v in match.items()))
    return [q for q, _ in chosen], [v for _, v in chosen]


def latency_plot(path: Path, rows: Sequence[dict], models: Sequence[str], systems: Sequence[str]) -> None:
    fig = Figure(figsize=(13, 3.2 * len(models)))
    axes = fig.subplots(len(models), 3, squeeze=False)
    for i, model in enumerate(models):
        for j, (key, name) in enumerate((("ttft_p50_s", "p50 TTFT (s)"), ("tpot_p50_s", "p50 TPOT (s)"),
                                         ("e2e_p50_s", "p50 E2E (s)"))):
            ax = axes[i, j]
            for system in systems:
                ax.plot(*series(rows, key, model=model, system=system), marker="o", label=system)
            ax.set(title=f"{model}: {name}", xlabel="QPS", yscale="log")
            note_impossible(ax, [r for r in rows if r["model"] == model],
                            lambda r: f"{r['system']}@{r['qps']:.2f}")
        axes[i, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def normalized_bars(path: Path, rps: dict, cells: list[tuple], systems: Sequence[str], tick: Callable[[tuple], str],
                    what: str, width_in: float, legend: tuple[int, int]) -> None:
    """One panel per model: each system's requests/s over PD 1:1's in every cell (`rps` keyed by (model, system,
    *cell)); an impossible run is marked ×. `legend` is (font size, columns)."""
    fig = Figure(figsize=(width_in, 3.2 * len(MODELS)))
    axes = fig.subplots(len(MODELS), 1, squeeze=False)[:, 0]
    width = 0.8 / len(systems)
    for ax, model in zip(axes, MODELS):
        for n, system in enumerate(systems):
            heights = [rps[(model, system, *c)] / rps[(model, "pd-1:1", *c)] for c in cells]
            x = np.arange(len(cells)) + n * width
            ax.bar(x, np.nan_to_num(heights), width, label=system)
            for xi, h in zip(x, heights):
                if not math.isfinite(h):
                    ax.text(xi, 0.02, "×", ha="center", color="red")     # impossible configuration
        ax.set_xticks(np.arange(len(cells)) + 0.4 - width / 2, [tick(c) for c in cells], fontsize=7)
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.set(title=f"{model}: throughput normalized to PD 1:1 ({what})", ylabel="normalized requests/s")
        ax.legend(fontsize=legend[0], ncol=legend[1])
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def fig11(scale: Scale, out: Path) -> list[Claim]:
    """Throughput (requests/s) of every system per model, input, output and batch; normalized to PD 1:1."""
    grid = list(product(MODELS, scale.inputs, scale.outputs, scale.batches))
    configs = {(m, s, i, o, b): SimulationConfig(system=s, model=m, workload=FixedBatch(b, i, o), max_batch=b)
               for (m, i, o, b), s in product(grid, COMPARED)}
    prefetch(configs.values())
    runs = {k: run(c) for k, c in configs.items()}
    rps = {k: metric(r, "throughput", "requests_per_s") for k, r in runs.items()}
    rows = [row(r, figure="fig11", requests_per_s=rps[k], normalized_to_pd_1_1=rps[k] / rps[(k[0], "pd-1:1", *k[2:])],
                decode_batch_mean=mean_decode_batch(r)) for k, r in runs.items()]
    write_csv(out / "fig11.csv", rows)

    normalized_bars(out / "fig11.png", rps, list(product(scale.inputs, scale.outputs, scale.batches)), COMPARED,
                    lambda cell: f"{cell[0] // 1024}K/{cell[1]}\nB{cell[2]}", "input/output, batch; × impossible",
                    max(8, 0.9 * len(grid) / len(MODELS)), legend=(7, len(COMPARED)))

    speedup = {(m, s, i, o, b): rps[(m, "duopd", i, o, b)] / rps[(m, s, i, o, b)]
               for m, i, o, b in grid for s in BASELINES}

    def over(pick: Callable, **match) -> tuple:
        keys = ("model", "system", "input", "output", "batch")
        chosen = {k: v for k, v in speedup.items() if all(k[keys.index(f)] in allowed for f, allowed in match.items())}
        return extreme(chosen, pick)

    def cite(key) -> str:
        return "fig11.csv: none possible" if key is None else (
            f"fig11.csv: {key[0]} duopd ÷ {key[1]}, input {key[2]}, output {key[3]}, batch {key[4]}")

    claims = []
    paper_average = {"GPT3-175B": (1.46, 2.23), "LLaMA2-70B": (1.29, 1.61), "Qwen3-235B-A22B": (1.45, 1.78)}
    for model in MODELS:
        average = {s: geomean(v for k, v in speedup.items() if k[:2] == (model, s)) for s in BASELINES}
        cells = sum(1 for k in speedup if k[:2] == (model, BASELINES[0]))
        for end, pick, paper in (("low", min, paper_average[model][0]), ("high", max, paper_average[model][1])):
            base, value = extreme(average, pick)
            claims.append(Claim("11", f"{model}: average speed-up over the baselines, {end} end (geometric mean over "
                                      f"the configurations per baseline, then {pick.__name__} over baselines)",
                                paper, value, "ratio", f"fig11.csv: geomean of {cells} configurations vs {base}"))
    for base, paper in (("pd-1:1", 1.76), ("pd-3:1", 2.23)):
        key, value = over(max, system=(base,))
        claims.append(Claim("11", f"max speed-up over {base} (all models and configurations)", paper, value, "ratio",
                            cite(key)))
    ranges = ((("pd-3:1",), (32,), None, (1.25, 1.60), "output 32 (prefill-heavy) vs PD 3:1"),
              (("chunked",), (32,), None, (1.08, 2.42), "output 32 (prefill-heavy) vs chunked"),
              (("pd-3:1", "chunked"), (512,), None, (1.31, 3.92), "output 512 vs PD 3:1 and chunked"),
              (BASELINES, (512,), (32,), (1.31, 3.44), "output 512 at batch 32 vs every baseline"))
    for systems, outputs, batches, (low, high), text in ranges:
        match = {"system": systems, "output": outputs} | ({"batch": batches} if batches else {})
        for end, pick, paper in (("lowest", min, low), ("highest", max, high)):
            key, value = over(pick, **match)
            claims.append(Claim("11", f"{text}: {end} speed-up over models, inputs"
                                      f"{', systems' if len(systems) > 1 else ''}{'' if batches else ', batches'}",
                                paper, value, "ratio", cite(key)))
    return claims


def fig12(scale: Scale, out: Path) -> list[Claim]:
    """p50 TTFT, TPOT and E2E vs QPS (Poisson arrivals), and the QPS at which TTFT reaches 3x its lowest-QPS value."""
    rows = latency_sweep("fig12", MODELS, COMPARED, scale.qps_multiples, scale.requests)
    write_csv(out / "fig12.csv", rows)
    latency_plot(out / "fig12.png", rows, MODELS, COMPARED)

    def lowest(model: str, system: str) -> dict:
        return min((r for r in rows if r["model"] == model and r["system"] == system), key=lambda r: r["qps"])

    claims = []
    for base, paper in (("pd-1:1", 2.13), ("pd-3:1", 1.39), ("chunked", 3.12)):
        ratios = {m: lowest(m, "duopd")["ttft_3x_qps"] / lowest(m, base)["ttft_3x_qps"] for m in MODELS}
        model, value = extreme(ratios)
        claims.append(Claim("12", f"supported QPS (TTFT at {KNEE_FACTOR:g}x its lowest-QPS value) duopd ÷ {base}, "
                                  f"max over models", paper, value, "ratio",
                            f"fig12.csv: {model}, knees {lowest(model, 'duopd')['ttft_3x_qps']:.3g} vs "
                            f"{lowest(model, base)['ttft_3x_qps']:.3g} QPS" if model else "fig12.csv: no knee"))
    for base, paper in (("pd-1:1", 42.61), ("pd-3:1", 77.66)):
        cuts = {m: 100 * (1 - lowest(m, "duopd")["tpot_p50_s"] / lowest(m, base)["tpot_p50_s"]) for m in MODELS}
        model, value = extreme(cuts)
        claims.append(Claim("12", f"p50 TPOT reduction vs {base} at the lowest QPS (no backlog), max over models (%)",
                            paper, value, "points",
                            f"fig12.csv: {model} at {lowest(model, base)['qps']:.3g} QPS" if model else "fig12.csv"))
    return claims


def fig9(scale: Scale, out: Path, load: float = FIG9_LOAD) -> list[Claim]:
    """MMU policies: p50 TTFT/TPOT per model at `load` × DuoPD's estimated capacity, and GPT3-175B TBT while the
    GPU keeps prefilling."""
    rows = []
    prefetch(estimate_config(model) for model in MODELS)
    prefetch([SimulationConfig(system="duopd", model=model,
                               workload=poisson(load * qps_estimate(model), scale.requests), mmu_policy=p)
              for model, p in product(MODELS, POLICIES)]
             + [SimulationConfig(system="duopd", model="GPT3-175B", workload=w, mmu_policy=p, max_batch=TBT_BATCH)
                for w, p in product((FIG9_TBT, FIG9_TBT_BATCH16), POLICIES)])
    for model in MODELS:
        qps = load * qps_estimate(model)
        runs = {p: run(SimulationConfig(system="duopd", model=model, workload=poisson(qps, scale.requests),
                                        mmu_policy=p)) for p in POLICIES}
        base = runs["prefill-first"]
        rows += [row(r, figure="fig9", study="policy-latency", ttft_p50_s=metric(r, "ttft_s", "p50"),
                     tpot_p50_s=metric(r, "tpot_s", "p50"),
                     ttft_vs_prefill_first=metric(r, "ttft_s", "p50") / metric(base, "ttft_s", "p50"),
                     tpot_vs_prefill_first=metric(r, "tpot_s", "p50") / metric(base, "tpot_s", "p50"))
                 for r in runs.values()]
    tbt = {}
    tbt_studies = (("tbt-issue-workload", FIG9_TBT, None), ("tbt-batch16", FIG9_TBT_BATCH16, TBT_BATCH))
    for study, workload, batch in tbt_studies:
        for policy in POLICIES:
            r = run(SimulationConfig(system="duopd", model="GPT3-175B", workload=workload, mmu_policy=policy,
                                     max_batch=TBT_BATCH))
            gaps = (tbt_at_batch(r.result, batch) if batch else time_between_tokens(r.result.requests)) \
                if r.result else np.array([])
            batches = list(decode_batches(r.result).values()) if r.result else [math.nan]
            p50, p99 = (float(np.percentile(gaps, q)) if gaps.size else math.nan for q in (50, 99))
            tbt[(study, policy)] = (p50, p99)
            rows.append(row(r, figure="fig9", study=study, tbt_at_batch=batch or "all", tbt_gaps=gaps.size,
                            tbt_p50_s=p50, tbt_p99_s=p99, decode_batch_p50=float(np.median(batches)),
                            decode_batch_max=float(np.max(batches))))
    write_csv(out / "fig9.csv", rows)

    fig = Figure(figsize=(13, 3.6))
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2, 1]})
    latency = [r for r in rows if r["study"] == "policy-latency"]
    width = 0.8 / (2 * len(POLICIES))
    for n, (policy, key) in enumerate(product(POLICIES, ("ttft_vs_prefill_first", "tpot_vs_prefill_first"))):
        values = [next(r[key] for r in latency if r["model"] == m and r["mmu_policy"] == policy) for m in MODELS]
        left.bar(np.arange(len(MODELS)) + n * width, values, width, label=f"{policy} {key.split('_')[0].upper()}")
    left.set_xticks(np.arange(len(MODELS)) + 0.4 - width / 2, MODELS)
    left.set(title=f"p50 TTFT / TPOT normalized to prefill-first (Poisson, {load:g}x DuoPD estimate)",
             ylim=(0, 1.4))
    left.legend(fontsize=7, ncol=3, loc="upper center")
    note_impossible(left, latency, lambda r: f"{r['model']} {r['mmu_policy']}")
    x = np.arange(len(POLICIES))
    for n, (name, index) in enumerate((("p50", 0), ("p99", 1))):
        right.bar(x + 0.4 * n, [1e3 * tbt[("tbt-batch16", p)][index] for p in POLICIES], 0.4, label=f"{name} TBT")
    right.set_xticks(x + 0.2, POLICIES)
    right.set(title=f"GPT3-175B TBT at batch {TBT_BATCH}, 16K context", ylabel="ms")
    right.set_ylim(0, 1.3 * right.get_ylim()[1])
    right.legend(fontsize=7, ncol=2, loc="upper center")
    fig.tight_layout()
    fig.savefig(out / "fig9.png", dpi=110)

    sim = (f"fig9.csv: tbt-batch16, GPT3-175B FixedBatch({FIG9_TBT_BATCH16.requests}, {FIG9_TBT_BATCH16.input_len}, "
           f"{FIG9_TBT_BATCH16.output_len}) max_batch {TBT_BATCH}, prefill-first, iterations at batch {TBT_BATCH}")
    spreads = {}
    for model in MODELS:
        mine = [r for r in latency if r["model"] == model]
        spread = [max(r[k] for r in mine) / min(r[k] for r in mine) for k in ("ttft_p50_s", "tpot_p50_s")]
        spreads[model] = (spread[0] / spread[1], *spread)
    model, (value, ttft_spread, tpot_spread) = min(spreads.items(), key=lambda item: item[1][0])
    return [
        Claim("9", "GPT3-175B p50 TBT, prefill-first, batch 16, 16K context (ms)", 15.71,
              1e3 * tbt[("tbt-batch16", "prefill-first")][0], "ratio", sim),
        Claim("9", "GPT3-175B p99 TBT, prefill-first, batch 16, 16K context (ms)", 17.18,
              1e3 * tbt[("tbt-batch16", "prefill-first")][1], "ratio", sim),
        Claim("9", "TTFT more sensitive to the policy than TPOT: (max/min p50 TTFT over policies) ÷ (max/min p50 "
                   "TPOT), min over models", 1.0, value, "ratio",
              f"fig9.csv: policy-latency, {model}: TTFT spread {ttft_spread:.3f}, TPOT spread {tpot_spread:.3f}",
              relation=">"),
    ]


def fig14(scale: Scale, out: Path) -> list[Claim]:
    """SM partitioning vs DuoPD: p50 TPOT, TTFT, E2E at the low end of the Fig. 12 QPS grid."""
    multiples = [m for m in scale.qps_multiples if m <= FIG14_MAX_LOAD]
    rows = latency_sweep("fig14", FIG14_MODELS, SM_SYSTEMS, multiples, scale.requests)
    write_csv(out / "fig14.csv", rows)
    latency_plot(out / "fig14.png", rows, FIG14_MODELS, SM_SYSTEMS)

    def at_lowest(model: str, system: str, key: str) -> float:
        return min((r for r in rows if r["model"] == model and r["system"] == system), key=lambda r: r["qps"])[key]

    claims = []
    checks = (("sm-5:5", "ttft_p50_s", {"GPT3-175B": 1.93, "Qwen3-235B-A22B": 1.66}, "=", "TTFT"),
              ("sm-9:1", "tpot_p50_s", {m: 5.0 for m in FIG14_MODELS}, ">", "TPOT (paper: over 5x)"),
              ("sm-5:5", "tpot_p50_s", {m: 1.0 for m in FIG14_MODELS}, "≈", "TPOT (paper: comparable)"),
              ("sm-9:1", "ttft_p50_s", {m: 1.0 for m in FIG14_MODELS}, "≈", "TTFT (paper: matches)"))
    for system, key, paper, relation, name in checks:
        for model in FIG14_MODELS:
            value = at_lowest(model, system, key) / at_lowest(model, "duopd", key)
            lowest = multiples[0] * qps_estimate(model)
            claims.append(Claim("14", f"{model}: {system} ÷ DuoPD p50 {name} at the lowest QPS", paper[model], value,
                                "ratio", f"fig14.csv: {model} {system} vs duopd at {lowest:.3g} QPS", relation))
    return claims


def server_utilization(run: Run, prefix: str) -> dict:
    """The utilization of the one server whose name starts with `prefix` (NaNs when impossible)."""
    servers = run.summary.get("utilization", {}).get("by_server", {})
    missing = {"compute": math.nan, "hbm_bandwidth": math.nan}
    return next((v for k, v in servers.items() if k.startswith(prefix)), missing)


def fig15(scale: Scale, out: Path) -> list[Claim]:
    """GPU compute and HBM bandwidth utilization: DuoPD's whole machine vs PD 1:1's prefill and decode instances,
    each against its own peak (DuoPD: 8 GPUs' FLOP/s and all 64 stacks' bandwidth, GPU and PNM bytes together;
    a PD instance: its 4 GPUs and their 32 stacks), over the run's makespan."""
    rows, util = [], {}
    prefetch(SimulationConfig(system=s, model=m, workload=FIG15_WORKLOAD,
                              max_batch=16) for m, s in product(MODELS, ("duopd", "pd-1:1")))
    for model in MODELS:
        duopd = run(SimulationConfig(system="duopd", model=model, workload=FIG15_WORKLOAD, max_batch=16))
        pd = run(SimulationConfig(system="pd-1:1", model=model, workload=FIG15_WORKLOAD, max_batch=16))
        prefill, decode = server_utilization(pd, "prefill instance"), server_utilization(pd, "decode instance")
        util[model] = {"duopd": (metric(duopd, "utilization", "gpu_compute"),
                                 metric(duopd, "utilization", "hbm_bandwidth")),
                       "prefill": (prefill["compute"], prefill["hbm_bandwidth"]),
                       "decode": (decode["compute"], decode["hbm_bandwidth"])}
        for r, part, label in ((duopd, "duopd", "DuoPD (8 GPUs + 64 PNMs)"),
                               (pd, "prefill", "PD 1:1 prefill instance (TP4)"),
                               (pd, "decode", "PD 1:1 decode instance (TP4)")):
            rows.append(row(r, figure="fig15", part=label, gpu_compute=util[model][part][0],
                            hbm_bandwidth=util[model][part][1], decode_batch_mean=mean_decode_batch(r)))
    write_csv(out / "fig15.csv", rows)

    fig = Figure(figsize=(11, 3.6))
    for ax, index, name in zip(fig.subplots(1, 2), (0, 1), ("GPU compute", "HBM bandwidth")):
        for n, (part, label) in enumerate((("duopd", "DuoPD"), ("prefill", "PD 1:1 prefill instance"),
                                           ("decode", "PD 1:1 decode instance"))):
            ax.bar(np.arange(len(MODELS)) + 0.27 * n, [100 * util[m][part][index] for m in MODELS], 0.27, label=label)
        ax.set_xticks(np.arange(len(MODELS)) + 0.27, MODELS)
        ax.set(title=f"{name} utilization (% of own peak)", ylabel="%")
        ax.legend(fontsize=7)
        note_impossible(ax, rows, lambda r: f"{r['model']} {r['system']}")
    fig.tight_layout()
    fig.savefig(out / "fig15.png", dpi=110)

    sim = f"fig15.csv: FixedBatch({FIG15_WORKLOAD.requests}, {FIG15_WORKLOAD.input_len}, " \
          f"{FIG15_WORKLOAD.output_len}) max_batch 16"
    compute_gap = {m: 100 * abs(u["duopd"][0] - u["prefill"][0]) for m, u in util.items()}
    compute_ratio = {m: u["duopd"][0] / u["decode"][0] for m, u in util.items()}
    hbm_gap = {m: 100 * abs(u["duopd"][1] - u["decode"][1]) for m, u in util.items()}
    hbm_ratio = {m: u["duopd"][1] / u["prefill"][1] for m, u in util.items()}
    claims = []
    for text, values, pick, paper, kind, relation in (
            ("GPU compute utilization, DuoPD vs PD prefill instance: absolute difference, max over models (points)",
             compute_gap, max, 1.0, "points", "<"),
            ("DuoPD ÷ PD decode instance GPU compute utilization, lowest over models", compute_ratio, min, 9.50,
             "ratio", "="),
            ("DuoPD ÷ PD decode instance GPU compute utilization, highest over models", compute_ratio, max, 30.62,
             "ratio", "="),
            ("HBM bandwidth utilization, DuoPD vs PD decode instance: absolute difference, max over models (points)",
             hbm_gap, max, 5.0, "points", "<"),
            ("DuoPD ÷ PD prefill instance HBM bandwidth utilization, max over models", hbm_ratio, max, 10.60,
             "ratio", "=")):
        model, value = extreme(values, pick)
        claims.append(Claim("15", text, paper, value, kind, f"{sim}, {model}", relation))
    return claims


def fig16(scale: Scale, out: Path) -> list[Claim]:
    """GPT3-175B energy, DuoPD vs PD 1:1, split into prefill (servers named "prefill…") and decode (the rest: the
    decode server and, for PD, the NVLink KV transfer the paper counts against decoding, §6.7); the PNMs' power
    from the synthesis table (the default) and, in the claims marked `[paper PNM power]`, DuoPD's 6.45 W."""
    configs = {(o, s, p): SimulationConfig(system=s, model="GPT3-175B", power_source=p,
                                           workload=FixedBatch(FIG16_REQUESTS, FIG16_INPUT, o), max_batch=16)
               for o, s, p in product(FIG16_OUTPUTS, ("pd-1:1", "duopd"), POWER_SOURCES)}
    prefetch(configs.values())
    runs = {k: run(c) for k, c in configs.items()}
    energy = {}
    for key, r in runs.items():
        parts = r.summary.get("energy_j", {}).get("by_server", {})
        prefill = sum(v for k, v in parts.items() if k.startswith("prefill")) if r.result else math.nan
        total = metric(r, "energy_j", "total")
        energy[key] = (total, prefill, total - prefill)
    rows = []
    for (output, system, source), r in runs.items():
        total, prefill, decode = energy[(output, system, source)]
        reference = energy[(output, "pd-1:1", source)][0]
        rows.append(row(r, figure="fig16", power_source=source, energy_j=total, prefill_j=prefill, decode_j=decode,
                        normalized_total=total / reference, normalized_prefill=prefill / reference,
                        normalized_decode=decode / reference))
    write_csv(out / "fig16.csv", rows)

    fig = Figure(figsize=(7, 3.6))
    ax = fig.subplots()
    for n, system in enumerate(("pd-1:1", "duopd")):
        x = np.arange(len(FIG16_OUTPUTS)) + 0.4 * n
        mine = [r for r in rows if r["system"] == system and r["power_source"] == "synthesized"]
        ax.bar(x, [r["normalized_prefill"] for r in mine], 0.4, label=f"{system} prefill")
        ax.bar(x, [r["normalized_decode"] for r in mine], 0.4, bottom=[r["normalized_prefill"] for r in mine],
               label=f"{system} decode")
    ax.set_xticks(np.arange(len(FIG16_OUTPUTS)) + 0.2, [f"Lo={o}" for o in FIG16_OUTPUTS])
    ax.set(title="GPT3-175B energy normalized to PD 1:1 (synthesized PNM power)", ylabel="normalized energy")
    ax.legend(fontsize=7)
    note_impossible(ax, [r for r in rows if r["power_source"] == "synthesized"],
                    lambda r: f"{r['system']} Lo={r['output_len']}")
    fig.tight_layout()
    fig.savefig(out / "fig16.png", dpi=110)

    claims = []
    for source in POWER_SOURCES:
        label = POWER_LABEL[source]
        for output, paper in zip(FIG16_OUTPUTS, (2.1, 14.8, 37.9)):
            value = 100 * (1 - energy[(output, "duopd", source)][0] / energy[(output, "pd-1:1", source)][0])
            claims.append(Claim("16", f"end-to-end energy reduction vs PD 1:1, output {output} (%){label}", paper,
                                value, "points", f"fig16.csv: GPT3-175B FixedBatch({FIG16_REQUESTS}, {FIG16_INPUT}, "
                                                 f"{output}), power_source {source}"))
        share = float(np.mean([100 * energy[(o, "duopd", source)][2] / energy[(o, "pd-1:1", source)][2]
                               for o in FIG16_OUTPUTS]))
        claims.append(Claim("16", "DuoPD decode energy as % of PD 1:1 decode energy (incl. KV transfer), mean over "
                                  f"outputs{label}", 32.4, share, "points",
                            f"fig16.csv: outputs {', '.join(map(str, FIG16_OUTPUTS))}, power_source {source}"))
    return claims


def fig13(scale: Scale, out: Path) -> list[Claim]:
    """Throughput of DuoPD, PD 1:1 on GPUs, on bank-level PIM and on Duplex, and the 4x variants (§6.4), per model,
    workload and batch; normalized to PD 1:1 on GPUs."""
    grid = list(product(MODELS, FIG13_WORKLOADS, scale.batches))
    configs = {(m, s, w, b): SimulationConfig(system=s, model=m, workload=FixedBatch(b, FIG13_INPUT, o), max_batch=b)
               for (m, (w, o), b), s in product(grid, FIG13_SYSTEMS)}
    prefetch(configs.values())
    runs = {k: run(c) for k, c in configs.items()}
    rps = {k: metric(r, "throughput", "requests_per_s") for k, r in runs.items()}
    rows = [row(r, figure="fig13", workload_kind=k[2], requests_per_s=rps[k],
                normalized_to_pd_1_1=rps[k] / rps[(k[0], "pd-1:1", *k[2:])], decode_batch_mean=mean_decode_batch(r))
            for k, r in runs.items()]
    write_csv(out / "fig13.csv", rows)

    normalized_bars(out / "fig13.png", rps, list(product((w for w, _ in FIG13_WORKLOADS), scale.batches)),
                    FIG13_SYSTEMS, lambda cell: f"{cell[0]}\nB{cell[1]}", "workload, batch; × impossible",
                    max(8, 1.2 * len(grid) / len(MODELS)), legend=(6, 4))

    def best(numerator: str, denominator: str, models: Sequence[str] = MODELS,
             kinds: Sequence[str] = ("prefill-heavy", "decode-heavy")) -> tuple[float, str]:
        ratios = {(m, w, b): rps[(m, numerator, w, b)] / rps[(m, denominator, w, b)]
                  for m, (w, _), b in grid if m in models and w in kinds}
        key, value = extreme(ratios)
        where = "none possible" if key is None else f"{key[0]}, {key[1]}, batch {key[2]}"
        return value, f"fig13.csv: {numerator} ÷ {denominator}, {where}"

    dense = [m for m in MODELS if m != "Qwen3-235B-A22B"]
    rows = (("DuoPD over PD 1:1 on PIM, prefill-heavy, max", 1.82, ("duopd", "pd-1:1-pim", MODELS, ("prefill-heavy",))),
            ("DuoPD over PD 1:1 on Duplex, prefill-heavy, max", 1.82,
             ("duopd", "pd-1:1-duplex", MODELS, ("prefill-heavy",))),
            ("PD 1:1 on PIM over PD 1:1 on GPUs, GPT3-175B decode-heavy, max", 1.26,
             ("pd-1:1-pim", "pd-1:1", ("GPT3-175B",), ("decode-heavy",))),
            ("DuoPD over PD 1:1 on PIM, decode-heavy, max", 1.80, ("duopd", "pd-1:1-pim", MODELS, ("decode-heavy",))),
            ("DuoPD over PD 1:1 on Duplex, dense models, decode-heavy, max", 1.49,
             ("duopd", "pd-1:1-duplex", dense, ("decode-heavy",))),
            ("PD 1:1 on Duplex over DuoPD, Qwen3-235B-A22B (MoE), decode-heavy, max", 1.09,
             ("pd-1:1-duplex", "duopd", ("Qwen3-235B-A22B",), ("decode-heavy",))),
            ("DuoPD (4x BW + 4x compute) over PD 1:1 on Duplex (4x compute), max", 2.18,
             ("duopd-4x-bw-4x-compute", "pd-1:1-duplex-4x-compute", MODELS, ("prefill-heavy", "decode-heavy"))))
    claims = []
    for text, paper, args in rows:
        value, where = best(*args)
        claims.append(Claim("13", text, paper, value, "ratio", where))
    return claims


FIGURES: dict[str, Callable[[Scale, Path], list[Claim]]] = {
    "fig11": fig11, "fig12": fig12, "fig9": fig9, "fig13": fig13, "fig14": fig14, "fig15": fig15, "fig16": fig16}


@dataclass(frozen=True)
class Sensitivity:
    """A what-if of the whole study: every run's configuration changed by `change`, which is what `flag` does to
    one `basedie simulate` run."""
    flag: str
    change: Callable[[SimulationConfig], SimulationConfig]


def _hardware(change: Callable) -> Callable[[SimulationConfig], SimulationConfig]:
    """A configuration change of its hardware: `change(hardware)` gives the `--hw` overrides."""
    def changed(config: SimulationConfig) -> SimulationConfig:
        hardware = resolve_hardware(config.hardware)
        return replace(config, hardware=with_overrides(hardware, change(hardware)))
    return changed


# Each mechanism of docs/results/duopd-study.md ("Where we differ") and the what-if that moves it.
UNLIMITED_PREFILL_TOKENS = 10 ** 6       # DistServe's simulator's default prefill budget is 10^7: no limit
SENSITIVITIES = {
    "allreduce-overlap": Sensitivity("--allreduce-overlap", lambda c: replace(c, overlap=True)),
    "roofline-efficiency": Sensitivity("--perf-model roofline-efficiency",
                                       lambda c: replace(c, perf_model="roofline-efficiency")),
    "kv-capacity-2x": Sensitivity("twice the HBM capacity (--hw gpu.stack.capacity_bytes x2)", _hardware(
        lambda hw: {"gpu.stack.capacity_bytes": str(2 * hw.gpu.stack.capacity_bytes)})),
    "prefill-batched": Sensitivity(f"prompts batched in prefill (--chunk-tokens {UNLIMITED_PREFILL_TOKENS} on the "
                                   f"whole-prompt prefill servers)",
                                   lambda c: replace(c, chunk_tokens=UNLIMITED_PREFILL_TOKENS)
                                   if SYSTEMS[c.system].prefill_batches else c),
    "vector-32-lanes": Sensitivity("the PNM's vector unit at 32 lanes (--hw pnm.vector_width=32)",
                                   _hardware(lambda hw: {"pnm.vector_width": "32"})),
    "power-source": Sensitivity("the PNM's power from the other source (--power-source paper or synthesized)",
                                lambda c: replace(c, power_source="synthesized" if c.power_source == "paper"
                                                  else "paper")),
}


@dataclass(frozen=True)
class Mechanism:
    """Why a claim differs from the paper: `name`, the numbered reason in docs/results/duopd-study.md ("Where we
    differ") that describes it, and the `SENSITIVITIES` entry whose rerun shows it."""
    name: str
    reason: int
    sensitivity: str


ALLREDUCE = Mechanism("TP all-reduces not overlapped: TP8 prefill gains less than 2x over TP4", 1, "allreduce-overlap")
CHUNKS = Mechanism("roofline chunks keep chunked prefill's throughput", 2, "roofline-efficiency")
KV_BOUND = Mechanism("PD 3:1's TP2 decode instance is KV-bound", 4, "kv-capacity-2x")
VECTOR = Mechanism("the PNM's decode pays the vector unit's depth", 8, "vector-32-lanes")
BATCH_ONE = Mechanism("decode batches stay near 1: prefill-bound", 3, "prefill-batched")
# The mechanism of each claim that can differ from the paper, by claim; a pair is (below the paper, above it).
MECHANISMS: dict[str, Mechanism | tuple[Mechanism, Mechanism]] = {
    **{f"{model}: average speed-up over the baselines, low end (geometric mean over the configurations per baseline, "
       f"then min over baselines)": mechanism
       for model, mechanism in (("GPT3-175B", CHUNKS), ("LLaMA2-70B", VECTOR), ("Qwen3-235B-A22B", VECTOR))},
    **{f"{model}: average speed-up over the baselines, high end (geometric mean over the configurations per "
       f"baseline, then max over baselines)": ALLREDUCE for model in MODELS},
    "max speed-up over pd-1:1 (all models and configurations)": ALLREDUCE,
    "max speed-up over pd-3:1 (all models and configurations)": KV_BOUND,
    "output 32 (prefill-heavy) vs PD 3:1: lowest speed-up over models, inputs, batches": ALLREDUCE,
    "output 32 (prefill-heavy) vs PD 3:1: highest speed-up over models, inputs, batches": ALLREDUCE,
    "output 32 (prefill-heavy) vs chunked: lowest speed-up over models, inputs, batches": CHUNKS,
    "output 32 (prefill-heavy) vs chunked: highest speed-up over models, inputs, batches": CHUNKS,
    "output 512 vs PD 3:1 and chunked: lowest speed-up over models, inputs, systems, batches": VECTOR,
    "output 512 vs PD 3:1 and chunked: highest speed-up over models, inputs, systems, batches": KV_BOUND,
    "output 512 at batch 32 vs every baseline: lowest speed-up over models, inputs, systems": VECTOR,
    "output 512 at batch 32 vs every baseline: highest speed-up over models, inputs, systems": KV_BOUND,
    f"supported QPS (TTFT at {KNEE_FACTOR:g}x its lowest-QPS value) duopd ÷ pd-1:1, max over models":
        Mechanism("the knee tracks prefill capacity, held down by TP8 all-reduces", 6, "allreduce-overlap"),
    # Below the paper PD 3:1's three TP2 prefill instances out-prefill DuoPD's TP8 (the quick grid); above it its
    # decode instance's KV capacity stalls its prefill (the full grid).
    f"supported QPS (TTFT at {KNEE_FACTOR:g}x its lowest-QPS value) duopd ÷ pd-3:1, max over models":
        (Mechanism("TP8 all-reduces: three TP2 prefill instances prefill faster", 1, "allreduce-overlap"), KV_BOUND),
    f"supported QPS (TTFT at {KNEE_FACTOR:g}x its lowest-QPS value) duopd ÷ chunked, max over models": CHUNKS,
    "TTFT more sensitive to the policy than TPOT: (max/min p50 TTFT over policies) ÷ (max/min p50 TPOT), min over "
    "models": Mechanism("roofline prefill offers little bandwidth to arbitrate", 5, "roofline-efficiency"),
    **{f"{model}: sm-5:5 ÷ DuoPD p50 TTFT at the lowest QPS": ALLREDUCE for model in FIG14_MODELS},
    **{f"{model}: {system} ÷ DuoPD p50 TPOT ({what}) at the lowest QPS": VECTOR
       for model in FIG14_MODELS for system, what in (("sm-9:1", "paper: over 5x"), ("sm-5:5", "paper: comparable"))},
    "GPU compute utilization, DuoPD vs PD prefill instance: absolute difference, max over models (points)": ALLREDUCE,
    **{f"DuoPD ÷ PD decode instance GPU compute utilization, {end} over models": Mechanism(
        "decode FLOPs are fixed by the tokens, averaged over a prefill-bound makespan", 3, "prefill-batched")
       for end in ("lowest", "highest")},
    "HBM bandwidth utilization, DuoPD vs PD decode instance: absolute difference, max over models (points)": BATCH_ONE,
    "DuoPD ÷ PD prefill instance HBM bandwidth utilization, max over models":
        Mechanism("batch-1 PNM decode re-reads the weights per token", 3, "prefill-batched"),
    "end-to-end energy reduction vs PD 1:1, output 32 (%)":
        Mechanism("TP8 all-reduces lengthen DuoPD's prefill at full board power", 1, "allreduce-overlap"),
    **{f"end-to-end energy reduction vs PD 1:1, output {output} (%)":
       Mechanism("PD's 4 decode GPUs run batch 1 at full power", 3, "prefill-batched") for output in (128, 512)},
    "DuoPD decode energy as % of PD 1:1 decode energy (incl. KV transfer), mean over outputs":
        Mechanism("the PNM's power per stack", 7, "power-source"),
}


def mechanism_of(claim: Claim) -> Mechanism | None:
    """The `MECHANISMS` entry of `claim` for the side of the paper it falls on (None: it has none); a Fig. 16 claim
    under the other power source has the same mechanism as under the default."""
    entry = MECHANISMS.get(claim.claim.removesuffix(POWER_LABEL["paper"]))
    return entry[claim.ours > claim.paper] if isinstance(entry, tuple) else entry


def explain(claims: Sequence[Claim], figures: dict[str, Callable], scale: Scale, out: Path) -> list[Claim]:
    """The claims with their `mechanism` column: "agrees" within `TOLERANCE` or the paper's bound; otherwise the
    claim's `MECHANISMS` entry and its value when the figure is rerun under the entry's sensitivity (CSVs and plots
    in `out/sensitivity/<name>/`), or "not explained" when it has none."""
    needed: dict[str, set[str]] = {}
    for claim in claims:
        if not claim.agrees and mechanism_of(claim):
            needed.setdefault(mechanism_of(claim).sensitivity, set()).add(f"fig{claim.figure}")
    rerun: dict[tuple[str, str], float] = {}
    for name, chosen in needed.items():
        folder = out / "sensitivity" / name
        folder.mkdir(parents=True, exist_ok=True)
        CHANGE[:] = [SENSITIVITIES[name].change]
        try:
            rerun.update(((name, c.claim), c.ours) for figure in sorted(chosen) for c in figures[figure](scale, folder))
        finally:
            CHANGE.clear()
    explained = []
    for claim in claims:
        if claim.agrees:
            text = "agrees" if claim.relation in "<>" else f"agrees (within ±{TOLERANCE:.0%})"
        elif why := mechanism_of(claim):
            text = (f"{why.name} (reason {why.reason}); {SENSITIVITIES[why.sensitivity].flag}: "
                    f"{rerun[(why.sensitivity, claim.claim)]:.4g}")
        else:
            text = "not explained"
        explained.append(replace(claim, mechanism=text))
    return explained


def deviation_text(claim: Claim) -> str:
    if not math.isfinite(claim.deviation):
        return "n/a"
    return f"{claim.deviation:.2f}x" if claim.kind == "ratio" else f"{claim.deviation:+.1f} pt"


def write_headline(out: Path, claims: Sequence[Claim], quick: bool) -> str:
    """headline.csv and headline.md; returns the markdown."""
    write_csv(out / "headline.csv", [
        {"figure": c.figure, "claim": c.claim, "paper_relation": c.relation, "paper": c.paper, "ours": c.ours,
         "deviation": c.deviation, "deviation_kind": "ours/paper" if c.kind == "ratio" else "ours-paper (points)",
         "simulation": c.simulation, "agrees": c.agrees, "mechanism": c.mechanism} for c in claims])
    lines = [f"# DuoPD study: our figures next to the paper's{' (quick mode: fewer points and requests)' * quick}",
             "",
             "Deviation: `x` rows are ours ÷ paper, `pt` rows are ours − paper in percentage points. Relation: how the "
             "paper states its value (`=` a value, `<` at most, `>` more than, `≈` comparable). Mechanism: for a "
             f"claim outside ±{TOLERANCE:.0%} of the paper (or its bound), what makes the difference, the reason "
             "in docs/results/duopd-study.md that explains it, and our value rerun under the what-if that moves it.",
             "",
             "| fig | claim | paper | ours | deviation | simulation | mechanism |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {c.figure} | {cell(c.claim)} | {'' if c.relation == '=' else c.relation}{c.paper:.4g} | "
              f"{c.ours:.4g} | {deviation_text(c)} | {cell(c.simulation)} | {cell(c.mechanism)} |" for c in claims]
    text = "\n".join(lines) + "\n"
    (out / "headline.md").write_text(text)
    return text


def side_by_side(folders: Sequence[Path]) -> str:
    """One markdown table of the headline claims of several finished studies (e.g. one per `--perf-model`), a
    column of ours per folder, headed by the folder's name."""
    tables = []
    for folder in folders:
        with open(folder / "headline.csv", newline="") as stream:
            tables.append(list(csv.DictReader(stream)))
    first = tables[0]
    if any([r["claim"] for r in t] != [r["claim"] for r in first] for t in tables):
        raise SystemExit("--side-by-side: the studies have different claims (run them with the same --only/--quick)")
    lines = ["| fig | claim | paper | " + " | ".join(f.name for f in folders) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in folders) + " |"]
    for rows in zip(*tables):
        row = rows[0]
        relation = "" if row["paper_relation"] == "=" else row["paper_relation"]
        lines.append(f"| {row['figure']} | {cell(row['claim'])} | {relation}{float(row['paper']):.4g} | "
                     + " | ".join(f"{float(r['ours']):.4g}" for r in rows) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="basedie study duopd", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/study/duopd"), help="output folder")
    parser.add_argument("--quick", action="store_true", help="fewer points and requests (a smoke run)")
    parser.add_argument("--only", default=",".join(FIGURES), help=f"comma-separated subset of {','.join(FIGURES)}")
    parser.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT", help="run on this Dask cluster")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="LocalCluster workers (default: one per core; 0: no Dask, this process only)")
    parser.add_argument("--perf-model", default="roofline", choices=PERF_MODELS,
                        help="GPU performance model of every run (roofline-efficiency: the H100's measured "
                             "efficiencies on the paper's GPU)")
    parser.add_argument("--allreduce", default="bandwidth", choices=ALL_REDUCE_MODELS,
                        help="all-reduce model of the roofline (docs/design/fidelity.md)")
    parser.add_argument("--allreduce-overlap", action="store_true", help="overlap all-reduces with compute")
    parser.add_argument("--fig9-load", type=float, default=FIG9_LOAD, metavar="X",
                        help=f"Fig. 9's Poisson rate as a multiple of DuoPD's estimated capacity (default "
                             f"{FIG9_LOAD:g}; the paper states none)")
    parser.add_argument("--side-by-side", type=Path, nargs="+", metavar="DIR",
                        help="print the headline tables of these finished studies as one (nothing is run)")
    args = parser.parse_args(argv)
    if args.side_by_side:
        print(side_by_side(args.side_by_side), end="")
        return
    try:  # every run is on the paper's machine: refuse a model that cannot price its GPU before running any
        perf_model(args.perf_model, resolve_hardware(SimulationConfig.hardware).gpu)
    except ConfigError as error:
        parser.error(f"--perf-model {args.perf_model}: {error}")
    global PERF_MODEL
    PERF_MODEL = args.perf_model
    COLLECTIVES.update(all_reduce=args.allreduce, overlap=args.allreduce_overlap)
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in FIGURES]
    if not 0 < args.fig9_load < math.inf:
        parser.error(f"--fig9-load must be a positive finite number, got {args.fig9_load}")
    if unknown or not chosen:
        parser.error(f"--only: unknown figure(s) {', '.join(unknown) or '(none given)'}; choose from "
                     f"{', '.join(FIGURES)}")
    start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    scale = QUICK if args.quick else FULL
    figures = {**FIGURES, "fig9": partial(fig9, load=args.fig9_load)}
    with Cluster(args.scheduler, args.workers) as client:
        CLIENT[:] = [client] if client else []
        try:
            claims = [claim for name in chosen for claim in figures[name](scale, args.out)]
            claims = explain(claims, figures, scale, args.out)
        finally:
            CLIENT.clear()
    print(write_headline(args.out, claims, args.quick))
    print(f"wall time {time.perf_counter() - start:.1f} s; results in {args.out}")


if __name__ == "__main__":
    main()
