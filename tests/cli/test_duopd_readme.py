"""scripts/duopd_readme.py: the README's DuoPD results section, written from a study's headline table between its
two markers."""
import csv
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
FIELDS = ["figure", "claim", "paper", "ours", "agrees", "mechanism"]
ROWS = [{"figure": "11", "claim": "a", "paper": "1.5", "ours": "1.4", "agrees": "True", "mechanism": "agrees"},
        {"figure": "11", "claim": "b", "paper": "1.5", "ours": "0.9", "agrees": "False",
         "mechanism": "TP all-reduces not overlapped (reason 1); --allreduce-overlap: 1.3"},
        {"figure": "11", "claim": "c", "paper": "2.4", "ours": "1.0", "agrees": "False",
         "mechanism": "TP all-reduces not overlapped (reason 1); --allreduce-overlap: 1.1"},
        {"figure": "16", "claim": "d", "paper": "14.8", "ours": "30.5", "agrees": "False",
         "mechanism": "not explained"}]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("duopd_readme", ROOT / "scripts" / "duopd_readme.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def study(folder: Path, rows=ROWS) -> Path:
    folder.mkdir()
    with open(folder / "headline.csv", "w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return folder


def test_the_section_counts_agreeing_claims_per_figure_and_names_each_mechanism_once(script) -> None:
    text = script.section(ROWS)
    assert text.startswith("1 of 4 headline claims of the DuoPD study agree")
    assert "| 11 | 3 | 1 | TP all-reduces not overlapped (1) |" in text.splitlines()
    assert "| 16 | 1 | 0 | not explained |" in text.splitlines()
    assert "(docs/results/duopd-study.md)" in text


def test_only_the_text_between_the_markers_is_rewritten(script, tmp_path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# top\n\n{script.BEGIN}\nold\n{script.END}\n\n## after\n")
    script.main([str(study(tmp_path / "s")), "--readme", str(readme)])
    once = readme.read_text()
    assert once == f"# top\n\n{script.BEGIN}\n{script.section(ROWS)}{script.END}\n\n## after\n"
    script.main([str(tmp_path / "s"), "--readme", str(readme)])
    assert readme.read_text() == once


@pytest.mark.parametrize("readme_text, table, message", [
    ("no markers\n", True, "needs one"),
    ("x\n", False, "no headline table"),
])
def test_a_missing_marker_or_table_is_one_line_and_writes_nothing(script, tmp_path, capsys, readme_text, table,
                                                                   message) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(readme_text)
    folder = study(tmp_path / "s") if table else tmp_path / "none"
    with pytest.raises(SystemExit) as exit_:
        script.main([str(folder), "--readme", str(readme)])
    assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert readme.read_text() == readme_text


def test_the_committed_readme_holds_a_generated_section(script) -> None:
    readme = (ROOT / "README.md").read_text()
    body = readme.split(script.BEGIN + "\n")[1].split(script.END)[0]
    lines = body.splitlines()
    assert lines[0].split(" of ")[0].isdigit() and "| fig | claims | agree |" in body
    figures = [line.split("|")[1].strip() for line in lines if line.startswith("| ") and line[2].isdigit()]
    assert figures == ["11", "12", "9", "13", "14", "15", "16"]
