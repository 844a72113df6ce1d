"""Compare sysmodel's iteration latencies with two established serving simulators' latency models.

    python scripts/compare_peers.py --distserve PATH/TO/DistServe --splitwise PATH/TO/splitwise-sim

Fetches nothing: point it at local checkouts (github.com/LLMServe/DistServe, github.com/Mutinifni/splitwise-sim).
It reads DistServe's fitted A100-80GB latency models (`simdistserve/estimators/profile_data/
profiler-a100-80g.distserve.json`: prefill `a + b·tokens + c·Σ len²`, decode `a + b·context + c·batch`, in ms)
and splitwise-sim's measured iteration database (`data/perf_model.csv`: `prompt_time` for a batch of prompts,
`token_time` per output token, in ms), prices the same iterations with each `--perf-model`, and prints
ours / theirs per point. Nothing from either file is used by sysmodel.

End to end against DistServe's simulator (three workloads this script writes; OPT-13B, one TP1 prefill and one
TP1 decode instance on A100-80GB):

    python scripts/compare_peers.py --write-workloads DIR
    # in a DistServe checkout, with simpy and pandas installed, for W in chat longprompt highload:
    python -m simdistserve.benchmarks.simulate_dist --backend distserve --model facebook/opt-13b --N 300 \
        --arrival custom --workload DIR/W.json --tp-prefill 1 --tp-decode 1 --output-request-latency DIR/W.distserve.csv
    python scripts/compare_peers.py --end-to-end DIR

replays `DIR/W.jsonl` through `basedie`'s `pd:1x1+1x1` on `a100-sxm4-80gb` under each `--perf-model` and prints
p50/p90 TTFT and TPOT beside DistServe's, with TPOT as DistServe defines it: (last token − first token) /
output tokens.
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


# name → (requests, Poisson rate per s, mean prompt tokens, mean output tokens); lognormal lengths with cv 0.3.
WORKLOADS = {"chat": (300, 2.0, 256, 128), "longprompt": (200, 0.5, 2048, 64), "highload": (300, 6.0, 256, 128)}


def write_workloads(folder: Path) -> None:
    """Each workload as DistServe's custom JSON (start_time in s) and as a basedie JSON-lines trace."""
    folder.mkdir(parents=True, exist_ok=True)
    for seed, (name, (count, rate, prompt, output)) in enumerate(WORKLOADS.items()):
        rng = np.random.default_rng(seed)
        arrivals = np.cumsum(rng.exponential(1 / rate, count))
        lengths = [np.clip(np.rint(rng.lognormal(np.log(mean) - np.log1p(0.09) / 2, np.sqrt(np.log1p(0.09)), count)),
                           low, high).astype(int) for mean, low, high in ((prompt, 8, 4000), (output, 2, 1000))]
        rows = [{"start_time": float(t), "prompt_len": int(p), "output_len": int(o)}
                for t, p, o in zip(arrivals, *lengths)]
        (folder / f"{name}.json").write_text(json.dumps(rows))
        (folder / f"{name}.jsonl").write_text("".join(
            json.dumps({"arrival_s": r["start_time"], "prompt_tokens": r["prompt_len"],
                        "output_tokens": r["output_len"]}) + "\n" for r in rows))


def end_to_end(folder: Path) -> None:
    from sysmodel.simulate import SimulationConfig, simulate
    from sysmodel.traces import Trace

    print(f"{'workload':11s} {'model':20s} " + " ".join(f"{m:>19s}" for m in
                                                       ("TTFT p50", "TTFT p90", "TPOT p50", "TPOT p90")))
    for name in WORKLOADS:
        with open(folder / f"{name}.distserve.csv", newline="") as stream:
            theirs = list(csv.DictReader(stream))
        their = {"ttft": np.array([float(r["first_token_latency"]) for r in theirs]) / 1e3,
                 "tpot": np.array([float(r["tpot"]) for r in theirs]) / 1e3}
        for model in PERF_MODELS:
            result = simulate(SimulationConfig("pd:1x1+1x1", "OPT-13B", Trace(str(folder / f"{name}.jsonl")),
                                               hardware="a100-sxm4-80gb", max_batch=512, perf_model=model))
            ours = {"ttft": np.array([r["ttft_s"] for r in result.rows]),
                    "tpot": np.array([(r["e2e_s"] - r["ttft_s"]) / r["output_len"] for r in result.rows])}
            cells = [f"{np.percentile(ours[k], q) * 1e3:6.1f}/{np.percentile(their[k], q) * 1e3:6.1f}"
                     f"={np.percentile(ours[k], q) / np.percentile(their[k], q):4.2f}"
                     for k in ("ttft", "tpot") for q in (50, 90)]
            print(f"{name:11s} {model:20s} " + " ".join(cells))
    print("cells: ours ms / DistServe ms = ratio")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distserve", type=Path, help="a DistServe checkout")
    parser.add_argument("--splitwise", type=Path, help="a splitwise-sim checkout")
    parser.add_argument("--csv", type=Path, help="write every iteration's row here")
    parser.add_argument("--write-workloads", type=Path, metavar="DIR", help="write the end-to-end workloads here")
    parser.add_argument("--end-to-end", type=Path, metavar="DIR",
                        help="compare with DistServe's per-request latencies in DIR/<workload>.distserve.csv")
    args = parser.parse_args(argv)
    if args.write_workloads:
        write_workloads(args.write_workloads)
    if args.end_to_end:
        end_to_end(args.end_to_end)
    if args.write_workloads or args.end_to_end:
        return
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
