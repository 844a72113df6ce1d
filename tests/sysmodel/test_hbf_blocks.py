"""The block-at-once paths of the HBF service give what iteration-by-iteration pricing gives: the frame cache
over a block against `access` (itself checked against `FrameCache`), routing drawn for a block against batch
by batch, retention's skipped deadline search against counting every step."""
import numpy as np
import pytest

from sysmodel.hbf.cache import LayerLRU
from sysmodel.hbf.retention import Retention, retention_s
from sysmodel.hbf.routing import Router, RoutingModel


@pytest.mark.parametrize("capacity", [0, 3, 12, 40, 200])
def test_a_block_of_iterations_hits_like_one_at_a_time(capacity) -> None:
    rng = np.random.default_rng(capacity)
    block, single = LayerLRU(4, 16, capacity), LayerLRU(4, 16, capacity)
    for step in range(40):
        masks = rng.random((int(rng.integers(1, 6)), 4, 16)) < rng.choice([0.05, 0.4, 0.9])
        expected = np.stack([single.access(mask) for mask in masks])
        assert (block.access_block(masks) == expected).all(), step
        assert (block.last == single.last).all() and (block.order == single.order).all()


def test_objects_touched_one_at_a_time_hit_in_a_later_block_of_a_cache_that_holds_everything() -> None:
    """1 layer x 2 slots, capacity 2 (every object fits): `access` touches slot 0, then slot 1 (both miss); a
    block then touching slot 0, then both, hits slot 0 twice and slot 1 once: nothing is ever evicted."""
    lru = LayerLRU(1, 2, 2)
    assert not lru.access(np.array([[True, False]])).any()
    assert not lru.access(np.array([[False, True]])).any()
    hits = lru.access_block(np.array([[[True, False]], [[True, True]]]))
    assert hits.tolist() == [[[True, False]], [[True, True]]]


def test_a_block_ages_the_zones_at_the_arrhenius_rate_up_to_the_step_that_meets_a_deadline() -> None:
    """At the reference 85 C a zone lasts 24 h: hour-long steps age it by 1/24 each, so from damage 0 the 24th
    step meets its deadline; `age` takes the 23 before it. At 45 C it lasts 24 h x exp(1.04 eV / k x (1/318.15 K
    - 1/358.15 K)) = 69.2 days (k = 8.617e-5 eV/K), so a day ages it by 1/69.2."""
    zone = Retention(1)
    assert zone.age(np.full(30, 3600.0), np.full(30, 85.0)) == 23
    assert zone.aging == pytest.approx(23 / 24, rel=1e-12)
    cool = Retention(1)
    assert cool.age(np.full(2, 86400.0), np.full(2, 45.0)) == 2
    assert cool.aging == pytest.approx(2 / 69.2, rel=2e-3)


def test_the_fast_path_is_taken_and_exact_on_a_hand_case(monkeypatch) -> None:
    """2 layers x 2 slots, capacity 2. Iteration 0 touches all 4 objects (no hits). Iteration 1 touches all 4:
    object (0, 0) has 3 objects touched after it in iteration 0 and none earlier in iteration 1 (distance 3),
    (0, 1) has 2; (1, 0) has 1 after it plus 2 touched in layer 0 this iteration (3), (1, 1) 0 + 2 = 2: none hits.
    Iteration 2 touches only layer 1: (1, 0) has 1 after it, (1, 1) none: both hit."""
    lru = LayerLRU(2, 2, 2)
    full, layer1 = np.ones((2, 2), dtype=bool), np.array([[False, False], [True, True]])
    assert not lru.access_block(full[None]).any()     # after nothing: iteration by iteration
    monkeypatch.setattr(LayerLRU, "access", None)      # from here on only the block path may run
    hits = lru.access_block(np.stack([full, layer1]))
    assert not hits[0].any()
    assert hits[1].tolist() == [[False, False], [True, True]]


def test_block_routing_draws_the_same_numbers() -> None:
    one, block = (Router(RoutingModel(16, 2, 1.0, seed=3), 3) for _ in range(2))
    tokens = np.array([4, 4, 4])
    expected = np.stack([one.touched(4, slice(0, 8)) for _ in tokens])
    assert (block.touched_block(tokens, slice(0, 8)) == expected).all()
    mixed = np.array([1, 7])
    assert (block.touched_block(mixed) == np.stack([one.touched(1), one.touched(7)])).all()


def test_retention_counts_every_deadline_it_skips_searching_for() -> None:
    rng = np.random.default_rng(5)
    for zones in (1, 7, 300):
        fast = Retention(zones, rng.random(zones))
        initial, aging, met = fast.initial.copy(), 0.0, 0
        for _ in range(3000):
            dt, temp = float(rng.exponential(600.0)), float(rng.uniform(40, 125))
            met += fast.advance(dt, temp)
            aging += dt / retention_s(temp)
            assert met == int(np.floor(initial + aging).sum()), zones
        fast.restore(0.0, 0)        # a rollback: the next deadline is searched again
        assert fast.advance(1e-9, 85.0) == 0 and fast.aging == pytest.approx(1e-9 / (24 * 3600))
