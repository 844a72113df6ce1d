"""How fast the system model runs: a 1,000-request Poisson workload on LLaMA2-70B, every system, one core.

    python scripts/bench_sysmodel.py [--requests 1000] [--qps 2] [--repeat 3] [--perf-model NAME] [--systems A,B]
                                     [--memory hbm|A|B|C|FILE] [--gpus N]
    python scripts/bench_sysmodel.py --scale 10000 100000 1000000 [--baseline TREE] [--out FILE]
    python scripts/bench_sysmodel.py --peers --distserve PATH --distserve-python PY --splitwise PATH
                                     --splitwise-python PY [--repeat 3] [--doc docs/results/scale.md]

`--scale N...`: the production-scale targets (docs/results/scale.md). Each N runs `basedie simulate --system duopd --model
LLaMA2-70B --qps 4 --requests N --no-plots` as its own process and reports its wall and CPU seconds, its peak RSS
and both per request; with `--baseline TREE`, each N also runs with another source tree (e.g. a checkout of the
commit before a change) right after this one's run of N: CPU and memory before and after, and whether the outputs
are byte-identical. Writes the Markdown tables to `--out`.

`--peers`: the 1,000-request workload of `scripts/bench_peers.py`, each tool as a whole process, `--repeat` rounds
side by side (each round runs every tool once): DistServe's simulator and splitwise-sim beside ours on their
deployments, ours with its plots on (the default) and with `--no-plots`. CPU seconds are the kernel's user +
system of the process and the children it waited for; the ratio per peer is peer ÷ ours of the medians. Writes
the table between the markers of `--doc` and the plot beside it (`PEERS_PNG`). Runs after `--scale` when both
are given.

HBF's speed target (docs/design/hbf.md, "Speed"): `--model Qwen3-30B-A3B --systems chunked --gpus 1 --memory C --qps 20
--input-len 1024 --output-len 128`, beside the same run with `--memory A` (HBM only) in one invocation each.

Prints, per system, the best wall time of `simulate()` over the repeats (the verified table is loaded once,
beforehand, and timed separately) and how many output tokens per second of wall time that is.
"""
import argparse
import filecmp
import importlib.util
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from basedie import verified
from sysmodel.hardware import PAPER_HARDWARE, with_overrides
from sysmodel.simulate import SimulationConfig, simulate
from sysmodel.systems import SYSTEMS
from sysmodel.workload import PoissonArrivals


# Runs `basedie` in this process and prints its peak resident set (kB) to stderr at exit.
PEAK = ("import atexit, resource, sys\n"
        "atexit.register(lambda: print(f'PEAK_RSS_KB {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', "
        "file=sys.stderr))\n"
        "from basedie.cli import main\n"
        "sys.exit(main(sys.argv[1:]))")
TARGETS = {"seconds": {100_000: 8.0, 1_000_000: 60.0}, "peak_rss_mb": {1_000_000: 2048.0}, "peers": 5.0}
ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- bench_sysmodel peers: begin -->", "<!-- bench_sysmodel peers: end -->"
PEERS_PNG = "scale-peers.png"
# peer → its deployment's runs of ours: (plots on, --no-plots)
PAIRS = {"DistServe": ("ours, DistServe's deployment", "ours, DistServe's deployment, --no-plots"),
         "splitwise-sim": ("ours, splitwise-sim's deployment", "ours, splitwise-sim's deployment, --no-plots")}


