"""scripts/bench_sweep.py with `--workers 0`: the serial run alone (it crashed on the missing cluster)."""
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "bench_sweep.py"


@pytest.fixture(scope="module")
def script():
    return SimpleNamespace(**runpy.run_path(str(SCRIPT)))


def test_workers_zero_runs_the_serial_points_only(script, capsys) -> None:
    assert script.main(["--points", "2", "--workers", "0"]) == 0
    out = capsys.readouterr().out
    assert "2 DuoPD points" in out and "serial, one process" in out
    assert "LocalCluster" not in out and "0 points failed" in out


def test_negative_workers_is_a_usage_error(script) -> None:
    with pytest.raises(SystemExit) as exit_:
        script.main(["--workers", "-1"])
    assert exit_.value.code == 2
