"""Metrics of a finished run: per-request latencies, distributions (p50/p90/p99, not just means), throughput,
utilization and energy (paper §6.2–6.7)."""
import math
from collections.abc import Sequence

import numpy as np

from .engine import Request
from .servers import Accounting


def request_row(request: Request) -> dict[str, float]:
    """TTFT = arrival → first token (the prompt's queueing and prefill); TPOT = mean time per output token
    after the first, (last − first) / (tokens − 1), so in disaggregated systems it includes the KV transfer and
    the wait for a decode slot; that wait (reaching the decode server → joining a batch) is also reported on
    its own as `decode_queue_s` (NaN for one-token outputs, which never decode); E2E = arrival → last token."""
    tpot = ((request.finish - request.first_token) / (request.output_len - 1)
            if request.output_len > 1 else math.nan)
    return {
        "id": request.id, "arrival_s": request.arrival, "input_len": request.input_len,
        "output_len": request.output_len, "queue_s": request.prefill_start - request.arrival,
        "ttft_s": request.first_token - request.arrival, "tpot_s": tpot, "e2e_s": request.finish - request.arrival,
        "decode_queue_s": request.decode_start - request.decode_ready,
    }


def _distribution(values: Sequence[float] | np.ndarray) -> dict[str, float]:
    """Mean and percentiles of the values that are not NaN. An array passed in is reordered (partitioned in place
    once its mean is taken: a million requests' token gaps are not copied)."""
    values = np.asarray(values, dtype=float)
    if np.isnan(values).any():
        values = values[~np.isnan(values)]
    if values.size == 0:
        return {"mean": math.nan, "p50": math.nan, "p90": math.nan, "p99": math.nan}
    mean = float(values.mean())
    return {"mean": mean, **{f"p{q}": float(np.percentile(values, q, overwrite_input=True)) for q in (50, 90, 99)}}


def token_gaps(requests: Sequence[Request]) -> tuple[np.ndarray, np.ndarray]:
    """Every gap between consecutive tokens of each request, request after request, and where each request's gaps
    start (`len(requests) + 1` offsets: request k's are gaps[starts[k]:starts[k + 1]]). Filled in place: no
    array per request outlives its own step."""
    starts = np.zeros(len(requests) + 1, dtype=np.int64)
    np.cumsum([max(r.tokens - 1, 0) for r in requests], out=starts[1:])
    gaps = np.empty(int(starts[-1]))
    for request, start, stop in zip(requests, starts[:-1].tolist(), starts[1:].tolist()):
        if stop > start:
            times = request.token_time_array()
            np.subtract(times[1:], times[:-1], out=gaps[start:stop])
    return gaps, starts


def time_between_tokens(requests: Sequence[Request]) -> np.ndarray:
    """Every gap between consecutive tokens of the same request."""
    return token_gaps(requests)[0]


def grouped_percentiles(values: np.ndarray, starts: np.ndarray, qs: Sequence[float]) -> list[np.ndarray]:
    """For each q of `qs`, `np.percentile(values[starts[k]:starts[k + 1]], q)` for every group k, NaN for an empty
    group, from one sort: numpy's default (linear) method, with its arithmetic (virtual index (n − 1)·q/100, and its
    two-sided lerp), so each value is the one np.percentile gives, not an approximation of it."""
    counts = np.diff(starts)
    order = np.lexsort((values, np.repeat(np.arange(counts.size), counts)))
    ordered = values[order]
    filled = counts > 0
    last = np.maximum(counts - 1, 0)
    results = []
    for q in qs:
        virtual = (counts - 1) * (q / 100)
        previous = np.minimum(np.floor(virtual), last).astype(np.int64)
        following = np.minimum(previous + 1, last)
        gamma = virtual - previous
        low = np.where(filled, starts[:-1] + previous, 0)
        high = np.where(filled, starts[:-1] + following, 0)
        a, b = (ordered[low], ordered[high]) if ordered.size else (np.zeros(counts.size),) * 2
        span = b - a
        result = np.where(gamma >= 0.5, b - span * (1 - gamma), a + span * gamma)
        results.append(np.where(filled, result, np.nan))
    return results


def energy_j(account: Accounting, link_energy_per_bit: float) -> float:
    """Busy time at the device's power, plus bytes moved in HBM and over the links."""
    return (account.busy_s * account.power_w + account.hbm_bytes * account.hbm_energy_per_byte
            + account.link_bytes * 8 * link_energy_per_bit)


def summarize(requests: Sequence[Request], accounts: Sequence[Accounting], link_energy_per_bit: float,
              gpu_peak_flops: float, memory_bandwidth: float) -> dict:
    """Aggregate metrics; `gpu_peak_flops` and `memory_bandwidth` are the whole machine's."""
    column = {name: np.fromiter((getattr(r, name) for r in requests), float, len(requests))
              for name in ("arrival", "output_len", "first_token", "finish", "decode_ready", "decode_start")}
    arrival, first, finish, output_len = (column[k] for k in ("arrival", "first_token", "finish", "output_len"))
    # request_row's arithmetic, element by element (TPOT's NaN for one-token outputs included)
    several = output_len > 1
    tpot = np.where(several, (finish - first) / np.where(several, output_len - 1, 1), math.nan)
    makespan = float(finish.max() - arrival.min())
    outputs = sum(r.output_len for r in requests)
    tokens = outputs + sum(r.input_len for r in requests)
    energies = {a.name: energy_j(a, link_energy_per_bit) for a in accounts}
    total_energy = sum(energies.values())
    gpu_flops = sum(a.flops for a in accounts if a.device == "gpu")
    hbm_bytes = sum(a.hbm_bytes for a in accounts)
    tbt = time_between_tokens(requests)
    return {
        "requests": len(requests),
        "makespan_s": makespan,
        "throughput": {"requests_per_s": len(requests) / makespan, "output_tokens_per_s": outputs / makespan,
                       "tokens_per_s": tokens / makespan},
        "ttft_s": _distribution(first - arrival),
        "tpot_s": _distribution(tpot),
        "e2e_s": _distribution(finish - arrival),
        "tbt_s": _distribution(tbt),
        "decode_queue_s": _distribution(column["decode_start"] - column["decode_ready"]),
        "utilization": {
            "gpu_compute": gpu_flops / (gpu_peak_flops * makespan),
            "hbm_bandwidth": hbm_bytes / (memory_bandwidth * makespan),
            "by_server": {a.name: {"busy": a.busy_s / makespan,
                                   "compute": a.flops / (a.peak_flops * makespan) if a.peak_flops else math.nan,
                                   "hbm_bandwidth": a.hbm_bytes / (a.bandwidth * makespan) if a.bandwidth
                                   else math.nan}
                          for a in accounts},
        },
        "energy_j": {"total": total_energy, "per_request": total_energy / len(requests),
                     "per_output_token": total_energy / outputs, "by_server": energies},
    }


def qps_at_ttft_multiple(qps: Sequence[float], ttft: Sequence[float], factor: float = 3.0) -> float:
    """The QPS at which TTFT first reaches `factor` × its value at the lowest QPS (paper §6.3), linearly
    interpolated between measured points; inf if it never does within the sweep."""
    order = np.argsort(qps)
    qps, ttft = np.asarray(qps)[order], np.asarray(ttft)[order]
    limit = factor * ttft[0]
    for i in range(1, len(qps)):
        if ttft[i] >= limit:
            return float(qps[i - 1] + (limit - ttft[i - 1]) / (ttft[i] - ttft[i - 1]) * (qps[i] - qps[i - 1]))
    return math.inf
