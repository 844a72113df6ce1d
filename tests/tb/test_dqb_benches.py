"""Build the DQB under Verilator and run its cocotb bench for every parameter set `pytest` proves; and the planted
bugs that must make the bench fail, run under Icarus (seconds to compile, where a Verilator build of each variant
costs minutes)."""

import pytest
from amaranth.hdl import Const, Module
from amaranth.lib import wiring

from rtl.dqb import dqb as rtl_dqb
from rtl.dqb import processing, request_table, sz_requests
from rtl.registry import BLOCKS
from basedie.weights.pc_layout import sz_read_fraction
from basedie.flow.runner import run_bench

from tests.tb.bench_runs import each_run, measure
from tests.tb.planted import failed_tests, needs_icarus

pytestmark = pytest.mark.verilator


@each_run("tb.dqb.bench")
def test_bench(block_name: str, config: dict) -> None:
    _, figures = measure(block_name, config)

    assert figures["beats_per_cycle"] == 1.0
    assert figures["initiation_interval"] == 1
    # One memory beat becomes 16/bits response beats at one per cycle: the memory side runs at bits/16.
    assert figures["memory_beats_per_cycle_by_mode"] == {
        "bypass": 1.0, "reserved": 1.0, "int4_bf16": 0.25, "int4_fp16": 0.25, "int8_bf16": 0.5, "int8_fp16": 0.5,
        "fp8_e4m3_bf16": 0.5, "fp8_e4m3_fp16": 0.5}
    assert set(figures["read_latency_cycles"]) == {"bypass", "reserved", "int4_bf16", "int8_bf16", "fp8_e4m3_bf16",
                                                   "int4_fp16", "int8_fp16", "fp8_e4m3_fp16"}
    assert figures["sz_miss_penalty_cycles"] > 0
    assert {(row["weight_bits"], row["group_size"]) for row in figures["sz_read_fraction"]} == \
        {(bits, g) for bits in (4, 8) for g in (64, 128, 256)}
    for row in figures["sz_read_fraction"]:
        assert row["fraction"] == pytest.approx(sz_read_fraction(row["weight_bits"], row["group_size"]), abs=1e-6)
    assert 0.9 < figures["sz_buffer_hit_rate"] < 1
    assert figures["vectors_checked"] > 10_000


def _planted_fails(monkeypatch, tmp_path, tests: str) -> set[str]:
    """The bench's cocotb tests matching `tests` (a regex) under Icarus on the (mutated) DQB at its first pytest
    size; the names of those that failed."""
    monkeypatch.setenv("COCOTB_TEST_FILTER", tests)
    return failed_tests("dqb", "tb.dqb.bench", BLOCKS["dqb"].params(**BLOCKS["dqb"].bench.configs[0]), tmp_path)


@needs_icarus
def test_response_registers_that_ignore_back_pressure_fail_the_bench(monkeypatch, tmp_path) -> None:
    """The registers carrying each beat's valid, control and raw data (and each lane's scale) advance every cycle:
    a stalled response is overwritten. Without stalls nothing differs, so only the back-pressure test fails."""
    delayed = processing.delayed
    monkeypatch.setattr(processing, "delayed",
                        lambda m, advance, value, stages, name: delayed(m, Const(1), value, stages, name))
    failed = _planted_fails(monkeypatch, tmp_path, "every_mode_and_error|random_traffic_under_back_pressure")
    assert failed == {"random_traffic_under_back_pressure"}, failed


@needs_icarus
def test_a_zero_point_taken_from_the_next_group_fails_the_bench(monkeypatch, tmp_path) -> None:
    """Each lane reads the zero point one byte further along the S/Z line (the next group's for INT8, two groups
    on for INT4): every dequantizing read is off, while table misses and untagged reads are not."""
    class Shifted(processing.DataProcessing):
        def _select(self, stages, flags, part, beat, read, scale_line, zero_line):
            return super()._select(stages, flags, part, beat, read, scale_line, zero_line.rotate_right(8))
    monkeypatch.setattr(rtl_dqb, "DataProcessing", Shifted)
    failed = _planted_fails(monkeypatch, tmp_path, "every_mode_and_error|unusable_entry_is_a_table_miss")
    assert failed == {"every_mode_and_error"}, failed


