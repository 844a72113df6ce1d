"""`basedie generate` before and after, side by side in one run on this machine; writes the table into docs.

    python scripts/bench_hardware_loop.py [--base main] [--block pnm] [--param NAME=VALUE ...] [--doc docs/results/fast-loop.md]

"Before" is the code of `--base` (a git ref), checked out with `git worktree add --detach` into a temporary folder
and imported from there; "after" is this checkout. Each side generates the same block and parameters in a process
of its own (`basedie generate`), the two one after the other, and is measured from the kernel's accounting: wall
seconds, CPU seconds (user + system, Yosys's child process included) and the largest resident set of the Python
process and of its largest child (Yosys; a child started by fork counts the pages it shared with Python). Ratios are before ÷ after. On a shared machine wall time depends on the load; CPU time
much less, so both are printed. The Markdown table replaces the one between the markers in `--doc`.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- bench_hardware_loop: begin -->", "<!-- bench_hardware_loop: end -->"
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
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "results" / "fast-loop.md", help="the page to write into")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_hardware_loop-") as folder:
        old = Path(folder) / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.base], check=True,
                       capture_output=True)
        try:
            before = generate(old, args.block, args.param, Path(folder) / "out-before")
            after = generate(ROOT, args.block, args.param, Path(folder) / "out-after")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=True)
    text = table(args.block, args.param, args.base, before, after)
    print(text)
    write_table(args.doc, text)


if __name__ == "__main__":
    main()
