"""Metrics at their edges: a distribution with no values, and the QPS knee (paper §6.3) on sweeps the study's
own tests do not make (integer sweeps; a TTFT that dips below its lowest-QPS value before it climbs)."""
import math

import pytest

from sysmodel.engine import Request
from sysmodel.metrics import qps_at_ttft_multiple, summarize, time_between_tokens
from sysmodel.servers import Accounting


def test_a_metric_with_no_values_reports_every_statistic_as_nan() -> None:
    # One-token outputs never decode: TPOT, the gaps between tokens and the decode queue have no values.
    request = Request(0, 0.0, 10, 1)
    request.prefill_start = request.decode_ready = request.decode_start = math.nan
    request.prefilled = 10
    request.emit(0.5)
    account = Accounting("gpu", "gpu", 1e15, 1e12, 100.0, 0.0)
    summary = summarize([request], [account], 0.0, 1e15, 1e12)
    for metric in ("tpot_s", "tbt_s", "decode_queue_s"):
        assert list(summary[metric]) == ["mean", "p50", "p90", "p99"]
        assert all(math.isnan(value) for value in summary[metric].values())
    assert summary["ttft_s"] == {"mean": 0.5, "p50": 0.5, "p90": 0.5, "p99": 0.5}
    assert time_between_tokens([request]).size == 0 and time_between_tokens([]).size == 0


def test_a_run_starting_late_is_measured_from_its_first_arrival_and_two_tokens_have_one_gap() -> None:
    # Arrivals at 10 s and 11 s, first tokens at 12 s and 12.5 s, second tokens at 12.5 s and 14 s: the run
    # lasts 14 - 10 = 4 s; TPOT is the one gap of each request (0.5 s, 1.5 s).
    requests = []
    for id, arrival, tokens in [(0, 10.0, [12.0, 12.5]), (1, 11.0, [12.5, 14.0])]:
        request = Request(id, arrival, 10, 2)
        request.prefill_start, request.decode_ready, request.decode_start = arrival, tokens[0], tokens[0]
        request.prefilled = 10
        for time in tokens:
            request.emit(time)
        requests.append(request)
    summary = summarize(requests, [Accounting("gpu", "gpu", 1e15, 1e12, 100.0, 0.0)], 0.0, 1e15, 1e12)
    assert summary["makespan_s"] == 4.0
    assert summary["throughput"]["requests_per_s"] == 0.5
    assert summary["tpot_s"]["mean"] == pytest.approx(1.0)
    assert summary["tbt_s"]["mean"] == pytest.approx(1.0) and summary["tbt_s"]["p50"] == pytest.approx(1.0)


def test_the_knee_is_a_crossing_after_the_lowest_qps_not_the_lowest_qps_itself() -> None:
    # Factor 1, TTFT 2 s → 1 s → 3 s: the limit 2 s is crossed halfway from QPS 2 (1 s) to 3 (3 s), at 2.5.
    assert qps_at_ttft_multiple([1, 2, 3], [2.0, 1.0, 3.0], factor=1.0) == pytest.approx(2.5)


def test_integer_sweeps_interpolate_like_float_ones() -> None:
    # Limit 3 × 2 = 6 s, crossed a third of the way from 4 s (QPS 2) to 10 s (QPS 5): 2 + 1 = 3.
    assert qps_at_ttft_multiple([1, 2, 5], [2, 4, 10]) == pytest.approx(3.0)
