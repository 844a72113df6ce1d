"""Batched prefill: a prefill server runs whole prompts first come first served, as many as fit in its token budget
(a prompt longer than the budget alone); without a budget one prompt per iteration. `--chunk-tokens` sets the
budget on every system with prefill servers."""
import numpy as np
import pytest

from basedie import verified
from sysmodel.config import SimulationConfig
from sysmodel.engine import EventLoop, Request
from sysmodel.execution import Cost
from sysmodel.operators import Work, prefill_work
from sysmodel.servers import Accounting, KVPool, PrefillServer
from sysmodel.simulate import simulate
from sysmodel.workload import FixedBatch


def prefill_run(lengths: list[int], budget: int | None, capacity: int = 10_000):
    """Prompts of `lengths` arriving at 0 on a prefill server whose iterations take 1 s: the work of each
    iteration and each request's first-token time."""
    works, handed = [], []

    def cost(work, scale=1.0, loads=None) -> Cost:
        works.append(work)
        return Cost(1.0, 0.0, 0.0, 0.0, 0.0)

    def handoff(request: Request) -> None:
        handed.append(request)
        pool.release(request)

    loop, pool = EventLoop(), KVPool(capacity, "pool")
    server = PrefillServer(loop, "prefill", cost, Accounting("prefill", "gpu", 1.0, 1.0, 0.0, 0.0), kv=pool,
                           handoff=handoff, token_budget=budget)
    requests = [Request(i, 0.0, length, 1) for i, length in enumerate(lengths)]
    for request in requests:
        loop.at(0.0, lambda request=request: server.submit(request))
    loop.run()
    assert handed == requests        # first come, first served
    return works, [r.first_token for r in requests]


def test_without_a_budget_each_prompt_is_its_own_iteration() -> None:
    works, first = prefill_run([5, 3, 4], None)
    assert works == [prefill_work(5), prefill_work(3), prefill_work(4)] and first == [1.0, 2.0, 3.0]


def test_a_budget_batches_whole_prompts_in_order_until_the_next_does_not_fit() -> None:
    works, first = prefill_run([5, 3, 4, 9, 2], 10)
    # 5 + 3 fit (4 more would make 12); 4 alone (9 more would be 13); 9 + ... 2 would make 11: 9 alone; 2.
    both = Work(*(a + b for a, b in zip(prefill_work(5), prefill_work(3))))
    assert works == [both, prefill_work(4), prefill_work(9), prefill_work(2)]
    assert both == (8, 15 + 6, 8, 2)        # each prompt attends only to its own tokens
    assert first == [1.0, 1.0, 2.0, 3.0, 4.0]


def test_a_prompt_longer_than_the_budget_runs_alone() -> None:
    works, first = prefill_run([30, 2, 2], 10)
    assert works[0] == prefill_work(30) and first == [1.0, 2.0, 2.0]


def test_a_batch_takes_only_the_prompts_whose_kv_fits() -> None:
    # 12 tokens of KV: the first request (5 + 1) and the second (5 + 1) fit, the third waits for the first batch.
    works, first = prefill_run([5, 5, 5], 100, capacity=12)
    assert len(works) == 2 and first == [1.0, 1.0, 2.0]


@pytest.fixture(scope="module")
def table() -> verified.VerifiedBlocks:
    return verified.load()


@pytest.mark.parametrize("system", ["pd-1:1", "duopd", "sm-7:3"])
def test_chunk_tokens_batches_the_prefill_of_every_prefill_server(table, system: str) -> None:
    def first_tokens(budget):
        config = SimulationConfig(system=system, model="LLaMA2-70B", workload=FixedBatch(4, 1024, 4),
                                  chunk_tokens=budget)
        result = simulate(config, table)
        assert result.config["chunk_tokens"] == budget
        return sorted(r.first_token for r in result.requests)

    alone, batched = first_tokens(None), first_tokens(4096)
    assert len(set(alone)) == 4 and len(set(batched)) == 1
    # Four prompts in one iteration take longer than one alone, and less than four one after another.
    assert alone[0] < batched[0] < alone[-1]
