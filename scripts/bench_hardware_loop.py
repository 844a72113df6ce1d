"""`basedie generate` and the benches before and after, side by side in one run on this machine; writes the tables
into docs.

    python scripts/bench_hardware_loop.py [--base main] [--block pnm] [--param NAME=VALUE ...] [--doc docs/results/fast-loop.md]
    python scripts/bench_hardware_loop.py --benches [BLOCK ...] [--base main] [--doc docs/results/fast-loop.md]
    python scripts/bench_hardware_loop.py --builds BLOCK[:NAME=VALUE,...] ... [--run] [--after-only] [--base main]

"Before" is the code of `--base` (a git ref), checked out with `git worktree add --detach` into a temporary folder
and imported from there; "after" is this checkout. Each side generates the same block and parameters in a process
of its own (`basedie generate`), the two one after the other, and is measured from the kernel's accounting: wall
seconds, CPU seconds (user + system, Yosys's child process included) and the largest resident set of the Python
process and of its largest child (Yosys; a child started by fork counts the pages it shared with Python). Ratios are before ÷ after. On a shared machine wall time depends on the load; CPU time
much less, so both are printed. The Markdown table replaces the one between the markers in `--doc`.

`--benches` measures instead each named block's bench (default: every registered bench) at its first small
parameter set, as `pytest` runs it (or, with `--soak N`, its soak test of N beats per port and of N/10, whose
differences give the cost per streamed cycle without start-up and stimulus): the Verilator build is made first and not timed (the build does not depend on
`tb/`, so both sides share it), then the bench runs with the same random-reset seed under the code of each side,
before and after alternately, block by block. Simulated cycles are the last test's end in cocotb's results file;
CPU seconds the simulator process's user + system time (Python's start-up, stimulus and golden models included).
The ratio is after ÷ before in cycles per CPU second.

`--builds` measures the Verilator build of each named block and parameter set (`pnm_lane:width=1024,sublane_width=128`)
from an empty build folder under the code of each side: wall and CPU seconds (generation, Verilator and the C++
compiler) and the largest resident set of Verilator or a compiler. With `--run` each side then runs the bench on its
build with the same random-reset seed, whose simulated cycles must agree. `--after-only` skips the "before" side
(for designs it cannot build on this machine).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rtl.registry import BLOCKS

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- bench_hardware_loop: begin -->", "<!-- bench_hardware_loop: end -->"
BUILD_MARKERS = ("<!-- bench_builds: begin -->", "<!-- bench_builds: end -->")
BENCH_MARKERS = {soak: (f"<!-- bench_speed{'_soak' if soak else ''}: begin -->",
                        f"<!-- bench_speed{'_soak' if soak else ''}: end -->") for soak in (False, True)}
# Runs `basedie generate` in this process and prints what the kernel counted for it and for its children.
MEASURED = r"""
import json, resource, sys, time
from basedie.cli import main
started = time.monotonic()
status = main(["generate", *sys.argv[1:]])
me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"status": status, "wall_s": time.monotonic() - started,
                  "cpu_s": me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime,
                  "python_rss_mb": me.ru_maxrss / 1024, "child_rss_mb": children.ru_maxrss / 1024}))
"""


# Builds one block's first small set (untimed), runs its bench and prints the simulator's CPU and cycles.
BENCH_RUN = r"""
import json, resource, sys, xml.etree.ElementTree as ET
from pathlib import Path
from rtl.registry import BLOCKS
from basedie.flow.runner import CLOCK_PERIOD_NS, build, run_bench, run_name
block, runs, soak = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
params = BLOCKS[block].params(**BLOCKS[block].bench.configs[0])
build(block, params)
started = resource.getrusage(resource.RUSAGE_CHILDREN)
run_bench(block, BLOCKS[block].bench.module, params, runs=runs, seed=1, soak=soak)
ended = resource.getrusage(resource.RUSAGE_CHILDREN)
results = runs / (run_name(block, params) + ("-soak" if soak else "")) / "results.xml"
stops = [float(p.get("value")) for p in ET.parse(results).iter("property") if p.get("name") == "sim_time_stop"]
print(json.dumps({"cpu_s": ended.ru_utime + ended.ru_stime - started.ru_utime - started.ru_stime,
                  "cycles": round(max(stops) / CLOCK_PERIOD_NS)}))
"""


# Builds one block and parameter set into an empty BASEDIE_BUILD_DIR and prints what the kernel counted; with a
# fourth argument "run", then runs its bench with seed 1 and adds the simulated cycles.
BUILD_RUN = r"""
import json, resource, sys, time, xml.etree.ElementTree as ET
from pathlib import Path
from rtl.registry import BLOCKS
from basedie.flow.runner import BUILD_ROOT, CLOCK_PERIOD_NS, build, run_bench, run_name
block, params, run = sys.argv[1], BLOCKS[sys.argv[1]].params(**json.loads(sys.argv[2])), sys.argv[3] == "run"
started = time.monotonic()
build(block, params)
me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
figures = {"wall_s": time.monotonic() - started,
           "cpu_s": me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime,
           "python_rss_mb": me.ru_maxrss / 1024, "child_rss_mb": children.ru_maxrss / 1024}
