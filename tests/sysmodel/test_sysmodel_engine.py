"""The event engine and the servers: event order, block decoding equal to iteration-by-iteration decoding,
complete and ordered token timelines, first-come-first-served prefill, and KV capacity."""
from dataclasses import replace

import numpy as np
import pytest

from basedie import verified
from sysmodel.engine import EventLoop, Request
from sysmodel.errors import ConfigError
from sysmodel.hardware import PAPER_HARDWARE, Hardware
from sysmodel.llm import LLM
from sysmodel.operators import Shard, decode_work
from sysmodel.execution import Cost
from sysmodel.servers import Accounting, DecodeServer, KVPool, MixedServer
from sysmodel.simulate import SimulationConfig, simulate
from sysmodel.systems import SYSTEMS
from sysmodel.workload import FixedBatch, PoissonArrivals

# GPUs per instance (the tensor-parallel degree whose KV pool bounds the decode batch) of every system.
TP = {"duopd": 8, "pd-1:1": 4, "pd-3:1": 2, "chunked": 8, "sm-9:1": 8, "sm-7:3": 8, "sm-5:5": 8, "gpu": 1,
      "duopd-4x-bw": 8, "duopd-4x-bw-4x-compute": 8, "pd-1:1-pim": 4, "pd-1:1-duplex": 4, "pd-1:1-duplex-4x-compute": 4}
# The fraction of its memory the instance that bounds the decode batch keeps (bank-level PIM takes the rest).
KEPT = {"pd-1:1-pim": PAPER_HARDWARE.pim.capacity_fraction}
TINY = LLM("tiny", layers=2, hidden=64, heads=8, kv_heads=8, head_dim=8, ffn=128, vocab=100, gated_mlp=True)


@pytest.fixture(scope="module")
def table() -> verified.VerifiedBlocks:
    """The committed table: its 64-lane array is the 4× compute PNM's."""
    return verified.load()


def test_event_loop_runs_in_time_then_insertion_order() -> None:
    loop, ran = EventLoop(), []

    def note(label: str):
        return lambda: ran.append((loop.now, label))

    for time, label in [(3.0, "a"), (1.0, "b"), (2.0, "c"), (1.0, "d"), (3.0, "e")]:
        loop.at(time, note(label))
    loop.at(2.0, lambda: (ran.append((loop.now, "f")), loop.at(2.0, note("g")), loop.at(2.5, note("h"))))
    assert loop.run() == 3.0
    assert ran == [(1.0, "b"), (1.0, "d"), (2.0, "c"), (2.0, "f"), (2.0, "g"), (2.5, "h"), (3.0, "a"), (3.0, "e")]


def test_a_fresh_loop_starts_at_time_zero() -> None:
    loop, seen = EventLoop(), []
    assert loop.now == 0.0
    loop.at(loop.now + 0.5, lambda: seen.append(loop.now))
    assert loop.run() == 0.5 and seen == [0.5]


def single(self: DecodeServer) -> None:
    """The reference: one decode iteration at a time."""
    self._admit()
    if not self.running:
        return
    b = len(self.running)
    self.start(decode_work(b, self.context + b * np.arange(1)))


@pytest.mark.parametrize("model", ["llama2-70b", "qwen3-235b-a22b"])
@pytest.mark.parametrize("system", list(SYSTEMS))
def test_block_decoding_equals_iteration_by_iteration(table, monkeypatch, system: str, model: str) -> None:
    if (system, model) == ("gpu", "qwen3-235b-a22b"):
        pytest.skip("470 GB of weights do not fit one GPU")
    blocks_equal_single_iterations(table, monkeypatch, system, model, seed=5)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("system", ["duopd", "pd-1:1", "sm-7:3"])
def test_block_decoding_equals_iteration_by_iteration_on_other_arrivals(table, monkeypatch, system: str,
                                                                         seed: int) -> None:
    blocks_equal_single_iterations(table, monkeypatch, system, "llama2-70b", seed)


