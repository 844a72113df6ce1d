"""Re-pricing an iteration in progress: progress is the work done at each rate, not the elapsed fraction."""
from types import SimpleNamespace

import numpy as np
import pytest

from sysmodel.engine import EventLoop
from sysmodel.execution import Cost
from sysmodel.memory import MemoryTier
from sysmodel.operators import Work
from sysmodel.servers import Accounting, Server, SharedMemory


class Dial:
    """A sharing whose grant is whatever fraction the test sets."""
    fraction = 1.0

    def grant(self, offered):
        return {name: load * self.fraction for name, load in offered.items()}


class OneIteration(Server):
    def completed(self, ends: np.ndarray) -> None:
        self.ended = float(ends[-1])


def run(changes: list[tuple[float, float]]) -> tuple[float, float]:
    """One 10-s iteration (at full share) under share changes at the given times; its end and busy time."""
    loop, dial = EventLoop(), Dial()
    tier = MemoryTier("m", 1, 1.0, 0.0, 0.0).with_sharing(dial)
    memory = SharedMemory(tier)
    memory.users["other"] = SimpleNamespace(busy=True, offered=0.5, reprice=lambda: None)

    def cost(work, scale=1.0, loads=None, share=None):
        return Cost(10.0 / scale, 1.0, 1.0, 0.0, 1.0)

    server = OneIteration(loop, "me", cost, Accounting("me", "gpu", 1.0, 1.0, 0.0, 0.0), memory)
    loop.at(0.0, lambda: server.start(Work(1, 1, 1, 1)))
    for time, fraction in changes:
        def change(fraction=fraction):
            dial.fraction = fraction
            memory.changed("other")
        loop.at(time, change)
    loop.run()
    return server.ended, server.accounting.busy_s


def test_the_issues_example_ends_at_12_5_s() -> None:
    # 5 s at 1/10 per s = 0.5 done; 5 s at 1/20 per s = 0.25 more; 0.25 left at 1/10 per s = 2.5 s.
    assert run([(5.0, 0.5), (10.0, 1.0)])[0] == pytest.approx(12.5, rel=1e-12)


def test_three_reprices_end_where_the_work_is_done() -> None:
    # Rates (fraction of the iteration per second): 1/10 on [0, 2), 1/20 on [2, 6), 1/40 on [6, 8), 1/10 after.
    # Done by t = 8: 0.2 + 0.2 + 0.05 = 0.45; the 0.55 left take 5.5 s: the iteration ends at 13.5 s.
    end, busy = run([(2.0, 0.5), (6.0, 0.25), (8.0, 1.0)])
    assert end == pytest.approx(13.5, rel=1e-12)
    assert busy == pytest.approx(13.5, rel=1e-12)


def test_a_change_back_to_the_priced_share_is_seen_after_a_reprice() -> None:
    # The share goes to 1/2 and back to 1 (the share it was first priced at): the second change must still
    # re-price, so the scale recorded for the iteration has to follow the first re-price.
    # 0.4 done at t = 4, 0.1 more by t = 6 at 1/20 per s, 0.5 left at 1/10 per s: ends at 11 s.
    assert run([(4.0, 0.5), (6.0, 1.0)])[0] == pytest.approx(11.0, rel=1e-12)


class Block(Server):
    def completed(self, ends: np.ndarray) -> None:
        self.ended = ends.tolist()


def block(loop: EventLoop, dial: Dial, other, seconds, start: float = 0.0, iterations: int = 2) -> Block:
    """A server that starts, at `start`, a block of `iterations` iterations priced `seconds(scale, loads)` each,
    beside the co-runner `other` on a memory shared by `dial`."""
    memory = SharedMemory(MemoryTier("m", 1, 1.0, 0.0, 0.0).with_sharing(dial))
    memory.users["other"] = other

    def cost(work, scale=1.0, loads=None, share=None):
        each = np.ones(np.shape(work.tokens)) if np.ndim(work.tokens) else 1.0
        return Cost(each * seconds(scale, loads or {}), each, each, 0.0, each)

    server = Block(loop, "me", cost, Accounting("me", "gpu", 1.0, 1.0, 0.0, 0.0), memory)
    loop.at(start, lambda: server.start(Work(*[np.ones(iterations)] * 4)))
    return server


