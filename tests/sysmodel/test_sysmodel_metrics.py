"""Metric definitions on a timeline built by hand: two requests, two servers, every figure worked out below.

Request 0 arrives at 0.0, starts prefill at 0.5 and emits tokens at 1.0, 1.2, 1.5, 1.9; it
reaches its decode server at 1.0 and joins a batch at 1.1.
Request 1 arrives at 0.4, starts prefill at 1.0 and emits tokens at 1.5, 2.0, 2.6; it joins a batch
as soon as it reaches the decode server, at 1.5."""
import math

import numpy as np
import pytest

from sysmodel.engine import Request
from sysmodel.metrics import energy_j, qps_at_ttft_multiple, request_row, summarize, time_between_tokens
from sysmodel.servers import Accounting

LINK_J_PER_BIT = 8e-12


def made(id: int, arrival: float, input_len: int, prefill_start: float, tokens: list[float],
         decode: tuple[float, float] = (math.nan, math.nan)) -> Request:
    request = Request(id, arrival, input_len, len(tokens))
    request.prefill_start = prefill_start
    request.decode_ready, request.decode_start = decode
    request.prefilled = input_len
    for time in tokens:
        request.emit(time)
    return request


@pytest.fixture
def requests() -> list[Request]:
    return [made(0, 0.0, 100, 0.5, [1.0, 1.2, 1.5, 1.9], (1.0, 1.1)),
            made(1, 0.4, 50, 1.0, [1.5, 2.0, 2.6], (1.5, 1.5))]


@pytest.fixture
def accounts() -> list[Accounting]:
    gpu = Accounting("prefill", "gpu", peak_flops=1e15, bandwidth=1e12, power_w=1000.0, hbm_energy_per_byte=2e-11,
                     busy_s=1.3, flops=6.5e14, hbm_bytes=1.3e12, link_bytes=1e9)
    pnm = Accounting("decode", "pnm", peak_flops=1e13, bandwidth=1e12, power_w=50.0, hbm_energy_per_byte=1e-11,
                     busy_s=2.0, flops=2.6e12, hbm_bytes=2.6e12)
    link = Accounting("link", "link", 0.0, 0.0, 0.0, 0.0, link_bytes=5e9)
    return [gpu, pnm, link]


def test_emit_records_first_token_and_finish(requests) -> None:
    first = requests[0]
    assert (first.first_token, first.finish, first.done) == (1.0, 1.9, True)
    assert first.context == 100 + 3        # the prompt and every output token but the newest
    pending = Request(5, 0.0, 10, 3)
    pending.emit(2.0)
    assert (pending.first_token, pending.done, math.isnan(pending.finish)) == (2.0, False, True)


def test_request_rows(requests) -> None:
    assert request_row(requests[0]) == pytest.approx({
        "id": 0, "arrival_s": 0.0, "input_len": 100, "output_len": 4, "queue_s": 0.5,
        "ttft_s": 1.0, "tpot_s": (1.9 - 1.0) / 3, "e2e_s": 1.9, "decode_queue_s": 0.1})
    assert request_row(requests[1]) == pytest.approx({
        "id": 1, "arrival_s": 0.4, "input_len": 50, "output_len": 3, "queue_s": 0.6,
        "ttft_s": 1.1, "tpot_s": (2.6 - 1.5) / 2, "e2e_s": 2.2, "decode_queue_s": 0.0})
    assert math.isnan(request_row(made(2, 1.0, 10, 1.0, [3.0]))["tpot_s"])  # one token: no time per output token


def test_time_between_tokens_pools_both_requests(requests) -> None:
    assert np.sort(time_between_tokens(requests)) == pytest.approx([0.2, 0.3, 0.4, 0.5, 0.6])


def test_summary_latencies_and_throughput(requests, accounts) -> None:
    summary = summarize(requests, accounts, LINK_J_PER_BIT, gpu_peak_flops=2e15, memory_bandwidth=4e12)
    makespan = 2.6 - 0.0                    # last token of request 1 − first arrival
    assert summary["requests"] == 2
    assert summary["makespan_s"] == pytest.approx(makespan)
    assert summary["throughput"] == pytest.approx({"requests_per_s": 2 / makespan,
                                                   "output_tokens_per_s": (4 + 3) / makespan,
                                                   "tokens_per_s": (4 + 3 + 100 + 50) / makespan})
    # numpy's linear percentiles: over two values p50 is their midpoint and p99 is 99 % of the way up.
    assert summary["ttft_s"] == pytest.approx({"mean": 1.05, "p50": 1.05, "p90": 1.0 + 0.9 * 0.1,
                                               "p99": 1.0 + 0.99 * 0.1})
    tpot = sorted([0.3, 0.55])
    assert summary["tpot_s"] == pytest.approx({"mean": 0.425, "p50": 0.425, "p90": tpot[0] + 0.9 * 0.25,
                                               "p99": tpot[0] + 0.99 * 0.25})
    assert summary["e2e_s"] == pytest.approx({"mean": 2.05, "p50": 2.05, "p90": 1.9 + 0.9 * 0.3,
                                              "p99": 1.9 + 0.99 * 0.3})
    # TBT over the five gaps 0.2 … 0.6: p90 and p99 at ranks 0.9 · 4 = 3.6 and 0.99 · 4 = 3.96 (0.5 … 0.6).
    assert summary["tbt_s"] == pytest.approx({"mean": 0.4, "p50": 0.4, "p90": 0.5 + 0.6 * 0.1,
                                              "p99": 0.5 + 0.96 * 0.1})
    # Decode-slot waits 0.1 and 0.0: mean and median 0.05, p90 = 0.0 + 0.9 * 0.1, p99 = 0.0 + 0.99 * 0.1.
    assert summary["decode_queue_s"] == pytest.approx({"mean": 0.05, "p50": 0.05, "p90": 0.09,
                                                        "p99": 0.099})


