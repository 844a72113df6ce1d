"""Bandwidth sharing: the MMU arbitration reproduces the verified points and interpolates between them; fair
(max-min) sharing never over-grants."""
import itertools
from dataclasses import replace

import numpy as np
import pytest

from basedie import verified
from sysmodel.arbitration import POLICIES, MMUArbitration
from sysmodel.errors import ConfigError
from sysmodel.hardware import PAPER_HARDWARE
from sysmodel.memory import FairSharing, MemoryTier


@pytest.fixture(scope="module")
def table() -> verified.VerifiedBlocks:
    return verified.load()


def measured(table: verified.VerifiedBlocks, policy: str) -> list[dict]:
    entry = table.entry("mmu", out_of_order=False)
    return [p for p in entry.figures["arbitration"] if p["policy"] == POLICIES[policy]]


def served(point: dict, source: str) -> float:
    """The fraction of its offered load a source obtained in the measurement."""
    return point[f"{source}_share"] / point[f"{source}_offered_actual"]


@pytest.mark.parametrize("policy", list(POLICIES))
def test_every_measured_point_is_reproduced_exactly(table, policy: str) -> None:
    mmu = MMUArbitration.from_verified(table, policy, PAPER_HARDWARE)
    entry = table.entry("mmu", out_of_order=False)
    points = measured(table, policy)
    assert len(points) == 9
    for p in points:
        rates = p["gpu_offered"], p["pnm_offered"]        # requests per cycle per port
        fractions = {"gpu": rates[0] / mmu.full_rate, "pnm": rates[1] / mmu.full_rate}
        for source in ("gpu", "pnm"):
            # The generator offered a little more or less than requested: what carries over is the fraction
            # served, e.g. prefill-first at 0.25/1.0: the GPU offered 0.234 and got all of it.
            assert mmu.served(source, *rates) == pytest.approx(served(p, source), rel=1e-12)
            assert mmu.wait_cycles(source, *rates) == pytest.approx(p[f"{source}_wait_p50"], rel=1e-12)
            if max(fractions.values()) <= 1:     # 1 request per cycle is 102.4 % of the stack: unreachable
                cycles = entry.figures[f"latency_cycles_{source}"] + p[f"{source}_wait_p50"]
                assert mmu.access_latency_s(source, fractions) == pytest.approx(cycles / 1e9, rel=1e-12)
                assert mmu.grant(fractions)[source] == pytest.approx(fractions[source] * served(p, source),
                                                                     rel=1e-12)


@pytest.mark.parametrize("policy", list(POLICIES))
def test_a_source_alone_gets_what_it_offers(table, policy: str) -> None:
    mmu = MMUArbitration.from_verified(table, policy, PAPER_HARDWARE)
    for load in (0.1, 0.25, 0.4, 0.8, 1.0):
        assert mmu.grant({"gpu": load}) == pytest.approx({"gpu": load, "pnm": 0.0})
        assert mmu.grant({"pnm": load, "gpu": 0.0}) == pytest.approx({"gpu": 0.0, "pnm": load})
        # Unloaded: the bare MMU latency (2 cycles for the GPU, 3 for the PNM as measured).
        assert mmu.access_latency_s("pnm", {"pnm": load}) == pytest.approx(3e-9)
    assert mmu.grant({"gpu": 7.0, "pnm": -1.0}) == pytest.approx({"gpu": 1.0, "pnm": 0.0})  # loads clipped to 0..1


