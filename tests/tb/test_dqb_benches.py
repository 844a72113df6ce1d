"""Build the DQB under Verilator and run its cocotb bench for every parameter set `pytest` proves."""
import pytest

from tb.models.pc_layout import sz_read_fraction

from tests.tb.bench_runs import each_run, measure

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
