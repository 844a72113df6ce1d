"""Build every `rtl.fp` unit under Verilator and run its cocotb bench for every verified parameter set."""
import pytest

from rtl.registry import BLOCKS
from tb.fp.stimulus import RANDOM_VECTORS
from tb.models.fp import width

from tests.tb.bench_runs import each_run, measure

pytestmark = pytest.mark.verilator


@each_run("tb.fp.bench")
def test_bench(block_name: str, config: dict) -> None:
    _, figures = measure(block_name, config)

    assert figures["latency_cycles"] == BLOCKS[block_name].component.latency
    assert figures["initiation_interval"] == 1
    assert figures["beats_per_cycle"] == 1.0
    if block_name == "fp_to_fp32":
        assert figures["vectors_checked"] == 2 ** width(config["source"])  # exhaustive
    else:
        assert figures["vectors_checked"] >= RANDOM_VECTORS
