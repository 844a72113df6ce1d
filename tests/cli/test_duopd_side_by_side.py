"""The DuoPD study: finished studies' headline tables side by side (a column per study), and a performance
model that cannot price the paper's GPU refused up front."""
import csv
from pathlib import Path

import pytest

from basedie.studies import duopd

FIELDS = ["figure", "claim", "paper_relation", "paper", "ours", "deviation", "deviation_kind", "simulation"]


def headline(folder: Path, ours: list[float], claims=("speed-up | low", "TPOT")) -> Path:
    folder.mkdir()
    with open(folder / "headline.csv", "w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=FIELDS)
        writer.writeheader()
        for claim, value, relation in zip(claims, ours, ("=", ">")):
            writer.writerow({"figure": "11", "claim": claim, "paper_relation": relation, "paper": 1.46,
                             "ours": value, "deviation": 0, "deviation_kind": "ours/paper", "simulation": "x"})
    return folder


def test_one_column_of_ours_per_study(tmp_path, capsys) -> None:
    a = headline(tmp_path / "roofline", [1.1712, 0.5])
    b = headline(tmp_path / "roofline-efficiency", [1.28, 2.0])
    duopd.main(["--side-by-side", str(a), str(b)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| fig | claim | paper | roofline | roofline-efficiency |"
    assert lines[2] == "| 11 | speed-up \\| low | 1.46 | 1.171 | 1.28 |"
    assert lines[3] == "| 11 | TPOT | >1.46 | 0.5 | 2 |"


def test_studies_of_different_claims_are_refused(tmp_path) -> None:
    a = headline(tmp_path / "a", [1.0, 1.0])
    b = headline(tmp_path / "b", [1.0, 1.0], claims=("other", "TPOT"))
    with pytest.raises(SystemExit, match="different claims"):
        duopd.main(["--side-by-side", str(a), str(b)])


def test_a_model_that_cannot_price_the_papers_gpu_is_refused_before_any_run(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        duopd.main(["--quick", "--perf-model", "measured", "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    assert "no measured profile for GB300" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
