"""A sweep survives a worker process killed mid-sweep: Dask reschedules the dead worker's batches, and the table
is complete and identical to an uninterrupted run's (scripts/bench_sweep.py --faults does the same at 1,000
points, and also kills and resumes the whole `basedie sweep`)."""
import os
import runpy
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from basedie.simulation import simulate_parser
from basedie.spec import load
from basedie.sweep import sweep

pytestmark = pytest.mark.slow      # a two-worker LocalCluster: seconds to start
SCRIPT = Path(__file__).parents[2] / "scripts" / "bench_sweep.py"
SPEC = """
[base]
system = "duopd"
model = "LLaMA2-70B"
input-len = 1024
requests = 2
[axes]
hw.pnm.power_w = [4, 8, 12, 16]
output-len = [2, 4, 6, 8, 10]
"""


def test_a_worker_killed_mid_sweep_leaves_the_table_complete_and_identical(tmp_path) -> None:
    script = SimpleNamespace(**runpy.run_path(str(SCRIPT)))
    path = tmp_path / "spec.toml"
    path.write_text(SPEC)
    parser = simulate_parser()
    spec = load(path, parser)
    points = spec.points(parser)
    assert sweep(spec, points, SPEC, tmp_path / "serial", None, progress=False, plots=False)["failed"] == 0
    killed = script.killed_worker(spec, points, SPEC, tmp_path / "killed", workers=2)
    assert 1 <= killed["parts"] < killed["batches"]               # killed after the first batch, before the last
    with pytest.raises(ProcessLookupError):
        os.kill(killed["pid"], 0)                                 # that worker is gone
    assert killed["counts"] == {"points": 20, "computed": 20, "reused": 0, "failed": 0}
    assert pq.read_table(tmp_path / "killed" / "points.parquet").equals(
        pq.read_table(tmp_path / "serial" / "points.parquet"))
