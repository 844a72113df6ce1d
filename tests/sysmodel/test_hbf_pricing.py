"""A port's block of iterations priced, settled and cut, by hand: `HBFPort._price` on planted objects and KV
bytes (waits for misses and KV, prefetches late or hidden, the package's rate changing within the block, the
other ports' power), `HBFTier.settle` on planted blocks (re-priced by its server, alone, replaced at the instant
it was priced), `_cut_where_traffic_changes`; then the tier as built from its options."""
from types import SimpleNamespace

import numpy as np
import pytest

from sysmodel.errors import ConfigError
from sysmodel.hbf.layout import Layout
from sysmodel.hbf.media import PAGE_BYTES, HBFStack
from sysmodel.hbf.routing import Router, RoutingModel
from sysmodel.hbf.service import ACCESS, PortBlock, HBFOptions, PortPower
from sysmodel.hbf.thermal import ThrottlePolicy
from sysmodel.llm import LLM
from sysmodel.operators import Shard, Work
from tests.sysmodel.test_hbf_shared import (EXPERT_BYTES, LAYER_BYTES, LAYER_PAGES, QUIET, RATE, TINY_MOE, TR,
                                            Scripted, _moe_tier, _tier)

STACK = HBFStack()
WRITE_BACK = PAGE_BYTES / RATE + STACK.program_s / STACK.outstanding_reads     # one page programmed, one stack
NONE = Layout("none", hbm_stacks=1, hbf_stacks=1, weights="hbf", frame_cache_gib=0.0)


def _objects(n_ahead, n_demand, useful, accesses, hits) -> tuple:
    """`HBFTier.objects`' per-iteration figures, planted: objects fetched are those prefetched or waited for."""
    n_ahead, n_demand, useful = (np.array(a) for a in (n_ahead, n_demand, useful))
    return n_ahead, n_demand, useful, (n_ahead + n_demand).sum(axis=1), np.array(accesses), np.array(hits)


def _layer(nbytes: float, rate: float = RATE) -> float:
    """One layer's media read: tR, then its bytes at `rate`."""
    return TR + nbytes / rate


def _own_block_in_progress(watts: float) -> SimpleNamespace:
    """The port's own block, priced a moment ago at this instant (it is priced again at another HBM share)."""
    return SimpleNamespace(starts=np.array([0.0]), ends=np.array([1.0]), waits=np.zeros(1),
                           power=np.array([[0.0, 0.0, watts]]), media_load=np.array([0.5]))


