"""scripts/slowest_tests.py: the slowest tests of a JUnit XML report, with the CPU seconds tests/conftest.py records."""
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "slowest_tests.py"
REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.tb.test_a" name="test_build[x]@build-x" time="30.0">
  <properties><property name="cpu_s" value="4.0"/></properties></testcase>
<testcase classname="tests.cli.test_b" name="test_quick" time="0.5">
  <properties><property name="cpu_s" value="9.0"/></properties></testcase>
<testcase classname="tests.cli.test_b" name="test_other" time="2.0">
  <properties><property name="cpu_s" value="1.5"/></properties></testcase>
</testsuite></testsuites>"""


@pytest.fixture(scope="module")
def script():
    return SimpleNamespace(**runpy.run_path(str(SCRIPT)))


def report(tmp_path, text: str = REPORT) -> str:
    path = tmp_path / "junit.xml"
    path.write_text(text)
    return str(path)


def test_rows_are_sorted_by_the_chosen_column_and_the_totals_cover_every_test(script, tmp_path, capsys) -> None:
    assert script.main([report(tmp_path), "--top", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "| 1 | `tests/tb/test_a.py::test_build[x]` | 30.0 | 4.0 |"   # the xdist group is not shown
    assert lines[3].startswith("| 2 | `tests/cli/test_b.py::test_other`") and len(lines) == 5
    assert lines[4] == "| | all 3 tests | 32.5 | 14.5 |"
    assert script.main([report(tmp_path), "--by", "cpu", "--top", "1"]) == 0
    assert "`tests/cli/test_b.py::test_quick` | 0.5 | 9.0 |" in capsys.readouterr().out


@pytest.mark.parametrize("text,argv,message", [
    (None, ["--top", "0"], "--top 0: list at least 1 test"),
    ("<testsuites>", [], "not a readable JUnit XML report"),
    ("<testsuites><testsuite/></testsuites>", [], "the report holds no test cases"),
    ('<testsuites><testcase classname="a" name="b" time="1"/></testsuites>', ["--by", "cpu"],
     "no test has a cpu_s property"),
])
def test_a_bad_report_or_option_is_one_line_exit_2(script, tmp_path, capsys, text, argv, message) -> None:
    assert script.main([report(tmp_path, text or REPORT), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_modules_sum_their_tests(script, tmp_path, capsys) -> None:
    assert script.main([report(tmp_path), "--modules", "--by", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2:] == ["| 1 | `tests/cli/test_b.py (2 tests)` | 2.5 | 10.5 |",
                         "| 2 | `tests/tb/test_a.py (1 tests)` | 30.0 | 4.0 |",
                         "| | all 3 tests in them | 32.5 | 14.5 |"]
