"""What lets the engine run production-scale workloads without changing a result: arrivals fed one at a time
in the order scheduling them all would give, token times kept as the decode blocks' arrays, and per-request
percentiles of many groups in one sort, equal to np.percentile group by group."""
import numpy as np
import pytest

from sysmodel.engine import EventLoop, Request
from sysmodel.metrics import grouped_percentiles, token_gaps


def _order(requests: list[Request], fed: bool) -> list[tuple[float, str]]:
    """What runs when: an event scheduled before the arrivals, each arrival, and at every arrival one event of its
    own scheduled at that same instant and one a second later."""
    loop, ran = EventLoop(), []
    loop.at(1.0, lambda: ran.append((loop.now, "scheduled before the arrivals")))

    def submit(request: Request) -> None:
        ran.append((loop.now, f"arrive {request.id}"))
        loop.at(loop.now, lambda: ran.append((loop.now, f"after {request.id}")))
        loop.at(loop.now + 1.0, lambda: ran.append((loop.now, f"a second after {request.id}")))

    if fed:
        loop.arrivals(requests, submit)
    else:
        for request in requests:
            loop.at(request.arrival, lambda request=request: submit(request))
    loop.run()
    return ran


@pytest.mark.parametrize("arrivals", [[0.0, 0.0, 0.0], [3.0, 1.0, 2.0, 1.0, 4.0], [0.0, 1.0, 1.0, 2.0, 2.0, 5.0]])
def test_fed_arrivals_run_exactly_as_arrivals_scheduled_up_front(arrivals) -> None:
    requests = [Request(i, t, 1, 1) for i, t in enumerate(arrivals)]
    fed = _order(requests, fed=True)
    assert fed == _order(requests, fed=False)
    assert [label for _, label in fed if label.startswith("arrive")] == [
        f"arrive {i}" for i in sorted(range(len(arrivals)), key=lambda i: arrivals[i])]


def test_block_tokens_are_shared_not_copied_and_read_back_in_order() -> None:
    a, b = Request(0, 0.0, 4, 5), Request(1, 0.0, 4, 3)
    a.prefilled = b.prefilled = 4
    a.emit(1.0), b.emit(1.5)
    block = np.array([2.0, 3.0])
    a.emit_block(block), b.emit_block(block)
    assert a.token_times == [1.0, 2.0, 3.0] and b.token_times == [1.5, 2.0, 3.0]
    assert b.done and b.finish == 3.0 and not a.done and a.context == 4 + 2
    a.emit_block(np.array([4.0, 4.5]))
    assert a.done and a.finish == 4.5 and a.tokens == 5
    assert np.array_equal(a.token_time_array(), [1.0, 2.0, 3.0, 4.0, 4.5])
    gaps, starts = token_gaps([a, Request(2, 0.0, 1, 1), b])
    assert starts.tolist() == [0, 4, 4, 6]
    assert gaps.tolist() == [1.0, 1.0, 1.0, 0.5, 0.5, 1.0]


def test_grouped_percentiles_equal_numpy_group_by_group() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        counts = rng.integers(0, 14, size=rng.integers(1, 25))
        values = np.round(rng.exponential(1.0, counts.sum()), rng.integers(1, 5))    # rounded: ties too
        starts = np.concatenate([[0], np.cumsum(counts)])
        qs = (0, 37.5, 50, 90, 99, 100)
        for q, got in zip(qs, grouped_percentiles(values, starts, qs), strict=True):
            want = [np.percentile(values[a:b], q) if b > a else np.nan for a, b in zip(starts[:-1], starts[1:])]
            assert np.array_equal(got, want, equal_nan=True), (q, counts)
