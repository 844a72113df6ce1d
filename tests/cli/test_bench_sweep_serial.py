"""scripts/bench_sweep.py with `--workers 0`: the serial run alone (it crashed on the missing cluster)."""
import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "bench_sweep.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("bench_sweep", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_workers_zero_runs_the_serial_points_only(script, capsys) -> None:
    assert script.main(["--points", "2", "--workers", "0"]) == 0
    out = capsys.readouterr().out
    assert "2 DuoPD points" in out and "serial, one process" in out
    assert "LocalCluster" not in out and "0 points failed" in out


def test_negative_workers_is_a_usage_error(script) -> None:
    with pytest.raises(SystemExit) as exit_:
        script.main(["--workers", "-1"])
    assert exit_.value.code == 2
