"""The QPS knee (paper §6.3) on sweeps the study's own tests do not make: integer sweeps and a TTFT that dips
below its lowest-QPS value before it climbs (noise at light load)."""
import pytest

from sysmodel.metrics import qps_at_ttft_multiple


def test_the_knee_is_a_crossing_after_the_lowest_qps_not_the_lowest_qps_itself() -> None:
    # Factor 1, TTFT 2 s → 1 s → 3 s: the limit 2 s is crossed halfway from QPS 2 (1 s) to 3 (3 s), at 2.5.
    assert qps_at_ttft_multiple([1, 2, 3], [2.0, 1.0, 3.0], factor=1.0) == pytest.approx(2.5)


def test_integer_sweeps_interpolate_like_float_ones() -> None:
    # Limit 3 × 2 = 6 s, crossed a third of the way from 4 s (QPS 2) to 10 s (QPS 5): 2 + 1 = 3.
    assert qps_at_ttft_multiple([1, 2, 5], [2, 4, 10]) == pytest.approx(3.0)
