"""A mixed server that never splits a prompt (Orca, vLLM's default scheduler): prompts join an iteration while
they fit the token budget, and a prompt longer than the budget runs whole, alone."""
import numpy as np

from sysmodel.engine import EventLoop, Request
from sysmodel.execution import Cost
from sysmodel.operators import Work
from sysmodel.servers import Accounting, KVPool, MixedServer


def whole_prompt_server(mixed: bool = True) -> tuple[EventLoop, MixedServer, list[Work], list[Request]]:
    """A whole-prompt server of a 3-token budget whose every iteration takes 1 s; the work of each iteration
    and the requests in the order they finished."""
    works, done = [], []

    def cost(work, scale=1.0, loads=None) -> Cost:
        works.append(work)
        return Cost(np.ones(np.shape(work.kv_read)) if np.shape(work.kv_read) else 1.0, 0.0, 0.0, 0.0, 0.0)

    loop = EventLoop()
    server = MixedServer(loop, "mixed", cost, Accounting("mixed", "gpu", 1.0, 1.0, 0.0, 0.0), kv=KVPool(100, "pool"),
                         max_batch=4, chunk_tokens=3, whole_prompts=True, mixed=mixed, finished=done.append)
    return loop, server, works, done


def test_whole_prompts_fill_the_budget_and_a_long_one_runs_alone() -> None:
    loop, server, works, done = whole_prompt_server()
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


def test_without_mixed_batches_decoding_pauses_while_a_prompt_runs() -> None:
    # a (2-token prompt, 3 tokens out) decodes from t = 1; b (2-token prompt, 1 token out) arrives at 1.5 and
    # runs at the next iteration boundary, t = 2. Mixed: a's decode rides along (3 tokens: 2 + 1), a's third
    # token comes at 3. Not mixed (vLLM's default): the 2→3 s iteration is b's prompt alone, a's third token
    # waits until 4.
    for mixed, third, tokens in [(True, 3.0, 3), (False, 4.0, 2)]:
        loop, server, works, done = whole_prompt_server(mixed)
        a, b = Request(0, 0.0, 2, 3), Request(1, 1.5, 2, 1)
        loop.at(0.0, lambda: server.submit(a))
        loop.at(1.5, lambda: server.submit(b))
        loop.run()
        assert a.token_times == [1.0, 2.0, third] and b.finish == 3.0
        assert works[2].tokens == tokens
    assert works[2] == Work(2, 3, 2, 1)          # not mixed: exactly b's prompt (causal pairs 1 + 2)
