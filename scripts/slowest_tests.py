"""The slowest tests of a pytest run, as a Markdown table, from its JUnit XML.

    pytest --junitxml=build/junit.xml
    python scripts/slowest_tests.py build/junit.xml [--top 20] [--by cpu|wall] [--modules]

Wall seconds are pytest's own (setup, call and teardown); CPU seconds are the `cpu_s` property that
tests/conftest.py records for each test (user and system time of the test's process and of the tools it waited for:
Verilator, make, Icarus, Yosys). On a shared machine wall times follow the load, CPU times much less. A last line
gives the totals of the whole run. `--modules` lists test modules instead of tests, each with its tests' sums:
where a run's time goes by kind of work (a bench module's builds and runs, the Icarus runs, Yosys, the studies).
"""
import argparse
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Timing:
    test: str
    wall_s: float
    cpu_s: float | None
    """None when the run did not record it (a run without tests/conftest.py's hook)."""


def timings(junit_xml: Path) -> list[Timing]:
    """Every test case of the report with its wall and CPU seconds."""
    rows = []
    for case in ET.parse(junit_xml).iter("testcase"):
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        cpu = properties.get("cpu_s")
        name = case.get("name", "")
        if name.rfind("@") > name.rfind("]"):   # pytest-xdist appends "@group" to a grouped test's name
            name = name[:name.rfind("@")]
        rows.append(Timing(f"{case.get('classname', '').replace('.', '/')}.py::{name}",
                           float(case.get("time", 0)), None if cpu is None else float(cpu)))
    return rows


def by_module(rows: list[Timing]) -> list[Timing]:
    """One row per test module: its tests' wall and CPU seconds summed (CPU None when no test recorded it)."""
    modules: dict[str, list[Timing]] = {}
    for row in rows:
        modules.setdefault(row.test.split("::")[0], []).append(row)
    return [Timing(f"{module} ({len(tests)} tests)", sum(t.wall_s for t in tests),
                   None if all(t.cpu_s is None for t in tests) else sum(t.cpu_s or 0.0 for t in tests))
            for module, tests in modules.items()]


def table(rows: list[Timing], top: int, by: str, total: str) -> str:
    """The `top` slowest rows by `by` ("cpu" or "wall") as Markdown, and the run's totals labelled `total`."""
    key = (lambda r: r.cpu_s or 0.0) if by == "cpu" else (lambda r: r.wall_s)
    cpu = lambda value: "–" if value is None else f"{value:,.1f}"   # noqa: E731
    lines = ["| # | test | wall s | CPU s |", "| ---: | --- | ---: | ---: |"]
    for rank, row in enumerate(sorted(rows, key=key, reverse=True)[:top], 1):
        lines.append(f"| {rank} | `{row.test}` | {row.wall_s:,.1f} | {cpu(row.cpu_s)} |")
    recorded = [r.cpu_s for r in rows if r.cpu_s is not None]
    lines.append(f"| | {total} | {sum(r.wall_s for r in rows):,.1f} | "
                 f"{cpu(sum(recorded) if recorded else None)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("junit_xml", type=Path, help="pytest's --junitxml report")
    parser.add_argument("--top", type=int, default=20, help="how many tests to list (default 20)")
    parser.add_argument("--by", choices=("cpu", "wall"), default="wall", help="the column to sort by (default wall)")
    parser.add_argument("--modules", action="store_true", help="list test modules (their tests' sums), not tests")
    args = parser.parse_args(argv)
    if args.top < 1:
        print(f"--top {args.top}: list at least 1 test", file=sys.stderr)
        return 2
    try:
        rows = timings(args.junit_xml)
    except (OSError, ET.ParseError) as error:
        print(f"{args.junit_xml}: not a readable JUnit XML report ({error})", file=sys.stderr)
        return 2
    if not rows:
        print(f"{args.junit_xml}: the report holds no test cases", file=sys.stderr)
        return 2
    if args.by == "cpu" and all(r.cpu_s is None for r in rows):
        print(f"{args.junit_xml}: no test has a cpu_s property (run from this checkout's tests/)", file=sys.stderr)
        return 2
    total = f"all {len(rows):,} tests"
    print(table(by_module(rows), args.top, args.by, f"{total} in them") if args.modules
          else table(rows, args.top, args.by, total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
