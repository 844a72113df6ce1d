"""The PNM's vector unit in the system model: the passes a decode layer asks of it, counted by hand per op; their
time from the verified `pnm_vector` figures (a planted figure moves it); the width scaling checked against the
RTL's structure; and a PNM iteration's price with the unit, worked out by hand."""
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from basedie.verified import VerifiedBlocks, VerifiedEntry
from rtl.fp.add import FP32Add
from rtl.pnm_vector.params import VectorParams
from rtl.pnm_vector.ports import Op
from rtl.pnm_vector.vector import PNMVector
from sysmodel.errors import ConfigError
from sysmodel.execution import VectorFigures
from sysmodel.hardware import PAPER_HARDWARE
from sysmodel.llm import LLM
from sysmodel.operators import Shard, Work, decode_work
from sysmodel.vector_work import Pass, decode_head, decode_layer, merge_tree, online_softmax, rms_norm
from tests.sysmodel.test_execution_edges import PAIR, pnm

OPS = ("max", "add", "mul", "exp", "recip", "rsqrt", "silu", "gelu", "softmax", "merge")
PROVENANCE = {"sources_digest": "-", "bench": "tb.pnm_vector.bench", "rtl_module": "rtl.pnm_vector.vector"}
# hidden 8, 2 query heads sharing 1 KV head of 4, SwiGLU MLP 8 → 16 → 8.
GATED = LLM("gated", layers=1, hidden=8, heads=2, kv_heads=1, head_dim=4, ffn=16, vocab=4, gated_mlp=True)
MOE = replace(GATED, name="moe", experts=4, experts_per_token=2)


def vector_entry(width: int = 2, latency: int = 100, rate: float = 2.0, **planted: float) -> VerifiedEntry:
    """A pnm_vector entry as the bench records it (every op at `latency` and `rate`), with `planted` figures."""
    figures = {f"{name}_{op}": value for op in OPS
               for name, value in (("latency_cycles", latency), ("elements_per_cycle", rate))}
    figures |= {"elements_per_cycle_reduce_sum_exp": rate, "elements_per_cycle_reduce_max_max": rate}
    return VerifiedEntry("pnm_vector", {"width": width}, figures | planted, PROVENANCE)


def adder(latency: int = 3) -> VerifiedEntry:
    return VerifiedEntry("fp32_add", {}, {"latency_cycles": latency}, PROVENANCE)


def figures(*entries: VerifiedEntry, width: int = 2) -> VectorFigures:
    return VectorFigures.from_verified(VerifiedBlocks(list(entries)), replace(PAPER_HARDWARE.pnm, vector_width=width))


def tally(steps) -> Counter:
    """Elements per (op, reduce) over the steps."""
    counts = Counter()
    for step in steps:
        for p in step:
            counts[p.op, p.reduce] += p.elements
    return counts


# --- what a layer asks of the unit, by hand ---

def test_a_gated_decode_layer_asks_these_elements_of_each_op() -> None:
    # 3 sequences holding 30 KV tokens in all, on 2 PNMs (stacks) of one GPU: 6 (head, sequence) pairs.
    work = decode_layer(Shard(GATED, 1), decode_work(3, 30), stacks=2)
    # Two norms of 3 vectors of 8 (Σa² 24, a·gain 24, ·1/n 3, +ε 3, rsqrt 3, ·r 24), two residual adds (24 each),
    # one merge level of 2 partials for each PNM's half of the pairs (MERGE 3; w·o 2 × 3 × 4 = 24; sum 12).
    assert tally(work.serial) == {("mul", "sum"): 48, ("mul", ""): 2 * (24 + 3 + 24) + 24, ("add", ""): 2 * 3 + 48 + 12,
                                  ("rsqrt", ""): 6, ("merge", ""): 3}
    assert len(work.serial) == 5 + 3 + 1 + 5 + 1
    # Softmax over each PNM's half of the context: 2 heads × 30 / 2 = 30 scores (max, e^, Σe^), 1/l for 6 pairs,
    # o·1/l over 6 × 4; SiLU and the gate product over 3 tokens × 16 / 2 PNMs.
    assert tally(work.overlapped["attention"]) == {("max", "max"): 30, ("exp", ""): 30, ("exp", "sum"): 30,
                                                   ("recip", ""): 6, ("mul", ""): 24}
    assert len(work.overlapped["attention"]) == 4
    assert tally(work.overlapped["mlp"]) == {("silu", ""): 24, ("mul", ""): 24}


