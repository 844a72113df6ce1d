"""Build the DuoPD MMU under Verilator and run its cocotb bench for every parameter set it proves; a planted
protection bug must make the bench fail."""
import xml.etree.ElementTree as ET

import pytest

from rtl.mmu import mmu
from rtl.mmu.params import POLICIES, MMUParams
from rtl.mmu.ports import Fault
from tb.benches import BENCHES
from tb.runner import BenchFailed, run_bench
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


def test_an_lsu_without_protection_is_caught(monkeypatch, tmp_path) -> None:
    """Plant the bug the protection check exists for: the LSU lets every instruction through."""
    monkeypatch.setattr(mmu, "fault_of", lambda m, p, instruction, config: Fault.NONE)
    monkeypatch.setenv("COCOTB_TEST_FILTER", "protection_faults")  # the one test that needs to see it
    # Under pytest cocotb's runner exits on failing tests; elsewhere ours raises BenchFailed.
    with pytest.raises((SystemExit, BenchFailed)):
        run_bench("mmu", BENCHES["mmu"].module, MMUParams(), runs=tmp_path)
    results = ET.parse(next(tmp_path.glob("mmu-*/results.xml")))
    assert {case.get("name") for case in results.iter("testcase") if case.find("failure") is not None} \
        == {"protection_faults"}
