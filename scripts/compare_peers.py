"""Compare sysmodel's iteration latencies with two established serving simulators' latency models.

    python scripts/compare_peers.py --distserve PATH/TO/DistServe --splitwise PATH/TO/splitwise-sim

Fetches nothing: point it at local checkouts (github.com/LLMServe/DistServe, github.com/Mutinifni/splitwise-sim).
It reads DistServe's fitted A100-80GB latency models (`simdistserve/estimators/profile_data/
profiler-a100-80g.distserve.json`: prefill `a + b·tokens + c·Σ len²`, decode `a + b·context + c·batch`, in ms)
and splitwise-sim's measured iteration database (`data/perf_model.csv`: `prompt_time` for a batch of prompts,
`token_time` per output token, in ms), prices the same iterations with each `--perf-model`, and prints
ours / theirs per point. Nothing from either file is used by sysmodel.

End to end (`--write-workloads DIR` writes three workloads, each as DistServe's custom JSON `W.json`, as a
splitwise-sim trace `W.splitwise.csv` and as a basedie trace `W.jsonl`, plus `splitwise-peer.yaml`, a top-level
splitwise-sim configuration without its Ray launcher; it also prints every peer command below):

    python scripts/compare_peers.py --write-workloads DIR
    # DistServe (OPT-13B, one TP1 prefill + one TP1 decode instance, A100-80GB), Python 3.11 with simpy and pandas,
    # in its checkout, for W in chat longprompt highload:
    python -m simdistserve.benchmarks.simulate_dist --backend distserve --model facebook/opt-13b --N <requests> \
        --arrival custom --workload DIR/W.json --tp-prefill 1 --tp-decode 1 --output-request-latency DIR/W.distserve.csv
    # splitwise-sim (Llama-2-70B, its measured `performance_model=db`), Python 3.11 with hydra-core 1.3.2, omegaconf,
    # pandas, scipy, networkx, in its checkout, for W as above and each splitwise-sim deployment D of PEERS
    # (splitwise-baseline-a100/-h100: one DGX, one TP8 instance that prefills and decodes, -a100-tp4 the same at
    # TP4; splitwise-pd-h100: one prompt DGX + one token DGX, TP8 each, KV shipped at 200 GiB/s):
    python run.py --config-dir DIR --config-name splitwise-peer trace.path=DIR/W.splitwise.csv \
        output_dir=DIR/W.D <the overrides of D>
    python scripts/compare_peers.py --end-to-end DIR

replays `DIR/W.jsonl` through the same deployment in `basedie` under each `--perf-model` (and each
`--iteration-overhead SECONDS` given, besides none) and prints p50/p90 TTFT, TPOT and E2E beside each peer's (every
peer whose output is in DIR), with TPOT as both peers define it: (last token − first token) / output tokens.
"""
import argparse
import csv
import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
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

# splitwise-sim's top level (its configs/config.yaml) with the defaults these runs use and no Ray launcher; hydra
# reads the groups from the checkout's configs/ and this file from --config-dir.
SPLITWISE_CONFIG = """\
defaults:
  - cluster: dgx-h100
  - router: noop
  - arbiter: noop
  - hardware_repo: default
  - model_repo: default
  - orchestrator_repo: default
  - performance_model: db
  - power_model: constant
  - applications: solo
  - trace: test_trace
  - start_state: baseline
  - _self_
end_time: 86400
debug: false
seed: 0
choices: ${hydra:runtime.choices}
output_dir: out
hydra:
  run:
    dir: ${output_dir}
  job:
    chdir: true
"""


@dataclass(frozen=True)
class Peer:
    """One peer deployment and ours: where its per-request output is, how to read it, what we replay it on."""
    output: str                  # relative to the workload folder; {w} is the workload
    read: Callable[[Path], dict[str, np.ndarray]]
    system: str
    model: str
    hardware: str
    gpus: int
    chunk_tokens: int | None = None
    overrides: tuple[str, ...] = ()   # splitwise-sim's hydra overrides


def distserve_latencies(path: Path) -> dict[str, np.ndarray]:
    """Seconds per request from DistServe's `--output-request-latency` CSV (its columns are in ms)."""
    with open(path, newline="") as stream:
        rows = list(csv.DictReader(stream))
    return {key: np.array([float(r[column]) for r in rows]) / 1e3
            for key, column in (("ttft", "first_token_latency"), ("tpot", "tpot"), ("e2e", "total_latency"))}


def splitwise_latencies(path: Path) -> dict[str, np.ndarray]:
    """Seconds per request from splitwise-sim's `detailed/<application>.csv` (`tbt_times` is (E2E − TTFT) / tokens)."""
    with open(path, newline="") as stream:
        rows = list(csv.DictReader(stream))
    return {key: np.array([float(r[column]) for r in rows])
            for key, column in (("ttft", "ttft_times"), ("tpot", "tbt_times"), ("e2e", "response_times"))}


