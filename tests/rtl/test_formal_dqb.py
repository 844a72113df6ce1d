"""The DQB's formal properties can fail (docs/guides/formal.md): the bug the proof of `mc_req_stable` found, put back,
response registers that ignore back-pressure, and a short path that overtakes the datapath, must each give a
counterexample."""
import pytest
from amaranth.hdl import Const

from rtl.dqb import dqb as rtl_dqb
from rtl.dqb import processing
from basedie.flow import sby
from tb.formal import dqb

pytestmark = pytest.mark.slow     # SymbiYosys runs (Yosys and a solver): minutes of CPU in all

PROPERTIES = {p.name: p for p in dqb.PROPERTIES}


def bmc(name: str, depth: int) -> sby.Outcome:
    return sby.run(PROPERTIES[name].harness("small"), "bmc", depth)


def test_a_config_write_that_empties_the_sz_directory_under_a_waiting_request(monkeypatch) -> None:
    """Regression: before the fix the directory was emptied at once, turning a zero-point fill that waited on
    `mc_req` into a scale fill (counterexample at step 4)."""
    class Hasty(rtl_dqb.SZRequestGenerator):
        def elaborate(self, platform):
            m = super().elaborate(platform)
            m.d.comb += [m.submodules.scales.flush.eq(self.config.valid),
                         m.submodules.zeros.flush.eq(self.config.valid)]
            return m
    monkeypatch.setattr(rtl_dqb, "SZRequestGenerator", Hasty)
    outcome = bmc("mc_req_stable", 6)
    assert outcome.status == "FAIL" and outcome.failed_step <= 5, outcome.log[-2000:]


def test_the_real_dqb_keeps_mc_req_still_where_the_bug_showed() -> None:
    outcome = bmc("mc_req_stable", 6)
    assert outcome.status == "PASS", outcome.log[-2000:]


def test_response_registers_that_ignore_back_pressure_move_a_waiting_response(monkeypatch) -> None:
    # The registers that carry each beat's valid, control and raw data to gpu_resp advance every cycle.
    delayed = processing.delayed
    monkeypatch.setattr(processing, "delayed",
                        lambda m, advance, value, stages, name: delayed(m, Const(1), value, stages, name))
    outcome = bmc("gpu_resp_stable", 22)   # counterexample at step 20 with the 16-cycle pipeline
    assert outcome.status == "FAIL" and outcome.failed_assertions, outcome.log[-2000:]


def test_a_short_path_that_overtakes_the_datapath_breaks_the_response_order(monkeypatch) -> None:
    """A store's acknowledgement (or a bypass beat) taking the short path past a dequantized read still in the
    datapath is delivered in that read's place (counterexample at step 4: the read accepted at step 0, the store
    at step 1, both answered by step 3)."""
    class Overtaking(processing.DataProcessing):
        def _nothing_older(self, stage_valid):
            return Const(1)
    monkeypatch.setattr(rtl_dqb, "DataProcessing", Overtaking)
    outcome = bmc("in_order", 6)
    assert outcome.status == "FAIL" and outcome.failed_step <= 5, outcome.log[-2000:]


def test_the_real_dqb_keeps_the_response_order_where_the_bug_showed() -> None:
    outcome = bmc("in_order", 6)
    assert outcome.status == "PASS", outcome.log[-2000:]
