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
