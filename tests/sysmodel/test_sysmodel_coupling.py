"""The verified-figures table drives the DuoPD results: change a measured figure and the result moves by the
amount the figure implies; systems that do not use the PNM do not move at all."""
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from basedie import verified
from sysmodel.simulate import SimulationConfig, simulate
from basedie.verified import VerifiedBlocks
from sysmodel.workload import FixedBatch

CLOCK_HZ = 1e9          # the PNM's clock (paper §6.1)
STACKS = 8              # HBM stacks, hence PNMs, per GPU


@pytest.fixture(scope="module")
def table() -> VerifiedBlocks:
    return verified.load()


def changed(table: VerifiedBlocks, block: str, change: Callable[[dict], dict], **params) -> VerifiedBlocks:
    """A copy of the table whose one entry of `block` with `params` has `change(figures)` as its figures."""
    entry = table.entry(block, **params)
    return VerifiedBlocks([replace(e, figures=change(dict(e.figures))) if e is entry else e for e in table.entries])


def lane(table: VerifiedBlocks, **figures) -> VerifiedBlocks:
    return changed(table, "pnm_lane", lambda old: {**old, **figures}, width=1024)


def prefill_first_points(table: VerifiedBlocks, point: Callable[[dict], dict]) -> VerifiedBlocks:
    """The MMU's prefill-first grid with every measured point replaced by `point(p)`."""
    def change(figures: dict) -> dict:
        grid = [point(dict(p)) if p["policy"] == "prefill_first" else p for p in figures["arbitration"]]
        return {**figures, "arbitration": grid}
    return changed(table, "mmu", change, out_of_order=False)


def tpot(model: str, table: VerifiedBlocks, workload=FixedBatch(1, 1024, 17), system: str = "duopd") -> float:
    return simulate(SimulationConfig(system=system, model=model, workload=workload), table).summary["tpot_s"]["mean"]


# Operators that stream weights or KV through the lanes, per layer (the norms run on the vector unit), and
# one LM head per iteration: qkv, attention, o_proj, MLP (+ router for MoE: experts in place of the MLP).
@pytest.mark.parametrize(("model", "layers", "operators"), [
    ("llama2-70b", 80, 4), ("gpt3-175b", 96, 4), ("qwen3-235b-a22b", 94, 5),
])
def test_a_longer_lane_pipeline_lengthens_every_decode_iteration(table, model: str, layers: int,
                                                                 operators: int) -> None:
    base = table.figure("pnm_lane", "latency_cycles", width=1024)
    workload = FixedBatch(1, 4096, 33)
    slower = tpot(model, lane(table, latency_cycles=base + 1000), workload)
    # Every operator pays the lane's pipeline latency once per iteration: 1,000 cycles at 1 GHz = 1 µs each.
    expected = 1000 / CLOCK_HZ * (layers * operators + 1)
    assert slower - tpot(model, table, workload) == pytest.approx(expected, rel=1e-6)


def llama_elements_per_pnm(context: float) -> float:
    """FP16 values one PNM streams per decode iteration of LLaMA2-70B with one sequence holding `context` KV
    tokens: per GPU (TP8) 8 query heads and 1 KV head of 128 per layer, 1/8 of the MLP and LM head; the GPU's
    share split over its 8 stacks."""
    hidden, q, kv, ffn, vocab = 8192, 8 * 128, 1 * 128, 28672, 32000
    qkv = hidden * (q + 2 * kv) + 2 * kv        # weights, and K and V of the new token written
    attention = 2 * kv * context                # K and V of every cached token
    o_proj = q * hidden
    mlp = 3 * hidden * ffn / 8
    lm_head = hidden * vocab / 8
    return (80 * (qkv + attention + o_proj + mlp) + lm_head) / STACKS


def test_fewer_macs_per_cycle_make_pnm_decode_compute_bound(table) -> None:
    # One request of 1,024 prompt tokens, 17 output tokens: 16 decode iterations over contexts 1,025 … 1,040.
    elements = llama_elements_per_pnm(1024 + 8.5)        # the mean over those iterations
    tpot_at = {macs: tpot("llama2-70b", lane(table, macs_per_cycle=macs)) for macs in (256, 512, 1024, 2048)}
    # At 1,024 MACs/cycle a lane takes 2 KB a cycle, 2.048 TB/s > the stack's 2 TB/s: memory-bound, so more
    # multipliers change nothing.
    assert tpot_at[2048] == pytest.approx(tpot_at[1024], rel=1e-12)
    assert tpot_at[1024] == pytest.approx(tpot("llama2-70b", table), rel=1e-12)
    # At 512 it takes 1.024 TB/s: compute-bound, every value costs 1 / (512 · 1 GHz) instead of 2 B / 2 TB/s …
    assert tpot_at[512] - tpot_at[1024] == pytest.approx(elements * (1 / (512 * CLOCK_HZ) - 2 / 2e12), rel=1e-6)
    # … and halving the MACs again doubles the compute time.
    assert tpot_at[256] - tpot_at[512] == pytest.approx(elements * (1 / 256 - 1 / 512) / CLOCK_HZ, rel=1e-6)


def test_the_mmu_shares_set_decode_speed_under_concurrent_prefill(table) -> None:
    # Request 1's 8K prefill (~0.1 s on the GPUs) runs while request 0 decodes its 15 remaining tokens on the PNMs.
    pair, alone = FixedBatch(2, 8192, 16), FixedBatch(1, 8192, 16)

    def request0(grid: VerifiedBlocks, workload=pair) -> np.ndarray:
        times = simulate(SimulationConfig(system="duopd", model="llama2-70b",
                                          workload=workload), grid).requests[0].token_times
        return np.diff(times)

    def no_contention(p: dict) -> dict:       # each source gets what it offers, without waiting
        return {**p, "gpu_share": p["gpu_offered_actual"], "pnm_share": p["pnm_offered_actual"],
                "gpu_wait_p50": 0.0, "pnm_wait_p50": 0.0}

    free = request0(prefill_first_points(table, no_contention))
    np.testing.assert_allclose(free, request0(table, alone), rtol=1e-12)   # as if the prefill were not there
    measured = request0(table)
    halved = request0(prefill_first_points(table, lambda p: {**p, "pnm_share": p["pnm_share"] / 2}))
    # Request 1's prefill starts as request 0's decoding does: every iteration shares the stacks.
    assert np.all(measured > free * 1.01)
    assert np.all(halved > measured * 1.01)
    # Without a concurrent prefill the arbitration grid plays no part.
    np.testing.assert_allclose(request0(prefill_first_points(table, no_contention), alone), request0(table, alone),
                               rtol=1e-12)


@pytest.mark.parametrize("system", ["pd-1:1", "pd-3:1", "chunked", "sm-7:3"])
def test_systems_without_pnm_ignore_the_pnm_and_mmu_figures(table, system: str) -> None:
    other = lane(table, latency_cycles=10_000, macs_per_cycle=64.0)
    other = prefill_first_points(other, lambda p: {**p, "pnm_share": 0.01, "gpu_share": 0.01, "gpu_wait_p50": 1e4})
    workload = FixedBatch(4, 8192, 32)
    base = simulate(SimulationConfig(system=system, model="llama2-70b", workload=workload), table)
    moved = simulate(SimulationConfig(system=system, model="llama2-70b", workload=workload), other)
    for a, b in zip(base.requests, moved.requests):
        assert a.token_times == b.token_times
    assert tpot("llama2-70b", other) > 2 * tpot("llama2-70b", table)     # while DuoPD does move
