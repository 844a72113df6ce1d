"""The benches can fail: plant a bug in the RTL and the right cocotb test must catch it."""
import pytest
from amaranth.hdl import Const
from tests.tb.planted import failed_tests, needs_icarus

from rtl import pipeline
from rtl.fp import multiply
from rtl.params import NoParams
from rtl.pnm_lane import accumulator
from rtl.pnm_lane.params import LaneParams

pytestmark = pytest.mark.verilator


@needs_icarus
def test_truncation_instead_of_rounding_is_caught(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(multiply, "round_nearest_even", lambda packed, guard, sticky: packed)
    assert {"bit_exact", "random_back_pressure"} <= failed_tests("fp32_mul", "tb.fp.bench", NoParams(), tmp_path)


@needs_icarus
def test_stages_that_ignore_back_pressure_are_caught(monkeypatch, tmp_path) -> None:
    stages_init = pipeline.Stages.__init__
    monkeypatch.setattr(pipeline.Stages, "__init__", lambda self, m, advance: stages_init(self, m, Const(1)))
    # At full rate nothing stalls, so only the back-pressure test can see the overwritten beats.
    assert failed_tests("fp16_mul_fp32", "tb.fp.bench", NoParams(), tmp_path) == {"random_back_pressure"}


@needs_icarus
def test_an_accumulator_that_truncates_is_caught(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(accumulator, "round_nearest_even", lambda packed, guard, sticky: packed)
    assert "bit_exact" in failed_tests("pnm_lane", "tb.pnm_lane.bench", LaneParams(width=2, sublane_width=1), tmp_path)
