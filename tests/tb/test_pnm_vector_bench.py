# amaranth: UnusedElaboratable=no
"""Build the vector unit under Verilator and run its cocotb bench; a planted rounding error in the exp
polynomial must make the bit-exact test fail."""
import pytest

from rtl.pnm_vector import approx
from rtl.pnm_vector.ports import Op
from rtl.registry import BLOCKS
from basedie.flow.runner import BenchFailed, run_bench

from tests.tb.bench_runs import each_run
from tests.tb.planted import needs_icarus

pytestmark = pytest.mark.verilator


@each_run("tb.pnm_vector.bench")
def test_bench(block_name: str, config: dict) -> None:
    params = BLOCKS[block_name].params(**config)
    figures = run_bench(block_name, BLOCKS[block_name].bench.module, params)
    latency = BLOCKS[block_name].build(params).latency
    assert figures["latency_cycles"] == latency and figures["initiation_interval"] == 1
    for op in Op:
        assert figures[f"latency_cycles_{op.name.lower()}"] == latency
        assert figures[f"elements_per_cycle_{op.name.lower()}"] == params.width  # one beat per cycle
    assert figures["elements_per_cycle_reduce_sum_exp"] == params.width
    assert figures["output_beats_checked"] > 10 * 400


@needs_icarus
def test_a_polynomial_coefficient_rounded_the_wrong_way_fails_the_bench(monkeypatch, tmp_path) -> None:
    """The RTL built with exp's last coefficient one ulp off (its other rounding): the model disagrees."""
    coefficients = list(approx.EXP_POLY)
    coefficients[-1] = type(coefficients[-1])(coefficients[-1].value + 1, 32)
    monkeypatch.setattr(approx, "EXP_POLY", tuple(coefficients))
    monkeypatch.setenv("COCOTB_TEST_FILTER", "bit_exact")
    with pytest.raises((SystemExit, BenchFailed)):
        run_bench("pnm_vector", "tb.pnm_vector.bench", BLOCKS["pnm_vector"].params(width=1), runs=tmp_path,
                  simulator="icarus")
