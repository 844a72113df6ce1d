"""Simulation speed against DistServe's simulator and splitwise-sim, side by side in one run on this machine.

    python scripts/bench_peers.py --distserve PATH --distserve-python PY --splitwise PATH --splitwise-python PY \
        [--requests 1000 10000] [--out DIR]

Fetches nothing: give each peer's checkout and a Python that has its dependencies (docs/design/fidelity.md says which).
For each request count it writes one Poisson workload (2 req/s, lognormal lengths around 256 prompt → 128 output
tokens, cv 0.3; `scripts/compare_peers.py`'s writer) in all three input formats and replays it, each tool as its
own process, on matching deployments:

- DistServe (OPT-13B, one TP1 prefill + one TP1 decode instance, A100-80GB) against `basedie simulate --system pd
  --prefill-instances 1 --prefill-tp 1 --decode-instances 1 --decode-tp 1 --model OPT-13B --hardware
  a100-sxm4-80gb`;
- splitwise-sim (Llama-2-70B, one prompt + one token DGX-H100, TP8 each, `performance_model=db`) against the same
  `pd` with TP 8 on `h100-sxm5-80gb` (two servers: `--hw gpus=16`);

ours with `--perf-model measured --no-plots` (JSON and CSV files written, as the peers write theirs). Measured
per process: wall seconds and CPU seconds (user + system, from the kernel's accounting of the child), and the
simulation core: wall and CPU seconds inside the event loop alone (ours `sysmodel.engine.EventLoop.run`,
DistServe's `simpy` `Environment.run`, splitwise-sim's `Simulator.run`), timed by a wrapper that each process
starts under (`CORE`, below; it changes nothing else). Ratios are peer ÷ ours. On a shared machine wall time
depends on the load; CPU time much less, so both are printed.
"""
import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

# Runs a program with one method timed: argv = module:Class.method, then a script path, `-m module` or
# `module:function`, then that program's arguments. Prints "CORE <wall s> <cpu s>" to stderr at exit.
CORE = r"""
import atexit, importlib, os, runpy, sys, time
target, entry, *rest = sys.argv[1:]
module, attribute = target.split(":")
sys.path.insert(0, os.getcwd())
owner_name, method = attribute.rsplit(".", 1)
owner = importlib.import_module(module)
for part in owner_name.split("."):
    owner = getattr(owner, part)
original, spent = getattr(owner, method), [0.0, 0.0]
def timed(*args, **kwargs):
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        return original(*args, **kwargs)
    finally:
        spent[0] += time.perf_counter() - wall
        spent[1] += time.process_time() - cpu
setattr(owner, method, timed)
atexit.register(lambda: print(f"CORE {spent[0]!r} {spent[1]!r}", file=sys.stderr))
if entry == "-m":
    sys.argv = [rest[0], *rest[1:]]
    runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
elif entry.endswith(".py"):
    sys.argv = [entry, *rest]
    runpy.run_path(entry, run_name="__main__")
else:
    name, function = entry.split(":")
    sys.argv = [name, *rest]
    sys.exit(getattr(importlib.import_module(name), function)())
"""

RATE, PROMPT, OUTPUT = 2.0, 256, 128


