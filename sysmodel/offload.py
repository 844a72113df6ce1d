"""PD disaggregation whose decode instance offloads operators to near-memory compute: the PIM and Duplex baselines
of DuoPD §6.4 (Fig. 13). The prefill instance, the KV transfer and the decode instance's other operators are
`pd-1:1`'s; only the offloaded operators move (docs/design/pim-baselines.md).

- `pd-1:1-pim`: decode attention on bank-level PIM in every stack ([Heo et al., 2024; Park et al., 2024];
  `hardware.BankPIM`), whose stacks hold half their capacity.
- `pd-1:1-duplex`, `pd-1:1-duplex-4x-compute`: decode attention and MoE experts on a logic-die PNM reading at 4×
  the stack's bandwidth ([Yun et al., 2024]; `hardware.DUPLEX_BANDWIDTH`), priced by `PNMExecution` from the
  verified lane and array figures: the verified 16-lane array, or for 4× compute the verified 64-lane one.

In a decode layer the offloaded operators need the GPU's results (the QKV projection) and the GPU needs theirs, so
the two run one after the other: an iteration is the GPUs' time for their operators plus the near-memory time
for the offloaded ones. The near-memory compute reads through its own path (bank rows, extra TSVs), never the
GPU's; the decode instance runs alone on its stacks, so nothing shares that path.
"""
from dataclasses import dataclass, replace

import numpy as np

from .arbitration import MMUArbitration
from .errors import require
from .execution import Cost, GPUExecution, PNMExecution, PNMFigures, VectorFigures
from .hardware import DUPLEX_BANDWIDTH, DUPLEX_BANDWIDTH_COMPUTE, Hardware, PNMScale
from .operators import Shard, Work
from .systems import SYSTEMS, Disaggregated, ServingSystem, Setting, kv_pool

ATTENTION = ("attention",)
ATTENTION_AND_EXPERTS = ("attention", "experts")


@dataclass(frozen=True)
class Part(Shard):
    """The operators of a shard that run on near-memory compute (`near`: those in `ops`) or stay on the GPUs (the
    rest, with the head and the tensor-parallel all-reduces)."""
    ops: tuple[str, ...] = ()
    near: bool = False

    def layer_ops(self, work: Work):
        return [op for op in super().layer_ops(work) if (op.name in self.ops) == self.near]

    def head_ops(self, work: Work):
        return [] if self.near else super().head_ops(work)

    def all_reduce_bytes(self, work: Work) -> float:
        return 0.0 if self.near else super().all_reduce_bytes(work)


@dataclass(frozen=True)
class PIMExecution:
    """The offloaded operators on every stack's bank-level PIM: per operator and stack, the longer of its bytes at
    the internal bandwidth and its FLOPs at `flops_per_byte` × that bandwidth, plus the stack's access latency (every
    operator has one, so an iteration always takes time)."""
    hardware: Hardware
    shard: Part

    def cost(self, work: Work) -> Cost:
        hw, pim = self.hardware, self.hardware.pim
        stacks = hw.gpu.stacks
        byte_rate = hw.gpu.stack.bandwidth * pim.bandwidth_multiple
        flop_rate = byte_rate * pim.flops_per_byte
        seconds = flops = nbytes = 0.0
        for op in self.shard.layer_ops(work):
            op_bytes = op.weight_bytes + op.kv_bytes
            seconds = seconds + hw.gpu.stack.latency_s + np.maximum(op_bytes / stacks / byte_rate,
                                                                  op.flops / stacks / flop_rate)
            flops, nbytes = flops + op.flops, nbytes + op_bytes
        layers, tp = self.shard.model.layers, self.shard.tp
        seconds *= layers
        offered = nbytes * layers / stacks / (seconds * byte_rate)      # of the PIM's own internal bandwidth
        return Cost(seconds, layers * flops * tp, layers * nbytes * tp, 0.0, offered)


