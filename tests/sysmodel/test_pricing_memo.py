"""Memoised pricing gives exactly what pricing afresh gives: the bounded memo stores and forgets without changing a
value; the arbiter's scalar lookups, its lookups of a block whose load is the same throughout, and one iteration's
price on a GPU or a PNM are each equal, bit for bit, to the computation they stand for; and a run's rows are the
requests' own."""
import numpy as np
import pytest

from basedie import verified
from sysmodel.arbitration import POLICIES, MMUArbitration
from sysmodel.execution import GPUExecution
from sysmodel.hardware import PAPER_HARDWARE
from sysmodel.memo import Memo
from sysmodel.metrics import request_row
from sysmodel.operators import Shard, decode_work, prefill_work
from sysmodel.llm import LLAMA2_70B
from sysmodel.simulate import SimulationConfig, simulate
from sysmodel.workload import PoissonArrivals
from tests.sysmodel.test_execution_edges import WORK, pnm


@pytest.fixture(scope="module")
def table() -> verified.VerifiedBlocks:
    return verified.load()


def test_the_memo_computes_a_key_once_and_starts_again_when_full() -> None:
    calls = []
    memo = Memo(entries=2)

    def compute(value):
        calls.append(value)
        return value * 10
    assert [memo(k, lambda k=k: compute(k)) for k in (1, 2, 1, 2)] == [10, 20, 10, 20]
    assert calls == [1, 2]
    assert memo(3, lambda: compute(3)) == 30 and memo(1, lambda: compute(1)) == 10     # full: emptied, recomputed
    assert calls == [1, 2, 3, 1]


@pytest.mark.parametrize("policy", list(POLICIES))
def test_memoised_lookups_equal_fresh_ones_bit_for_bit(table, policy: str) -> None:
    mmu = MMUArbitration.from_verified(table, policy, PAPER_HARDWARE)
    fresh = MMUArbitration.from_verified(table, policy, PAPER_HARDWARE)
    loads = np.random.default_rng(5).uniform(-0.2, 1.2, (40, 2)).round(2)     # rounded: keys repeat
    for gpu, pnm_load in loads.tolist() * 2:
        offered = {"gpu": gpu, "pnm": pnm_load}
        for source in ("gpu", "pnm"):
            assert mmu.granted(source, offered) == fresh._granted(source, gpu, pnm_load)
            assert mmu.access_latency_s(source, offered) == fresh._access_latency_s(source, gpu, pnm_load)


@pytest.mark.parametrize("policy", list(POLICIES))
def test_a_block_with_one_load_throughout_is_looked_up_as_the_whole_array(table, policy: str) -> None:
    # A memory-bound operator offers 1.0 at every iteration of a decode block: looked up once and broadcast, it
    # must equal the elementwise array lookup, beside a steady co-runner or a varying one.
    mmu = MMUArbitration.from_verified(table, policy, PAPER_HARDWARE)
    for level in (0.0, 0.37, 1.0, 1.4):
        steady = np.full(7, level)
        for other in (0.55, np.linspace(0.1, 0.9, 7), np.full(7, 0.25)):
            for offered in ({"gpu": other, "pnm": steady}, {"gpu": steady, "pnm": other}):
                for source in ("gpu", "pnm"):
                    loads = offered["gpu"], offered["pnm"]
                    assert np.array_equal(mmu.granted(source, offered), mmu._granted(source, *loads))
                    assert np.array_equal(mmu.access_latency_s(source, offered),
                                          mmu._access_latency_s(source, *loads))


@pytest.mark.parametrize("policy", list(POLICIES))
def test_a_block_beside_a_steady_load_is_looked_up_as_each_iteration_alone_bit_for_bit(table, policy: str) -> None:
    mmu = MMUArbitration.from_verified(table, policy, PAPER_HARDWARE)
    block = np.random.default_rng(3).uniform(-0.5, 1.5, 60) * mmu.full_rate
    for steady in (-0.1, 0.0, 0.3, 0.77, 2.0):
        for source in ("gpu", "pnm"):
            for lookup in (mmu.served, mmu.wait_cycles):
                assert lookup(source, steady, block).tolist() == [lookup(source, steady, y) for y in block]
                assert lookup(source, block, steady).tolist() == [lookup(source, x, steady) for x in block]


def test_one_iterations_price_is_memoised_by_everything_it_depends_on() -> None:
    gpu = GPUExecution(PAPER_HARDWARE, Shard(LLAMA2_70B, 2))
    work = prefill_work(1000)
    assert gpu.cost(work) == gpu.cost(work) == gpu._cost(work, 1.0, None)
    assert gpu.cost(work, 0.5) == gpu._cost(work, 0.5, None) != gpu.cost(work)
    assert gpu.cost(prefill_work(1001)) == gpu._cost(prefill_work(1001), 1.0, None) != gpu.cost(work)
    executor = pnm(1, stack_bandwidth=1e9)
    for gpu_load in (0.0, 0.5, 0.0):
        assert executor.cost(WORK, 1.0, {"gpu": gpu_load}) == executor._cost(WORK, 1.0, gpu_load, None)
    assert executor.cost(WORK, 0.5) == executor._cost(WORK, 0.5, 0.0, None) != executor.cost(WORK)
    block = decode_work(3, np.array([30, 33, 36]))          # a block's arrays are priced, not memoised
    assert all(np.array_equal(a, b) for a, b in zip(executor.cost(block), executor._cost(block, 1.0, 0.0, None)))


def test_a_runs_rows_are_built_from_its_requests(table) -> None:
    result = simulate(SimulationConfig(system="duopd", model="LLaMA2-70B",
                                       workload=PoissonArrivals(4.0, 30, 2048, 16, seed=1)), table)
    assert result.rows == [request_row(r) for r in result.requests] and len(result.rows) == 30