def splitwise(name: str, system: str, hardware: str, *overrides: str) -> tuple[str, Peer]:
    """A splitwise-sim deployment of Llama-2-70B (its `db` performance model) and ours on one (`a100`: DGX-A100)
    or two 8-GPU servers; its outputs under `<workload>.<name>/`."""
    a100 = hardware.startswith("a100")
    servers = 2 if system.startswith("pd:") else 1
    return name, Peer(f"{{w}}.{name}/detailed/0.csv", splitwise_latencies, system, "Llama-2-70B", hardware,
                      8 * servers, 2048,
                      ("applications.0.model_architecture=llama2-70b", "applications.0.model_size=llama2-70b-fp16",
                       *overrides, f"cluster.servers.0.count={servers * a100}",
                       f"cluster.servers.1.count={servers * (not a100)}"))


BASELINE = ("start_state=baseline", "applications.0.scheduler=token_jsq")
PEERS = dict([
    ("distserve", Peer("{w}.distserve.csv", distserve_latencies, "pd:1x1+1x1", "OPT-13B", "a100-sxm4-80gb", 8)),
    # splitwise-sim's Splitwise instance: prompts first, mixed batches, 2,048 batch tokens: our orca scheduler.
    splitwise("splitwise-baseline-a100", "colocated:1x8:orca", "a100-sxm4-80gb", *BASELINE),
    # the same at TP4 (splitwise-sim gives the one instance the whole server; TP sets its iteration times)
    splitwise("splitwise-baseline-a100-tp4", "colocated:1x4:orca", "a100-sxm4-80gb", *BASELINE,
              "start_state.instance.tensor_parallelism=4"),
    splitwise("splitwise-baseline-h100", "colocated:1x8:orca", "h100-sxm5-80gb", *BASELINE),
    splitwise("splitwise-pd-h100", "pd:1x8+1x8", "h100-sxm5-80gb", "start_state=splitwise",
              "start_state.split_type=homogeneous", "applications.0.scheduler=kv_round_robin"),
])