def _table_forcing(field: str, value: int) -> type:
    """A request table that sees `field` of every config beat as `value`."""
    class Forcing(wiring.Component):
        def __init__(self, params) -> None:
            self.inner = request_table.RequestTable(params)
            super().__init__(dict(self.inner.signature.members.items()))

        def elaborate(self, platform):
            m = Module()
            m.submodules.inner = inner = self.inner
            m.d.comb += [inner.config.valid.eq(self.config.valid), inner.config.payload.eq(self.config.payload),
                         getattr(inner.config.payload, field).eq(value), self.config.ready.eq(inner.config.ready),
                         inner.address.eq(self.address), self.match.eq(inner.match),
                         self.updating.eq(inner.updating)]
            return m
    return Forcing


@needs_icarus
def test_a_request_table_that_ignores_the_enable_bit_fails_the_bench(monkeypatch, tmp_path) -> None:
    """Every written entry is enabled: the disabled decoy at index 0 (the first layer's range, another layer's S/Z)
    wins over the real entry, so the first layer's dequantized reads are wrong."""
    monkeypatch.setattr(sz_requests, "RequestTable", _table_forcing("enable", 1))
    failed = _planted_fails(monkeypatch, tmp_path, "every_mode_and_error|unusable_entry_is_a_table_miss")
    assert failed == {"every_mode_and_error"}, failed


@needs_icarus
def test_a_table_update_that_is_not_atomic_fails_the_bench(monkeypatch, tmp_path) -> None:
    """Every config beat counts as an update's last: GPU requests are looked up between the beats of a whole-table
    update, and a read of a layer whose entry was already rewritten sees neither the old table nor the new one.
    Tests without updates under traffic pass."""
    monkeypatch.setattr(sz_requests, "RequestTable", _table_forcing("last", 1))
    failed = _planted_fails(monkeypatch, tmp_path, "every_mode_and_error|table_update_under_traffic")
    assert failed == {"table_update_under_traffic"}, failed


@needs_icarus
def test_a_short_path_that_overtakes_the_datapath_fails_the_bench(monkeypatch, tmp_path) -> None:
    """Pass-through beats take the short path even with dequantized beats still in the datapath: a bypass or
    reserved-tag read right after a dequantized one is answered first. The timing test sends isolated reads, where
    the short path is legal, so only the mixed test fails."""
    class Overtaking(processing.DataProcessing):
        def _nothing_older(self, stage_valid):
            return Const(1)
    monkeypatch.setattr(rtl_dqb, "DataProcessing", Overtaking)
    failed = _planted_fails(monkeypatch, tmp_path, "every_mode_and_error|timing_figures")
    assert failed == {"every_mode_and_error"}, failed


@needs_icarus
def test_a_store_that_ignores_its_mask_fails_the_bench(monkeypatch, tmp_path) -> None:
    """Every store writes its whole beat: the memory then differs from the golden model's, and so do later reads
    of the bytes the mask left alone. Reads alone are unaffected."""
    class Maskless(sz_requests.SZRequestGenerator):
        def elaborate(self, platform):
            m = super().elaborate(platform)
            m.d.comb += self.mc_req.payload.mask.eq(-1)
            return m
    monkeypatch.setattr(rtl_dqb, "SZRequestGenerator", Maskless)
    failed = _planted_fails(monkeypatch, tmp_path, "every_mode_and_error|random_traffic_under_back_pressure")
    assert failed == {"random_traffic_under_back_pressure"}, failed


@needs_icarus
def test_random_traffic_is_exact_behind_hbm4(monkeypatch, tmp_path) -> None:
    """Behind the HBM4 pseudo channel (in-order answers, row misses, refresh) the mixed traffic (stores to scale
    and zero-point lines, unaligned addresses, disabled and overlapping entries) is still exact."""
    monkeypatch.setenv("COCOTB_TEST_FILTER", "random_traffic_under_back_pressure")
    params = BLOCKS["dqb"].params(**BLOCKS["dqb"].bench.configs[0])
    figures = run_bench("dqb", "tb.dqb.bench", params, runs=tmp_path, simulator="icarus", memory="hbm4")
    assert figures["random_reads"] > 500 and figures["random_stores"] > 30, figures
