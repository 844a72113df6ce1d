"""Pinned study results: a study's headline table checked in as expected values with tolerances.

Each `tests/sysmodel/pinned/<name>.json` names the command that produces a CSV (`command`: a study's name and its
arguments, as `basedie study` takes them, run in this Python process; `{out}` is a fresh folder), the CSV (`table`), the
column whose value identifies a row (`key`), and per row the expected value of every pinned column (`expected`).
Numeric columns (`numbers`) may move by `rel_tol` (relative) or `abs_tol`; text columns (`texts`) must match
exactly. A study pins its results by adding one such file; `tests/sysmodel/test_pinned_results.py` runs every file
it finds.

A model change that moves a result must update the pinned file in the same commit, with a line in the commit
message saying why:

    python tests/sysmodel/pinned.py tests/sysmodel/pinned/<name>.json   # rewrite the expected values from a fresh run
"""
import csv
import importlib
import io
import json
import math
import sys
import tempfile
from contextlib import redirect_stdout
from functools import cache
from pathlib import Path

import pytest

from basedie.studies import STUDIES

ROOT = Path(__file__).resolve().parents[2]
FOLDER = Path(__file__).resolve().parent / "pinned"


def files() -> list[Path]:
    return sorted(FOLDER.glob("*.json"))


def command(name: str) -> tuple[str, ...]:
    """The command of the pinned file `name` (its stem)."""
    return tuple(json.loads((FOLDER / f"{name}.json").read_text())["command"])


def xdist_group(name: str) -> pytest.MarkDecorator:
    """The group of the tests that read the run of the pinned file `name` (its stem): with `--dist loadgroup`
    they share one worker, so `run` runs the study once."""
    return pytest.mark.xdist_group(f"pinned-{name}")


@cache
def run(command: tuple[str, ...]) -> tuple[Path, str]:
    """Run a study command (a study's name and its arguments) once per test process, in this process: (its output
    folder, what it printed)."""
    out = Path(tempfile.mkdtemp(prefix="pinned-"))
    study, *argv = (part.replace("{out}", str(out)) for part in command)
    printed = io.StringIO()
    with redirect_stdout(printed):
        importlib.import_module(STUDIES[study][0]).main(argv)
    return out, printed.getvalue()


def number(text: str) -> float:
    return float(text) if text not in ("", "nan") else math.nan


def measured(pin: dict) -> dict[str, dict[str, float | str]]:
    """The pinned columns of every row the command produces now, by key."""
    out, _ = run(tuple(pin["command"]))
    with (out / pin["table"]).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    table = {r[pin["key"]]: {**{c: number(r[c]) for c in pin.get("numbers", [])},
                             **{c: r[c] for c in pin.get("texts", [])}} for r in rows}
    if len(table) != len(rows):
        raise ValueError(f"{pin['table']}: the key column {pin['key']!r} does not identify every row")
    return table


def drifts(pin: dict, now: dict[str, dict]) -> list[str]:
    """Every difference between the pinned values and `now`, one line each (empty: no drift)."""
    expected = pin["expected"]
    problems = [f"new row, not pinned: {key}" for key in now if key not in expected]
    problems += [f"pinned row no longer produced: {key}" for key in expected if key not in now]
    for key in expected.keys() & now.keys():
        for column, want in expected[key].items():
            got = now[key][column]
            if column in pin.get("numbers", []):
                want = math.nan if want is None else want
                same = (math.isnan(want) and math.isnan(got)) or math.isclose(
                    got, want, rel_tol=pin.get("rel_tol", 0.0), abs_tol=pin.get("abs_tol", 0.0))
            else:
                same = got == want
            if not same:
                problems.append(f"{key} [{column}]: pinned {want!r}, now {got!r}")
    return sorted(problems)


def update(path: Path) -> None:
    """Rewrite `path`'s expected values from a fresh run (tolerances and command kept)."""
    pin = json.loads(path.read_text())
    now = measured(pin)
    pin["expected"] = {key: {c: (None if isinstance(v, float) and math.isnan(v) else v) for c, v in row.items()}
                       for key, row in now.items()}
    path.write_text(json.dumps(pin, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    for name in sys.argv[1:] or [str(p) for p in files()]:
        update(Path(name))
        print(f"updated {name}")