def blocks_equal_single_iterations(table, monkeypatch, system: str, model: str, seed: int) -> None:
    # Arrivals close enough that prefills overlap decoding: blocks are cut and repriced.
    config = SimulationConfig(system=system, model=model, workload=PoissonArrivals(4.0, 12, 2048, 64, seed=seed))
    blocks = simulate(config, table)
    monkeypatch.setattr(DecodeServer, "step", single)
    reference = simulate(config, table)
    assert [r.id for r in blocks.requests] == [r.id for r in reference.requests]
    # Identical but for one thing: a co-runner re-prices its iteration when a decode block starts or ends, not
    # at each iteration inside it, where the decode's offered load creeps up with the context (< 1e-6 here).
    for got, want in zip(blocks.requests, reference.requests):
        np.testing.assert_allclose(got.token_times, want.token_times, rtol=1e-6, atol=0)
        assert got.prefill_start == pytest.approx(want.prefill_start, rel=1e-6)
    assert blocks.summary["energy_j"]["total"] == pytest.approx(reference.summary["energy_j"]["total"], rel=1e-4)


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_every_request_gets_its_tokens_in_order(table, system: str) -> None:
    result = simulate(SimulationConfig(system=system, model="llama2-70b",
                                       workload=PoissonArrivals(3.0, 20, 4096, 48, seed=2)), table)
    for r in result.requests:
        times = np.array(r.token_times)
        assert len(times) == r.output_len
        assert np.all(np.diff(times) >= 0)
        assert r.arrival <= r.prefill_start < r.first_token == times[0]
        assert r.finish == times[-1]
    # First come, first served: prompts start in arrival order.
    starts = [r.prefill_start for r in sorted(result.requests, key=lambda r: r.arrival)]
    assert starts == sorted(starts)


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_prefill_of_a_fixed_batch_is_first_come_first_served(table, system: str) -> None:
    result = simulate(SimulationConfig(system=system, model="llama2-70b", workload=FixedBatch(6, 1024, 8)), table)
    starts = [r.prefill_start for r in result.requests]
    firsts = [r.first_token for r in result.requests]
    assert starts == sorted(starts) and firsts == sorted(firsts)
    if system != "pd-3:1":         # one prefill pipeline: strictly one prompt after the other
        assert all(a < b for a, b in zip(firsts, firsts[1:]))
    else:                          # three prefill instances take the first three prompts together
        assert starts[:3] == [0.0] * 3 and starts[3] > 0


def hardware_with_gpu_memory(capacity_bytes: float) -> Hardware:
    """The paper's machine with `capacity_bytes` of memory per GPU (over its 8 stacks)."""
    gpu = PAPER_HARDWARE.gpu
    stack = replace(gpu.stack, capacity_bytes=capacity_bytes / gpu.stacks)
    return replace(PAPER_HARDWARE, gpu=replace(gpu, stack=stack))


