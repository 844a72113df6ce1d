"""A shared prefix (`--shared-prefix-tokens`, its KV in HBM) on the systems with prefill servers: each prompt
computes only the tokens after the prefix, attending to the prefix as cached context, and PD moves only those
tokens' KV to the decode instance (the prefix is on every instance from the start)."""
import pytest

from basedie import verified
from sysmodel.config import SimulationConfig
from sysmodel.engine import EventLoop, Request
from sysmodel.execution import Cost
from sysmodel.operators import prefill_work
from sysmodel.servers import Accounting, KVPool, PrefillServer
from sysmodel.simulate import simulate
from sysmodel.workload import FixedBatch


def test_a_prompt_after_a_shared_prefix_computes_only_the_rest_and_attends_to_the_prefix() -> None:
    works = []

    def cost(work, scale=1.0, loads=None) -> Cost:
        works.append(work)
        return Cost(1.0, 0.0, 0.0, 0.0, 0.0)

    loop, pool = EventLoop(), KVPool(10_000, "pool")
    server = PrefillServer(loop, "prefill", cost, Accounting("prefill", "gpu", 1.0, 1.0, 0.0, 0.0), kv=pool,
                           handoff=pool.release, token_budget=12)
    requests = [Request(i, 0.0, length, 1, prefilled=4) for i, length in enumerate((10, 9, 20))]
    for request in requests:
        loop.at(0.0, lambda request=request: server.submit(request))
    loop.run()
    # 6 + 5 tokens computed fit a budget of 12 (10 + 9 prompt tokens would not); then 16 alone.
    first = prefill_work(6, 4)
    assert first == (6, 6 * 4 + 21, 10, 1)           # 6 new tokens, each attending to 4 cached and its causal part
    second = prefill_work(5, 4)
    assert works == [tuple(a + b for a, b in zip(first, second)), prefill_work(16, 4)]
    assert [r.prefilled for r in requests] == [10, 9, 20]


@pytest.fixture(scope="module")
def table() -> verified.VerifiedBlocks:
    return verified.load()


def run(table, system: str, prefix: int):
    config = SimulationConfig(system=system, model="LLaMA2-70B", workload=FixedBatch(1, 2048, 8),
                              shared_prefix_tokens=prefix)
    return simulate(config, table)


@pytest.mark.parametrize("system", ["pd-1:1", "duopd", "sm-7:3"])
def test_a_shared_prefix_shortens_the_first_token_and_leaves_decoding_alone(table, system: str) -> None:
    # One request alone: the prefill computes 1,024 of 2,048 tokens (attending to the other 1,024 cached), so
    # the first token comes sooner; each decode step reads the same 2,048-token context either way (PD's first
    # decode step also waits for the rest of the KV transfer, which is half as long).
    alone, shared = run(table, system, 0), run(table, system, 1024)
    assert shared.requests[0].first_token < 0.75 * alone.requests[0].first_token
    tpot = shared.summary["tpot_s"]["p50"], alone.summary["tpot_s"]["p50"]
    if system == "pd-1:1":
        assert tpot[1] * 0.99 < tpot[0] < tpot[1]
    else:
        assert tpot[0] == pytest.approx(tpot[1], rel=1e-9)


def test_pd_moves_only_the_kv_after_the_prefix(table) -> None:
    # The link's energy is its bytes at the link's energy per bit: half the prompt, half the energy.
    link = {prefix: run(table, "pd-1:1", prefix).summary["energy_j"]["by_server"]["KV transfer (NVLink)"]
            for prefix in (0, 1024)}
    assert link[1024] == pytest.approx(link[0] / 2, rel=1e-12) and link[0] > 0
