"""Build the PNM lane and array under Verilator and run their cocotb bench for every pytest parameter set; a
planted slower datapath must halve the MAC rate the bench measures."""
import json

import pytest

from rtl.pnm_lane.simd import latency_of
from rtl.registry import BLOCKS
from basedie.flow.runner import BenchFailed, run_bench

from tests.bench_configurations import beside_build
from tests.tb.bench_runs import each_run, measure
from tests.tb.planted import needs_icarus, throttled

pytestmark = pytest.mark.verilator


@each_run("tb.pnm_lane.bench")
def test_bench(block_name: str, config: dict) -> None:
    params, figures = measure(block_name, config)

    latency = latency_of(params)
    assert figures["latency_cycles_mlp"] == figures["latency_cycles_attention"] == latency
    assert figures["initiation_interval"] == 1
    assert figures["operand_pairs_per_cycle"] == 1.0
    lanes = getattr(params, "lanes", 1)
    assert figures["macs_per_cycle"] == params.width * lanes
    assert figures["vectors_checked"] > 900
    if block_name == "pnm_array":
        # Every lane is busy in a GEMV whose batch fills the lanes; attention uses one lane per query head.
        assert 0.9 < figures["utilization_gemv_batch16"] <= 1
        assert figures["utilization_attention_gqa1"] < figures["utilization_attention_gqa8"] <= 1


@needs_icarus
@beside_build("pnm_lane", width=2, sublane_width=1)
def test_a_lane_taking_a_beat_every_other_cycle_halves_its_measured_mac_rate(monkeypatch, tmp_path) -> None:
    """Plant a slower datapath (the lane's input transfers only every other cycle): the bench fails its II
    check, and the MACs it counts from the consumed operands halve with the rate. The unplanted lane runs on the
    bench's Verilator build (cycle counts do not depend on the simulator, and `tests/tb/test_icarus_benches.py`
    runs the same test on it under Icarus); the planted one under Icarus."""
    params = BLOCKS["pnm_lane"].params(width=2, sublane_width=1)
    monkeypatch.setenv("COCOTB_TEST_FILTER", "latency_and_initiation_interval")
    full = run_bench("pnm_lane", "tb.pnm_lane.bench", params, runs=tmp_path / "full")
    monkeypatch.setitem(BLOCKS, "pnm_lane", throttled("pnm_lane", "i"))
    with pytest.raises((SystemExit, BenchFailed)):
        run_bench("pnm_lane", "tb.pnm_lane.bench", params, runs=tmp_path / "slow", simulator="icarus")
    slow = json.loads(next((tmp_path / "slow").glob("pnm_lane*/figures.json")).read_text())
    # Width 2: one beat of 2 operand pairs per cycle, then one every other cycle.
    assert (full["initiation_interval"], full["operand_pairs_per_cycle"], full["macs_per_cycle"]) == (1, 1.0, 2.0)
    assert (slow["initiation_interval"], slow["operand_pairs_per_cycle"], slow["macs_per_cycle"]) == (2, 0.5, 1.0)
    assert slow["latency_cycles_mlp"] == full["latency_cycles_mlp"]     # the same pipeline, fed more slowly
