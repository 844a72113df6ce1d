"""How long an iteration takes on a device, and what it moves: GPUs (roofline per operator) and DuoPD's PNMs
(cycle counts from the verified lane figures, bandwidth from the stack and the MMU's share).

Every executor answers `cost(work, bandwidth_scale)` (the `Work` counts may be numpy arrays: one decode
block of consecutive iterations is priced at once): the iteration's time on all the devices of one
instance working together, its FLOPs, HBM bytes and link bytes in total, and `offered`, the fraction of the
memory bandwidth it asked for (what a co-runner on the same stacks competes with). `bandwidth_scale` < 1
stretches the memory side of every operator when a co-runner wins part of the bandwidth.
"""
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .arbitration import MMUArbitration
from .errors import ConfigError, require
from .hardware import Hardware
from .llm import BYTES_PER_VALUE
from .operators import Shard, Work, ring_all_reduce_s
from .verified import VerifiedBlocks


def _larger(work: Work):
    """Elementwise maximum for a block of iterations, the (much faster) builtin for one."""
    return np.maximum if isinstance(work.kv_read, np.ndarray) else max


class Cost(NamedTuple):
    seconds: float
    flops: float
    hbm_bytes: float
    link_bytes: float
    offered: float          # fraction of the instance's memory bandwidth this iteration asks for


@dataclass(frozen=True)
class GPUExecution:
    """`shard.tp` GPUs running one iteration in tensor parallel, with a fraction of their SMs.

    Each operator takes the longer of its compute time and its memory time (no overlap between operators,
    all-reduces not overlapped with compute); `sm_fraction` < 1 scales the compute and caps the bandwidth
    by the GPU's bandwidth-vs-SM curve (paper §3.2)."""
    hardware: Hardware
    shard: Shard
    sm_fraction: float = 1.0

    def __post_init__(self) -> None:
        require(0 < self.sm_fraction <= 1, f"SM fraction must be in (0, 1], got {self.sm_fraction}")

    def cost(self, work: Work, bandwidth_scale: float = 1.0, loads: Mapping[str, float] | None = None) -> Cost:
        """`loads` (the co-runners' offered loads) do not matter to a GPU beyond its share."""
        gpu, shard = self.hardware.gpu, self.shard
        flop_rate = gpu.flops * self.sm_fraction
        reachable = gpu.memory.bandwidth * gpu.sm_bandwidth(self.sm_fraction)
        byte_rate = reachable * bandwidth_scale
        larger = _larger(work)

        def totals(ops) -> tuple[float, float, float]:
            seconds = flops = nbytes = 0.0
            for op in ops:
                op_bytes = op.weight_bytes + op.kv_bytes + op.act_bytes
                seconds += larger(op.flops / flop_rate, op_bytes / byte_rate)
                flops += op.flops
                nbytes += op_bytes
            return seconds, flops, nbytes

        layer_s, layer_flops, layer_bytes = totals(shard.layer_ops(work))
        head_s, head_flops, head_bytes = totals(shard.head_ops(work))
        reduce_bytes = shard.all_reduce_bytes(work)
        reduce_s = ring_all_reduce_s(reduce_bytes, shard.tp, self.hardware.link.bandwidth)
        layers = shard.model.layers
        seconds = layers * (layer_s + reduce_s) + head_s
        flops = layers * layer_flops + head_flops
        hbm = layers * layer_bytes + head_bytes
        link = layers * (2 * (shard.tp - 1) / shard.tp) * reduce_bytes
        return Cost(seconds, flops * shard.tp, hbm * shard.tp, link * shard.tp,
                    hbm / (seconds * gpu.memory.bandwidth))


@dataclass(frozen=True)
class LaneFigures:
    """The PNM lane's measured figures (verified table, block `pnm_lane`). `macs_per_cycle` is what the bench
    counted from the operands the lane consumed per cycle of a back-to-back stream, so it already includes
    the operand-pair rate."""
    width: int
    latency_cycles: int
    macs_per_cycle: float

    @classmethod
    def from_verified(cls, table: VerifiedBlocks, width: int) -> "LaneFigures":
        try:
            figures = table.entry("pnm_lane", width=width).figures
        except KeyError as error:
            raise ConfigError(str(error).strip('"')) from None
        return cls(width, int(figures["latency_cycles"]), float(figures["macs_per_cycle"]))