@dataclass(frozen=True)
class OffloadExecution:
    """A decode instance's GPUs (`gpu`, on the operators they keep) and its near-memory compute (`near`, on the
    offloaded ones), one after the other in every iteration."""
    gpu: GPUExecution
    near: PIMExecution | PNMExecution

    def cost(self, work: Work, bandwidth_scale: float = 1.0, loads=None, share=None) -> Cost:
        on_gpu, near = self.gpu.cost(work, bandwidth_scale, loads, share), self.near.cost(work)
        seconds = on_gpu.seconds + near.seconds
        return Cost(seconds, on_gpu.flops + near.flops, on_gpu.hbm_bytes + near.hbm_bytes,
                    on_gpu.link_bytes + near.link_bytes, on_gpu.offered * on_gpu.seconds / seconds)


@dataclass(frozen=True)
class Offloaded(Disaggregated):
    """PD disaggregation whose decode instances run `ops` on bank-level PIM (`near="pim"`) or on a logic-die PNM
    scaled by `pnm` (`near="pnm"`)."""
    ops: tuple[str, ...] = ATTENTION
    near: str = "pim"
    pnm: PNMScale = PNMScale()

    def pnm_hardware(self, hardware: Hardware) -> Hardware | None:
        return self.pnm.apply(hardware) if self.near == "pnm" else None

    def decoder(self, setting: Setting, built: ServingSystem, shard: Shard, name: str):
        c = setting.config
        require(setting.layout is None and not c.quantization.quantized,
                f"{built.name} is modelled with FP16 weights in HBM only (no --memory layout, no --weights)")
        hw, model, tp = setting.hardware, shard.model, shard.tp
        gpus_w = tp * setting.gpu_power_w
        gpu = GPUExecution(hw, Part(model, tp, self.ops), 1.0, setting.perf, c.iteration_overhead_s)
        near_shard = Part(model, tp, self.ops, near=True)
        if self.near == "pim":
            # The PIM's units take DRAM area: the stacks hold `capacity_fraction` of their bytes, weights and KV alike.
            stack = replace(hw.gpu.stack, capacity_bytes=hw.gpu.stack.capacity_bytes * hw.pim.capacity_fraction)
            smaller = replace(setting, hardware=replace(hw, gpu=replace(hw.gpu, stack=stack)))
            # No PIM power is published (AttAcc gives energies per byte only): the instance draws its GPUs' power.
            return OffloadExecution(gpu, PIMExecution(hw, near_shard)), kv_pool(smaller, shard, name), gpus_w
        pnm_hw = self.pnm_hardware(hw)
        mmu = MMUArbitration.from_verified(setting.table, "prefill-first", pnm_hw)
        near = PNMExecution(pnm_hw, near_shard, PNMFigures.from_verified(setting.table, pnm_hw.pnm), mmu, setting.perf,
                            VectorFigures.from_verified(setting.table, pnm_hw.pnm), whole_decode=False)
        # While it decodes, the instance draws its GPUs' power and its stacks' PNMs' (with Duplex's TSV I/O).
        stacks = tp * hw.gpu.stacks
        return OffloadExecution(gpu, near), kv_pool(setting, shard, name), gpus_w + stacks * setting.pnm_power.watts


SYSTEMS.register("pd-1:1-pim", Offloaded(1, 4, 1, 4, ATTENTION, "pim"),
                 "pd-1:1 with decode attention on bank-level PIM at half the memory capacity (§6.4)")
SYSTEMS.register("pd-1:1-duplex", Offloaded(1, 4, 1, 4, ATTENTION_AND_EXPERTS, "pnm", DUPLEX_BANDWIDTH),
                 "pd-1:1 with decode attention and MoE experts on Duplex's 4x-bandwidth logic-die PNM (§6.4)")
SYSTEMS.register("pd-1:1-duplex-4x-compute", Offloaded(1, 4, 1, 4, ATTENTION_AND_EXPERTS, "pnm",
                                                       DUPLEX_BANDWIDTH_COMPUTE),
                 "pd-1:1-duplex with 4x the PNM's lanes (§6.4)")