def test_summary_utilization_and_energy(requests, accounts) -> None:
    summary = summarize(requests, accounts, LINK_J_PER_BIT, gpu_peak_flops=2e15, memory_bandwidth=4e12)
    makespan = 2.6
    utilization = summary["utilization"]
    assert utilization["gpu_compute"] == pytest.approx(6.5e14 / (2e15 * makespan))          # GPU accounts only
    assert utilization["hbm_bandwidth"] == pytest.approx((1.3e12 + 2.6e12) / (4e12 * makespan))
    by_server = utilization["by_server"]
    assert by_server["prefill"] == pytest.approx({"busy": 0.5, "compute": 0.25, "hbm_bandwidth": 0.5})
    assert by_server["decode"] == pytest.approx({"busy": 2.0 / 2.6, "compute": 0.1, "hbm_bandwidth": 1.0})
    assert by_server["link"]["busy"] == 0 and math.isnan(by_server["link"]["compute"])
    # Busy time at power + HBM bytes at their energy + link bits at 8 pJ.
    gpu = 1.3 * 1000 + 1.3e12 * 2e-11 + 1e9 * 8 * 8e-12        # 1300 + 26 + 0.064 J
    pnm = 2.0 * 50 + 2.6e12 * 1e-11                            # 100 + 26 J
    link = 5e9 * 8 * 8e-12                                     # 0.32 J
    energy = summary["energy_j"]
    assert energy["by_server"] == pytest.approx({"prefill": gpu, "decode": pnm, "link": link})
    assert energy["total"] == pytest.approx(gpu + pnm + link)
    assert energy["per_request"] == pytest.approx((gpu + pnm + link) / 2)
    assert energy["per_output_token"] == pytest.approx((gpu + pnm + link) / 7)
    assert energy_j(accounts[0], LINK_J_PER_BIT) == pytest.approx(1326.064)


def test_single_token_requests_leave_tpot_undefined(accounts) -> None:
    lone = [made(0, 0.0, 10, 0.0, [0.5]), made(1, 0.1, 10, 0.5, [1.0])]
    summary = summarize(lone, accounts, LINK_J_PER_BIT, 2e15, 4e12)
    assert all(math.isnan(v) for v in summary["tpot_s"].values())
    assert all(math.isnan(v) for v in summary["tbt_s"].values())
    assert summary["ttft_s"]["mean"] == pytest.approx(0.7)


def test_qps_at_three_times_the_lowest_ttft() -> None:
    # TTFT at the lowest QPS is 1.0, so the limit is 3.0: crossed between QPS 3 (2.5) and 4 (4.0), a third
    # of the way: 3 + (3.0 − 2.5) / (4.0 − 2.5).
    qps, ttft = [1, 2, 3, 4], [1.0, 1.5, 2.5, 4.0]
    assert qps_at_ttft_multiple(qps, ttft) == pytest.approx(3 + 1 / 3)
    assert qps_at_ttft_multiple(qps[::-1], ttft[::-1]) == pytest.approx(3 + 1 / 3)   # order of the sweep
    assert qps_at_ttft_multiple(qps, ttft, factor=2.0) == pytest.approx(2.5)
    assert qps_at_ttft_multiple([1, 2], [1.0, 3.0]) == pytest.approx(2.0)              # reached exactly
    assert qps_at_ttft_multiple(qps, [1.0, 1.1, 1.2, 2.9]) == math.inf
    # Steps of 2 QPS and a lowest TTFT of 2 s: the limit 6 s is crossed a third of the way from QPS 6 (5 s) to
    # 8 (8 s), i.e. at 6 + 2/3; a factor of 1 is reached at the lowest QPS already.
    qps, ttft = [2, 4, 6, 8], [2.0, 3.0, 5.0, 8.0]
    assert qps_at_ttft_multiple(qps, ttft) == pytest.approx(6 + 2 / 3)
    assert qps_at_ttft_multiple(qps, ttft, factor=1.0) == pytest.approx(2.0)
