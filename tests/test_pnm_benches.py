"""Build the PNM lane and array under Verilator and run their cocotb bench for every pytest parameter set."""
import pytest

from rtl.pnm.simd import latency_of
from rtl.registry import BLOCKS
from tb.benches import BENCHES
from tb.runner import run_bench
from tb.verify import module_runs, run_ids

RUNS = module_runs("tb.pnm.bench")


@pytest.mark.parametrize("block_name,config", RUNS, ids=run_ids(RUNS))
def test_bench(block_name: str, config: dict) -> None:
    params = BLOCKS[block_name].params(**config)
    figures = run_bench(block_name, BENCHES[block_name].module, params)

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
