"""Build the DuoPD MMU under Verilator and run its cocotb bench for every parameter set it proves; a planted
protection bug must make the bench fail."""
import json
import xml.etree.ElementTree as ET

import pytest

from rtl.mmu import mmu
from rtl.mmu.params import POLICIES, MMUParams
from rtl.mmu.ports import Fault
from rtl.registry import BLOCKS
from tb.benches import BENCHES
from tb.models import mmu as model
from tb.runner import BenchFailed, run_bench
from tb.verify import module_runs, run_ids

from planted import throttled

RUNS = module_runs("tb.mmu.bench")
SMALL = MMUParams(data_width=32, queue_depth=4, gpu_outstanding=4, pending_entries=2, max_sub_requests=8)


@pytest.mark.parametrize("config", [c for _, c in RUNS],
                         ids=run_ids(RUNS))
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
                         ("wrr_weight_gpu", 0), ("addr_width", 8), ("protected_regions", -1),
                         ("design_clock_hz", 0), ("data_width", 65536)):
        with pytest.raises(ValueError, match=field):
            MMUParams(**{field: value})


def test_an_lsu_without_protection_is_caught(monkeypatch, tmp_path) -> None:
    """Plant the bug the protection check exists for: the LSU lets every instruction through. A narrow, small
    configuration builds in a fraction of the default's time and runs the same protection test."""
    monkeypatch.setattr(mmu, "fault_of", lambda m, p, instruction, config: Fault.NONE)
    monkeypatch.setenv("COCOTB_TEST_FILTER", "protection_faults")  # the one test that needs to see it
    # Under pytest cocotb's runner exits on failing tests; elsewhere ours raises BenchFailed.
    with pytest.raises((SystemExit, BenchFailed)):
        run_bench("mmu", BENCHES["mmu"].module, SMALL, runs=tmp_path)
    results = ET.parse(next(tmp_path.glob("mmu-*/results.xml")))
    assert {case.get("name") for case in results.iter("testcase") if case.find("failure") is not None} \
        == {"protection_faults"}


def test_golden_protection_and_decomposition_by_hand() -> None:
    limits = dict(request_bytes=32, max_sub_requests=32, buffer_rows=1024, memory_size=4096,
                  regions=[(1024, 2048), (0, 0)])
    def instr(base: int, size: int, store: bool, dest: int = 0) -> model.Instruction:
        return model.Instruction(base=base, size=size, dest=dest, store=store, id=0)

    assert model.fault(instr(1024, 32, True), **limits) == model.PROTECTED
    assert model.fault(instr(992, 64, True), **limits) == model.PROTECTED      # overlaps the region's start
    assert model.fault(instr(2048, 32, True), **limits) == model.NONE          # the limit is exclusive
    assert model.fault(instr(1024, 1024, False), **limits) == model.NONE       # loads may read parameters
    assert model.fault(instr(4064, 33, False), **limits) == model.OUT_OF_RANGE
    assert model.fault(instr(4064, 32, False), **limits) == model.NONE
    assert model.fault(instr(16, 32, False), **limits) == model.MALFORMED      # unaligned base
    assert model.fault(instr(0, 1025, False), **limits) == model.MALFORMED     # more than 32 requests
    assert model.fault(instr(0, 64, False, dest=1023), **limits) == model.MALFORMED  # rows overflow
    assert model.sub_requests(instr(64, 70, False, dest=5), 32) == [
        model.SubRequest(2, 0xFFFFFFFF, 5), model.SubRequest(3, 0xFFFFFFFF, 6), model.SubRequest(4, 0x3F, 7)]


def test_golden_wrr_order_and_wait_statistics() -> None:
    assert "".join(s[0] for s in model.wrr_sources(3, 1, 9)) == "gggpgggpg"
    stats = model.wait_statistics(list(range(101)))
    assert (stats["p50"], stats["p99"], stats["max"]) == (50.0, 99.0, 100.0)


def test_an_mmu_issuing_every_other_cycle_halves_its_measured_rate_and_doubles_its_ii(monkeypatch, tmp_path) -> None:
    """Plant a slower issue path (the MC request port transfers only every other cycle): the saturated
    throughput test fails, and the rate and II it measured say why. (The default parameters: SMALL's 4-deep
    queues cannot keep the issue register busy every cycle.)"""
    monkeypatch.setenv("COCOTB_TEST_FILTER", "saturated_throughput")
    full = run_bench("mmu", BENCHES["mmu"].module, MMUParams(), runs=tmp_path / "full")
    monkeypatch.setitem(BLOCKS, "mmu", throttled("mmu", "mc_req"))
    with pytest.raises((SystemExit, BenchFailed)):
        run_bench("mmu", BENCHES["mmu"].module, MMUParams(), runs=tmp_path / "slow")
    slow = json.loads(next((tmp_path / "slow").glob("mmu*/figures.json")).read_text())
    assert (full["initiation_interval"], full["requests_per_cycle_saturated"]) == (1, 1.0)
    assert slow["initiation_interval"] == 2
    assert slow["requests_per_cycle_saturated"] == pytest.approx(0.5, abs=0.01)
