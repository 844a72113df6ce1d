"""Build every `rtl.fp` unit under Verilator and run its cocotb bench for every verified parameter set."""
import pytest

from rtl.registry import BLOCKS
from tb.benches import BENCHES
from tb.fp.vectors import RANDOM_VECTORS
from tb.models.fp import width
from tb.runner import run_bench
from tb.verify import module_runs, run_ids

RUNS = module_runs("tb.fp.bench")


@pytest.mark.parametrize("block_name,config", RUNS, ids=run_ids(RUNS))
def test_bench(block_name: str, config: dict) -> None:
    params = BLOCKS[block_name].params(**config)
    figures = run_bench(block_name, BENCHES[block_name].module, params)

    assert figures["latency_cycles"] == BLOCKS[block_name].component.latency
    assert figures["initiation_interval"] == 1
    assert figures["beats_per_cycle"] == 1.0
    if block_name == "fp_to_fp32":
        assert figures["vectors_checked"] == 2 ** width(config["source"])  # exhaustive
    else:
        assert figures["vectors_checked"] >= RANDOM_VECTORS