def test_a_slowed_iteration_that_outlasts_the_next_ones_planned_end_ends_where_its_work_does() -> None:
    # Two 10-s iterations from t = 2 (planned ends 12 and 22). At t = 7 half of the first is done and the share
    # drops to 1/4 (1/40 of the iteration per s): by t = 24, past the second's planned end, 0.5 + 17/40 = 0.925
    # is done; the share is back to 1 and the 0.075 left take 0.75 s. The block is cut at that iteration.
    loop, dial = EventLoop(), Dial()
    other = SimpleNamespace(busy=True, offered=0.5, reprice=lambda: None)
    server = block(loop, dial, other, lambda scale, loads: 10.0 / scale, start=2.0)
    for time, fraction in [(7.0, 0.25), (24.0, 1.0)]:
        def change(fraction=fraction):
            dial.fraction = fraction
            server.memory.changed("other")
        loop.at(time, change)
    loop.run()
    assert server.ended == pytest.approx([24.75], rel=1e-12)
    assert server.accounting.busy_s == pytest.approx(22.75, rel=1e-12)


def test_a_change_that_leaves_the_share_as_it_was_keeps_the_iterations_end() -> None:
    # The co-runner reports a change at t = 5 but its load and the share stay as they were: the iteration in
    # progress still ends at 10 s, and the block is cut there.
    loop, dial = EventLoop(), Dial()
    other = SimpleNamespace(busy=True, offered=0.5, reprice=lambda: None)
    server = block(loop, dial, other, lambda scale, loads: 10.0 / scale)
    loop.at(5.0, lambda: server.memory.changed("other"))
    loop.run()
    assert server.ended == [10.0]


def test_a_co_runners_new_load_reprices_even_at_the_same_share() -> None:
    # As the PNM's MMU wait depends on the GPU's load whatever bandwidth share the PNM gets: an iteration takes
    # 10 s × (1 + the co-runner's load), the share stays 1. Load 0.5: 15 s; at t = 6 (0.4 done) the load becomes
    # 1: the 0.6 left take 0.6 × 20 s = 12 s, so it ends at 18 s.
    loop, dial = EventLoop(), Dial()
    other = SimpleNamespace(busy=True, offered=0.5, reprice=lambda: None)
    server = block(loop, dial, other, lambda scale, loads: 10.0 * (1 + loads.get("other", 0.0)) / scale)

    def heavier():
        other.offered = 1.0
        server.memory.changed("other")
    loop.at(6.0, heavier)
    loop.run()
    assert server.ended == pytest.approx([18.0], rel=1e-12)


def test_an_iteration_ending_as_its_co_runner_changes_keeps_its_place_among_that_instants_events() -> None:
    # The co-runner's change and the iteration's end fall at t = 10, the change first (scheduled before the
    # block started); an event E at t = 10 was scheduled after the block started. The iteration has no work left
    # to re-price: it ends in its place, before E.
    loop, dial, order = EventLoop(), Dial(), []
    other = SimpleNamespace(busy=True, offered=0.5, reprice=lambda: None)

    def change():
        dial.fraction = 0.5
        server.memory.changed("other")
    loop.at(10.0, change)
    server = block(loop, dial, other, lambda scale, loads: 10.0 / scale, iterations=1)
    server.completed = lambda ends: order.append("end")
    loop.at(0.0, lambda: loop.at(10.0, lambda: order.append("E")))
    loop.run()
    assert order == ["end", "E"]


def test_each_operator_load_gets_its_own_fair_share_within_one_pricing() -> None:
    # Max-min fair sharing against a co-runner offering 0.8: an operator offering 0.6 gets the even level 0.5
    # (scale 0.5 / 0.6), one offering 0.3 gets all it asks (scale 1), one offering 0.1 all too. Asked in the order
    # 0.6, 0.3, 0.6, 0.1, 0.3 within one iteration's pricing, every answer must be its own load's, whichever was
    # asked before it.
    loop, asked = EventLoop(), []
    memory = SharedMemory(MemoryTier("m", 1, 1.0, 0.0, 0.0))
    memory.users["other"] = SimpleNamespace(busy=True, offered=0.8, reprice=lambda: None)

    def cost(work, scale=1.0, loads=None, share=None):
        if share is not None:
            asked.append([float(share(load)) for load in (0.6, 0.3, 0.6, 0.1, 0.3)])
            asked.append(share(np.array([0.6, 0.3])).tolist())
        return Cost(1.0, 0.0, 0.0, 0.0, 0.5)

    server = OneIteration(loop, "me", cost, Accounting("me", "gpu", 1.0, 1.0, 0.0, 0.0), memory)
    loop.at(0.0, lambda: server.start(Work(1, 1, 1, 1)))
    loop.run()
    assert asked[0] == pytest.approx([0.5 / 0.6, 1.0, 0.5 / 0.6, 1.0, 1.0], rel=1e-12)
    assert asked[1] == pytest.approx([0.5 / 0.6, 1.0], rel=1e-12)
