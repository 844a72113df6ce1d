"""The SymbiYosys runner reads SBY's verdicts right, on a counter small enough to reason about by hand: it counts
0..9 and wraps, stepping when a free input says so."""
import pytest
from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Elaboratable, Module, Mux, Signal

from basedie.flow import sby
from tb.formal.harness import clocked

pytestmark = pytest.mark.slow     # SymbiYosys runs (Yosys and a solver): minutes of CPU in all


class Counter(Elaboratable):
    def __init__(self, never: int) -> None:
        self.never = never

    def elaborate(self, platform) -> Module:
        m = Module()
        clocked(m)
        count = Signal(4)
        with m.If(AnySeq(1)):
            m.d.sync += count.eq(Mux(count == 9, 0, count + 1))
        m.d.comb += Assert(count != self.never)
        return m


def test_an_unreachable_value_whose_only_predecessor_is_itself_is_proved_by_1_induction() -> None:
    # 10 follows only 10 (9 wraps to 0): one step from any state other than 10 never reaches it.
    outcome = sby.run(Counter(10), "prove", 5)
    assert (outcome.status, outcome.induction) == ("PASS", 1)


def test_an_unreachable_value_with_a_stuttering_path_to_it_is_not_proved() -> None:
    # 12 is unreachable, but 10 → 11 → 12 (with any number of stalls before) is a path of states without 12 of
    # any length: induction never closes, and BMC finds nothing.
    outcome = sby.run(Counter(12), "prove", 5)
    assert (outcome.status, outcome.induction) == ("UNKNOWN", None)


@pytest.mark.parametrize("depth, status", [(5, "PASS"), (6, "FAIL")])
def test_a_reachable_value_is_found_at_its_step(depth, status, tmp_path) -> None:
    # 5 needs five steps from reset: it is at step 5, which a 6-step BMC (steps 0..5) covers and a 5-step one not.
    outcome = sby.run(Counter(5), "bmc", depth, keep=tmp_path)
    assert outcome.status == status
    if status == "FAIL":
        assert outcome.failed_step == 5 and outcome.failed_assertions[0].startswith("tests/rtl/test_formal_sby.py:")
        assert outcome.trace.exists()


class Started(Exception):
    pass


def test_sby_runs_with_the_callers_environment_and_the_solver_first_on_path(monkeypatch) -> None:
    seen = {}

    def popen(command, env, **_):
        seen.update(env)
        raise Started

    monkeypatch.setenv("YOWASP_CACHE_DIR", "/planted/cache")
    monkeypatch.setattr(sby, "ready", lambda: None)
    monkeypatch.setattr(sby.subprocess, "Popen", popen)
    with pytest.raises(Started):
        sby.run(Counter(10), "prove", 1)
    assert seen["YOWASP_CACHE_DIR"] == "/planted/cache"
    assert seen["PATH"].startswith(f"{sby.tools()['yices-smt2'].parent}:")