def kv_bytes_per_token(tp: int) -> int:
    """TINY's K and V of 2 layers, 8 / tp heads of 8 values, FP16."""
    return 2 * 2 * (8 // tp) * 8 * 2


def most_running(requests) -> int:
    """The largest decode batch: how many requests emit a decode token (any but the first, which prefill
    emits) at the same instant."""
    times, counts = np.unique(np.concatenate([r.token_times[1:] for r in requests]), return_counts=True)
    return int(counts.max())


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_kv_capacity_bounds_the_decode_batch(table, system: str) -> None:
    tp, fit, need = TP[system], 3, 16 + 256
    # Per GPU: the weights and the KV of 3½ requests of 272 tokens, so exactly 3 fit. Decoding is long beside
    # a prefill, so 3 do decode together.
    capacity = (Shard(TINY, tp).weight_bytes + (fit + 0.5) * need * kv_bytes_per_token(tp)) / KEPT.get(system, 1.0)
    workload = FixedBatch(12, 16, 256)
    limited = simulate(SimulationConfig(system=system, model=TINY, workload=workload,
                                        hardware=hardware_with_gpu_memory(capacity)), table)
    assert all(r.done for r in limited.requests)
    assert most_running(limited.requests) == fit
    ample = simulate(SimulationConfig(system=system, model=TINY, workload=workload,
                                      hardware=hardware_with_gpu_memory(1e9)), table)
    assert most_running(ample.requests) > fit          # without the KV limit the batch is larger


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_max_batch_bounds_the_decode_batch(table, system: str) -> None:
    result = simulate(SimulationConfig(system=system, model=TINY, workload=FixedBatch(10, 64, 32), max_batch=2), table)
    assert most_running(result.requests) == 2


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_a_request_whose_kv_never_fits_is_refused(table, system: str) -> None:
    tp = TP[system]
    capacity = (Shard(TINY, tp).weight_bytes + 1000 * kv_bytes_per_token(tp)) / KEPT.get(system, 1.0)  # 1,000 tokens
    config = SimulationConfig(system=system, model=TINY, workload=FixedBatch(1, 990, 20),
                              hardware=hardware_with_gpu_memory(capacity))
    # the pool that refuses it first
    pool = "decode instance 0" if system.startswith("pd-") else "1 GPUs" if system == "gpu" else "8 GPUs"
    with pytest.raises(ConfigError, match=f"request 0 needs 1010 tokens of KV cache but {pool} holds at most 1000"):
        simulate(config, table)


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_a_model_whose_weights_do_not_fit_is_refused(table, system: str) -> None:
    capacity = Shard(TINY, TP[system]).weight_bytes * 0.9
    config = SimulationConfig(system=system, model=TINY, workload=FixedBatch(1, 8, 8),
                              hardware=hardware_with_gpu_memory(capacity))
    with pytest.raises(ConfigError, match="tiny does not fit on"):
        simulate(config, table)


def chunked_run(*requests: Request) -> tuple[list, list, KVPool]:
    """Requests arriving at 0 on a mixed server of 3-token chunks whose every iteration takes 1 s: the work of
    each iteration, the requests in the order they finished, and the KV pool."""
    works = []

    def cost(work, scale=1.0, loads=None) -> Cost:
        works.append(work)
        ones = np.ones(np.shape(work.kv_read))
        return Cost(ones if ones.shape else 1.0, 0.0, 0.0, 0.0, 0.0)

    loop, done, pool = EventLoop(), [], KVPool(100, "pool")
    server = MixedServer(loop, "mixed", cost, Accounting("mixed", "gpu", 1.0, 1.0, 0.0, 0.0), kv=pool, max_batch=4,
                         chunk_tokens=3, finished=done.append)
    for request in requests:
        loop.at(0.0, lambda request=request: server.submit(request))
    loop.run()
    return works, done, pool


def test_chunked_iterations_carry_the_prompt_chunks_and_the_decode_tokens() -> None:
    first, second = Request(0, 0.0, 5, 3), Request(1, 0.0, 2, 2)
    works, done, pool = chunked_run(first, second)
    # Work = (new tokens, causal (query, key) pairs, KV tokens read, sequences emitting a token):
    # 1: tokens 1–3 of the first prompt: pairs 1 + 2 + 3.
    # 2: its last 2 tokens after 3 cached (2·3 + 1 + 2 pairs, 5 read, emits) + the second prompt's first token.
    # 3: the first request decodes (context 5 + its token = 6) + the second prompt's last token after 1 cached
    #    (it attends to 2 keys, reads 2).
    # 4: both decode: 5 + 2 of the first, 2 + 1 of the second.
    assert works[:3] == [(3, 6, 3, 0), (2 + 1, 9 + 1, 5 + 1, 1 + 0), (1 + 1, 6 + 2, 6 + 2, 1 + 1)]
    assert [int(np.asarray(v).sum()) for v in works[3]] == [2, 7 + 3, 7 + 3, 2] and len(works) == 4
    assert (first.first_token, first.finish, second.first_token, second.finish) == (2.0, 4.0, 3.0, 4.0)
    assert done == [first, second] and pool.used == 0
    # A one-token answer is done when its prompt is: it finishes there and frees its KV.
    only = Request(2, 0.0, 2, 1)
    works, done, pool = chunked_run(only)
    assert works == [(2, 3, 2, 1)] and done == [only] and only.finish == 1.0 and pool.used == 0
