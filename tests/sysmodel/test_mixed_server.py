"""A mixed server that never splits a prompt (Orca, vLLM's default scheduler): prompts join an iteration while
they fit the token budget, and a prompt longer than the budget runs whole, alone."""
import numpy as np

from sysmodel.engine import EventLoop, Request
from sysmodel.execution import Cost
from sysmodel.operators import Work
from sysmodel.servers import Accounting, KVPool, MixedServer


def test_whole_prompts_fill_the_budget_and_a_long_one_runs_alone() -> None:
    works = []

    def cost(work, scale=1.0, loads=None) -> Cost:       # every iteration takes 1 s
        works.append(work)
        return Cost(np.ones(np.shape(work.kv_read)) if np.shape(work.kv_read) else 1.0, 0.0, 0.0, 0.0, 0.0)

    loop, done = EventLoop(), []
    server = MixedServer(loop, "mixed", cost, Accounting("mixed", "gpu", 1.0, 1.0, 0.0, 0.0), kv=KVPool(100, "pool"),
                         max_batch=4, chunk_tokens=3, whole_prompts=True, finished=done.append)
    # One-token answers (done with their prompts) of 2, 1, 4 and 3 prompt tokens; a budget of 3 tokens.
    requests = [Request(i, 0.0, length, 1) for i, length in enumerate((2, 1, 4, 3))]
    for request in requests:
        loop.at(0.0, lambda request=request: server.submit(request))
    loop.run()
    # 1: the 2- and 1-token prompts exactly fill the budget (Work: tokens, causal pairs 3 + 1, KV read, logits).
    # 2: the 4-token prompt is longer than the budget: it runs whole (10 pairs) and alone.
    # 3: the 3-token prompt.
    assert works == [Work(3, 4, 3, 2), Work(4, 10, 4, 1), Work(3, 6, 3, 1)]
    assert [r.finish for r in requests] == [1.0, 1.0, 2.0, 3.0] and done == requests
