"""Compare sysmodel's iteration latencies with two established serving simulators' latency models.

    python scripts/compare_peers.py --distserve PATH/TO/DistServe --splitwise PATH/TO/splitwise-sim

Fetches nothing: point it at local checkouts (github.com/LLMServe/DistServe, github.com/Mutinifni/splitwise-sim).
It reads DistServe's fitted A100-80GB latency models (`simdistserve/estimators/profile_data/
profiler-a100-80g.distserve.json`: prefill `a + b·tokens + c·Σ len²`, decode `a + b·context + c·batch`, in ms)
and splitwise-sim's measured iteration database (`data/perf_model.csv`: `prompt_time` for a batch of prompts,
`token_time` per output token, in ms), prices the same iterations with each `--perf-model`, and prints
ours / theirs per point. Nothing from either file is used by sysmodel.

The end-to-end comparison (p50/p90 TTFT and TPOT of whole workloads replayed through both peers) needs their
simulators installed and run; see docs/fidelity.md for the state of that.
"""
import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from sysmodel.errors import ConfigError
from sysmodel.execution import GPUExecution
from sysmodel.llm import resolve_model
from sysmodel.operators import Shard, Work, decode_work, prefill_work
from sysmodel.perf import PERF_MODELS, perf_model
from sysmodel.presets import PRESETS

HARDWARE = {"a100-80gb": "a100-sxm4-80gb", "h100-80gb": "h100-sxm5-80gb"}
MODELS = {"facebook/opt-13b": "OPT-13B", "facebook/opt-66b": "OPT-66B", "llama2-70b": "Llama-2-70B"}


def ours(hardware: str, model: str, tp: int, work: Work) -> dict[str, float]:
    """Iteration seconds under every performance model (None where it does not apply)."""
    hw, shard = PRESETS[hardware], Shard(resolve_model(model), tp)
    times = {}
    for name in PERF_MODELS:
        try:
            times[name] = GPUExecution(hw, shard, perf=perf_model(name, hw.gpu)).cost(work).seconds
        except ConfigError:
            times[name] = None
    return times


def prompts(count: int, length: int) -> Work:
    return Work(*(count * field for field in prefill_work(length)))


def distserve_points(root: Path):
    data = json.loads((root / "simdistserve/estimators/profile_data/profiler-a100-80g.distserve.json").read_text())
    for model, by_tp in data.items():
        for tp, params in by_tp.items():
            a, b, c = params["prefill"]
            for length in (128, 512, 2048):
                yield ("DistServe", model, "a100-80gb", int(tp), f"prefill 1x{length}",
                       (a + b * length + c * length ** 2) / 1e3, prompts(1, length))
            for batch in (1, 16, 128):
                context = 512
                key = "decoding_smallbs" if batch < params["decoding_large_small_bs_threshold"] else "decoding_largebs"
                a, b, c = params[key]
                yield ("DistServe", model, "a100-80gb", int(tp), f"decode b{batch} ctx{context}",
                       (a + b * batch * context + c * batch) / 1e3, decode_work(batch, batch * context))


def splitwise_points(root: Path):
    groups = defaultdict(lambda: ([], []))
    with open(root / "data/perf_model.csv", newline="") as stream:
        for row in csv.DictReader(stream):
            if row["model"] in MODELS and row["hardware"] in HARDWARE:
                key = (row["model"], row["hardware"], int(row["tensor_parallel"]), int(row["prompt_size"]),
                       int(row["batch_size"]), int(row["token_size"]))
                groups[key][0].append(float(row["prompt_time"]))
                groups[key][1].append(float(row["token_time"]))
    for (model, hardware, tp, prompt, batch, tokens), (prompt_ms, token_ms) in sorted(groups.items()):
        yield ("splitwise-sim", model, hardware, tp, f"prefill {batch}x{prompt}", np.median(prompt_ms) / 1e3,
               prompts(batch, prompt))
        # token_time is the mean over the `tokens` decode steps: the mean context is prompt + tokens / 2.
        context = prompt + tokens // 2
        yield ("splitwise-sim", model, hardware, tp, f"decode b{batch} ctx{context}", np.median(token_ms) / 1e3,
               decode_work(batch, batch * context))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distserve", type=Path, help="a DistServe checkout")
    parser.add_argument("--splitwise", type=Path, help="a splitwise-sim checkout")
    parser.add_argument("--csv", type=Path, help="write every iteration's row here")
    args = parser.parse_args(argv)
    if not args.distserve and not args.splitwise:
        parser.error("give --distserve and/or --splitwise")
    points = [*(distserve_points(args.distserve) if args.distserve else []),
              *(splitwise_points(args.splitwise) if args.splitwise else [])]
    rows = []
    for peer, model, hardware, tp, what, theirs, work in points:
        times = ours(HARDWARE[hardware], MODELS[model], tp, work)
        rows.append({"peer": peer, "model": MODELS[model], "hardware": hardware, "tp": tp, "iteration": what,
                     "theirs_ms": round(theirs * 1e3, 3),
                     **{f"{name}_ratio": None if t is None else round(t / theirs, 3) for name, t in times.items()}})
    header = list(rows[0])
    groups = defaultdict(list)
    for row in rows:
        groups[(row["peer"], row["model"], row["hardware"], row["tp"], row["iteration"].split()[0])].append(row)
    names = [f"{name}_ratio" for name in PERF_MODELS]
    print("median ours/theirs per group (iterations within ±25 % with measured)")
    print(f"{'peer':14s} {'model':12s} {'hardware':10s} {'tp':>2s} {'phase':8s} "
          + " ".join(f"{n[:-6]:>19s}" for n in names) + "  within")
    for (peer, model, hardware, tp, phase), members in groups.items():
        medians = [np.median([m[n] for m in members]) if members[0][n] is not None else float("nan") for n in names]
        within = sum(abs(m["measured_ratio"] - 1) <= 0.25 for m in members if m["measured_ratio"] is not None)
        print(f"{peer:14s} {model:12s} {hardware:10s} {tp:2d} {phase:8s} "
              + " ".join(f"{v:19.2f}" for v in medians) + f"  {within}/{len(members)}")
    measured = np.array([r["measured_ratio"] for r in rows if r["measured_ratio"] is not None])
    within = np.mean(np.abs(measured - 1) <= 0.25)
    print(f"measured: median ratio {np.median(measured):.2f}, {within:.0%} of {measured.size} iterations within ±25 %")
    if args.csv:
        with open(args.csv, "w", newline="") as stream:
            writer = csv.DictWriter(stream, fieldnames=header)
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