@pytest.mark.parametrize("policy", list(POLICIES))
def test_interpolation_stays_within_the_neighbouring_points(table, policy: str) -> None:
    mmu = MMUArbitration.from_verified(table, policy, PAPER_HARDWARE)
    axis = [0.0, 0.25, 0.5, 1.0]
    fractions = {}                 # (gpu load, pnm load) → fraction served per source
    for load in axis:              # a source whose co-runner offers nothing is served in full
        fractions[load, 0.0] = {"gpu": 1.0}
        fractions[0.0, load] = {"pnm": 1.0}
    for p in measured(table, policy):
        fractions[p["gpu_offered"], p["pnm_offered"]] = {s: served(p, s) for s in ("gpu", "pnm")}
    rng = np.random.default_rng(1)
    for x, y in rng.uniform(0.25, 1, (300, 2)).tolist() + rng.uniform(0, 1, (300, 2)).tolist():
        for source, own, other in (("gpu", x, y), ("pnm", y, x)):
            if own == 0:
                continue
            own_axis = [a for a in axis if a > 0]      # below the lowest measured load it is held constant
            own = max(own, own_axis[0])
            i = max(k for k in range(len(own_axis) - 1) if own_axis[k] <= own)
            j = max(k for k in range(len(axis) - 1) if axis[k] <= other)
            corners = [fractions[(a, b) if source == "gpu" else (b, a)][source]
                       for a, b in itertools.product(own_axis[i:i + 2], axis[j:j + 2])]
            assert min(corners) - 1e-12 <= mmu.served(source, x, y) <= max(corners) + 1e-12
    # Halfway between two measured points on a grid line: the mean of their served fractions.
    p = {(q["gpu_offered"], q["pnm_offered"]): q for q in measured(table, policy)}
    expected = (served(p[0.5, 0.5], "pnm") + served(p[0.5, 1.0], "pnm")) / 2
    assert mmu.served("pnm", 0.5, 0.75) == pytest.approx(expected)
    # Offered fractions of the bandwidth are requests per cycle ÷ full_rate.
    assert mmu.grant({"gpu": 0.5 / mmu.full_rate, "pnm": 0.75 / mmu.full_rate})["pnm"] == pytest.approx(
        0.75 / mmu.full_rate * expected)


def test_unknown_policy_is_refused(table) -> None:
    with pytest.raises(ConfigError) as error:
        MMUArbitration.from_verified(table, "round-robin", PAPER_HARDWARE)
    assert str(error.value) == "unknown MMU policy 'round-robin'; choose one of prefill-first, decode-first, mixed"


def test_a_table_without_a_clocked_mmu_entry_names_the_command_that_measures_one(table) -> None:
    without = verified.VerifiedBlocks([e for e in table.entries if e.block != "mmu"])
    with pytest.raises(ConfigError) as error:
        MMUArbitration.from_verified(without, "prefill-first", PAPER_HARDWARE)
    assert str(error.value) == "no verified figures for mmu with {'out_of_order': False}; run `basedie verify mmu`"
    entry = table.entry("mmu", out_of_order=False)
    unclocked = replace(entry, params={k: v for k, v in entry.params.items() if k != "design_clock_hz"})
    with pytest.raises(ConfigError) as error:
        MMUArbitration.from_verified(verified.VerifiedBlocks([unclocked if e is entry else e for e in table.entries]),
                                     "prefill-first", PAPER_HARDWARE)
    assert str(error.value) == ("the verified mmu entry records no design clock; re-measure it with "
                                "`basedie verify mmu`")


def test_prefill_first_favours_the_gpu_and_decode_first_the_pnm(table) -> None:
    """Each policy gives its favoured source more than the other policy does. (Not that the favoured source gets
    more than the other: behind a DRAM with in-order answers the saturated PNM out-draws a prefill_first GPU,
    docs/design/dram.md.)"""
    loads = {"gpu": 1.0, "pnm": 1.0}
    prefill_first = MMUArbitration.from_verified(table, "prefill-first", PAPER_HARDWARE).grant(loads)
    decode_first = MMUArbitration.from_verified(table, "decode-first", PAPER_HARDWARE).grant(loads)
    assert prefill_first["gpu"] > decode_first["gpu"]
    assert decode_first["pnm"] > prefill_first["pnm"]


def test_fair_sharing_properties() -> None:
    fair = FairSharing()
    rng = np.random.default_rng(2)
    for _ in range(500):
        users = [f"u{i}" for i in range(rng.integers(1, 5))]
        offered = dict(zip(users, rng.uniform(0, 1.5, len(users))))
        granted = fair.grant(offered)
        assert set(granted) == set(users)
        assert sum(granted.values()) <= 1 + 1e-12
        assert all(0 <= granted[u] <= offered[u] + 1e-12 for u in users)
        if sum(offered.values()) <= 1:
            assert granted == pytest.approx(offered)            # enough for everyone
        else:
            assert sum(granted.values()) == pytest.approx(1.0)  # nothing left idle
        # Max-min: whoever gets less than it offered gets at least as much as anyone else.
        for u in users:
            if granted[u] < offered[u] - 1e-12:
                assert all(granted[u] >= granted[v] - 1e-12 for v in users)


