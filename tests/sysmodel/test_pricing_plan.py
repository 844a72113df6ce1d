"""An iteration's price from its plan (the operators' figures no co-runner changes, computed once per iteration
and reused for the price beside co-runners and for re-prices) equals, bit for bit, the walk over the operators
that priced everything afresh every time: on the GPU (roofline and measured performance models, an SM partition,
iteration overhead) and the PNM (with and without the vector unit, quantized weights through the DQBs, more
beats per cycle), dense and MoE models, one iteration and decode blocks, alone, at a bandwidth scale, beside a
co-runner's share and at GPU loads, over random workloads of three seeds. The reference walks below are the
pricing code as it was before the plans; they stay here only as this test's reference."""
from dataclasses import replace

import numpy as np
import pytest

from basedie import verified
from sysmodel.arbitration import MMUArbitration
from sysmodel.base_die import StackDequant
from sysmodel.execution import (Cost, GPUExecution, PNMExecution, PNMFigures, VectorFigures, _fraction, _larger,
                                array_passes, beat_groups, elementwise_max, layer_seconds)
from sysmodel.llm import BYTES_PER_VALUE, LLAMA2_70B, QWEN3_235B_A22B
from sysmodel.base_die import QUANTIZED_OPS
from sysmodel.hardware import PAPER_HARDWARE
from sysmodel.operators import Shard, Work, decode_work, prefill_work
from sysmodel.perf import perf_model
from sysmodel.presets import PRESETS
from sysmodel.quantized import Quantization


def gpu_walk(self: GPUExecution, work: Work, bandwidth_scale: float, share) -> Cost:
    gpu, shard = self.hardware.gpu, self.shard
    flop_rate = gpu.flops * self.sm_fraction
    reachable = gpu.memory.bandwidth * gpu.sm_bandwidth(self.sm_fraction)
    byte_rate = reachable * bandwidth_scale
    perf = self.perf

    def op_seconds(op, tokens):
        if share is None:
            return perf.op_seconds(op, tokens, shard, flop_rate, byte_rate)
        alone = perf.op_seconds(op, tokens, shard, flop_rate, reachable)
        load = _fraction(op.bytes / gpu.memory.bandwidth, alone)
        return perf.op_seconds(op, tokens, shard, flop_rate, reachable * share(load))

    def totals(ops, tokens):
        seconds = flops = nbytes = 0.0
        for op in ops:
            seconds += op_seconds(op, tokens)
            flops += op.flops
            nbytes += op.weight_bytes + op.kv_bytes + op.act_bytes
        return seconds, flops, nbytes

    layer_s, layer_flops, layer_bytes = totals(shard.layer_ops(work), work.tokens)
    layer_s += perf.layer_extra_seconds(work.tokens, shard, byte_rate)
    head_s, head_flops, head_bytes = totals(shard.head_ops(work), work.logits)
    reduce_bytes = shard.all_reduce_bytes(work)
    reduce_s = perf.all_reduce_seconds(reduce_bytes / 2, 2, shard.tp, self.hardware.link.bandwidth)
    layers = shard.model.layers
    seconds = layers * layer_seconds(perf, layer_s, reduce_s) + head_s + self.overhead_s
    flops = layers * layer_flops + head_flops
    hbm = layers * layer_bytes + head_bytes
    link = layers * (2 * (shard.tp - 1) / shard.tp) * reduce_bytes
    return Cost(seconds, flops * shard.tp, hbm * shard.tp, link * shard.tp, hbm / (seconds * gpu.memory.bandwidth))