def compare_peers():
    spec = importlib.util.spec_from_file_location("compare_peers", Path(__file__).parent / "compare_peers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(python: str, cwd: Path, target: str, entry: list[str], log: Path) -> dict[str, float]:
    """One process under CORE: its wall and CPU seconds and its loop's."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(log, "w") as stream:
        done = subprocess.run([python, "-c", CORE, target, *entry], cwd=cwd, stdout=stream,
                              stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [line for line in done.stderr.splitlines() if line.startswith("CORE ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(entry[:3])} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    core_wall, core_cpu = map(float, lines[-1].split()[1:])
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"wall_s": wall, "cpu_s": cpu, "core_wall_s": core_wall, "core_cpu_s": core_cpu}


def ours(folder: Path, name: str, tp: int, model: str, hardware: str, gpus: int,
         plots: bool = False) -> tuple[str, str, list[str]]:
    argv = ["simulate", "--system", "pd", "--prefill-instances", "1", "--prefill-tp", str(tp),
            "--decode-instances", "1", "--decode-tp", str(tp), "--model", model, "--hardware", hardware,
            "--hw", f"gpus={gpus}", "--batch", "512", "--chunk-tokens", "2048", "--perf-model", "measured",
            "--trace", str(folder / f"{name}.jsonl"), *([] if plots else ["--no-plots"]),
            "--out", str(folder / f"{name}.ours-tp{tp}")]
    return "sysmodel.engine:EventLoop.run", "basedie.cli:main", argv


def tools(folder: Path, name: str, n: int, args: argparse.Namespace, plots: bool = False) -> dict[str, tuple]:
    """Each tool's (python, working folder, timed method, entry, arguments) on workload `name` of `n` requests;
    ours with or without its plots."""
    splitwise = compare_peers().PEERS["splitwise-pd-h100"].overrides
    return {
        "ours, DistServe's deployment": (sys.executable, Path.cwd(),
                                         *ours(folder, name, 1, "OPT-13B", "a100-sxm4-80gb", 8, plots)),
        "DistServe": (args.distserve_python, args.distserve.resolve(), "simpy.core:Environment.run",
                      "-m", ["simdistserve.benchmarks.simulate_dist", "--backend", "distserve", "--model",
                             "facebook/opt-13b", "--N", str(n), "--arrival", "custom", "--workload",
                             str(folder / f"{name}.json"), "--tp-prefill", "1", "--tp-decode", "1",
                             "--output-request-latency", str(folder / f"{name}.distserve.csv")]),
        "ours, splitwise-sim's deployment": (sys.executable, Path.cwd(),
                                             *ours(folder, name, 8, "Llama-2-70B", "h100-sxm5-80gb", 16, plots)),
        "splitwise-sim": (args.splitwise_python, args.splitwise.resolve(), "simulator:Simulator.run",
                          "run.py", ["--config-dir", str(folder), "--config-name", "splitwise-peer",
                                     f"trace.path={folder}/{name}.splitwise.csv",
                                     f"output_dir={folder}/{name}.splitwise-pd-h100", *splitwise]),
    }


def run_tool(spec: tuple, log: Path) -> dict[str, float]:
    python, cwd, target, entry, rest = spec
    return run(python, cwd, target, [entry, *rest] if entry != "-m" else ["-m", *rest], log)


def add_peer_arguments(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--distserve", type=Path, required=required, help="a DistServe checkout")
    parser.add_argument("--distserve-python", required=required, help="a Python with simpy, pandas and numpy")
    parser.add_argument("--splitwise", type=Path, required=required, help="a splitwise-sim checkout")
    parser.add_argument("--splitwise-python", required=required, help="a Python with splitwise-sim's dependencies")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_peer_arguments(parser)
    parser.add_argument("--requests", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--out", type=Path, default=Path("build/bench_peers"))
    parser.add_argument("--json", type=Path, help="write every measurement here")
    args = parser.parse_args(argv)
    if min(args.requests) < 1:
        parser.error("--requests must be >= 1")
    peers = compare_peers()
    folder = args.out.resolve()
    peers.write_workloads(folder, {f"r{n}": (n, RATE, PROMPT, OUTPUT) for n in args.requests})
    results = {}
    for n in args.requests:
        name = f"r{n}"
        for tool, spec in tools(folder, name, n, args).items():
            results[n, tool] = r = run_tool(spec, folder / f"{name}.{tool.split(',')[0]}.log")
            print(f"{n:6d} requests  {tool:33s} process {r['wall_s']:7.2f} s wall {r['cpu_s']:7.2f} s CPU   "
                  f"core {r['core_wall_s']:7.3f} s wall {r['core_cpu_s']:7.3f} s CPU", flush=True)
        for peer, mine in (("DistServe", "ours, DistServe's deployment"),
                           ("splitwise-sim", "ours, splitwise-sim's deployment")):
            a, b = results[n, peer], results[n, mine]
            print(f"{n:6d} requests  {peer} ÷ ours: process {a['wall_s'] / b['wall_s']:5.1f}x wall "
                  f"{a['cpu_s'] / b['cpu_s']:5.1f}x CPU, core {a['core_wall_s'] / b['core_wall_s']:5.1f}x wall "
                  f"{a['core_cpu_s'] / b['core_cpu_s']:5.1f}x CPU")
    if len(args.requests) > 1:
        small, large = min(args.requests), max(args.requests)
        for tool in dict.fromkeys(t for _, t in results):
            a, b = results[small, tool], results[large, tool]
            print(f"{tool:33s} {large} ÷ {small} requests ({large / small:.0f}x): core CPU "
                  f"{b['core_cpu_s'] / a['core_cpu_s']:5.1f}x, process CPU {b['cpu_s'] / a['cpu_s']:5.1f}x")
    if args.json:
        args.json.write_text(json.dumps([{"requests": n, "tool": t, **r} for (n, t), r in results.items()], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
