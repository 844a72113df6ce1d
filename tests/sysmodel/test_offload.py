"""sysmodel.offload priced by hand: the PIM's attention at the stacks' internal bandwidth, an offloading decode
iteration as the GPUs' part then the near-memory part, and the decode instance each Fig. 13 system builds."""
from dataclasses import replace

import pytest

from basedie import verified
from sysmodel.config import SimulationConfig, resolve
from sysmodel.engine import EventLoop
from sysmodel.execution import GPUExecution
from sysmodel.hardware import PAPER_HARDWARE
from sysmodel.llm import MODEL_PRESETS
from sysmodel.offload import ATTENTION, OffloadExecution, Part, PIMExecution
from sysmodel.operators import Shard, decode_work
from sysmodel.systems import ServingSystem
from sysmodel.workload import FixedBatch

GPT3 = MODEL_PRESETS.lookup("GPT3-175B")
# The paper's hardware without the stacks' access latency, so that the PIM's time is its bytes at its bandwidth.
NO_LATENCY = replace(PAPER_HARDWARE, gpu=replace(PAPER_HARDWARE.gpu, stack=replace(PAPER_HARDWARE.gpu.stack,
                                                                                  latency_s=0.0)))


@pytest.fixture(scope="module")
def table() -> verified.VerifiedBlocks:
    """The committed table: its 64-lane array is the 4× compute PNM's."""
    return verified.load()


def test_pim_attention_reads_the_kv_cache_at_every_stacks_internal_bandwidth() -> None:
    # GPT3-175B (MHA, 96 layers, hidden 12,288) decoding one sequence of 16,384 tokens: K and V in FP16,
    # 2 × 16,384 × 96 × 12,288 × 2 B = 77.3 GB, one FLOP per byte. TP 4 × 8 stacks, each read at 16 × 2 TB/s.
    cost = PIMExecution(NO_LATENCY, Part(GPT3, 4, ATTENTION, near=True)).cost(decode_work(1, 16384))
    kv = 2 * 16384 * 96 * 12288 * 2
    assert cost.hbm_bytes == kv and cost.flops == kv and cost.link_bytes == 0.0
    assert cost.seconds == pytest.approx(kv / (4 * 8 * 16 * 2e12), rel=1e-12)
    assert cost.offered == pytest.approx(1.0, rel=1e-12)           # the whole internal bandwidth, all the time
    # Each layer's one offloaded operator waits once for its stack's access latency.
    with_latency = PIMExecution(PAPER_HARDWARE, Part(GPT3, 4, ATTENTION, near=True)).cost(decode_work(1, 16384))
    assert with_latency.seconds == pytest.approx(cost.seconds + 96 * PAPER_HARDWARE.gpu.stack.latency_s, rel=1e-12)


def test_an_offloading_iteration_adds_the_two_parts_and_the_gpus_load_spreads_over_both() -> None:
    work = decode_work(8, 8 * 4096)
    gpu = GPUExecution(PAPER_HARDWARE, Part(GPT3, 4, ATTENTION))
    near = PIMExecution(PAPER_HARDWARE, Part(GPT3, 4, ATTENTION, near=True))
    half = lambda load: 0.5      # noqa: E731 -- the GPUs get half their bandwidth whatever they offer
    on_gpu, on_pim = gpu.cost(work, 1.0, None, half), near.cost(work)
    both = OffloadExecution(gpu, near).cost(work, 1.0, {"gpu": 1.0}, half)
    assert on_gpu.seconds > gpu.cost(work).seconds                  # the share reaches the GPUs' part
    assert both.seconds == on_gpu.seconds + on_pim.seconds
    assert both.flops == on_gpu.flops + on_pim.flops and both.hbm_bytes == on_gpu.hbm_bytes + on_pim.hbm_bytes
    assert both.link_bytes == on_gpu.link_bytes > 0                 # the all-reduces stay with the GPUs
    # The GPUs offer their load while they run and nothing while the PIM runs.
    assert both.offered == pytest.approx(on_gpu.offered * on_gpu.seconds / both.seconds, rel=1e-12)


def _decoder(table, system: str, overhead_s: float = 0.0):
    config = SimulationConfig(system=system, model="LLaMA2-70B", workload=FixedBatch(1, 1024, 8),
                              iteration_overhead_s=overhead_s)
    setting = resolve(config, table)
    shard = Shard(setting.model, 4)
    return setting, setting.spec.decoder(setting, ServingSystem(EventLoop(), system), shard, "decode")


@pytest.mark.parametrize("system", ["pd-1:1-pim", "pd-1:1-duplex", "pd-1:1-duplex-4x-compute"])
def test_a_decode_instance_keeps_every_flop_the_head_and_the_all_reduces_on_its_gpus(table, system) -> None:
    setting, (execution, kv, watts) = _decoder(table, system)
    work = decode_work(8, 8 * 2048)
    whole = GPUExecution(setting.hardware, Shard(setting.model, 4)).cost(work)
    cost = execution.cost(work)
    assert cost.flops == pytest.approx(whole.flops, rel=1e-12)       # each operator once, the LM head included
    assert cost.link_bytes == whole.link_bytes                       # the near side reduces nothing
    assert execution.near.cost(work).link_bytes == 0.0 and kv.name == "decode"
    # Its power: 4 GPUs, and with Duplex's PNM 4 × 8 stacks' PNMs (none is published for the PIM).
    pnm = 0.0 if system == "pd-1:1-pim" else 4 * 8 * setting.pnm_power.watts
    assert watts == pytest.approx(4 * setting.gpu_power_w + pnm, rel=1e-12) and pnm >= 0
    # The host's time per iteration is paid once, by the GPUs' part.
    _, (slower, _, _) = _decoder(table, system, overhead_s=1e-3)
    assert slower.cost(work).seconds == pytest.approx(cost.seconds + 1e-3, rel=1e-12)


@pytest.mark.parametrize("system", ["pd-1:1-duplex", "pd-1:1-duplex-4x-compute"])
def test_duplexs_pnm_runs_the_softmax_beside_attention_and_leaves_the_norms_to_the_gpus(table, system) -> None:
    _, (execution, _, _) = _decoder(table, system)
    near = execution.near
    for work in (decode_work(1, 16384), decode_work(8, 8 * 2048), decode_work(64, 64 * 4096)):
        seconds = near.cost(work).seconds
        # The vector unit's online softmax streams beside attention and drains after it: longer than the array alone.
        assert seconds > replace(near, vector=None).cost(work).seconds
        # The norms and residual adds run on the GPUs: shorter than a PNM that decodes whole layers.
        assert seconds < replace(near, whole_decode=True).cost(work).seconds