def pnm_walk(self: PNMExecution, work: Work, bandwidth_scale: float, gpu_load, share) -> Cost:
    hw, shard, lane = self.hardware, self.shard, self.figures
    stacks = hw.gpu.stacks
    stack_bandwidth = hw.gpu.stack.bandwidth * hw.pnm.bandwidth_multiple
    byte_rate = stack_bandwidth * bandwidth_scale
    dequant = self.dequant
    fixed_s = lane.latency_cycles / lane.clock_hz + hw.gpu.stack.latency_s + (dequant.latency_s if dequant else 0.0)
    smaller = np.minimum if _larger(work) is np.maximum else min
    larger = elementwise_max
    groups = beat_groups(lane.lanes, hw.pnm.bandwidth_multiple)
    serial, final, beside = self._vector_chains if self.vector else (None, None, {})

    def seconds_of(ops, overlapped):
        total, hbm = 0.0, 0.0
        for op in ops:
            elements = (op.weight_bytes + op.kv_bytes) / BYTES_PER_VALUE
            if op.kind == "vector" or (not isinstance(elements, np.ndarray) and not elements):
                continue
            compute_s = array_passes(op.flops / (2 * elements), elements, lane.lanes, groups, smaller) \
                / stacks / lane.macs_per_cycle / lane.clock_hz
            if dequant is None:
                nbytes = elements * BYTES_PER_VALUE / stacks
            else:
                weights, other = ((op.weight_bytes, op.kv_bytes) if op.name in QUANTIZED_OPS
                                  else (0.0, op.weight_bytes + op.kv_bytes))
                nbytes = dequant.read_bytes(weights, other) / stacks
                compute_s = larger(compute_s, dequant.seconds(weights / stacks, other / stacks))
            if op.name in overlapped:
                stream_s, drain_s = overlapped[op.name](work)
                compute_s = larger(compute_s, stream_s)
                total += drain_s
            alone_s = nbytes / stack_bandwidth
            offered = alone_s / larger(compute_s, alone_s)
            start_s = fixed_s + self.mmu.access_latency_s("pnm", {"gpu": gpu_load, "pnm": offered})
            rate = byte_rate if share is None else stack_bandwidth * share(offered)
            total += larger(compute_s, nbytes / rate) + start_s
            hbm += nbytes
        return total, hbm

    layer, head = shard.layer_ops(work), shard.head_ops(work)
    layer_s, layer_bytes = seconds_of(layer, beside)
    head_s, head_bytes = seconds_of(head, {})
    if self.vector and self.whole_decode:
        layer_s += sum(serial(work))
        head_s += sum(final(work))
    reduce_bytes = shard.all_reduce_bytes(work)
    exchange_s = 2 * hw.pnm.all_reduce_s + self.perf.all_reduce_seconds(reduce_bytes / 2, 2, shard.tp,
                                                                        hw.link.bandwidth)
    layers = shard.model.layers
    seconds = layers * layer_seconds(self.perf, layer_s, exchange_s) + head_s
    flops = layers * sum(op.flops for op in layer) + sum(op.flops for op in head)
    hbm_per_stack = layers * layer_bytes + head_bytes
    link = layers * (2 * (shard.tp - 1) / shard.tp) * reduce_bytes
    return Cost(seconds, flops * shard.tp, hbm_per_stack * stacks * shard.tp, link * shard.tp,
                hbm_per_stack / (seconds * stack_bandwidth))


@pytest.fixture(scope="module")
def table() -> verified.VerifiedBlocks:
    return verified.load()


def works(seed: int) -> list[Work]:
    """Prefills (some after a cached prefix, some repeated: the plan's memo), single decode iterations, decode
    blocks and a mixed iteration, drawn at random."""
    rng = np.random.default_rng(seed)
    prompts = [prefill_work(int(n), int(p)) for n, p in zip(rng.integers(1, 20000, 4), rng.integers(0, 3000, 4))]
    singles = [decode_work(int(b), int(c)) for b, c in zip(rng.integers(1, 64, 3), rng.integers(100, 600000, 3))]
    blocks = []
    for batch, context, steps in zip(rng.integers(1, 64, 3), rng.integers(100, 600000, 3), rng.integers(1, 128, 3)):
        blocks.append(decode_work(int(batch), int(context) + int(batch) * np.arange(int(steps))))
    mixed = Work(*(a + b for a, b in zip(decode_work(8, 40000), prefill_work(512, 1024, False))))
    return prompts + prompts[:2] + singles + blocks + [mixed]