def test_an_ungated_mlp_is_one_gelu_and_moe_activates_the_routed_experts_rows() -> None:
    assert decode_layer(Shard(PAIR, 2), decode_work(4, 10), 1).overlapped["mlp"] == [(Pass("gelu", 4 * 16 / 2),)]
    # MoE: 3 tokens × 2 experts each × 16 rows, over 2 GPUs (EP) and 2 PNMs.
    moe = decode_layer(Shard(MOE, 2), decode_work(3, 30), 2).overlapped
    assert set(moe) == {"attention", "experts"} and tally(moe["experts"]) == {("silu", ""): 24, ("mul", ""): 24}


def test_the_merge_is_a_pairwise_tree_of_one_merge_per_partial_but_one() -> None:
    # 8 partials: levels of 4, 2, 1 pairs; each level MERGE, then w₁·o₁ beside w₂·o₂, then their sum.
    steps = merge_tree(heads=5, head_dim=4, partials=8)
    assert [s[0].elements for s in steps] == [20, 160, 80, 10, 80, 40, 5, 40, 20]
    assert [s[0].op for s in steps] == ["merge", "mul", "add"] * 3
    assert tally(merge_tree(5, 4, 3))["merge", ""] == 2 * 5 and len(merge_tree(5, 4, 3)) == 6
    assert merge_tree(5, 4, 1) == []


def test_the_final_norm_covers_the_sequences_that_emit_a_token() -> None:
    assert decode_head(Shard(GATED, 1), decode_work(3, 30)) == rms_norm(3, 8)
    assert tally(rms_norm(3, 8)) == {("mul", "sum"): 24, ("mul", ""): 51, ("add", ""): 3, ("rsqrt", ""): 3}


# --- their time, from the verified figures ---

def test_a_small_layers_vector_time_by_hand() -> None:
    # Width 2, 100 cycles, 2 elements a cycle, 1 GHz. Serial: 15 steps; 48 + 126 + 66 + 6 + 3 = 249 elements.
    unit = figures(vector_entry())
    work = decode_layer(Shard(GATED, 1), decode_work(3, 30), stacks=2)
    assert sum(unit.chain(work.serial)) == pytest.approx((249 / 2 + 15 * 100) * 1e-9, rel=1e-12, abs=0)
    stream, latency = unit.chain(work.overlapped["attention"])
    assert (stream, latency) == pytest.approx((120 / 2 * 1e-9, 400e-9), rel=1e-12, abs=0)


def test_a_planted_figure_in_the_table_moves_the_time() -> None:
    work = decode_layer(Shard(GATED, 1), decode_work(3, 30), stacks=2).serial
    base = sum(figures(vector_entry()).chain(work))
    # MUL at 1 element a cycle: its 126 unreduced and 48 Σa² elements (no measured MUL reduction: the op's
    # rate) take twice as long.
    assert sum(figures(vector_entry(elements_per_cycle_mul=1.0)).chain(work)) - base == pytest.approx(
        (126 + 48) / 2 * 1e-9, rel=1e-12, abs=0)
    # RSQRT's latency 300: one step of each norm waits 200 cycles more.
    assert sum(figures(vector_entry(latency_cycles_rsqrt=300)).chain(work)) - base == pytest.approx(
        2 * 200e-9, rel=1e-12, abs=0)
    # A measured MUL reduction is used where there is one.
    assert sum(figures(vector_entry(elements_per_cycle_reduce_sum_mul=0.5)).chain(work)) - base == pytest.approx(
        48 * (1 / 0.5 - 1 / 2) * 1e-9, rel=1e-12, abs=0)


def test_steps_without_work_pay_no_latency() -> None:
    unit = figures(vector_entry())
    assert unit.chain(rms_norm(0, 8)) == (0, 0) and unit.chain([]) == (0, 0)


# --- the width: the table's, scaled by the RTL's structure ---

def test_the_systems_width_scales_rate_linearly_and_latency_by_tree_levels() -> None:
    # Measured at width 2 (rate 2, latency 127); the system at 8: rate ×4, two more tree levels of one adder.
    unit = figures(vector_entry(latency=127, rate=2.0), adder(latency=5), width=8)
    assert unit.elements_per_cycle["exp"] == 8.0 and unit.elements_per_cycle["reduce_sum_exp"] == 8.0
    assert unit.latency_cycles["exp"] == 127 + 2 * 5
    assert unit.chain([(Pass("exp", 80, "sum"),)]) == pytest.approx((10e-9, 137e-9), rel=1e-12, abs=0)
    # An entry of the system's own width is used as measured, without the adder.
    exact = figures(vector_entry(latency=127), vector_entry(width=8, latency=131, rate=7.5), width=8)
    assert (exact.latency_cycles["mul"], exact.elements_per_cycle["mul"]) == (131, 7.5)


