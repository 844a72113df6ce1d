"""Max-min fair sharing over a block of iterations (each column an iteration, worked by hand), and the memory
tier's refusals."""
import math

import numpy as np
import pytest

from sysmodel.errors import ConfigError
from sysmodel.memory import FairSharing, MemoryTier


def test_fair_sharing_divides_each_iteration_of_a_block_on_its_own() -> None:
    # Shares of the tier, three iterations (columns); c's offer is one scalar for all three.
    # 1st: .2 + .3 + .4 = .9 fits: everyone gets its offer.
    # 2nd: .7 + .6 + .4 = 1.7: every offer is above 1/3, so each gets 1/3.
    # 3rd: b's .05 is below 1/3; the other two split the remaining .95 evenly (.475), c's .4 fits under it, and
    #      a gets what is left: 1 - .05 - .4 = .55.
    # 4th: a alone asks for anything: a gets all of it (1, not its 1.5), the others 0.
    granted = FairSharing().grant({"a": np.array([0.2, 0.7, 0.9, 1.5]), "b": np.array([0.3, 0.6, 0.05, 0.0]),
                                   "c": np.array([0.4, 0.4, 0.4, 0.0])})
    assert granted["a"] == pytest.approx([0.2, 1 / 3, 0.55, 1.0])
    assert granted["b"] == pytest.approx([0.3, 1 / 3, 0.05, 0.0])
    assert granted["c"] == pytest.approx([0.4, 1 / 3, 0.4, 0.0])


def test_a_scalar_offer_is_shared_against_each_iteration_of_a_block() -> None:
    # Two users: 0.8 (every iteration) against 0.1, 0.9: 0.8 fits beside 0.1; against 0.9 both get 0.5.
    granted = FairSharing().grant({"gpu": 0.8, "pnm": np.array([0.1, 0.9])})
    assert granted["gpu"] == pytest.approx([0.8, 0.5])
    assert granted["pnm"] == pytest.approx([0.1, 0.5])


def tier(**changes) -> MemoryTier:
    fields = dict(name="t", capacity_bytes=1e9, bandwidth=1e12, latency_s=1e-8, energy_per_byte=1e-11)
    return MemoryTier(**{**fields, **changes})


@pytest.mark.parametrize("changes, message", [
    ({"capacity_bytes": 0.0}, "memory tier t: capacity_bytes must be > 0"),
    ({"bandwidth": 0.0}, "memory tier t: bandwidth must be > 0 bytes/s"),
    ({"capacity_bytes": math.inf}, "memory tier t: capacity_bytes and bandwidth must be finite"),
    ({"bandwidth": math.inf}, "memory tier t: capacity_bytes and bandwidth must be finite"),
    ({"latency_s": -1e-9}, "memory tier t: latency_s and energy_per_byte must be >= 0"),
    ({"energy_per_byte": -1e-12}, "memory tier t: latency_s and energy_per_byte must be >= 0"),
])
def test_a_tier_without_capacity_or_bandwidth_or_with_negative_costs_is_refused(changes, message) -> None:
    with pytest.raises(ConfigError) as error:
        tier(**changes)
    assert str(error.value) == message


def test_a_tier_with_zero_latency_and_energy_is_accepted_and_keeps_its_name_under_another_sharing() -> None:
    free = tier(latency_s=0.0, energy_per_byte=0.0)
    sharing = FairSharing()
    shared = free.with_sharing(sharing)
    assert shared == free and shared.name == "t" and shared.sharing is sharing
