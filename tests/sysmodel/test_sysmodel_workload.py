"""Workloads: Poisson arrivals have the statistics of a Poisson process, lengths the requested mean and spread;
both are reproducible from the seed. Tolerances are 5 standard errors of the sample size."""
import math

import numpy as np
import pytest

from sysmodel.errors import ConfigError
from sysmodel.workload import FixedBatch, PoissonArrivals

N = 100_000
QPS, INPUT, OUTPUT, CV = 4.0, 1000, 200, 0.1


@pytest.fixture(scope="module")
def poisson() -> list:
    return PoissonArrivals(QPS, N, INPUT, OUTPUT, length_cv=CV, seed=7).generate()


def test_inter_arrival_times_are_exponential_at_the_rate(poisson) -> None:
    arrivals = np.array([r.arrival for r in poisson])
    gaps = np.diff(arrivals, prepend=0.0)
    assert np.all(gaps > 0)
    mean = 1 / QPS
    # Exponential: standard deviation = mean, so the sample mean's standard error is mean / √N …
    assert gaps.mean() == pytest.approx(mean, abs=5 * mean / math.sqrt(N))
    # … the sample standard deviation's about mean · √(2/N) (fourth moment 9 mean⁴), hence the CV's bound.
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=5 * math.sqrt(2 / N) + 5 / math.sqrt(N))
    # Memoryless shape: P(gap > mean) = e⁻¹, P(gap > 3 mean) = e⁻³ (binomial standard errors).
    for k in (1, 3):
        p = math.exp(-k)
        assert np.mean(gaps > k * mean) == pytest.approx(p, abs=5 * math.sqrt(p * (1 - p) / N))


@pytest.mark.parametrize(("attribute", "mean"), [("input_len", INPUT), ("output_len", OUTPUT)])
def test_lengths_have_the_requested_mean_and_spread(poisson, attribute: str, mean: int) -> None:
    lengths = np.array([getattr(r, attribute) for r in poisson])
    assert lengths.dtype.kind == "i"
    sigma = CV * mean
    assert lengths.mean() == pytest.approx(mean, abs=5 * sigma / math.sqrt(N))
    # Rounding to whole tokens adds a variance of 1/12; the sample std's standard error is σ / √(2N).
    assert lengths.std() == pytest.approx(math.sqrt(sigma ** 2 + 1 / 12), abs=5 * sigma / math.sqrt(2 * N))


def test_requests_are_numbered_in_arrival_order(poisson) -> None:
    assert [r.id for r in poisson[:5]] == [0, 1, 2, 3, 4]
    assert all(a.arrival < b.arrival for a, b in zip(poisson, poisson[1:]))
    assert all(not r.token_times and math.isnan(r.first_token) for r in poisson[:100])


def test_lengths_are_whole_tokens_and_at_least_one() -> None:
    requests = PoissonArrivals(1.0, 2000, 2, 3, length_cv=2.0, seed=3).generate()
    inputs = [r.input_len for r in requests]
    assert min(inputs) == 1 and min(r.output_len for r in requests) == 1    # clipped, not dropped
    assert all(isinstance(r.input_len, int) and isinstance(r.output_len, int) for r in requests)
    assert len(set(inputs)) > 3                                              # still spread above the clip


def test_zero_cv_gives_exact_lengths() -> None:
    requests = PoissonArrivals(1.0, 50, 8192, 128, length_cv=0.0).generate()
    assert {(r.input_len, r.output_len) for r in requests} == {(8192, 128)}


def test_same_seed_same_requests_other_seed_other_requests() -> None:
    def fingerprint(workload: PoissonArrivals) -> list[tuple]:
        return [(r.arrival, r.input_len, r.output_len) for r in workload.generate()]

    base = fingerprint(PoissonArrivals(2.0, 200, 8192, 256, seed=11))
    assert fingerprint(PoissonArrivals(2.0, 200, 8192, 256, seed=11)) == base
    other = fingerprint(PoissonArrivals(2.0, 200, 8192, 256, seed=12))
    assert all(a != b for a, b in zip(base, other))


def test_fixed_batch() -> None:
    requests = FixedBatch(5, 8192, 64).generate()
    assert [(r.id, r.arrival, r.input_len, r.output_len) for r in requests] == [(i, 0.0, 8192, 64) for i in range(5)]
    assert requests[0] is not requests[1] and requests[0].token_times is not requests[1].token_times


@pytest.mark.parametrize(("make", "named"), [
    (lambda: FixedBatch(0, 8, 8), "requests must be >= 1, got 0"),
    (lambda: FixedBatch(1, 0, 8), "input length must be >= 1, got 0"),
    (lambda: FixedBatch(1, 8, -1), "output length must be >= 1, got -1"),
    (lambda: PoissonArrivals(0.0, 10, 8, 8), "qps must be > 0, got 0.0"),
    (lambda: PoissonArrivals(-1.0, 10, 8, 8), "qps must be > 0"),
    (lambda: PoissonArrivals(1.0, 0, 8, 8), "requests must be >= 1"),
    (lambda: PoissonArrivals(1.0, 10, 0, 8), "input length must be >= 1"),
    (lambda: PoissonArrivals(1.0, 10, 8, 0), "output length must be >= 1"),
    (lambda: PoissonArrivals(1.0, 10, 8, 8, length_cv=-0.1), "length_cv must be >= 0"),
])
def test_bad_workloads_are_refused(make, named: str) -> None:
    with pytest.raises(ConfigError, match=f"workload: {named}"):
        make()


def test_one_request_of_one_token_each_way_is_a_workload() -> None:
    assert [(r.id, r.input_len, r.output_len) for r in FixedBatch(1, 1, 1).generate()] == [(0, 1, 1)]
    assert len(PoissonArrivals(qps=1.0, requests=1, input_len=1, output_len=1).generate()) == 1


@pytest.mark.parametrize(("fields", "message"), [
    ({"qps": float("inf")}, "workload: qps must be finite, got inf"),
    ({"seed": -1}, "workload: seed must be >= 0, got -1"),
])
def test_an_infinite_rate_or_a_negative_seed_is_refused(fields, message) -> None:
    with pytest.raises(ConfigError) as error:
        PoissonArrivals(**({"qps": 1.0, "requests": 4, "input_len": 8, "output_len": 8} | fields))
    assert str(error.value) == message


def test_poisson_requests_are_numbered_and_their_lengths_spread_by_length_cv() -> None:
    """As the fixture's tests above, on requests generated inside the test: mutmut credits a test only with the
    functions its own body runs, not a module fixture's."""
    requests = PoissonArrivals(qps=1.0, requests=4000, input_len=1000, output_len=200).generate()
    assert [r.id for r in requests] == list(range(4000))
    # normal lengths of standard deviation 0.1 × the mean: 100 and 20 tokens, within 5 % over 4,000 draws
    assert np.std([r.input_len for r in requests]) == pytest.approx(100, rel=0.05)
    assert np.std([r.output_len for r in requests]) == pytest.approx(20, rel=0.05)