def test_fair_sharing_examples() -> None:
    fair = FairSharing()
    assert fair.grant({"a": 1.0, "b": 0.8}) == pytest.approx({"a": 0.5, "b": 0.5})    # both saturate
    assert fair.grant({"a": 0.2, "b": 0.9}) == pytest.approx({"a": 0.2, "b": 0.8})    # the rest to the other
    assert fair.grant({"a": 0.3}) == pytest.approx({"a": 0.3})
    assert fair.grant({"a": -0.5, "b": 2.0}) == pytest.approx({"a": 0.0, "b": 1.0})
    assert fair.grant({"a": 0.6, "b": 0.6, "c": 0.1}) == pytest.approx({"a": 0.45, "b": 0.45, "c": 0.1})


def test_a_gpus_stacks_seen_as_one_tier() -> None:
    # 8 HBM4 stacks: 8 × 48 GB, 8 × 2 TB/s; latency, energy per byte and sharing those of one stack.
    class Unfair:
        def grant(self, offered):
            return {user: 0.0 for user in offered}

    sharing = Unfair()
    stack = MemoryTier("stack", 48e9, 2e12, 42e-9, 20.8e-12, sharing)
    eight = stack.scaled(8)
    assert (eight.name, eight.capacity_bytes, eight.bandwidth) == ("8x stack", 384e9, 16e12)
    assert (eight.latency_s, eight.energy_per_byte) == (42e-9, 20.8e-12) and eight.sharing is sharing
    assert stack.scaled(8, "HBM").name == "HBM"
    # A GPU's memory is its stacks scaled (computed afresh for a new GPU, not a cached preset).
    gpu = replace(PAPER_HARDWARE.gpu, stacks=4, stack=stack)
    assert (gpu.memory.bandwidth, gpu.memory.capacity_bytes, gpu.memory.name) == (8e12, 192e9, "4x stack")


@pytest.mark.parametrize("policy", list(POLICIES))
def test_a_block_of_iterations_is_served_as_each_iteration_alone(table, policy: str) -> None:
    # Decode blocks look the grid up with arrays: the same values as one lookup per iteration, also below the
    # lowest and above the highest measured load (held constant there).
    mmu = MMUArbitration.from_verified(table, policy, PAPER_HARDWARE)
    x, y = np.random.default_rng(2).uniform(-0.5, 1.5, (2, 50))
    for source in ("gpu", "pnm"):
        for lookup in (mmu.served, mmu.wait_cycles):
            np.testing.assert_allclose(lookup(source, x, y), [lookup(source, a, b) for a, b in zip(x, y)], rtol=1e-12)


@pytest.mark.parametrize("policy", list(POLICIES))
def test_a_block_of_offers_is_granted_and_waits_as_each_offer_alone(table, policy: str) -> None:
    # A block's offers (one per iteration), some below nothing or above the whole bandwidth (taken as 0 and as
    # all of it), against a co-runner's block or its steady offer (a prefill iteration beside a decode block).
    mmu = MMUArbitration.from_verified(table, policy, PAPER_HARDWARE)
    gpu, pnm = np.array([-0.2, 0.1, 0.5, 1.3]), np.array([0.7, 1.6, -0.1, 0.3])
    for offered in ({"gpu": gpu, "pnm": pnm}, {"gpu": gpu, "pnm": 0.6}, {"gpu": 0.6, "pnm": pnm}):
        granted = mmu.grant(offered)
        waits = {s: mmu.access_latency_s(s, offered) for s in ("gpu", "pnm")}
        for k in range(4):
            one = {s: float(v[k]) if isinstance(v, np.ndarray) else v for s, v in offered.items()}
            clipped = {s: min(max(v, 0.0), 1.0) for s, v in one.items()}
            for s in ("gpu", "pnm"):
                assert granted[s][k] == pytest.approx(mmu.grant(clipped)[s], rel=1e-12)
                assert waits[s][k] == pytest.approx(mmu.access_latency_s(s, clipped), rel=1e-12)