def same(a: Cost, b: Cost) -> bool:
    """Every field equal, bit for bit (arrays elementwise, of the same shape)."""
    return all(np.array_equal(np.asarray(x), np.asarray(y)) and np.shape(x) == np.shape(y) for x, y in zip(a, b))


def shares():
    """No share; a co-runner's share that falls with the operator's own load (any function of it will do: the
    plan must ask it about the same loads)."""
    return [None, lambda load: 1.0 / (1.0 + 0.7 * load)]


def pnms(table) -> dict[str, PNMExecution]:
    hw = PAPER_HARDWARE
    mmu = MMUArbitration.from_verified(table, "prefill-first", hw)
    vector = VectorFigures.from_verified(table, hw.pnm)
    figures = PNMFigures.from_verified(table, hw.pnm)
    dequant = StackDequant.from_verified(table, Quantization("w4a16", 128, "dqb"), hw.gpu, dqb_power_w=0.2)
    wide = replace(hw, pnm=replace(hw.pnm, bandwidth_multiple=2.0))
    return {"dense": PNMExecution(hw, Shard(LLAMA2_70B, 8), figures, mmu),
            "vector": PNMExecution(hw, Shard(LLAMA2_70B, 8), figures, mmu, vector=vector),
            "dqb": PNMExecution(hw, Shard(LLAMA2_70B, 8), figures, mmu, vector=vector, dequant=dequant),
            "moe, offloaded": PNMExecution(hw, Shard(QWEN3_235B_A22B, 8), figures, mmu, vector=vector,
                                           whole_decode=False),
            "wide": PNMExecution(wide, Shard(LLAMA2_70B, 4), PNMFigures.from_verified(table, wide.pnm), mmu,
                                 vector=vector)}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_pnm_price_from_its_plan_is_the_walk_over_its_operators(table, seed: int) -> None:
    for name, executor in pnms(table).items():
        for work in works(seed):
            for scale in (1.0, 0.37):
                for gpu_load in (0.0, 0.55):
                    for share in shares():
                        if share is None:        # the public entry: memoised for one iteration
                            priced = executor.cost(work, scale, {"gpu": gpu_load})
                        else:
                            priced = executor._cost(work, scale, gpu_load, share)
                        assert same(priced, pnm_walk(executor, work, scale, gpu_load, share)), (name, work)


def gpus() -> dict[str, GPUExecution]:
    h100 = PRESETS["h100-sxm5-80gb"]
    return {"roofline": GPUExecution(PAPER_HARDWARE, Shard(LLAMA2_70B, 8)),
            "sm partition, overhead": GPUExecution(PAPER_HARDWARE, Shard(LLAMA2_70B, 4), 0.3, overhead_s=2e-4),
            "moe": GPUExecution(PAPER_HARDWARE, Shard(QWEN3_235B_A22B, 8)),
            "measured": GPUExecution(h100, Shard(LLAMA2_70B, 4), perf=perf_model("measured", h100.gpu))}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_gpu_price_from_its_plan_is_the_walk_over_its_operators(seed: int) -> None:
    for name, executor in gpus().items():
        for work in works(seed):
            for scale in (1.0, 0.37):
                for share in shares():
                    priced = executor.cost(work, scale, share=share)
                    assert same(priced, gpu_walk(executor, work, scale, share)), (name, work)


def test_a_plan_is_reused_for_the_same_iteration_and_never_for_another(table) -> None:
    # The price beside a co-runner reuses the plan of the same iteration priced alone: the same object. Another
    # block's arrays (a new `Work`) get their own plan, even when equal.
    executor = pnms(table)["vector"]
    block = decode_work(4, 1000 + 4 * np.arange(6))
    assert executor._plan(block) is executor._plan(block)
    assert executor._plan(decode_work(4, 1000 + 4 * np.arange(6))) is not executor._plan(block)
    one = prefill_work(300)
    assert executor._plan(one) is executor._plan(prefill_work(300))