@dataclass(frozen=True)
class PNMExecution:
    """DuoPD decoding on the PNMs of `shard.tp` GPUs (one PNM per stack), paper §4.2 and §5.

    Within a GPU the weights are split over its stacks and the KV cache is split along the sequence
    (sequence parallelism, FlashDecoding partial softmax, §5.2). Per operator and PNM, the lanes need
    `passes × elements / macs_per_cycle` cycles: the memory operand is broadcast to all lanes (§4.2), so a
    weight beat serves up to `lanes` token rows (the sequences, or for an expert the tokens routed to it)
    and a key/value beat up to `lanes` query heads of a GQA group; the rows an operand serves are its
    FLOPs / (2 × its elements), and more rows than lanes take more passes. The memory side moves the PNM's bytes
    at its share of the stack's bandwidth. Each operator pays the lane's pipeline latency and the MMU's
    access latency at the loads the GPU and the operator offer; each layer pays two inter-PNM all-reduces
    (§5.2) and the GPU-level tensor-parallel all-reduces over NVLink. Norms and softmax run on the PNM's
    vector unit, which is not modelled (its operands sit in the PNM buffer)."""
    hardware: Hardware
    shard: Shard
    lane: LaneFigures
    mmu: MMUArbitration

    @property
    def peak_flops(self) -> float:
        """One PNM: every lane's multipliers, two FLOPs per MAC."""
        return self.hardware.pnm.lanes * self.lane.macs_per_cycle * 2 * self.hardware.pnm.clock_hz

    def cost(self, work: Work, bandwidth_scale: float = 1.0, loads: Mapping[str, float] | None = None) -> Cost:
        """`loads["gpu"]`, the GPU's offered load, sets the MMU's wait."""
        hw, shard, lane = self.hardware, self.shard, self.lane
        pnm, stacks = hw.pnm, hw.gpu.stacks
        stack_bandwidth = hw.gpu.stack.bandwidth
        byte_rate = stack_bandwidth * bandwidth_scale
        fixed_s = lane.latency_cycles / pnm.clock_hz + hw.gpu.stack.latency_s
        gpu_load = (loads or {}).get("gpu", 0.0)
        larger = _larger(work)

        def seconds_of(ops) -> tuple[float, float]:
            total, hbm = 0.0, 0.0
            for op in ops:
                elements = (op.weight_bytes + op.kv_bytes) / BYTES_PER_VALUE
                if op.kind == "vector" or (not isinstance(elements, np.ndarray) and not elements):
                    continue
                passes = -(-(op.flops / (2 * elements)) // pnm.lanes)
                nbytes = elements * BYTES_PER_VALUE / stacks
                compute_s = passes * elements / stacks / lane.macs_per_cycle / pnm.clock_hz
                # What the operator asks of the stack while it streams: all of it when memory-bound, less
                # when the lanes are the bottleneck; the MMU's wait is looked up at that load.
                alone_s = nbytes / stack_bandwidth
                offered = alone_s / larger(compute_s, alone_s)
                start_s = fixed_s + self.mmu.access_latency_s("pnm", {"gpu": gpu_load, "pnm": offered})
                total += larger(compute_s, nbytes / byte_rate) + start_s
                hbm += nbytes
            return total, hbm

        layer, head = shard.layer_ops(work), shard.head_ops(work)
        layer_s, layer_bytes = seconds_of(layer)
        head_s, head_bytes = seconds_of(head)
        reduce_bytes = shard.all_reduce_bytes(work)
        exchange_s = 2 * pnm.all_reduce_s + ring_all_reduce_s(reduce_bytes, shard.tp, hw.link.bandwidth)
        layers = shard.model.layers
        seconds = layers * (layer_s + exchange_s) + head_s
        flops = layers * sum(op.flops for op in layer) + sum(op.flops for op in head)
        hbm_per_stack = layers * layer_bytes + head_bytes
        link = layers * (2 * (shard.tp - 1) / shard.tp) * reduce_bytes
        return Cost(seconds, flops * shard.tp, hbm_per_stack * stacks * shard.tp, link * shard.tp,
                    hbm_per_stack / (seconds * hw.gpu.stack.bandwidth))