def test_a_block_waits_for_its_misses_and_kv_reads_pays_its_write_backs_and_draws_their_energy() -> None:
    """No prefetch, two layers, beside another port drawing 5 W on HBF (and the port's own earlier pricing of
    this block, which is not another port). Iteration 0 computes 1 ms moving 1 GB through HBM, misses both
    layers and reads 2 KV pages (a page a layer, waited for with the layer) and writes one back; iteration 1
    computes 2 ms and misses layer 1; iteration 2 takes no time and hits both. Power: 100, 10, 1 W per die while
    computing, 10 pJ per HBM byte; HBF reads cost 48 pJ/B, programming the stack's energy per byte. The package
    runs one step per iteration, the other port's 5 W added over those that take time."""
    _, tier, (a, b) = _tier(NONE, ("a", 1.0, PortPower((100.0, 10.0, 1.0), 1e-11)), ("b", 1.0, QUIET))
    tier.package = Scripted([RATE])
    a.block = _own_block_in_progress(100.0)
    b.block = SimpleNamespace(starts=np.array([0.0]), ends=np.array([10.0]), waits=np.zeros(1),
                              power=np.array([[0.0, 0.0, 5.0]]), media_load=np.zeros(1))
    compute = np.array([1e-3, 2e-3, 0.0])
    objects = _objects(np.zeros((3, 2)), [[1, 1], [0, 1], [0, 0]], np.zeros((3, 2)), [2, 2, 2], [0, 1, 2])
    kv = np.array([[2.0 * PAGE_BYTES, PAGE_BYTES], [0.0, 0.0], [0.0, 0.0]])
    block = a._price(0.0, compute, np.array([1e9, 0.0, 0.0]), objects, kv)

    stall = np.array([2 * _layer(LAYER_BYTES + PAGE_BYTES) + WRITE_BACK, _layer(LAYER_BYTES), 0.0])
    fill = np.array([2 * LAYER_BYTES + 2 * PAGE_BYTES, LAYER_BYTES, 0.0])
    busy = compute + stall
    energy = np.array([[0.1, 0.01 + 0.01, 1e-3 + fill[0] * 48e-12 + PAGE_BYTES * STACK.program_energy_per_byte],
                       [0.2, 0.02, 2e-3 + fill[1] * 48e-12], [0.0, 0.0, 0.0]])
    power = np.array([energy[0] / busy[0], energy[1] / busy[1], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(block.stall, stall, rtol=1e-12)
    np.testing.assert_allclose(block.busy, busy, rtol=1e-12)
    np.testing.assert_allclose(block.power, power, rtol=1e-12)
    assert block.fill.tolist() == fill.tolist() and block.programmed.tolist() == [PAGE_BYTES, 0.0, 0.0]
    assert block.waits.tolist() == [0.0] * 3 and block.rate.tolist() == [RATE] * 3
    assert block.ahead is None and block.overlap is None
    np.testing.assert_array_equal(block.demand, [[LAYER_BYTES + PAGE_BYTES] * 2, [0, LAYER_BYTES], [0, 0]])
    # Beside an idle co-runner it asks, of the tier alone, what it moves over its time.
    np.testing.assert_allclose(block.media_load, [(fill[0] + PAGE_BYTES) / (busy[0] * RATE),
                                                  fill[1] / (busy[1] * RATE), 0.0], rtol=1e-12)
    counts = dict(zip(ACCESS, block.counts.T.tolist()))
    assert counts["accesses"] == [2, 2, 2] and counts["hits"] == [0, 1, 2] and counts["prefetched_in_time"] == [0] * 3
    assert counts["media_reads"] == counts["media_reads_waited"] == [2 * LAYER_PAGES, LAYER_PAGES, 0]
    assert counts["media_bytes"] == [2 * LAYER_BYTES, LAYER_BYTES, 0] and counts["wasted_prefetch_bytes"] == [0] * 3
    assert counts["fill_bytes"] == fill.tolist() and counts["cooling_wait_s"] == [0.0] * 3
    np.testing.assert_allclose(counts["stall_s"], stall, rtol=1e-12)
    taken = tier.package.taken
    np.testing.assert_allclose([s for s, _ in taken], busy, rtol=1e-12)
    np.testing.assert_allclose([w for _, w in taken], power + [[0, 0, 5.0], [0, 0, 5.0], [0, 0, 0]], rtol=1e-12)
    assert block.snapshot == 0.0


def test_next_layer_prefetch_hides_what_arrives_within_the_previous_layers_compute_and_counts_the_late() -> None:
    """Dense weights and KV pages both prefetched (layer l's as layer l-1 starts computing; layer 0's overlaps
    nothing). Iteration 0 (1 ms) prefetches both layers and 2 KV pages: layer 0 is late by its whole read, layer
    1 arrives within 0.5 ms. Iteration 1 (40 us) prefetches both, uses only layer 0's, and writes a page back:
    layer 1's read overlaps only 20 us (the layer waits for it, no access does). Iteration 2 takes no time and
    moves nothing. Another port, idle, makes the tier shared: each iteration's load is what it moves over its own
    time alone."""
    _, tier, (a, _) = _tier(NONE, ("a", 1.0, QUIET), ("b", 1.0, QUIET), options=HBFOptions(prefetch="next-layer"))
    tier.package = Scripted([RATE])
    compute = np.array([1e-3, 4e-5, 0.0])
    objects = _objects([[1, 1], [1, 1], [0, 0]], np.zeros((3, 2)), [[1, 1], [1, 0], [0, 0]], [2, 2, 2], [0, 0, 2])
    kv = np.array([[2.0 * PAGE_BYTES, 0.0], [0.0, PAGE_BYTES], [0.0, 0.0]])
    block = a._price(0.0, compute, np.zeros(3), objects, kv)

    first, second = _layer(LAYER_BYTES + PAGE_BYTES), _layer(LAYER_BYTES)
    assert first < 5e-4 and second > 2e-5
    stall = np.array([first, second + (second - 2e-5) + WRITE_BACK, 0.0])
    np.testing.assert_allclose(block.stall, stall, rtol=1e-12)
    np.testing.assert_array_equal(block.ahead, [[LAYER_BYTES + PAGE_BYTES] * 2, [LAYER_BYTES] * 2, [0, 0]])
    np.testing.assert_array_equal(block.demand, np.zeros((3, 2)))
    np.testing.assert_allclose(block.overlap, [[0.0, 5e-4], [0.0, 2e-5], [0.0, 0.0]], rtol=1e-15)
    moved = np.array([2 * LAYER_BYTES + 2 * PAGE_BYTES, 2 * LAYER_BYTES + PAGE_BYTES, 0.0])
    np.testing.assert_allclose(block.media_load, [*(moved[:2] / ((compute + stall)[:2] * RATE)), 0.0], rtol=1e-12)
    counts = dict(zip(ACCESS, block.counts.T.tolist()))
    assert counts["prefetched_in_time"] == [1, 0, 0]
    assert counts["media_reads"] == [2 * LAYER_PAGES, 2 * LAYER_PAGES, 0]
    # The late prefetches an access uses: iteration 1's late layer 1 is not used, so nothing waits for it.
    assert counts["media_reads_waited"] == [LAYER_PAGES, LAYER_PAGES, 0]
    assert counts["wasted_prefetch_bytes"] == [0, LAYER_BYTES, 0]


def test_a_dense_prefetch_without_kv_hides_layer_1_behind_layer_0_but_not_layer_0() -> None:
    _, tier, (a,) = _tier(NONE, ("a", 1.0, QUIET), options=HBFOptions(prefetch="next-layer"))
    tier.package = Scripted([RATE])
    block = a._price(0.0, np.array([1e-3]), np.zeros(1), _objects([[1, 1]], [[0, 0]], [[1, 1]], [2], [0]),
                     np.zeros((1, 2)))
    assert block.stall.tolist() == pytest.approx([_layer(LAYER_BYTES)], rel=1e-12)


def test_an_iteration_is_priced_at_the_rate_the_package_serves_when_it_starts_and_waits_out_severe() -> None:
    """Dense, next-layer prefetch, 1 ms of compute per iteration (iteration 2: 0.1 ms, so its layer 1 is late
    too); iteration 3 hits both layers. The planted package serves R, then R/2 after iteration 0, nothing after
    iteration 1 (Severe) until a 10 ms cooling step, R/2 again, nothing after iteration 2 and still nothing after
    iteration 3, R/2 after another cooling step. Iteration 2 waits 10 ms and is priced at R/2; iteration 3 reads
    nothing, so it does not wait; iteration 4 waits 10 ms and is priced at R/2 (not at the 'infinite' rate of
    iteration 3, which was served nothing and needed nothing); iteration 5, in Severe again, reads nothing and
    does not wait. The cooling steps draw none of the port's own power (its earlier pricing of this block is in
    progress); the iterations draw only their media reads' energy."""
    _, tier, (a,) = _tier(NONE, ("a", 1.0, QUIET), options=HBFOptions(prefetch="next-layer"))
    tier.package = Scripted([RATE, RATE / 2, 0.0, RATE / 2, 0.0, 0.0, RATE / 2, 0.0])
    a.block = _own_block_in_progress(100.0)
    compute = np.array([1e-3, 1e-3, 1e-4, 1e-3, 1e-3, 1e-3])
    reads = [[1, 1], [1, 1], [1, 1], [0, 0], [1, 1], [0, 0]]
    objects = _objects(reads, np.zeros((6, 2)), reads, [2] * 6, [0, 0, 0, 2, 0, 2])
    block = a._price(0.0, compute, np.zeros(6), objects, np.zeros((6, 2)))

    full, half = _layer(LAYER_BYTES), _layer(LAYER_BYTES, RATE / 2)
    stall = np.array([full, half, half + half - 5e-5, 0.0, half, 0.0])
    np.testing.assert_allclose(block.stall, stall, rtol=1e-12)
    assert block.waits.tolist() == [0.0, 0.0, 0.01, 0.0, 0.01, 0.0]
    assert block.rate.tolist() == [RATE, RATE / 2, RATE / 2, 0.0, RATE / 2, 0.0]
    counts = dict(zip(ACCESS, block.counts.T.tolist()))
    # Iteration 2's layer 1 overlaps 50 us at R/2: what streams in after tR by then is in time, the rest waited for.
    part = (5e-5 - TR) * (RATE / 2) / LAYER_BYTES
    assert 0 < part < 1
    assert counts["prefetched_in_time"] == pytest.approx([1, 1, part, 0, 1, 0], rel=1e-12)
    assert counts["media_reads_waited"] == pytest.approx(
        [LAYER_PAGES, LAYER_PAGES, (2 - part) * LAYER_PAGES, 0, LAYER_PAGES, 0], rel=1e-12)
    busy = compute + stall
    hbf_w = np.array([2, 2, 2, 0, 2, 0]) * LAYER_BYTES * 48e-12 / busy        # reading the media, nothing else
    taken = tier.package.taken
    assert [s for s, _ in taken] == pytest.approx([busy[0], busy[1], 0.01, busy[2], busy[3], 0.01, busy[4], busy[5]],
                                                  rel=1e-12)
    watts = [[0, 0, w] for w in hbf_w]
    np.testing.assert_allclose([w for _, w in taken], [*watts[:2], [0, 0, 0], *watts[2:4], [0, 0, 0], *watts[4:]],
                               rtol=1e-12)


def test_a_block_that_moves_nothing_draws_its_compute_power_and_is_run_when_settled() -> None:
    """Every access hits: no media time, power = energy over compute (nothing for an iteration of no time), no
    load on the media (beside another port), and the package untouched until the block is settled."""
    _, tier, (a, _) = _tier(NONE, ("a", 1.0, PortPower((100.0, 10.0, 1.0), 0.0)), ("b", 1.0, QUIET))
    tier.package = Scripted([RATE])
    none = np.zeros((2, 2))
    block = a._price(0.0, np.array([1e-3, 0.0]), np.zeros(2), _objects(none, none, none, [2, 2], [2, 2]), none)
    assert block.power.tolist() == [[100.0, 10.0, 1.0], [0.0, 0.0, 0.0]] and block.busy.tolist() == [1e-3, 0.0]
    assert block.media_load.tolist() == [0.0, 0.0] and block.snapshot is None and not tier.package.taken
    assert block.counts[:, :2].tolist() == [[2, 2], [2, 2]]


def test_a_port_reading_beside_one_whose_iteration_reads_nothing_has_the_media_to_itself() -> None:
    _, tier, (a, b) = _tier(NONE, ("a", 1.0, QUIET), ("b", 1.0, QUIET))
    tier.package = Scripted([RATE])
    none = np.zeros((1, 2))
    a.block = a._price(0.0, np.array([1e-3]), np.zeros(1), _objects(none, none, none, [2], [2]), none)
    a.block.starts, a.block.ends = np.zeros(1), np.array([1e-3])
    block = b._price(0.0, np.array([1e-3]), np.zeros(1), _objects(none, [[1, 1]], none, [2], [0]), none)
    assert block.stall.tolist() == pytest.approx([2 * _layer(LAYER_BYTES)], rel=1e-12)


def test_a_frame_cache_hit_is_counted_once_and_only_the_miss_is_read() -> None:
    """A frame cache of 17 experts: 2 tokens touch experts {0, 1} of both layers (read), then 3 touch {0, 1, 2}:
    4 of its 6 accesses hit, and expert 2 of each layer is read."""
    _, tier, (a,) = _moe_tier(("a", 1e-5, QUIET), frame_cache_gib=0.1)
    assert tier.lru.capacity == 17
    tier.objects(a, np.array([2]))
    _, _, (n_ahead, n_demand, useful, fetched, accesses, hits) = tier.objects(a, np.array([3]))
    assert n_demand.tolist() == [[1, 1]] and (fetched.tolist(), accesses.tolist(), hits.tolist()) == ([2], [6], [4])
    assert not n_ahead.any() and not useful.any()


@pytest.mark.parametrize("prefetch", ["none", "moe-speculative"])
def test_with_the_weights_in_hbm_no_expert_is_read_from_hbf_whatever_the_prefetch(prefetch) -> None:
    layout = Layout("kv", hbm_stacks=1, hbf_stacks=1, hbf_stack_gib=1.0, kv="hbf")
    _, tier, (a,) = _tier(layout, ("a", 1e-5, QUIET), shard=Shard(TINY_MOE, 2), options=HBFOptions(prefetch=prefetch))
    touched, demand, counts = tier.objects(a, np.array([2, 3]))
    assert not touched.any() and not demand.any() and not any(np.any(c) for c in counts)


# ----- settling --------------------------------------------------------------------------------------------
def _planted_block(port, snapshot=1.0) -> PortBlock:
    """Two iterations priced at 1 s: 0.25 s cooling then 0.75 s at (1, 2, 3) W; 0.5 s then 0.5 s at (4, 5, 6) W;
    dense weights (every layer touched), one count of each kind per iteration."""
    tokens = np.ones(2, dtype=np.int64)
    demand = np.ones((2, 2, 1), dtype=bool)
    return PortBlock(port, np.array([1.0, 2.0]), np.array([2.0, 3.0]), np.array([0.25, 0.5]), np.array([0.75, 0.5]),
                 np.zeros(2), np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), np.ones((2, len(ACCESS))), np.zeros(2),
                 np.zeros(2), np.zeros(2), np.full(2, RATE), None, np.zeros((2, 2)), None, None,
                 before=(None, None, np.zeros((2, 1), dtype=bool), None), snapshot=snapshot,
                 replay=(tokens, demand, demand, None))


def _settled(ports: int, server_ends=None, snapshot=1.0) -> tuple:
    """The planted block settled at the end, on a tier of `ports` ports, its server's ends `server_ends` (if any)."""
    _, tier, made = _tier(NONE, *[(role, 1.0, QUIET) for role in "ab"[:ports]])
    a = made[0]
    interrupted = []
    if server_ends is not None:
        a.server = SimpleNamespace(ends=np.array(server_ends), interrupt=lambda: interrupted.append(1))
    tier.package = Scripted([RATE], clock=1.0)
    a.block = tier.pending = _planted_block(a, snapshot)
    tier.settle(float("inf"))
    return tier, a, interrupted


def test_settling_a_block_whose_server_re_priced_its_last_iteration_runs_the_package_to_the_servers_end() -> None:
    """Beside another port, the package is run again from the block's start: each wait draws nothing, the last
    iteration is busy until the server's end (2.8 s, not 3 s) less its wait. The block is whole: its counts are
    kept, and its server is not interrupted."""
    tier, a, interrupted = _settled(2, [2.0, 2.8])
    assert tier.package.restored == [1.0]
    steps = tier.package.taken
    assert [w for _, w in steps] == [[0.0] * 3, [1.0, 2.0, 3.0], [0.0] * 3, [4.0, 5.0, 6.0]]
    assert [s for s, _ in steps] == pytest.approx([0.25, 0.75, 0.5, 0.3], rel=1e-12)
    assert tier.package.clock == pytest.approx(2.8, rel=1e-15)
    assert a.counts.tolist() == [2.0] * len(ACCESS) and not interrupted


def test_settling_alone_keeps_the_package_run_as_priced_and_runs_a_block_that_moved_nothing() -> None:
    tier, _, _ = _settled(1)
    assert tier.package.taken == [] and tier.package.restored == []
    tier, _, _ = _settled(1, snapshot=None)         # priced without running the package
    assert [s for s, _ in tier.package.taken] == [0.25, 0.75, 0.5, 0.5] and tier.package.restored == []


def test_a_block_replaced_at_the_instant_it_was_priced_leaves_no_trace() -> None:
    """Speculative MoE prefetch, no frame cache: a block of 2 then 3 tokens is priced at 0, then replaced at 0 by
    one of 1 token (its server's batch changed). What the tier keeps is the 1-token iteration alone: one expert
    a layer, waited for (nothing predicted: the port's previous iteration is still none)."""
    _, tier, (a,) = _moe_tier(("a", 1e-5, QUIET), prefetch="moe-speculative")
    a.cost(Work(np.array([2, 3]), 1, 1, 1))
    a.cost(Work(np.array([1]), 1, 1, 1))
    tier.settle(float("inf"))
    counts = dict(zip(ACCESS, a.counts.tolist()))
    assert (counts["accesses"], counts["hits"], counts["media_bytes"]) == (2, 0, 2 * EXPERT_BYTES)
    assert counts["media_reads"] == counts["media_reads_waited"] == 2 * 1536


def test_a_resident_block_replaced_at_the_instant_it_was_priced_leaves_no_trace() -> None:
    """Both layers in the frame cache (read by a first iteration): every later block is resident. One priced at
    1 s and replaced at 1 s by another adds only the other's accesses, all hits."""
    layout = Layout("t", hbm_stacks=1, hbf_stacks=1, weights="hbf", frame_cache_gib=1.0)
    loop, tier, (a,) = _tier(layout, ("a", 1e-3, QUIET))
    a.cost(Work(1, 1, 1, 1))
    loop.now = 1.0
    a.cost(Work(np.array([1, 1, 1]), 1, 1, 1))
    a.cost(Work(np.array([1]), 1, 1, 1))
    tier.settle(float("inf"))
    counts = dict(zip(ACCESS, a.counts.tolist()))
    assert (counts["accesses"], counts["hits"]) == (4, 2)


class OnePagePerSequence:
    """Planted KV frames: each iteration reads one page from the media per sequence it runs."""

    def __init__(self) -> None:
        self.counts = {"media_read_pages": 0, "programmed_pages": 0}

    def iteration(self, sequences, live) -> None:
        self.counts["media_read_pages"] += len(sequences)

    def snapshot(self) -> dict:
        return dict(self.counts)

    def restore(self, state: dict) -> None:
        self.counts = dict(state)


def test_a_kv_block_replaced_at_the_instant_it_was_priced_gives_back_its_kv_reads() -> None:
    """One decoding request: a block of two iterations reads two KV pages; replaced at once by a block of one,
    the KV frames are as before it, plus the one page the new block read."""
    _, tier, (a,) = _tier(NONE, ("a", 1e-5, QUIET))
    tier.kv = OnePagePerSequence()
    a.server = SimpleNamespace(busy=False, kv_sequences=lambda iteration: [(1, 100 + iteration, 1)],
                               kv_live=lambda: {1}, interrupt=lambda: None)
    a.cost(Work(np.array([1, 1]), 1, 1, 1))
    assert tier.kv.counts["media_read_pages"] == 2
    a.server.ends = np.zeros(0)                 # its server ran none of it
    a.cost(Work(np.array([1]), 1, 1, 1))
    a.server.ends = a.block.ends
    tier.settle(float("inf"))
    assert tier.kv.counts["media_read_pages"] == 1
    assert dict(zip(ACCESS, a.counts.tolist()))["fill_bytes"] == 2 * LAYER_BYTES + PAGE_BYTES


# ----- cutting where the traffic changes ------------------------------------------------------------------
@pytest.mark.parametrize("fill, programmed, co_runner_busy, server, cut", [
    ([5, 9, 9, 9], [0, 0, 0, 0], True, True, 1.0),       # the second iteration moves more
    ([5, 5, 9, 9], [0, 0, 0, 0], True, True, 2.0),       # the third
    ([5, 4, 4, 4], [0, 1, 1, 1], True, True, None),      # as many bytes through the media: the same shares
    ([5, 9, 9, 9], [0, 0, 0, 0], False, True, None),     # the other port's server is idle: no share to change
    ([5, 9, 9, 9], [0, 0, 0, 0], True, False, None),     # priced outside a server: nothing to interrupt
])
def test_a_block_is_cut_where_its_media_traffic_first_changes_while_a_co_runner_is_busy(
        fill, programmed, co_runner_busy, server, cut) -> None:
    loop, tier, (a, b) = _tier(NONE, ("a", 1.0, QUIET), ("b", 1.0, QUIET))
    cuts = []
    b.server = SimpleNamespace(busy=co_runner_busy)
    if server:
        a.server = SimpleNamespace(busy=True, interrupt=lambda: cuts.append(loop.now))
    block = SimpleNamespace(starts=np.arange(4.0), fill=np.array(fill, dtype=float),
                            programmed=np.array(programmed, dtype=float), media_load=np.full(4, 0.25))
    a.block = block
    a._cut_where_traffic_changes(block)
    loop.run()
    assert cuts == ([] if cut is None else [cut])


def test_a_block_is_cut_where_its_media_load_changes() -> None:
    loop, tier, (a, b) = _tier(NONE, ("a", 1.0, QUIET), ("b", 1.0, QUIET))
    cuts = []
    b.server = SimpleNamespace(busy=True)
    a.server = SimpleNamespace(busy=True, interrupt=lambda: cuts.append(loop.now))
    a.block = SimpleNamespace(starts=np.arange(3.0), fill=np.ones(3), programmed=np.zeros(3),
                              media_load=np.array([0.25, 0.25, 0.5]))
    a._cut_where_traffic_changes(a.block)
    loop.run()
    assert cuts == [2.0]


# ----- the tier as built from its options -------------------------------------------------------------------
@pytest.mark.parametrize("options, message", [
    ({"read_s": float("inf")}, "HBF page read time must be a finite number > 0, got inf"),
    ({"read_s": 0.0}, "HBF page read time must be a finite number > 0, got 0.0"),
    ({"frame_cache_gib": float("inf")}, "frame cache must be a finite number of GiB >= 0, got inf"),
    ({"frame_cache_gib": -1.0}, "frame cache must be a finite number of GiB >= 0, got -1.0"),
    ({"prefetch": "all"}, "unknown prefetch 'all'; choose one of none, next-layer, moe-speculative"),
    ({"ambient_c": -50.5}, "ambient temperature must be in [-50, 80) C, got -50.5"),
    ({"ambient_c": 80.0}, "ambient temperature must be in [-50, 80) C, got 80.0"),
])
def test_bad_hbf_options_are_refused_naming_the_value(options, message) -> None:
    assert ThrottlePolicy().leave_severe_c == 80.0
    with pytest.raises(ConfigError) as error:
        HBFOptions(**options)
    assert str(error.value) == message


def test_the_edges_of_the_hbf_options_are_accepted_and_a_read_time_keeps_the_grade() -> None:
    HBFOptions(ambient_c=-50.0)
    HBFOptions(ambient_c=79.9, frame_cache_gib=0.0)
    stack = HBFOptions(grade=2, read_s=3e-5).stack()
    assert (stack.grade, stack.read_s) == (2, 3e-5) and stack == HBFStack(grade=2, read_s=3e-5)


def test_the_tier_routes_an_moe_model_by_its_seeded_skewed_model_and_holds_no_weights_to_refresh_in_hbm() -> None:
    shard = Shard(TINY_MOE, 1)
    options = HBFOptions(routing_skew=0.5, seed=3)
    _, tier, _ = _tier(Layout("w", hbm_stacks=1, hbf_stacks=1, hbf_stack_gib=1.0, weights="hbf"), shard=shard,
                       options=options)
    model = RoutingModel(8, 2, 0.5, 3)
    tokens = np.array([1, 4, 16])
    np.testing.assert_array_equal(tier.demand(tokens), Router(model, tier.layers).touched_block(tokens))
    assert len(tier.package.retention.initial) == tier.layers * tier.slots
    _, tier, _ = _tier(Layout("kv", hbm_stacks=1, hbf_stacks=1, hbf_stack_gib=1.0, kv="hbf"), shard=shard,
                       options=options)
    assert len(tier.package.retention.initial) == 0 and not tier.demand(tokens).any()


def test_a_refreshed_object_is_its_pages_in_whole_erase_blocks_programmed_over_the_outstanding_operations() -> None:
    """An object of 8,048 pages (a 2-layer model with a 4,000-wide MLP) spans 32 erase blocks of 256 pages; on
    two stacks its tPROG is spread over 2 x 2,048 operations; a refreshed byte is read and programmed."""
    odd = LLM("odd", layers=2, hidden=1024, heads=8, kv_heads=8, head_dim=128, ffn=4000, vocab=1000, gated_mlp=True)
    _, tier, _ = _tier(Layout("two", hbm_stacks=1, hbf_stacks=2, weights="hbf"), shard=Shard(odd, 1))
    refresh = tier.package.refresh
    assert (tier.object_pages, tier.blocks_per_object, refresh.zone_blocks) == (8048, 32, 32)
    assert refresh.zone_program_s == pytest.approx(8048 * 100e-6 / 4096, rel=1e-15)
    assert refresh.energy_per_byte == pytest.approx(48e-12 + STACK.program_energy_per_byte, rel=1e-15)
    assert refresh.zone_bytes == tier.object_bytes == (4 * 1024 * 1024 + 3 * 1024 * 4000) * 2 == 8048 * PAGE_BYTES


def test_speculative_prefetch_streams_from_the_iteration_start_and_a_layer_waits_only_for_what_it_uses() -> None:
    """`HBFTier.stream`, worked by hand (tR = L, 1 GB/s, 100 us of compute a layer). Layer 0 predicted 100 us of
    experts and uses half: the stream starts at L, so nothing is in time, and the layer waits for its used half
    only (L + 50 us); the unused half is dropped unread. Layer 1's prefetch (30 us, all used) starts at L + 50 us
    and is read by the time layer 1 starts (L + 150 us): in time; layer 1 waits only for its 10 us demand miss
    (latency, then its bytes). An iteration that reads nothing waits for nothing."""
    _, tier, _ = _moe_tier(("a", 1e-5, QUIET), prefetch="moe-speculative")
    latency, rate, us = tier.tier.latency_s, 1e9, 1e-6
    used = np.array([[50e3, 30e3], [0.0, 0.0]])
    unused = np.array([[50e3, 0.0], [0.0, 0.0]])
    demand = np.array([[0.0, 10e3], [0.0, 0.0]])
    stall, arrived, starts, heads = tier.stream(np.full(2, rate), used, unused, demand, np.full((2, 2), 100 * us))
    np.testing.assert_allclose(stall, [(latency + 50 * us) + (latency + 10 * us), 0.0], rtol=1e-12)
    np.testing.assert_array_equal(arrived, [[0.0, 1.0], [1.0, 1.0]])
    np.testing.assert_allclose(starts[0], [0.0, latency + 150 * us], rtol=1e-12)
    np.testing.assert_allclose(heads[0], [latency, latency + 50 * us], rtol=1e-12)


def test_a_speculative_block_reads_neither_the_dropped_prediction_nor_counts_it_waited() -> None:
    """moe-speculative, one iteration of two layers (100 us of compute each). Layer 0 predicted 2 experts and
    uses 1: nothing is read when it starts (the stream reaches it after tR), so it waits for its used expert and
    drops the other unread. Layer 1 predicted nothing and waits for its 1 miss. Two experts read, both waited
    for; no byte wasted; the dropped expert costs neither media bytes nor HBF energy."""
    _, tier, (a,) = _moe_tier(("a", 1e-5, QUIET), prefetch="moe-speculative")
    tier.package = Scripted([RATE])
    objects = _objects([[2, 0]], [[0, 1]], [[1, 0]], [2], [0])
    block = a._price(0.0, np.array([200e-6]), np.zeros(1), objects, np.zeros((1, 2)))
    np.testing.assert_allclose(block.stall, [2 * _layer(EXPERT_BYTES)], rtol=1e-12)
    counts = dict(zip(ACCESS, block.counts.T.tolist()))
    pages = EXPERT_BYTES // PAGE_BYTES
    assert counts["media_reads"] == [2 * pages] and counts["media_reads_waited"] == [2 * pages]
    assert counts["media_bytes"] == [2 * EXPERT_BYTES] and counts["wasted_prefetch_bytes"] == [0]
    assert counts["prefetched_in_time"] == [0] and block.fill.tolist() == [2 * EXPERT_BYTES]
    hbf_energy = 2 * EXPERT_BYTES * tier.tier.energy_per_byte
    assert block.power[0, 2] * block.busy[0] == pytest.approx(hbf_energy, rel=1e-12)
