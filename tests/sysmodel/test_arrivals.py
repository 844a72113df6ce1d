"""Generated arrivals (`sysmodel/arrivals.py`): each check's boundary and exact message, each length distribution
against numpy's documented one, and the requests a workload generates."""
import math
import re

import numpy as np
import pytest

from sysmodel.arrivals import GammaArrivals, Lengths
from sysmodel.errors import ConfigError


def _refused(message: str, build) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        build()


@pytest.mark.parametrize("kwargs, message", [
    (dict(mean=10, kind="poisson"),
     "workload: length distribution 'poisson' is not one of fixed, normal, lognormal, uniform, exponential"),
    (dict(mean=0), "workload: mean length must be >= 1, got 0"),
    (dict(mean=10, cv=-0.01), "workload: length cv must be >= 0, got -0.01"),
    (dict(mean=10, cv=math.nan), "workload: length cv must be >= 0, got nan"),
    (dict(mean=10, cv=math.inf), "workload: length cv must be >= 0, got inf"),
    (dict(mean=10, low=0), "workload: length range must have 1 <= low <= high, got 0..None"),
    (dict(mean=10, low=5, high=4), "workload: length range must have 1 <= low <= high, got 5..4"),
    (dict(mean=10, kind="uniform", cv=0.578), "workload: a uniform length distribution has cv <= 0.577, got 0.578"),
])
def test_a_bad_length_distribution_is_refused_with_its_message(kwargs: dict, message: str) -> None:
    _refused(message, lambda: Lengths(**kwargs))


@pytest.mark.parametrize("kwargs", [
    dict(mean=1), dict(mean=10, cv=0.0), dict(mean=10, low=1), dict(mean=10, low=4, high=4),
    dict(mean=10, low=2, high=None), dict(mean=10, kind="uniform", cv=0.577), dict(mean=10, kind="normal", cv=5.0),
    *(dict(mean=10, kind=kind) for kind in ("fixed", "normal", "lognormal", "uniform", "exponential")),
])
def test_a_length_distribution_at_its_bounds_is_accepted(kwargs: dict) -> None:
    Lengths(**kwargs)


def test_the_uniform_cv_bound_is_that_of_the_widest_uniform_from_zero() -> None:
    """U(0, 2m) has sd 2m/sqrt(12) = m/sqrt(3): a cv of 1/sqrt(3) exactly is accepted, anything above refused."""
    Lengths(10, "uniform", 1 / math.sqrt(3))
    with pytest.raises(ConfigError):
        Lengths(10, "uniform", math.nextafter(1 / math.sqrt(3), 1))


def test_fixed_lengths_are_the_mean_every_time() -> None:
    draws = Lengths(37, "fixed", 0.9).draw(np.random.default_rng(0), 50)
    assert draws.dtype.kind == "i" and draws.shape == (50,) and set(draws.tolist()) == {37}


@pytest.mark.parametrize("kind, sample", [
    ("normal", lambda rng, n: rng.normal(200, 0.25 * 200, n)),
    # numpy's lognormal takes the underlying normal's mean and sd: mean m and cv c give sigma^2 = ln(1 + c^2)
    # and mu = ln m - sigma^2 / 2 (E = exp(mu + sigma^2 / 2), Var / E^2 = exp(sigma^2) - 1)
    ("lognormal", lambda rng, n: rng.lognormal(math.log(200) - math.log(1.0625) / 2, math.sqrt(math.log(1.0625)), n)),
    # U(a, b) has sd (b - a) / sqrt(12): half-width sqrt(3) * c * m
    ("uniform", lambda rng, n: rng.uniform(200 - math.sqrt(3) * 50, 200 + math.sqrt(3) * 50, n)),
    ("exponential", lambda rng, n: rng.exponential(200, n)),
])
def test_each_length_is_numpys_draw_of_its_distribution_rounded_and_clipped(kind: str, sample) -> None:
    expected = np.clip(np.rint(sample(np.random.default_rng(11), 4000)), 150, 260)
    draws = Lengths(200, kind, 0.25, low=150, high=260).draw(np.random.default_rng(11), 4000)
    assert draws.dtype.kind == "i"
    assert draws.tolist() == expected.astype(int).tolist()


