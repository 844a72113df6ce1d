"""Build the PNM controller under Verilator and run its cocotb bench; a BARRIER that waits for nothing, or a decoder
that lets a set reserved byte through, must make the bench fail."""
import pytest

from rtl.pnm_controller import controller, decode
from rtl.pnm_controller.outstanding import Outstanding
from rtl.registry import BLOCKS
from basedie.flow.runner import BenchFailed, run_bench

from tests.tb.bench_runs import each_run, measure
from tests.tb.planted import needs_icarus

pytestmark = pytest.mark.verilator


@each_run("tb.pnm_controller.bench")
def test_bench(block_name: str, config: dict) -> None:
    params, figures = measure(block_name, config)
    stated = BLOCKS[block_name].build(params)
    assert (figures["latency_cycles"], figures["initiation_interval"]) == (stated.latency, 1)
    assert figures["issue_rate_instructions_per_cycle"] == 1.0
    assert figures["barrier_overhead_cycles"] == figures["done_latency_cycles"] == 1
    assert figures["random_programs"] == 40 and figures["malformed_programs"] == 63
    assert figures["faults_while_offered"] >= 3 and figures["vectors_checked"] > 1500


def _planted(monkeypatch, tmp_path, test: str) -> None:
    monkeypatch.setenv("COCOTB_TEST_FILTER", test)
    params = BLOCKS["pnm_controller"].params(**BLOCKS["pnm_controller"].bench.configs[0])
    with pytest.raises((SystemExit, BenchFailed)):
        run_bench("pnm_controller", "tb.pnm_controller.bench", params, runs=tmp_path, simulator="icarus")


@needs_icarus
def test_a_barrier_that_waits_for_nothing_fails_the_bench(monkeypatch, tmp_path) -> None:
    """Every unit's counter reports itself drained whatever is outstanding: a command after a BARRIER issues before
    an earlier command completed, or DONE comes early."""
    class Impatient(Outstanding):
        def elaborate(self, platform):
            m = super().elaborate(platform)
            m.d.comb += self.drained.eq(1)
            return m

    monkeypatch.setattr(controller, "Outstanding", Impatient)
    _planted(monkeypatch, tmp_path, "random_programs")


@needs_icarus
def test_a_decoder_that_ignores_the_reserved_byte_fails_the_bench(monkeypatch, tmp_path) -> None:
    original = decode._unused_nonzero
    monkeypatch.setattr(decode, "_unused_nonzero", lambda r, kind: original(r, kind) & (r.reserved == 0))
    _planted(monkeypatch, tmp_path, "malformed_programs")
