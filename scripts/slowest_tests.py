"""The slowest tests of a pytest run, as a Markdown table, from its JUnit XML.

    pytest --junitxml=build/junit.xml
    python scripts/slowest_tests.py build/junit.xml [--top 20] [--by cpu|wall]

Wall seconds are pytest's own (setup, call and teardown); CPU seconds are the `cpu_s` property that
tests/conftest.py records for each test (user and system time of the test's process and of the tools it waited for:
Verilator, make, Icarus, Yosys). On a shared machine wall times follow the load, CPU times much less. A last line
gives the totals of the whole run.
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


def table(rows: list[Timing], top: int, by: str) -> str:
    """The `top` slowest rows by `by` ("cpu" or "wall") as Markdown, and the run's totals."""
    key = (lambda r: r.cpu_s or 0.0) if by == "cpu" else (lambda r: r.wall_s)
    cpu = lambda value: "–" if value is None else f"{value:,.1f}"   # noqa: E731
    lines = ["| # | test | wall s | CPU s |", "| ---: | --- | ---: | ---: |"]
    for rank, row in enumerate(sorted(rows, key=key, reverse=True)[:top], 1):
        lines.append(f"| {rank} | `{row.test}` | {row.wall_s:,.1f} | {cpu(row.cpu_s)} |")
    recorded = [r.cpu_s for r in rows if r.cpu_s is not None]
    lines.append(f"| | all {len(rows):,} tests | {sum(r.wall_s for r in rows):,.1f} | "
                 f"{cpu(sum(recorded) if recorded else None)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("junit_xml", type=Path, help="pytest's --junitxml report")
    parser.add_argument("--top", type=int, default=20, help="how many tests to list (default 20)")
    parser.add_argument("--by", choices=("cpu", "wall"), default="wall", help="the column to sort by (default wall)")
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
    print(table(rows, args.top, args.by))
    return 0


if __name__ == "__main__":
    sys.exit(main())
