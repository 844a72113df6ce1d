"""Build the DuoPD MMU under Verilator and run its cocotb bench for every parameter set it proves; a planted
protection bug must make the bench fail."""
import json
import xml.etree.ElementTree as ET

import pytest

from rtl.mmu import lsu
from rtl.mmu.params import POLICIES, MMUParams
from rtl.mmu.ports import Fault
from rtl.registry import BLOCKS
from basedie.flow.runner import BenchFailed, run_bench

from tests.bench_configurations import beside_build
from tests.tb.bench_runs import each_run, measure
from tests.tb.planted import needs_icarus, throttled

pytestmark = pytest.mark.verilator

SMALL = MMUParams(data_bits=32, queue_depth=4, gpu_outstanding=4, pending_entries=2, max_sub_requests=8)


@each_run("tb.mmu.bench")
def test_bench(block_name: str, config: dict) -> None:
    _, figures = measure(block_name, config)

    assert figures["requests_per_cycle_saturated"] >= 0.99
    assert figures["latency_cycles_gpu"] >= 1 and figures["latency_cycles_pnm"] >= 1
    grid = figures["arbitration"]
    assert {point["policy"] for point in grid} == set(POLICIES)
    assert any(point["gpu_offered"] == point["pnm_offered"] == 1.0 for point in grid)
    assert figures["vectors_checked"] > 1000


@needs_icarus
def test_an_lsu_without_protection_is_caught(monkeypatch, tmp_path) -> None:
    """Plant the bug the protection check exists for: the LSU lets every instruction through. A narrow, small
    configuration builds in a fraction of the default's time and runs the same protection test."""
    monkeypatch.setattr(lsu, "fault_of", lambda m, p, instruction, config: Fault.NONE)
    monkeypatch.setenv("COCOTB_TEST_FILTER", "protection_faults")  # the one test that needs to see it
    # Under pytest cocotb's runner exits on failing tests; elsewhere ours raises BenchFailed.
    with pytest.raises((SystemExit, BenchFailed)):
        run_bench("mmu", BLOCKS["mmu"].bench.module, SMALL, runs=tmp_path, simulator="icarus")
    results = ET.parse(next(tmp_path.glob("mmu-*/results.xml")))
    assert {case.get("name") for case in results.iter("testcase") if case.find("failure") is not None} \
        == {"protection_faults"}


@needs_icarus
@beside_build("mmu", out_of_order=False)
def test_an_mmu_issuing_every_other_cycle_halves_its_measured_rate_and_doubles_its_ii(monkeypatch, tmp_path) -> None:
    """Plant a slower issue path (the MC request port transfers only every other cycle): the saturated
    throughput test fails, and the rate and II it measured say why. (The default parameters: SMALL's 4-deep
    queues cannot keep the issue register busy every cycle.) The unplanted MMU runs on the bench's Verilator build
    (cycle counts do not depend on the simulator, and `tests/tb/test_icarus_benches.py` runs the same test on it
    under Icarus); the planted one, a Verilog of its own, under Icarus."""
    monkeypatch.setenv("COCOTB_TEST_FILTER", "saturated_throughput")
    full = run_bench("mmu", BLOCKS["mmu"].bench.module, MMUParams(), runs=tmp_path / "full")
    monkeypatch.setitem(BLOCKS, "mmu", throttled("mmu", "mc_req"))
    with pytest.raises((SystemExit, BenchFailed)):
        run_bench("mmu", BLOCKS["mmu"].bench.module, MMUParams(), runs=tmp_path / "slow", simulator="icarus")
    slow = json.loads(next((tmp_path / "slow").glob("mmu*/figures.json")).read_text())
    assert (full["initiation_interval"], full["requests_per_cycle_saturated"]) == (1, 1.0)
    assert slow["initiation_interval"] == 2
    assert slow["requests_per_cycle_saturated"] == pytest.approx(0.5, abs=0.01)