if run:
    run_bench(block, BLOCKS[block].bench.module, params, seed=1)
    results = BUILD_ROOT / "runs" / run_name(block, params) / "results.xml"
    stops = [float(p.get("value")) for p in ET.parse(results).iter("property") if p.get("name") == "sim_time_stop"]
    figures["cycles"] = round(max(stops) / CLOCK_PERIOD_NS)
print(json.dumps(figures))
"""


def build_cost(source: Path, spec: str, folder: Path, run: bool) -> dict:
    """Build `spec` (`block[:name=value,...]`) with the code of `source` into the empty build folder `folder`."""
    block, _, assignments = spec.partition(":")
    if block not in BLOCKS or BLOCKS[block].bench is None:
        raise SystemExit(f"no bench for {block!r}: choose among {', '.join(BLOCKS)}")
    params = BLOCKS[block].params.from_strings(dict(a.split("=", 1) for a in assignments.split(",") if a))
    env = {**os.environ, "BASEDIE_BUILD_DIR": str(folder),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(source), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", BUILD_RUN, block, json.dumps(params.as_dict()),
                             "run" if run else "build"], env=env, cwd=source, capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"building {spec} in {source} failed: {result.stderr.strip()[-800:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def build_table(base: str | None, specs: list[str], run: bool, before: dict, after: dict) -> str:
    """Each build's wall and CPU seconds and largest child RSS, before and after (and the bench's cycles)."""
    sides = ([("before", before)] if base else []) + [("after", after)]
    keys = [("wall s", "wall_s", "{:,.0f}"), ("CPU s", "cpu_s", "{:,.0f}"),
            ("largest RSS of a child (MB)", "child_rss_mb", "{:,.0f}")] + ([("cycles", "cycles", "{:,}")] if run else [])
    command = (f"--builds {' '.join(specs)}" + (" --run" if run else "")
               + (f" --base {base}" if base else " --after-only"))
    header = ["build"] + [f"{label} {side}" for label, _, _ in keys for side, _ in sides]
    lines = ["Verilator builds from an empty build folder" + (f", before (`{base}`) and after, one after the other"
             if base else "") + f" on this machine (`python scripts/bench_hardware_loop.py {command}`):", "",
             "| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
    for spec in specs:
        row = [f"`{spec}`"] + [form.format(figures[spec][key]) for _, key, form in keys for _, figures in sides]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def bench_speed(source: Path, block: str, runs: Path, soak: int) -> dict:
    """Run `block`'s bench (its soak of `soak` beats per port, if not 0) with the `tb/` of `source`: its CPU
    seconds, cycles and cycles per CPU second."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(source), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", BENCH_RUN, block, str(runs), str(soak)], env=env, cwd=source,
                            capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"the {block} bench in {source} failed: {result.stderr.strip()[-800:]}")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    return figures | {"rate": figures["cycles"] / figures["cpu_s"]}