@pytest.mark.parametrize("width", [1, 2, 4, 128])
def test_the_scaling_matches_the_rtls_stated_latency_and_one_beat_of_every_lane_per_cycle(width: int) -> None:
    # The RTL: `width` copies of the lane chain behind one stream beat, II 1; its latency grows by one FP32 adder
    # (the reduction tree's node) per doubling. Scaled from the width-2 unit it must give the unit built at width.
    built, bench = PNMVector(VectorParams(width=width)), PNMVector(VectorParams(width=2))
    unit = figures(vector_entry(latency=bench.latency, rate=2.0), adder(FP32Add.latency), width=width)
    assert built.initiation_interval == 1 and len(built.i.payload.lanes) == width
    assert unit.latency_cycles["merge"] == built.latency and unit.elements_per_cycle["merge"] == width
    assert [o.name.lower() for o in Op] == list(OPS)


def test_missing_or_impossible_figures_are_refused_with_the_command() -> None:
    with pytest.raises(ConfigError, match="^no verified pnm_vector; create it with `basedie verify pnm_vector`$"):
        figures(adder())
    with pytest.raises(ConfigError, match="^no verified fp32_add; create it with `basedie verify fp32_add`$"):
        figures(vector_entry(), width=8)
    with pytest.raises(ConfigError, match="power of two, got 96"):
        figures(vector_entry(), adder(), width=96)


# --- a PNM iteration with the unit, by hand ---

@pytest.mark.parametrize(("stack_bandwidth", "hidden_streams_s"), [
    # Memory that moves everything at once: the softmax (100 elements) and GELU (64) streams bound their
    # operators, 50 + 32 cycles.
    (1e18, (50 + 32) * 1e-9),
    # 1 GB/s: attention's 320 B of KV (320 ns) and the MLP's 512 B of weights (512 ns) outlast the streams,
    # which hide behind them.
    (1e9, 0.0),
])
def test_a_pnm_iteration_adds_the_serial_chains_and_the_overlapped_drains(stack_bandwidth, hidden_streams_s) -> None:
    # PAIR decoding 4 sequences over 10 KV tokens on one PNM: serial = 2 norms (108 elements, 5 steps each) and
    # 2 residual adds (32, 1 step), no merge; the head's norm 108 elements, 5 steps; the softmax chain's 4
    # latencies and GELU's 1. Width 2, 100 cycles, 1 GHz.
    without = pnm(1, stack_bandwidth=stack_bandwidth, macs=1e6)
    with_unit = replace(without, vector=figures(vector_entry()))
    serial = (2 * 108 + 2 * 32) / 2 + 12 * 100
    head = 108 / 2 + 5 * 100
    drains = (4 + 1) * 100
    extra = with_unit.cost(decode_work(4, 10)).seconds - without.cost(decode_work(4, 10)).seconds
    assert extra == pytest.approx((serial + head + drains) * 1e-9 + hidden_streams_s, rel=1e-9, abs=1e-12)


def test_a_chain_priced_once_per_count_equals_the_chain_priced_for_each_iteration() -> None:
    # Every step's elements follow one Work count, so pricing one unit of each count gives any iteration's price,
    # for one iteration and for a block of them (numpy counts), idle counts included.
    unit, shard = figures(vector_entry(latency=100, rate=2.0, latency_cycles_exp=170)), Shard(MOE, 2)
    serial = unit.linear(lambda work: decode_layer(shard, work, 4).serial)
    attention = unit.linear(lambda work: decode_layer(shard, work, 4).overlapped["attention"])
    for work in (decode_work(3, 30), decode_work(1, 7), Work(0, 0, 0, 0)):
        layer = decode_layer(shard, work, 4)
        assert serial(work) == pytest.approx(unit.chain(layer.serial), rel=1e-12, abs=0)
        assert attention(work) == pytest.approx(unit.chain(layer.overlapped["attention"]), rel=1e-12, abs=0)
    block = Work(np.array([0, 2]), np.array([0, 9]), np.array([0, 9]), np.array([0, 2]))
    stream, latency = attention(block)
    assert list(stream) == pytest.approx([0, unit.chain(decode_layer(shard, decode_work(2, 9), 4)
                                                        .overlapped["attention"])[0]], rel=1e-12, abs=0)
    assert list(latency) == pytest.approx([0, (3 * 100 + 170) * 1e-9], rel=1e-12, abs=0)
