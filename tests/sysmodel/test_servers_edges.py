"""The servers' bookkeeping checked on planted executors whose every iteration takes a round number of seconds
(issue 19's mutation testing found these unchecked): the KV pool's exact fit, what an account adds up, the
share a co-runner leaves (capped at what was asked, floored at `MIN_SHARE`), the decode batch's KV context as
requests join and leave, and a request that reaches a decode server already done."""
import numpy as np
import pytest

from sysmodel.engine import EventLoop, Request
from sysmodel.errors import ConfigError
from sysmodel.execution import Cost
from sysmodel.memory import MemoryTier
from sysmodel.operators import Work
from sysmodel.servers import MIN_SHARE, Accounting, DecodeServer, KVPool, PrefillServer, SharedMemory


def account(name: str = "server") -> Accounting:
    return Accounting(name, "gpu", 1.0, 1.0, 0.0, 0.0)


def per_iteration(value: float, work: Work):
    """`value` for each iteration of a block (an array when the work is one)."""
    return value + 0 * np.asarray(work.kv_read, float) if np.ndim(work.kv_read) else value


def decoded(request: Request, prefilled: int) -> Request:
    """`request` as a prefill server hands it over: its prompt's KV written, its first token out at 0 s."""
    request.prefilled = prefilled
    request.emit(0.0)
    return request


def test_a_request_of_exactly_the_pools_capacity_fits() -> None:
    pool = KVPool(10, "pool")
    exact = Request(0, 0.0, 6, 4)                  # 6 + 4 = 10 tokens
    pool.check_fits(exact)
    assert pool.reserve(exact) and pool.used == 10
    assert not pool.reserve(Request(1, 0.0, 1, 1)) and pool.used == 10
    with pytest.raises(ConfigError, match="request 2 needs 11 tokens of KV cache but pool holds at most 10"):
        pool.check_fits(Request(2, 0.0, 6, 5))


def test_an_account_adds_up_every_iteration_it_ran() -> None:
    # Each iteration: 2 s, 3 FLOPs, 5 HBM bytes, 7 link bytes. Two prompts (one iteration each), then a decode
    # block of 3 iterations.
    def cost(work, scale=1.0, loads=None, share=None) -> Cost:
        return Cost(*(per_iteration(v, work) for v in (2.0, 3.0, 5.0, 7.0, 0.0)))

    loop, done = EventLoop(), []
    prefill = PrefillServer(loop, "prefill", cost, account("prefill"), kv=KVPool(100, "p"), handoff=done.append)
    decode = DecodeServer(loop, "decode", cost, account("decode"), kv=KVPool(100, "d"), max_batch=4,
                          finished=done.append)
    for i in range(2):
        prefill.submit(Request(i, 0.0, 8, 1))
    decode.submit(decoded(Request(2, 0.0, 8, 4), 8))
    loop.run()
    assert (prefill.accounting.busy_s, prefill.accounting.flops, prefill.accounting.hbm_bytes,
            prefill.accounting.link_bytes) == (4.0, 6.0, 10.0, 14.0)
    assert (decode.accounting.busy_s, decode.accounting.flops, decode.accounting.hbm_bytes,
            decode.accounting.link_bytes) == (6.0, 9.0, 15.0, 21.0)


