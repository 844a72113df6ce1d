"""The benches can fail: plant a bug in the RTL and the right cocotb test must catch it."""
import xml.etree.ElementTree as ET

import pytest
from amaranth.hdl import Const

from rtl import pipeline
from rtl.fp import multiply
from rtl.params import NoParams
from tb.runner import BenchFailed, run_bench

pytestmark = pytest.mark.verilator


def failed_tests(block_name: str, runs) -> set[str]:
    """Run the bench on the (mutated) block and return the names of the cocotb tests that failed."""
    # Under pytest cocotb's runner exits on failing tests; elsewhere ours raises BenchFailed.
    with pytest.raises((SystemExit, BenchFailed)):
        run_bench(block_name, "tb.fp.bench", NoParams(), runs=runs)
    results = ET.parse(runs / block_name / "results.xml")
    return {case.get("name") for case in results.iter("testcase") if case.find("failure") is not None}


def test_truncation_instead_of_rounding_is_caught(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(multiply, "round_nearest_even", lambda packed, guard, sticky: packed)
    assert {"bit_exact", "random_back_pressure"} <= failed_tests("fp32_mul", tmp_path)


def test_stages_that_ignore_back_pressure_are_caught(monkeypatch, tmp_path) -> None:
    stages_init = pipeline.Stages.__init__
    monkeypatch.setattr(pipeline.Stages, "__init__", lambda self, m, advance: stages_init(self, m, Const(1)))
    # At full rate nothing stalls, so only the back-pressure test can see the overwritten beats.
    assert failed_tests("fp16_mul_fp32", tmp_path) == {"random_back_pressure"}