@pytest.mark.parametrize("kind", ["normal", "lognormal", "uniform", "exponential"])
def test_lengths_without_an_upper_bound_are_not_capped(kind: str) -> None:
    """Mean 50, cv 0.5: each distribution puts draws beyond 80 (1.6 means) and the default floor is 1."""
    draws = Lengths(50, kind, 0.5).draw(np.random.default_rng(2), 20000)
    assert draws.max() > 80 and draws.min() >= 1
    assert draws.mean() == pytest.approx(50, rel=0.03)


def test_a_length_distribution_has_its_cv_at_a_small_mean() -> None:
    """Mean 3, cv 0.5 before rounding: the normal's sd is 1.5, not the mean or 1."""
    draws = np.random.default_rng(4).normal(3, 1.5, 20000)
    assert Lengths(3, "normal", 0.5, high=100).draw(np.random.default_rng(4), 20000).tolist() == \
        np.clip(np.rint(draws), 1, 100).astype(int).tolist()


@pytest.mark.parametrize("kwargs, message", [
    (dict(qps=0.0), "workload: qps must be > 0 and finite, got 0.0"),
    (dict(qps=-1.0), "workload: qps must be > 0 and finite, got -1.0"),
    (dict(qps=math.inf), "workload: qps must be > 0 and finite, got inf"),
    (dict(qps=math.nan), "workload: qps must be > 0 and finite, got nan"),
    (dict(arrival_cv=0.0), "workload: arrival cv must be > 0, got 0.0"),
    (dict(arrival_cv=math.inf), "workload: arrival cv must be > 0, got inf"),
    (dict(arrival_cv=math.nan), "workload: arrival cv must be > 0, got nan"),
    (dict(requests=0), "workload: requests must be >= 1, got 0"),
    (dict(seed=-1), "workload: seed must be >= 0, got -1"),
])
def test_a_bad_generated_workload_is_refused_with_its_message(kwargs: dict, message: str) -> None:
    base = dict(qps=2.0, requests=5, input=Lengths(10), output=Lengths(3))
    _refused(message, lambda: GammaArrivals(**(base | kwargs)))


def test_a_generated_workload_at_its_bounds_is_accepted() -> None:
    workload = GammaArrivals(1e-9, 1, Lengths(10, "fixed"), Lengths(3, "fixed"), arrival_cv=1e-9, seed=0)
    assert len(workload.generate()) == 1 and (workload.input_len, workload.output_len) == (10, 3)


def test_generated_requests_are_numbered_in_arrival_order_with_their_own_lengths() -> None:
    workload = GammaArrivals(4.0, 6, Lengths(17, "fixed"), Lengths(5, "fixed"), seed=9)
    requests = workload.generate()
    assert [r.id for r in requests] == list(range(6))
    assert [(r.input_len, r.output_len) for r in requests] == [(17, 5)] * 6
    assert all(type(r.arrival) is float and type(r.input_len) is int for r in requests)
    assert all(a.arrival < b.arrival for a, b in zip(requests, requests[1:]))


def test_arrivals_are_the_cumulative_gamma_gaps_drawn_from_the_seed() -> None:
    """Mean gap 1/qps and cv c: Gamma of shape 1/c^2 and scale 1/(qps * shape) (mean shape * scale, cv 1/sqrt(shape));
    the lengths are drawn after the gaps, inputs first, from the same generator."""
    rng = np.random.default_rng(21)
    gaps = rng.gamma(4.0, 1 / (5.0 * 4.0), 8)                 # cv 0.5: shape 4
    inputs, outputs = rng.normal(100, 10, 8), rng.normal(20, 2, 8)
    requests = GammaArrivals(5.0, 8, Lengths(100), Lengths(20), arrival_cv=0.5, seed=21).generate()
    assert [r.arrival for r in requests] == pytest.approx(np.cumsum(gaps).tolist(), rel=1e-12)
    assert [r.input_len for r in requests] == np.rint(inputs).astype(int).tolist()
    assert [r.output_len for r in requests] == np.rint(outputs).astype(int).tolist()


def test_a_seed_fixes_the_workload_and_another_seed_changes_it() -> None:
    def arrivals(seed: int) -> list[float]:
        return [r.arrival for r in GammaArrivals(3.0, 20, Lengths(10), Lengths(3), seed=seed).generate()]
    assert arrivals(5) == arrivals(5)
    assert arrivals(5) != arrivals(6)
