"""The PNM's quantized decode priced from the base die's verified decode layer (block `base_die`) where it covers
the case: its bytes give the S/Z share at the bench's group size, which the DQB's own bench does not measure."""
from dataclasses import replace

import pytest

from basedie import verified
from basedie.verified import VerifiedBlocks
from sysmodel import base_die
from sysmodel.base_die import StackDequant
from sysmodel.errors import ConfigError
from sysmodel.hardware import PAPER_HARDWARE
from sysmodel.quantized import DQBFigures, Quantization, base_die_sz_rows, sz_source


@pytest.fixture(scope="module")
def table():
    return verified.load()


def test_the_base_die_decode_layer_gives_the_s_z_share_of_groups_of_32(table):
    # Groups of 32 weights: INT4 packs 16 B and adds one FP16 scale and one 4-bit zero (2.5 B); INT8 32 B + 3 B.
    rows = {(row["weight_bits"], row["group_size"]): row["fraction"] for row in base_die_sz_rows(table)}
    assert rows == pytest.approx({(4, 32): 2.5 / 18.5, (8, 32): 3 / 35}, rel=1e-12)
    assert sz_source(table, 4, 32) == (pytest.approx(2.5 / 18.5, rel=1e-12), "base_die")
    assert sz_source(table, 4, 128)[1] == "dqb"


@pytest.mark.parametrize("weights, stored", [("w4a16", (16 + 2.5) / 64), ("w8a16", (32 + 3) / 64)])
def test_the_pnm_reads_the_bytes_the_base_die_read_per_fp16_weight_byte(table, weights, stored):
    """The base die's INT4 decode layer read its 49,152 B of FP16 weights as 12,288 B + 1,920 B of S/Z (INT8:
    24,576 + 2,304): 0.289 (0.547) of the FP16 bytes, which is what the serving model's PNM reads per FP16 weight
    byte at group size 32."""
    dequant = StackDequant.from_verified(table, Quantization(weights, 32, "dqb"), PAPER_HARDWARE.gpu, dqb_power_w=0.2)
    assert dequant.stored_per_fp16 == pytest.approx(stored, rel=1e-12)
    assert stored == pytest.approx((12_288 + 1_920) / 49_152 if weights == "w4a16" else (24_576 + 2_304) / 49_152)


def test_without_the_base_die_entry_group_32_is_refused_naming_the_measured_groups(table):
    no_base_die = VerifiedBlocks([entry for entry in table.entries if entry.block != "base_die"])
    with pytest.raises(ConfigError, match=r"^no measured S/Z fraction for group size 32 \(4-bit\); measured: "
                                          r"64, 128, 256$"):
        sz_source(no_base_die, 4, 32)


@pytest.mark.parametrize("weights, mode", [("w4a16", "int4_fp16"), ("w8a16", "int8_fp16")])
def test_a_stacks_dqbs_are_one_per_pseudo_channel_at_their_verified_rates(table, weights, mode):
    # The paper's HBM4 stack: 64 pseudo-channels, one DQB each, every one moving its interface's beat at the
    # verified beats per cycle of its mode and at its design clock.
    dqb = DQBFigures.from_verified(table, mode)
    beats = 64 * dqb.beat_bytes * dqb.clock_hz
    dequant = StackDequant.from_verified(table, Quantization(weights, 32, "dqb"), PAPER_HARDWARE.gpu, dqb_power_w=0.2)
    assert dequant.packed_per_fp16 == {"w4a16": 0.25, "w8a16": 0.5}[weights]
    assert dequant.output_rate == pytest.approx(beats * dqb.output_beats_per_cycle, rel=1e-12)
    assert dequant.memory_rate == pytest.approx(beats * dqb.memory_beats_per_cycle, rel=1e-12)
    assert dequant.bypass_rate == pytest.approx(beats * dqb.bypass_beats_per_cycle, rel=1e-12)
    assert dequant.latency_s == pytest.approx(dqb.latency_cycles / dqb.clock_hz, rel=1e-12) and dequant.latency_s > 0
    assert dequant.power_w == pytest.approx(64 * 0.2, rel=1e-12)


def test_a_gpu_without_a_pseudo_channel_count_is_refused_naming_the_option(table):
    gpu = replace(PAPER_HARDWARE.gpu, pseudo_channels_per_stack=0)
    with pytest.raises(ConfigError) as refused:
        StackDequant.from_verified(table, Quantization("w4a16", 32, "dqb"), gpu, dqb_power_w=0.2)
    assert str(refused.value) == (f"{gpu.name}: the PNM's DQBs need the stack's pseudo-channel count (one DQB per "
                                  "pseudo-channel; --hw gpu.pseudo_channels_per_stack=N)")


def test_the_dqbs_time_is_the_busier_weight_side_then_the_s_z_and_other_bytes_at_the_bypass_rate():
    # 0.5 B stored per FP16 byte, 0.25 B of it packed weights: 400 FP16 bytes read 200 B, 100 B of them S/Z.
    dequant = StackDequant(stored_per_fp16=0.5, packed_per_fp16=0.25, output_rate=100.0, memory_rate=10.0,
                           bypass_rate=50.0, latency_s=0.0, power_w=0.0)
    assert dequant.read_bytes(400.0, 30.0) == 230.0
    # Packed input 100 B at 10 B/s (10 s) outlasts 400 B of output at 100 B/s (4 s); S/Z + 100 B at 50 B/s: 4 s.
    assert dequant.seconds(400.0, 100.0) == pytest.approx(14.0)
    # A slow output side (1 B/s: 400 s) sets the weights' time instead.
    assert replace(dequant, output_rate=1.0).seconds(400.0, 100.0) == pytest.approx(404.0)


def test_the_rates_scale_with_each_modes_beats_per_cycle_and_a_single_pseudo_channel_is_enough(table, monkeypatch):
    # A made-up DQB of 4-byte beats at 100 MHz: 2 output beats, 0.5 packed beats and 4 bypass beats per cycle.
    figures = DQBFigures(latency_cycles=10, output_beats_per_cycle=2.0, memory_beats_per_cycle=0.5,
                         bypass_beats_per_cycle=4.0, beat_bytes=4, clock_hz=1e8)
    monkeypatch.setattr(base_die.DQBFigures, "from_verified", classmethod(lambda cls, table, mode: figures))
    gpu = replace(PAPER_HARDWARE.gpu, pseudo_channels_per_stack=1)
    dequant = StackDequant.from_verified(table, Quantization("w4a16", 32, "dqb"), gpu, dqb_power_w=0.2)
    assert (dequant.output_rate, dequant.memory_rate, dequant.bypass_rate) == (8e8, 2e8, 16e8)
    assert dequant.latency_s == pytest.approx(1e-7) and dequant.power_w == 0.2
