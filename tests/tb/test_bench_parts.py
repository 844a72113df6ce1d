"""The shared bench parts behave as the benches assume (cocotb sampling semantics, probes, stream ends)."""
import pytest

from rtl.registry import BLOCKS
from basedie.flow.runner import run_bench

from tests.bench_configurations import beside_build

pytestmark = pytest.mark.verilator


@beside_build("fp_to_fp32", source="int4")
def test_bench_parts_selftest() -> None:
    run_bench("fp_to_fp32", "tb.selftest", BLOCKS["fp_to_fp32"].params(source="int4"))