def write_workloads(folder: Path, workloads: dict[str, tuple[int, float, int, int]] = WORKLOADS) -> None:
    """Each workload as DistServe's custom JSON (start_time in s), a splitwise-sim trace CSV and a basedie
    JSON-lines trace, and splitwise-sim's top-level configuration."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "splitwise-peer.yaml").write_text(SPLITWISE_CONFIG)
    for seed, (name, (count, rate, prompt, output)) in enumerate(workloads.items()):
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
        # request_type 2 is splitwise-sim's generative LLM request; one application (0), batch 1 per request.
        (folder / f"{name}.splitwise.csv").write_text(
            "request_id,request_type,application_id,arrival_timestamp,batch_size,prompt_size,token_size\n" + "".join(
                f"{i},2,0,{r['start_time']!r},1,{r['prompt_len']},{r['output_len']}\n" for i, r in enumerate(rows)))


def peer_commands(folder: Path) -> list[str]:
    """The command line that produces each peer output `--end-to-end` reads (run in the peer's checkout)."""
    folder = folder.resolve()
    lines = []
    for name, (count, *_) in WORKLOADS.items():
        lines.append(f"python -m simdistserve.benchmarks.simulate_dist --backend distserve --model facebook/opt-13b "
                     f"--N {count} --arrival custom --workload {folder}/{name}.json --tp-prefill 1 --tp-decode 1 "
                     f"--output-request-latency {folder}/{name}.distserve.csv")
        for peer_name, peer in PEERS.items():
            if peer.overrides:
                lines.append(f"python run.py --config-dir {folder} --config-name splitwise-peer "
                             f"trace.path={folder}/{name}.splitwise.csv output_dir={folder}/{name}.{peer_name} "
                             + " ".join(peer.overrides))
    return lines


def ours_latencies(peer: Peer, trace: Path, perf: str, overhead_s: float = 0.0) -> dict[str, np.ndarray]:
    """Seconds per request of the same trace through our deployment, TPOT as the peers define it; `overhead_s`:
    the host time every GPU iteration adds (`--iteration-overhead`)."""
    from sysmodel.simulate import SimulationConfig, simulate
    from sysmodel.traces import Trace

    hardware = replace(PRESETS[peer.hardware], gpus=peer.gpus)
    result = simulate(SimulationConfig(system=peer.system, model=peer.model, workload=Trace(str(trace)),
                                       hardware=hardware, max_batch=512,
                                       chunk_tokens=peer.chunk_tokens, perf_model=perf,
                                       iteration_overhead_s=overhead_s))
    rows = result.rows      # built on demand: once
    return {"ttft": np.array([r["ttft_s"] for r in rows]),
            "tpot": np.array([(r["e2e_s"] - r["ttft_s"]) / r["output_len"] for r in rows]),
            "e2e": np.array([r["e2e_s"] for r in rows])}


METRICS = tuple((k, q) for k in ("ttft", "tpot", "e2e") for q in (50, 90))


def percentiles(latencies: dict[str, np.ndarray]) -> dict[tuple[str, int], float]:
    """p50 and p90 of each metric, linearly interpolated between requests (numpy's default, as both peers use)."""
    return {(key, q): float(np.percentile(latencies[key], q)) for key, q in METRICS}


def end_to_end(folder: Path, perf_models=PERF_MODELS, peers=tuple(PEERS), overheads=(0.0,)) -> list[dict]:
    """ours / theirs at p50 and p90 of each metric, per peer output found in `folder`, workload, perf model and
    per-iteration host overhead (seconds)."""
    rows = []
    print(f"{'peer':27s} {'workload':10s} {'perf model':19s} {'overhead':>8s} "
          + " ".join(f"{k.upper() + ' p' + str(q):>20s}" for k, q in METRICS))
    for peer_name in peers:
        peer = PEERS[peer_name]
        for name in WORKLOADS:
            path = folder / peer.output.format(w=name)
            if not path.exists():
                continue
            theirs = percentiles(peer.read(path))
            for perf, overhead in ((perf, overhead) for perf in perf_models for overhead in overheads):
                ours = percentiles(ours_latencies(peer, folder / f"{name}.jsonl", perf, overhead))
                row = {"peer": peer_name, "workload": name, "perf_model": perf, "iteration_overhead_s": overhead}
                cells = []
                for key, q in METRICS:
                    a, b = ours[key, q], theirs[key, q]
                    row[f"{key}_p{q}_ours_ms"], row[f"{key}_p{q}_theirs_ms"] = round(a * 1e3, 2), round(b * 1e3, 2)
                    row[f"{key}_p{q}_ratio"] = round(a / b, 3)
                    cells.append(f"{a * 1e3:7.1f}/{b * 1e3:7.1f}={a / b:4.2f}")
                rows.append(row)
                print(f"{peer_name:27s} {name:10s} {perf:19s} {overhead * 1e3:6.1f}ms " + " ".join(cells))
    print("cells: ours ms / theirs ms = ratio")
    return rows


def ratio_table(rows: list[dict]) -> str:
    """The end-to-end rows' ours ÷ theirs as a markdown table, a row per peer, workload, model and overhead."""
    lines = ["| peer | workload | perf model | overhead (ms) | "
             + " | ".join(f"{key.upper()} p{q}" for key, q in METRICS) + " |",
             "| --- | --- | --- | --- | " + " | ".join("---" for _ in METRICS) + " |"]
    lines += [f"| {r['peer']} | {r['workload']} | {r['perf_model']} | {r['iteration_overhead_s'] * 1e3:g} | "
              + " | ".join(f"{r[f'{key}_p{q}_ratio']:.2f}" for key, q in METRICS) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distserve", type=Path, help="a DistServe checkout")
    parser.add_argument("--splitwise", type=Path, help="a splitwise-sim checkout")
    parser.add_argument("--csv", type=Path, help="write every iteration's row here")
    parser.add_argument("--write-workloads", type=Path, metavar="DIR", help="write the end-to-end workloads here")
    parser.add_argument("--end-to-end", type=Path, metavar="DIR",
                        help="compare with the peers' per-request latencies found in DIR")
    parser.add_argument("--peer", action="append", choices=PEERS, help="with --end-to-end: only these peers")
    parser.add_argument("--perf-model", action="append", choices=PERF_MODELS,
                        help="with --end-to-end: only these performance models (default all)")
    parser.add_argument("--markdown", action="store_true",
                        help="with --end-to-end: then print ours ÷ theirs of every cell as a markdown table")
    parser.add_argument("--iteration-overhead", action="append", type=float, metavar="SECONDS",
                        help="with --end-to-end: also run ours with this host time per GPU iteration, beside "
                             "none (repeatable)")
    args = parser.parse_args(argv)
    if args.write_workloads:
        write_workloads(args.write_workloads)
        print("\n".join(peer_commands(args.write_workloads)))
    if args.end_to_end:
        overheads = tuple(dict.fromkeys((0.0, *(args.iteration_overhead or ()))))
        if not all(np.isfinite(overheads)) or min(overheads) < 0:
            parser.error(f"--iteration-overhead must be finite seconds >= 0, got {', '.join(map(str, overheads))}")
        rows = end_to_end(args.end_to_end, perf_models=args.perf_model or PERF_MODELS,
                          peers=args.peer or tuple(PEERS), overheads=overheads)
        if args.markdown:
            print(ratio_table(rows), end="")
        if args.csv and rows:
            with open(args.csv, "w", newline="") as stream:
                writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
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