class Planted:
    """A sharing that grants every user `factor` times what it offers."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def grant(self, offered):
        return {name: load * self.factor for name, load in offered.items()}


def scale(factor: float, offered):
    memory = SharedMemory(MemoryTier("m", 1, 1.0, 0.0, 0.0).with_sharing(Planted(factor)))
    return memory.scale("me", {"me": offered, "other": 0.5})


@pytest.mark.parametrize(("factor", "share"), [(0.25, 0.25), (2.0, 1.0), (0.0, MIN_SHARE)])
def test_the_share_is_granted_over_offered_never_above_one_nor_below_the_floor(factor: float, share: float) -> None:
    # A quarter of the offer granted is a quarter share; twice the offer is still all of it (a source never
    # streams faster than it asked); nothing granted is the floor that keeps the iteration's time finite.
    assert scale(factor, 0.5) == pytest.approx(share, rel=1e-12, abs=0)
    # A block of iterations: each its own; an iteration that offers nothing takes no share from anyone: 1.
    np.testing.assert_allclose(scale(factor, np.array([0.0, 0.5, 0.25])), [1.0, share, share], rtol=1e-12)


def test_a_source_that_offers_nothing_has_a_share_of_one() -> None:
    assert scale(0.25, 0.0) == 1.0


def test_a_decode_server_refuses_a_request_its_pool_can_never_hold() -> None:
    server = DecodeServer(EventLoop(), "decode", None, account(), kv=KVPool(10, "decode pool"), max_batch=4,
                          finished=lambda request: None)
    with pytest.raises(ConfigError, match="request 0 needs 13 tokens of KV cache but decode pool holds at most 10"):
        server.submit(Request(0, 0.0, 8, 5))


@pytest.mark.parametrize("kv_reserved", [True, False])
def test_a_request_done_at_prefill_retires_at_once_and_frees_its_kv(kv_reserved: bool) -> None:
    # A one-token answer is done when its prompt is. Colocated (`kv_reserved`, as DuoPD): the KV the prefill
    # reserved in the shared pool is released. Disaggregated: the prefill instance's pool is released by the
    # `admitted` callback, and the decode pool, never reserved, is not touched.
    def cost(work, scale=1.0, loads=None, share=None) -> Cost:
        raise AssertionError("a done request runs no iteration")

    loop, done = EventLoop(), []
    shared, prefill_pool = KVPool(100, "shared"), KVPool(100, "prefill")
    server = DecodeServer(loop, "decode", cost, account(), kv=shared, max_batch=4, finished=done.append,
                          kv_reserved=kv_reserved)
    request = decoded(Request(0, 0.0, 8, 1), 8)
    if kv_reserved:
        shared.reserve(request)
        server.submit(request)
    else:
        prefill_pool.reserve(request)
        server.submit(request, admitted=lambda: prefill_pool.release(request))
    loop.run()
    assert done == [request] and shared.used == 0 and prefill_pool.used == 0


def test_a_decode_iteration_reads_the_context_of_every_running_request() -> None:
    # a: 4 prompt tokens, 3 to output; b: 2 prompt tokens, 5 to output; both have their first token. Each
    # iteration reads every running request's cached tokens plus the one it writes: 4 + 1 and 2 + 1 = 8, then
    # 10. After 2 iterations a is done; b holds 2 + 2 cached tokens (its prompt, its first two tokens) and
    # reads 5, then 6.
    reads = []

    def cost(work, scale=1.0, loads=None, share=None) -> Cost:
        reads.append(np.atleast_1d(work.kv_read).tolist())
        return Cost(per_iteration(1.0, work), 0.0, 0.0, 0.0, 0.0)

    loop, done = EventLoop(), []
    server = DecodeServer(loop, "decode", cost, account(), kv=KVPool(100, "pool"), max_batch=4, finished=done.append)
    a, b = decoded(Request(0, 0.0, 4, 3), 4), decoded(Request(1, 0.0, 2, 5), 2)
    server.submit(a)
    server.submit(b)
    loop.run()
    assert reads == [[8, 10], [5, 6]]
    assert a.token_times == [0.0, 1.0, 2.0] and b.token_times == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert done == [a, b] and server.kv.used == 0


def test_a_prefill_and_a_decode_on_one_memory_share_it_max_min_fairly() -> None:
    # Both servers ask for the whole bandwidth each iteration (1 s alone): side by side each gets half, so an
    # iteration takes 2 s. The prompt (t = 0 → 2) slows the decode's first iteration to 2 s; the second runs alone.
    def cost(work, scale=1.0, loads=None, share=None) -> Cost:
        return Cost(per_iteration(1.0, work) / scale, 0.0, 0.0, 0.0, per_iteration(1.0, work))

    loop, done, handed = EventLoop(), [], []
    memory = SharedMemory(MemoryTier("m", 1, 1.0, 0.0, 0.0))
    prefill = PrefillServer(loop, "prefill", cost, account(), memory=memory, kv=KVPool(100, "p"),
                            handoff=handed.append)
    decode = DecodeServer(loop, "decode", cost, account(), memory=memory, kv=KVPool(100, "d"), max_batch=4,
                          finished=done.append)
    prompt, decoding = Request(0, 0.0, 8, 2), decoded(Request(1, 0.0, 8, 3), 8)
    prefill.submit(prompt)
    decode.submit(decoding)
    loop.run()
    assert prompt.first_token == 2.0 and handed == [prompt]
    assert decoding.token_times == [0.0, 2.0, 3.0]
    assert (prefill.accounting.busy_s, decode.accounting.busy_s) == (2.0, 3.0)


def test_a_wake_that_cannot_shorten_the_block_leaves_its_end_in_place() -> None:
    # a decodes 4 tokens, 1 s each (t = 0 → 4). b arrives at 3.5, in a's last iteration: the block cannot be cut
    # earlier, so its end keeps its place among the events of t = 4. c's arrival at 4 was scheduled (at t = 1)
    # after that end: the block ends first and b starts alone; c joins one iteration later, at 5.
    def cost(work, scale=1.0, loads=None, share=None) -> Cost:
        return Cost(per_iteration(1.0, work), 0.0, 0.0, 0.0, 0.0)

    loop, done = EventLoop(), []
    server = DecodeServer(loop, "decode", cost, account(), kv=KVPool(100, "pool"), max_batch=4, finished=done.append)
    a, b, c = (decoded(Request(i, 0.0, 8, length), 8) for i, length in enumerate((5, 3, 3)))
    server.submit(a)
    loop.at(3.5, lambda: server.submit(b))
    loop.at(1.0, lambda: loop.at(4.0, lambda: server.submit(c)))
    loop.run()
    assert a.token_times[1:] == [1.0, 2.0, 3.0, 4.0]
    assert b.token_times[1:] == [5.0, 6.0] and c.token_times[1:] == [6.0, 7.0]


@pytest.mark.parametrize("shared", [False, True])
def test_a_block_runs_to_the_next_finishing_request_unless_a_request_can_join(shared: bool) -> None:
    # One iteration of 1 s per block element; a batch of one. a has 3 tokens to go: one block of 3 iterations
    # reading 8 + 1, 9 + 1, 10 + 1 tokens. b arrives at 1.5 but the batch is full: a's block is not cut, and b
    # decodes after it (a block of 2). On a memory shared with nobody busy, the same blocks.
    reads = []

    def cost(work, scale=1.0, loads=None, share=None) -> Cost:
        reads.append(np.atleast_1d(work.kv_read).tolist())
        return Cost(per_iteration(1.0, work), 0.0, 0.0, 0.0, per_iteration(1.0, work))

    loop = EventLoop()
    memory = SharedMemory(MemoryTier("m", 1, 1.0, 0.0, 0.0)) if shared else None
    server = DecodeServer(loop, "decode", cost, account(), memory, kv=KVPool(100, "pool"), max_batch=1,
                          finished=lambda request: None)
    a, b = decoded(Request(0, 0.0, 8, 4), 8), decoded(Request(1, 0.0, 8, 3), 8)
    server.submit(a)
    loop.at(1.5, lambda: server.submit(b))
    loop.run()
    assert reads == [[9, 10, 11], [9, 10]]
    assert a.token_times[1:] == [1.0, 2.0, 3.0] and b.token_times[1:] == [4.0, 5.0]


def test_a_server_idle_on_the_shared_memory_is_no_co_runner() -> None:
    # A decode server alone at work on a memory it shares with an idle prefill server: its iterations are
    # priced alone (no co-runners' loads given), 1 s each.
    asked = []

    def cost(work, scale=1.0, loads=None, share=None) -> Cost:
        asked.append(loads)
        return Cost(per_iteration(1.0, work) / scale, 0.0, 0.0, 0.0, per_iteration(1.0, work))

    loop = EventLoop()
    memory = SharedMemory(MemoryTier("m", 1, 1.0, 0.0, 0.0))
    PrefillServer(loop, "prefill", cost, account(), memory=memory, kv=KVPool(100, "p"), handoff=lambda r: None)
    decode = DecodeServer(loop, "decode", cost, account(), memory=memory, kv=KVPool(100, "d"), max_batch=4,
                          finished=lambda r: None)
    decoding = decoded(Request(0, 0.0, 8, 3), 8)
    decode.submit(decoding)
    loop.run()
    assert decoding.token_times == [0.0, 1.0, 2.0] and asked == [None]
