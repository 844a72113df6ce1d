"""Measure how long the commands a user runs first take, and write the table of docs/results/run-times.md.

Each command runs under `/usr/bin/time` from this checkout, into a scratch folder (its own empty build cache and
a copy of the verified-figures table, so the committed files stay as they are). The page names the machine and
the load average when each command started: on a shared machine the wall times are upper bounds, CPU time is
the steadier figure.

    python scripts/run_times.py [--full | --only KEY,...] [--out docs/results/run-times.md]

Without options it measures every command but the two of `--full` (the full-size `basedie run` and the whole
`pytest`, an hour or more each); `--only` names the commands by key.
"""
import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "results" / "run-times.md"
TABLE = ROOT / "sysmodel" / "data" / "verified_blocks.json"


@dataclass(frozen=True)
class Command:
    """One row: its key, the command as a user types it, what it does, the arguments that keep it in the
    scratch folder (`{scratch}` is replaced by that folder), and the build cache it uses (its own, empty, unless
    it names another command's)."""
    key: str
    shown: str
    does: str
    argv: tuple[str, ...]
    full_only: bool = False
    cache: str = ""


RUN = ("basedie", "run", "-o", "{scratch}/verilog", "--table", "{scratch}/t.json")
COMMANDS = (
    Command("simulate", "basedie simulate --system duopd --model LLaMA2-70B --qps 4 --requests 1000",
            "one serving simulation, plots included",
            ("basedie", "simulate", "--system", "duopd", "--model", "LLaMA2-70B", "--qps", "4", "--requests",
             "1000", "-o", "{scratch}/simulate")),
    Command("quick-loop", 'pytest -m "not verilator and not slow"', "the quick test loop (two pytest workers)",
            ("pytest", "-m", "not verilator and not slow", "-q", "-p", "no:cacheprovider")),
    Command("verify-one", "basedie verify fp32_add", "one block: its Verilator build and its bench, from an empty "
            "build cache", ("basedie", "verify", "fp32_add", "--table", "{scratch}/t.json")),
    Command("run-quick", "basedie run --quick", "generate every block, run the small parameter sets' benches, "
            "from an empty build cache", (*RUN, "--quick")),
    Command("run-quick-cached", "basedie run --quick", "the same again, every Verilator build cached",
            (*RUN, "--quick"), cache="run-quick"),
    Command("run", "basedie run", "adds the full-size parameter sets (the small sets' builds cached)", RUN,
            full_only=True, cache="run-quick"),
    Command("pytest", "pytest", "the whole test suite (what CI runs)", ("pytest", "-q", "-p", "no:cacheprovider"),
            full_only=True),
)


@dataclass(frozen=True)
class Measured:
    wall_s: float
    cpu_s: float
    peak_mb: float
    load: float
    status: int
    last_line: str


def measure(command: Command, scratch: Path) -> Measured:
    """Run one command under /usr/bin/time; CPU is user + system of the command and all its children."""
    report = scratch / "time.txt"
    argv = [arg.replace("{scratch}", str(scratch)) for arg in command.argv]
    env = {**os.environ, "BASEDIE_BUILD_DIR": str(scratch / "build" / (command.cache or command.key))}
    load = os.getloadavg()[0]
    done = subprocess.run(["/usr/bin/time", "-o", str(report), "-f", "%e %U %S %M", *argv], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    wall, user, system, peak_kb = report.read_text().split()[-4:]
    last = next((line.strip() for line in reversed(done.stdout.splitlines()) if line.strip()), "")
    return Measured(float(wall), float(user) + float(system), int(peak_kb) / 1024, load, done.returncode, last)


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown CPU")
    memory_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                     if line.startswith("MemTotal"))
    return (f"{os.cpu_count()} cores of {cpu}, {memory_kb / 2**20:.0f} GB of memory, {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}")


def minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def page(rows: list[tuple[Command, Measured]], options: str) -> str:
    lines = ["# How long the commands take", "",
             f"Measured by `python scripts/run_times.py{options}` (this page is its output) on {machine()}.",
             "Each command ran in a scratch folder with its own empty build cache (unless it says otherwise), one "
             "after the other, in the order below. The machine "
             "may have been shared: the load average when a command started says how busy it was, and wall times "
             "measured under load are upper bounds. CPU time (user + system, every process the command started) "
             "moves much less with the load.", "",
             "| command | what it does | wall | CPU | largest process | load average at start | exit |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for command, m in rows:
        lines.append(f"| `{command.shown}` | {command.does} | {minutes(m.wall_s)} | {minutes(m.cpu_s)} | "
                     f"{m.peak_mb / 1024:.1f} GB | {m.load:.1f} | {m.status} |")
    failed = [(command, m) for command, m in rows if m.status]
    if failed:
        lines += ["", "What a command that failed printed last:", ""]
        lines += [f"- `{command.shown}`: `{m.last_line}`" for command, m in failed]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--full", action="store_true", help="also the full `basedie run` and the whole pytest")
    choice.add_argument("--only", metavar="KEY,...",
                        help=f"these commands only: {', '.join(command.key for command in COMMANDS)}")
    parser.add_argument("--out", type=Path, default=PAGE, help=f"the page to write ({PAGE.relative_to(ROOT)})")
    args = parser.parse_args()
    keys = args.only.split(",") if args.only else [c.key for c in COMMANDS if args.full or not c.full_only]
    unknown = sorted(set(keys) - {command.key for command in COMMANDS})
    if unknown:
        parser.error(f"--only: unknown command {', '.join(unknown)}")
    if shutil.which("basedie") is None or not Path("/usr/bin/time").exists():
        print("run_times.py: error: needs `basedie` on PATH (pip install -e '.[test]') and /usr/bin/time",
              file=sys.stderr)
        return 2
    options = " --full" if args.full else f" --only {args.only}" if args.only else ""
    rows = []
    with tempfile.TemporaryDirectory(prefix="run-times-") as folder:
        scratch = Path(folder)
        shutil.copy(TABLE, scratch / "t.json")
        for command in (c for c in COMMANDS if c.key in keys):
            rows.append((command, measure(command, scratch)))
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(page(rows, options))  # after each command, so a stopped run keeps what it measured
    return 0


if __name__ == "__main__":
    sys.exit(main())
