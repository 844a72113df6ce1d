"""Build the DQB under Verilator and run its cocotb bench for every parameter set `pytest` proves."""
import pytest

from rtl.dqb.params import DQBParams
from rtl.registry import BLOCKS
from tb.benches import BENCHES
from tb.models.pc_layout import sz_read_fraction
from tb.runner import run_bench
from tb.verify import module_runs

RUNS = module_runs("tb.dqb.bench")


@pytest.mark.parametrize("config", [config for _, config in RUNS], ids=[c["rounding"] for _, c in RUNS])
def test_bench(config: dict) -> None:
    params = BLOCKS["dqb"].params(**config)
    figures = run_bench("dqb", BENCHES["dqb"].module, params)

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


@pytest.mark.parametrize("field,value", [
    ("interface_bits", 48), ("internal_bits", 512), ("tag_bits", 4), ("request_table_bytes", 100),
    ("request_table_entry_bytes", 8), ("sz_buffer_bytes", 64), ("outstanding_reads", 6), ("rounding", "up"),
    ("design_clock_hz", 0), ("interface_bits", 65536), ("address_bits", 8),
])
def test_bad_parameters_name_the_field(field: str, value) -> None:
    with pytest.raises(ValueError, match=field):
        DQBParams(**{field: value})
