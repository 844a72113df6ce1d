"""`--iteration-overhead`: the host's time per iteration, added once to every iteration of every GPU server
(prefill, decode, mixed) and to no PNM iteration; 0 by default (the papers' systems)."""
import numpy as np
import pytest

from basedie import verified
from sysmodel.config import SimulationConfig
from sysmodel.errors import ConfigError
from sysmodel.execution import GPUExecution
from sysmodel.hardware import PAPER_HARDWARE
from sysmodel.llm import MODEL_PRESETS
from sysmodel.operators import Shard, decode_work, prefill_work
from sysmodel.simulate import simulate
from sysmodel.workload import FixedBatch

OVERHEAD = 0.002


@pytest.fixture(scope="module")
def table() -> verified.VerifiedBlocks:
    return verified.load()


def test_the_overhead_lengthens_each_iteration_by_itself_and_lowers_its_offered_load() -> None:
    shard = Shard(MODEL_PRESETS.lookup("LLaMA2-70B"), 4)
    plain, slow = GPUExecution(PAPER_HARDWARE, shard), GPUExecution(PAPER_HARDWARE, shard, overhead_s=OVERHEAD)
    for work in (prefill_work(2048), decode_work(3, 3 * 4096 + np.arange(5) * 3)):
        base, charged = plain.cost(work), slow.cost(work)
        assert np.allclose(np.asarray(charged.seconds) - base.seconds, OVERHEAD, rtol=0, atol=1e-12)
        assert np.all(np.asarray(charged.offered) < base.offered)
        assert np.all(charged.hbm_bytes == base.hbm_bytes) and np.all(charged.flops == base.flops)


def run(table, system: str, overhead: float, output_len: int = 6):
    config = SimulationConfig(system=system, model="LLaMA2-70B", workload=FixedBatch(1, 2048, output_len),
                              iteration_overhead_s=overhead)
    result = simulate(config, table)
    assert result.config["iteration_overhead_s"] == overhead
    (request,) = result.requests
    return request


def test_a_gpu_decode_iteration_pays_it_once_per_token(table) -> None:
    plain, charged = run(table, "pd-1:1", 0.0), run(table, "pd-1:1", OVERHEAD)
    # One request decoding alone: each token after the first is one decode iteration.
    assert np.allclose(np.diff(charged.token_times) - np.diff(plain.token_times), OVERHEAD, rtol=0, atol=1e-9)
    assert charged.first_token > plain.first_token + OVERHEAD * 0.999


def test_mixed_iterations_pay_it_once_each(table) -> None:
    plain, charged = run(table, "chunked", 0.0), run(table, "chunked", OVERHEAD)
    # 2,048 prompt tokens are two 1,024-token chunks, then one iteration per further token.
    assert charged.first_token - plain.first_token == pytest.approx(2 * OVERHEAD, abs=1e-9)
    assert charged.finish - plain.finish == pytest.approx((2 + 5) * OVERHEAD, abs=1e-9)


def test_duopd_pays_it_on_the_gpu_prefill_not_on_the_pnm_decode(table) -> None:
    plain, charged = run(table, "duopd", 0.0), run(table, "duopd", OVERHEAD)
    assert charged.first_token - plain.first_token == pytest.approx(OVERHEAD, abs=1e-9)
    assert np.allclose(np.diff(charged.token_times), np.diff(plain.token_times), rtol=1e-12, atol=0)


@pytest.mark.parametrize("bad", [-1e-3, float("nan"), float("inf")])
def test_a_negative_or_non_finite_overhead_is_refused(bad) -> None:
    with pytest.raises(ConfigError, match="iteration overhead must be a finite number of seconds >= 0"):
        SimulationConfig(system="pd-1:1", model="LLaMA2-70B", workload=FixedBatch(1, 16, 2), iteration_overhead_s=bad)
