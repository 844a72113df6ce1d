"""Per-operator memory coupling (issue 15): an operator's bandwidth share is the one its own offered load
obtains against the co-runners, not the iteration average's. Expectations worked out by hand for a one-layer
model whose operators are, by their FLOPs per byte, either memory-bound (offering all of the bandwidth) or
compute-bound (offering less)."""
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from sysmodel.engine import EventLoop
from sysmodel.execution import Cost, GPUExecution, PNMExecution, PNMFigures
from sysmodel.hardware import PAPER_HARDWARE
from sysmodel.llm import LLM
from sysmodel.memory import MemoryTier
from sysmodel.operators import Shard, Work, decode_work, prefill_work
from sysmodel.servers import Accounting, Server, SharedMemory

# A 4-token vocabulary: an LM head of 64 rows once padded as vLLM pads it (to a multiple of 64).
SMALL = LLM("small", layers=1, hidden=8, heads=1, kv_heads=1, head_dim=8, ffn=16, vocab=4, gated_mlp=False)


def step_share(load):
    """A planted arbiter: an operator that offers more than 90 % of the bandwidth gets half of what it asks."""
    return np.where(np.asarray(load) > 0.9, 0.5, 1.0) if isinstance(load, np.ndarray) else (0.5 if load > 0.9 else 1.0)


def one_gpu(flops: float, bandwidth: float):
    stack = MemoryTier("stack", 1e12, bandwidth, 0.0, 0.0)
    gpu = replace(PAPER_HARDWARE.gpu, stacks=1, stack=stack, flops=flops)
    return replace(PAPER_HARDWARE, gpu=gpu, gpus=1, pnm=replace(PAPER_HARDWARE.pnm, lanes=4, all_reduce_s=0.0))


def test_only_the_memory_bound_gpu_operators_lose_bandwidth() -> None:
    # 64 prompt tokens, 3 kFLOP/s and 1 kB/s (3 FLOPs per byte at the ridge). FLOPs / bytes per operator:
    #   norm ×2  2,048 / 2,048 (1 per byte: memory-bound, offers 100 %)
    #   qkv     24,576 / 4,480 (offers 4,480·3 / 24,576 = 55 %);  attention 66,560 / 4,096 (18 %)
    #   o_proj   8,192 / 2,176 (80 %);  mlp 32,768 / 4,608 (42 %)
    #   final norm 32 / 32 and LM head 2·8·64 = 1,024 / 8·64·2 + (8 + 64)·2 = 1,168 for the one token that
    #   produces a logit: memory-bound.
    # Only the memory-bound operators (2,048 + 2,048 + 32 + 1,168 bytes) take twice as long: 5.296 s more.
    gpu = GPUExecution(one_gpu(3e3, 1e3), Shard(SMALL, 1))
    alone, work = gpu.cost(prefill_work(64)), prefill_work(64)
    assert gpu.cost(work, share=step_share).seconds - alone.seconds == pytest.approx(5.296, rel=1e-12)
    # The iteration as a whole offers less than 90 %: coupling at its average would change nothing.
    assert alone.offered < 0.9
    assert gpu.cost(work, bandwidth_scale=step_share(alone.offered)).seconds == alone.seconds


def test_only_the_memory_bound_pnm_operators_lose_bandwidth() -> None:
    # Batch 8, 100 tokens of context on 4 one-MAC lanes (the mechanisms test's case): at 4 GB/s every operator
    # is compute-bound and offers 25–50 %; at 1 kB/s all 5,504 B are memory-bound and take twice as long.
    lanes = PNMFigures(lanes=4, clock_hz=1e9, latency_cycles=0, macs_per_cycle=1.0)
    zero_wait = SimpleNamespace(access_latency_s=lambda source, offered: 0.0)

    def seconds(bandwidth: float, share=None) -> float:
        pnm = PNMExecution(one_gpu(1e30, bandwidth), Shard(SMALL, 1), lanes, zero_wait)
        return pnm.cost(decode_work(8, 100), share=share).seconds
    assert seconds(4e9, step_share) == pytest.approx(seconds(4e9), rel=1e-12)
    assert seconds(1e3, step_share) == pytest.approx(2 * 5.504, rel=1e-12)


class Halving:
    """A sharing that halves whoever offers more than half of the bandwidth while someone else is busy."""

    def grant(self, offered):
        return {name: load * (0.5 if load > 0.5 else 1.0) for name, load in offered.items()}


def test_a_server_prices_each_operator_at_its_own_load() -> None:
    # The server's iteration offers 30 % on average; its cost sees the share a 100 % operator would get (0.5)
    # and a 20 % one (1.0), against the co-runner's 40 %.
    seen = {}

    def cost(work, scale=1.0, loads=None, share=None):
        if share is not None:
            seen.update(scale=scale, loads=dict(loads), full=share(1.0), light=share(0.2))
        return Cost(1.0, 0.0, 0.0, 0.0, 0.3)

    class One(Server):
        def completed(self, ends):
            pass

    loop = EventLoop()
    memory = SharedMemory(MemoryTier("m", 1, 1.0, 0.0, 0.0).with_sharing(Halving()))
    memory.users["other"] = SimpleNamespace(busy=True, offered=0.4, reprice=lambda: None)
    server = One(loop, "me", cost, Accounting("me", "gpu", 1.0, 1.0, 0.0, 0.0), memory)
    loop.at(0.0, lambda: server.start(Work(1, 1, 1, 1)))
    loop.run()
    assert seen == {"scale": 1.0, "loads": {"other": 0.4, "me": 0.3}, "full": 0.5, "light": 1.0}
