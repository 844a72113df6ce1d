"""Build the DuoPD MMU under Verilator and run its cocotb bench for every parameter set it proves."""
import pytest

from rtl.mmu.params import POLICIES, MMUParams
from tb.benches import BENCHES
from tb.runner import run_bench
from tb.verify import bench_runs

RUNS = bench_runs(["mmu"], include_verify_only=False)


@pytest.mark.parametrize("config", [c for _, c in RUNS], ids=["-".join(f"{k}={v}" for k, v in c.items()) or "default" for _, c in RUNS])
def test_bench(config: dict) -> None:
    figures = run_bench("mmu", BENCHES["mmu"].module, MMUParams(**config))

    assert figures["requests_per_cycle_saturated"] >= 0.99
    assert figures["latency_cycles_gpu"] >= 1 and figures["latency_cycles_pnm"] >= 1
    grid = figures["arbitration"]
    assert {point["policy"] for point in grid} == set(POLICIES)
    assert any(point["gpu_offered"] == point["pnm_offered"] == 1.0 for point in grid)
    assert figures["vectors_checked"] > 1000


def test_bad_parameters_name_the_field() -> None:
    for field, value in (("policy", "fair"), ("data_width", 48), ("pending_entries", 0),
                         ("wrr_weight_gpu", 0), ("addr_width", 8), ("protected_regions", -1)):
        with pytest.raises(ValueError, match=field):
            MMUParams(**{field: value})