def bench_table(base: str, blocks: list[str], soak: int, before: dict, after: dict) -> str:
    """Cycles per CPU second of each side's whole run; with `soak`, also per cycle streamed: the cycles and CPU
    seconds a soak of `soak` beats adds over one of a tenth of that, so start-up and stimulus cancel."""
    what = f"its soak of {soak:,} beats per port, and of {soak // 10:,}" if soak else "every test of it"
    command = f"--benches {' '.join(blocks)}" + (f" --soak {soak}" if soak else "")
    header = ["bench", "cycles", "CPU s before", "CPU s after", "cycles / CPU s before", "cycles / CPU s after",
              "after ÷ before"]
    if soak:
        header += ["per streamed cycle: cycles / CPU s before", "after", "after ÷ before"]
    lines = [f"Each block's bench at its first small set ({what}), before (`{base}`'s `tb/`) and after, alternately "
             f"on this machine (`python scripts/bench_hardware_loop.py {command}`); CPU seconds of the simulator "
             "process:", "", "| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
    for block in blocks:
        b, a = before[block], after[block]
        row = [f"`{block}`", f"{a['cycles']:,}", f"{b['cpu_s']:.1f}", f"{a['cpu_s']:.1f}", f"{b['rate']:,.0f}",
               f"{a['rate']:,.0f}", f"{a['rate'] / b['rate']:.1f}×"]
        if soak:
            row += [f"{b['streamed']:,.0f}", f"{a['streamed']:,.0f}", f"{a['streamed'] / b['streamed']:.1f}×"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def soak_speed(source: Path, block: str, runs: Path, soak: int) -> dict:
    """`bench_speed` of a soak of `soak` beats, with `streamed`: cycles per CPU second over what it adds to a soak
    of a tenth of that."""
    short, long = bench_speed(source, block, runs, soak // 10), bench_speed(source, block, runs, soak)
    return long | {"streamed": (long["cycles"] - short["cycles"]) / (long["cpu_s"] - short["cpu_s"])}


def generate(source: Path, block: str, params: list[str], out: Path) -> dict:
    """Measure `basedie generate` with the packages of `source` first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(source), os.environ.get("PYTHONPATH")]))}
    args = [block, "-o", str(out), *(arg for param in params for arg in ("--param", param))]
    result = subprocess.run([sys.executable, "-c", MEASURED, *args], env=env, cwd=source, capture_output=True,
                            text=True)
    if result.returncode:
        raise SystemExit(f"basedie generate in {source} failed: {result.stderr.strip()[-500:]}")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    verilog = out / f"{block}.v"
    return figures | {"verilog_mb": verilog.stat().st_size / 1e6,
                      "modules": verilog.read_text().count("\nmodule ") + 1}


def table(block: str, params: list[str], base: str, before: dict, after: dict) -> str:
    rows = [("wall s", "wall_s", "{:.1f}"), ("CPU s (Python + Yosys)", "cpu_s", "{:.1f}"),
            ("largest RSS, Python (MB)", "python_rss_mb", "{:.0f}"), ("largest RSS, a child (MB)", "child_rss_mb", "{:.0f}"),
            ("Verilog (MB)", "verilog_mb", "{:.2f}"), ("Verilog modules", "modules", "{:d}")]
    what = f"`basedie generate {block}{''.join(f' --param {p}' for p in params)}`"
    lines = [f"{what}, before (`{base}`) and after, one after the other on this machine "
             f"(`python scripts/bench_hardware_loop.py --block {block}{''.join(f' --param {p}' for p in params)}`):",
             "", "| figure | before | after | before ÷ after |", "| --- | --- | --- | --- |"]
    for label, key, form in rows:
        ratio = before[key] / after[key] if after[key] else float("nan")
        lines.append(f"| {label} | {form.format(before[key])} | {form.format(after[key])} | {ratio:.1f}× |")
    return "\n".join(lines)


def write_table(doc: Path, text: str, begin: str = BEGIN, end: str = END) -> None:
    page = doc.read_text()
    if begin not in page or end not in page:
        raise SystemExit(f"{doc} has no {begin} … {end} markers to write the table between")
    head, rest = page.split(begin, 1)
    doc.write_text(f"{head}{begin}\n{text}\n{end}{rest.split(end, 1)[1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="main", help="the git ref measured as 'before' (main)")
    parser.add_argument("--block", default="pnm", help="the block to generate (pnm, at the paper's size)")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="a block parameter")
    parser.add_argument("--benches", nargs="*", metavar="BLOCK",
                        help="measure these blocks' benches instead (no name: every registered bench)")
    parser.add_argument("--soak", type=int, default=0, metavar="N",
                        help="with --benches: run each bench's soak test of N beats per port instead of its tests")
    parser.add_argument("--builds", nargs="+", metavar="BLOCK[:NAME=VALUE,...]",
                        help="measure these Verilator builds instead, each from an empty build folder")
    parser.add_argument("--run", action="store_true", help="with --builds: then run each bench on its build")
    parser.add_argument("--after-only", action="store_true", help="with --builds: build with this checkout only")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "results" / "fast-loop.md", help="the page to write into")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_hardware_loop-") as folder:
        old = Path(folder) / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.base], check=True,
                       capture_output=True)
        try:
            if args.builds:
                before, after = {}, {}
                for n, spec in enumerate(args.builds):
                    if not args.after_only:
                        before[spec] = build_cost(old, spec, Path(folder) / f"build-before{n}", args.run)
                    after[spec] = build_cost(ROOT, spec, Path(folder) / f"build-after{n}", args.run)
                    print(spec, before.get(spec), after[spec], flush=True)
            elif args.benches is not None:
                blocks = args.benches or [name for name, block in BLOCKS.items() if block.bench is not None]
                unknown = [name for name in blocks if name not in BLOCKS or BLOCKS[name].bench is None]
                if unknown:
                    raise SystemExit(f"no bench for {', '.join(unknown)}: choose among {', '.join(BLOCKS)}")
                before, after = {}, {}
                for block in blocks:
                    speed = soak_speed if args.soak else bench_speed
                    before[block] = speed(old, block, Path(folder) / "runs-before", args.soak)
                    after[block] = speed(ROOT, block, Path(folder) / "runs-after", args.soak)
                    print(block, before[block], after[block], flush=True)
            else:
                before = generate(old, args.block, args.param, Path(folder) / "out-before")
                after = generate(ROOT, args.block, args.param, Path(folder) / "out-after")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=True)
    if args.builds:
        text = build_table(None if args.after_only else args.base, args.builds, args.run, before, after)
        print(text)
        write_table(args.doc, text, *BUILD_MARKERS)
        return
    if args.benches is not None:
        text = bench_table(args.base, blocks, args.soak, before, after)
        print(text)
        write_table(args.doc, text, *BENCH_MARKERS[bool(args.soak)])
        return
    text = table(args.block, args.param, args.base, before, after)
    print(text)
    write_table(args.doc, text)


if __name__ == "__main__":
    main()