def simulate_process(requests: int, out: Path, tree: Path | None = None) -> dict[str, float]:
    """`basedie simulate` of the scale workload as its own process: wall, CPU (the child's user + system) and peak
    RSS. `tree`: run that source tree's `basedie`, `sysmodel` and `rtl` instead (first on `PYTHONPATH`)."""
    env = None if tree is None else {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # -P: `python -c` would put the working directory ahead of PYTHONPATH, and run the tree it is started in
    done = subprocess.run([sys.executable, "-P", "-c", PEAK, "simulate", "--system", "duopd", "--model", "LLaMA2-70B",
                           "--qps", "4", "--requests", str(requests), "--no-plots", "--out", str(out)],
                          capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    peaks = [line for line in done.stderr.splitlines() if line.startswith("PEAK_RSS_KB ")]
    if done.returncode != 0 or not peaks:
        raise SystemExit(f"basedie simulate --requests {requests} failed (exit {done.returncode}):\n"
                         f"{done.stderr[-2000:]}")
    return {"wall_s": wall, "cpu_s": after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime,
            "peak_rss_mb": int(peaks[-1].split()[1]) / 1024}


def baseline(folder: Path, before: dict[int, dict[str, float]], after: dict[int, dict[str, float]]) -> list[str]:
    """Before (the `--baseline` tree's runs) beside after (this tree's), by size: CPU and peak RSS ratios, and
    whether the outputs are byte-identical."""
    lines = ["", "| requests | CPU before | CPU after | before ÷ after | peak RSS before | peak RSS after | outputs |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    print(f"{'requests':>9} {'CPU before':>10} {'CPU after':>9} {'ratio':>6} {'MB before':>9} {'MB after':>8}  outputs")
    for n, new in after.items():
        old = before[n]
        same = all(filecmp.cmp(folder / f"before-{n}" / name, folder / f"duopd-{n}" / name, shallow=False)
                   for name in ("summary.json", "requests.csv", "servers.csv"))
        verdict = "byte-identical" if same else "DIFFER"
        print(f"{n:9d} {old['cpu_s']:10.2f} {new['cpu_s']:9.2f} {old['cpu_s'] / new['cpu_s']:6.2f} "
              f"{old['peak_rss_mb']:9.0f} {new['peak_rss_mb']:8.0f}  {verdict}", flush=True)
        lines.append(f"| {n:,} | {old['cpu_s']:.1f} s | {new['cpu_s']:.1f} s | {old['cpu_s'] / new['cpu_s']:.2f}× | "
                     f"{old['peak_rss_mb']:.0f} MB | {new['peak_rss_mb']:.0f} MB | {verdict} |")
    return lines


def verdict(n: int, r: dict[str, float]) -> str:
    """The targets at `n` requests, each as measured ÷ target (≤ 1 meets it); empty where none is set."""
    parts = []
    if n in TARGETS["seconds"]:
        target = TARGETS["seconds"][n]
        parts.append(f"≤ {target:g} s wall: {r['wall_s'] / target:.1f}× it (CPU {r['cpu_s'] / target:.1f}×)")
    if n in TARGETS["peak_rss_mb"]:
        target = TARGETS["peak_rss_mb"][n]
        parts.append(f"≤ {target:g} MB: {r['peak_rss_mb'] / target:.2f}× it")
    met = (r["wall_s"] <= TARGETS["seconds"].get(n, float("inf"))
           and r["peak_rss_mb"] <= TARGETS["peak_rss_mb"].get(n, float("inf")))
    return f"{', '.join(parts)}: {'met' if met else 'missed'}" if parts else ""


def script(name: str):
    """Another script of this folder, as a module."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parent / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def machine() -> str:
    """The processor, its cores, Python's version and the load average: what the timings depend on."""
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor() or platform.machine())
    return (f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"load average {os.getloadavg()[0]:.1f}")


def peer_runs(args: argparse.Namespace, folder: Path) -> dict[str, list[dict[str, float]]]:
    """Every tool's runs of the 1,000-request workload, `args.repeat` rounds, each round every tool once."""
    peers = script("bench_peers")
    peers.compare_peers().write_workloads(folder, {"r1000": (1000, peers.RATE, peers.PROMPT, peers.OUTPUT)})
    specs = peers.tools(folder, "r1000", 1000, args, plots=True)
    without = peers.tools(folder, "r1000", 1000, args, plots=False)
    for peer, (mine, bare) in PAIRS.items():
        specs[bare] = (*without[mine][:4], [*without[mine][4][:-1], f"{without[mine][4][-1]}-no-plots"])
    runs: dict[str, list[dict[str, float]]] = {tool: [] for tool in specs}
    for round_ in range(args.repeat):
        for index, (tool, spec) in enumerate(specs.items()):
            r = peers.run_tool(spec, folder / f"r1000.tool{index}.log")
            runs[tool].append(r)
            print(f"round {round_ + 1}/{args.repeat}  {tool:43s} {r['wall_s']:7.2f} s wall {r['cpu_s']:6.2f} s CPU  "
                  f"loop {r['core_cpu_s']:6.3f} s CPU", flush=True)
    return runs


def peer_table(runs: dict[str, list[dict[str, float]]], host: str, repeat: int) -> tuple[str, dict[str, float]]:
    """The Markdown of the runs (medians, CPU range) and peer ÷ ours of the median CPU by run of ours."""
    median = {tool: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for tool, rs in runs.items()}
    ratios = {mine: median[peer]["cpu_s"] / median[mine]["cpu_s"] for peer, pair in PAIRS.items() for mine in pair}
    lines = [f"`python scripts/bench_sysmodel.py --peers --repeat {repeat} ...`: 1,000 requests, each tool a whole "
             f"process, {repeat} rounds side by side on {host} (at the start). Medians; CPU is user + system of "
             "the process and its children, its range over the rounds in brackets; the loop is the time inside "
             "the event loop alone.", "",
             "| tool | wall | CPU | loop CPU | peer ÷ ours, CPU | target |", "| --- | --- | --- | --- | --- | --- |"]
    for tool, rs in runs.items():
        m, cpus = median[tool], [r["cpu_s"] for r in rs]
        ratio, verdict = "", ""
        if tool in ratios:
            ratio = f"{ratios[tool]:.1f}×"
            verdict = f"≥ {TARGETS['peers']:g}×: {'met' if ratios[tool] >= TARGETS['peers'] else 'missed'}"
        lines.append(f"| {tool} | {m['wall_s']:.1f} s | {m['cpu_s']:.2f} s ({min(cpus):.2f}–{max(cpus):.2f}) | "
                     f"{m['core_cpu_s']:.2f} s | {ratio} | {verdict} |")
    lines += ["", f"![CPU seconds per tool, 1,000 requests]({PEERS_PNG})"]
    return "\n".join(lines), ratios


def peer_plot(runs: dict[str, list[dict[str, float]]], path: Path) -> None:
    """Each tool's CPU seconds, a bar at the median and a dot per round, grouped by deployment, with the peer's
    CPU ÷ 5 (what ours must stay under) as a dashed line."""
    from matplotlib.figure import Figure  # the object API renders PNGs with Agg, no GUI backend involved

    figure = Figure(figsize=(7.5, 3.6), layout="constrained")
    axes = figure.subplots()
    labels, x = [], 0
    for peer, pair in PAIRS.items():
        start = x
        for tool, label in ((peer, peer), (pair[0], "ours"), (pair[1], "ours, --no-plots")):
            cpus = [r["cpu_s"] for r in runs[tool]]
            axes.bar(x, statistics.median(cpus), color="tab:gray" if tool == peer else "tab:blue", width=0.7)
            axes.plot([x] * len(cpus), cpus, "k.", markersize=4)
            labels.append((x, label))
            x += 1
        bound = statistics.median(r["cpu_s"] for r in runs[peer]) / TARGETS["peers"]
        axes.plot([start - 0.4, x - 0.6], [bound] * 2, "r--", linewidth=1)
        axes.text(start + 1, -0.16, f"{peer}'s deployment", ha="center", transform=axes.get_xaxis_transform())
        x += 0.6
    axes.set_xticks([p for p, _ in labels], [label for _, label in labels], fontsize=8)
    axes.set_ylabel("CPU seconds per process")
    axes.set_title(f"1,000 requests, whole processes (red: peer ÷ {TARGETS['peers']:g})", fontsize=10)
    figure.savefig(path, dpi=110)


def peer_speed(args: argparse.Namespace) -> int:
    """The 1,000-request comparison with the peers: the table into `args.doc`, the plot beside it."""
    folder = args.folder.resolve() / "peers"
    folder.mkdir(parents=True, exist_ok=True)
    host = machine()
    runs = peer_runs(args, folder)
    text, ratios = peer_table(runs, host, args.repeat)
    for mine, ratio in ratios.items():
        print(f"peer ÷ {mine}: {ratio:.2f}× CPU (target ≥ {TARGETS['peers']:g}×)")
    peer_plot(runs, args.doc.parent / PEERS_PNG)
    script("bench_hardware_loop").write_table(args.doc, text, BEGIN, END)
    print(f"table written to {args.doc}, plot to {args.doc.parent / PEERS_PNG}")
    return 0


def scale(args: argparse.Namespace) -> int:
    """The production-scale targets, measured in one run; a Markdown table to `args.out`."""
    folder = args.folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["| requests | wall | CPU | peak RSS | CPU per request | added RSS per added request | target |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    print(f"{'requests':>9} {'wall s':>8} {'CPU s':>8} {'peak MB':>8} {'CPU ms/req':>10} {'added kB/req':>12}  target")
    previous = None     # (requests, peak MB) of the size before: memory per request beyond the process's base
    measured, before = {}, {}
    for n in sorted(args.scale):
        r = measured[n] = simulate_process(n, folder / f"duopd-{n}")
        if args.baseline:       # right after, so that both runs of a size see about the same load
            before[n] = simulate_process(n, folder / f"before-{n}", args.baseline)
        target = verdict(n, r)
        added = (r["peak_rss_mb"] - previous[1]) * 1024 / (n - previous[0]) if previous else float("nan")
        previous = n, r["peak_rss_mb"]
        print(f"{n:9d} {r['wall_s']:8.2f} {r['cpu_s']:8.2f} {r['peak_rss_mb']:8.0f} {r['cpu_s'] / n * 1e3:10.3f} "
              f"{added:12.2f}  {target}", flush=True)
        lines.append(f"| {n:,} | {r['wall_s']:.1f} s | {r['cpu_s']:.1f} s | {r['peak_rss_mb']:.0f} MB | "
                     f"{r['cpu_s'] / n * 1e3:.3f} ms | {'' if added != added else f'{added:.2f} kB'} | {target} |")
    if args.baseline:
        lines += baseline(folder, before, measured)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
        print(f"table written to {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--qps", type=float, default=2.0)
    parser.add_argument("--input-len", type=int, default=8192)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument("--model", default="llama2-70b")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--perf-model", default="roofline", help="roofline, measured or roofline-efficiency")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated (default: all)")
    parser.add_argument("--memory", default="hbm",
                        help="package layout: hbm, A, B, C or a layout file (docs/design/hbf.md)")
    parser.add_argument("--gpus", type=int, default=None, help="GPUs of the paper hardware (default: its 8)")
    parser.add_argument("--scale", type=int, nargs="+", metavar="N", help="the scale targets at N requests each")
    parser.add_argument("--peers", action="store_true", help="the 1,000-request comparison with the peers' speed")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "results" / "scale.md",
                        help="with --peers: the page whose marked section gets the table")
    parser.add_argument("--baseline", type=Path, metavar="TREE",
                        help="with --scale: also run each size with this source tree (before) beside this one")
    script("bench_peers").add_peer_arguments(parser, required=False)
    parser.add_argument("--folder", type=Path, default=Path("build/bench_scale"), help="where runs write")
    parser.add_argument("--out", type=Path, help="with --scale: write the Markdown table here")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    missing = [flag for flag in ("distserve", "distserve_python", "splitwise", "splitwise_python")
               if getattr(args, flag) is None]
    if args.peers and missing:
        parser.error(f"--peers needs --{missing[0].replace('_', '-')}")
    if args.scale is not None and min(args.scale) < 1:
        parser.error("--scale request counts must be >= 1")
    if args.baseline and args.scale is None:
        parser.error("--baseline goes with --scale")
    if args.scale is not None or args.peers:
        status = scale(args) if args.scale is not None else 0
        return status or (peer_speed(args) if args.peers else 0)

    start = time.perf_counter()
    table = verified.load()
    print(f"verified table loaded (digests of rtl/ checked) in {time.perf_counter() - start:.3f} s")
    workload = PoissonArrivals(args.qps, args.requests, args.input_len, args.output_len, seed=0)
    hardware = PAPER_HARDWARE if args.gpus is None else with_overrides(PAPER_HARDWARE, {"gpus": str(args.gpus)})
    print(f"{args.model}, {args.requests} requests, Poisson {args.qps} QPS, input {args.input_len}, "
          f"output {args.output_len} (means), --perf-model {args.perf_model}, {hardware.gpus} GPUs, "
          f"memory {args.memory}")
    print(f"{'system':9} {'wall s':>7} {'tokens out':>10} {'tokens/s of wall':>17}")
    for system in args.systems.split(","):
        best, result = float("inf"), None
        for _ in range(args.repeat):
            start = time.perf_counter()
            result = simulate(SimulationConfig(system=system, model=args.model, workload=workload, hardware=hardware,
                                               perf_model=args.perf_model,
                                               memory=args.memory), table)
            best = min(best, time.perf_counter() - start)
        tokens = sum(r.output_len for r in result.requests)
        print(f"{system:9} {best:7.3f} {tokens:10d} {tokens / best:17.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
