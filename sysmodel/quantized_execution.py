"""Iterations on GPUs whose linear layers hold quantized weights (StreamDQ, paper 002): the weight GEMMs are
priced by `sysmodel.quantized` (the chosen dequantization path), everything else as `GPUExecution` prices it.

vLLM's GPTQ/AWQ models quantize the decoder blocks' linear layers (QKV, output projection, MLP or each expert's
MLP) and keep the embeddings, the LM head and an MoE model's routers in FP16; so does this model. An SM partition
(`sm_fraction` < 1) runs its kernels on its share of the SMs (whole SMs, rounded): that share of the tensor
and CUDA-core throughput, and the bandwidth the GPU's SM-bandwidth curve gives that many SMs.
"""
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from .errors import require
from .execution import Cost
from .hardware import Hardware
from .operators import BYTES_PER_VALUE, Shard, Work, ring_all_reduce_s
from .quantized import GemmModel, larger

MATRIX_OPS = ("qkv", "o_proj", "mlp", "experts")


def linear_shapes(shard: Shard) -> dict[str, list[tuple[int, int]]]:
    """(K, N) of every quantized GEMM of one layer on one GPU: QKV and the MLP's gate/up are one GEMM each (as
    vLLM merges them), the output and down projections split K under tensor parallelism. An MoE model's
    `experts` are the GEMMs of one whole expert (experts are split over the GPUs, not within one: EP = TP)."""
    m = shard.model
    q, kv = shard.heads * m.head_dim, shard.kv_heads * m.head_dim
    ffn = m.ffn if m.moe else shard.ffn
    mlp = [(m.hidden, (m.mlp_matrices - 1) * ffn), (ffn, m.hidden)]
    return {"qkv": [(m.hidden, q + 2 * kv)], "o_proj": [(q, m.hidden)], "experts" if m.moe else "mlp": mlp}


def quantized_weight_bytes(shard: Shard, gemm: GemmModel) -> float:
    """One GPU's weights: quantized linear layers (with S/Z; an MoE model's local experts each) plus the FP16
    embeddings, LM head and routers."""
    m = shard.model
    copies = {"experts": m.experts // shard.tp}
    linear = sum(copies.get(name, 1) * gemm.weight_bytes(k, n)
                 for name, shapes in linear_shapes(shard).items() for k, n in shapes)
    return m.layers * (linear + shard.router_bytes) + shard.embedding_bytes


@dataclass(frozen=True)
class QuantizedGPUExecution:
    """`shard.tp` GPUs running one iteration in tensor parallel with quantized linear layers (plus the host's
    `overhead_s` per iteration, as `GPUExecution`)."""
    hardware: Hardware
    shard: Shard
    gemm: GemmModel
    overhead_s: float = 0.0
    sm_fraction: float = 1.0

    @classmethod
    def partition(cls, hardware: Hardware, shard: Shard, gemm: GemmModel, sm_fraction: float,
                  overhead_s: float = 0.0) -> "QuantizedGPUExecution":
        """On `sm_fraction` of each GPU's SMs: the GEMM model of a GPU with that many SMs and that compute."""
        require(0 < sm_fraction <= 1, f"SM fraction must be in (0, 1], got {sm_fraction}")
        gpu = gemm.gpu
        sms = max(1, round(gpu.sms * sm_fraction))
        share = sms / gpu.sms
        return cls(hardware, shard, replace(gemm, gpu=replace(gpu, sms=sms, flops=gpu.flops * share)),
                   overhead_s=overhead_s, sm_fraction=share)

    def __post_init__(self) -> None:
        for shapes in linear_shapes(self.shard).values():
            for k, _ in shapes:
                self.gemm.quant.check_divides(k)

    @cached_property
    def shapes(self) -> dict[str, list[tuple[int, int]]]:
        return linear_shapes(self.shard)

    def _experts(self, op, tokens):
        """The experts an iteration touches on one GPU (the FP16 operator's expectation under uniform routing) and
        the token rows each multiplies: one quantized GEMM pair per touched expert, its rows the GPU's token-expert
        pairs shared among them."""
        m = self.shard.model
        touched = op.weight_bytes / (m.expert_params * BYTES_PER_VALUE)
        pairs = tokens * m.experts_per_token / self.shard.tp
        if isinstance(touched, np.ndarray):
            return touched, np.divide(pairs, touched, out=np.zeros_like(touched), where=touched > 0)
        return touched, (pairs / touched if touched else 0.0)

    def cost(self, work: Work, bandwidth_scale: float = 1.0, loads: Mapping[str, float] | None = None,
             share=None) -> Cost:
        """With co-runners on the memory, every kernel streams at the iteration's share (`bandwidth_scale`):
        `share`, the per-operator coupling of `GPUExecution`, is not applied to the quantized kernels."""
        gpu, shard = self.hardware.gpu, self.shard
        flop_rate = gpu.flops * self.sm_fraction
        bandwidth = gpu.memory.bandwidth * gpu.sm_bandwidth(self.sm_fraction) * bandwidth_scale
        tokens = work.tokens
        layer_s = layer_bytes = 0.0
        layer_ops, head_ops = shard.layer_ops(work), shard.head_ops(work)
        for op in layer_ops:
            if op.name in MATRIX_OPS:    # the GEMM's output rows include the K and V the QKV op writes
                copies, rows = self._experts(op, tokens) if op.name == "experts" else (1, tokens)
                for k, n in self.shapes[op.name]:
                    cost = self.gemm.cost(rows, k, n, bandwidth)
                    layer_s = layer_s + copies * cost.seconds
                    layer_bytes = layer_bytes + copies * cost.hbm_bytes
            else:
                layer_s = layer_s + larger(op.flops / flop_rate, op.bytes / bandwidth)
                layer_bytes = layer_bytes + op.bytes
        head_s = head_bytes = 0.0
        for op in head_ops:
            if op.name == "lm_head":
                memory, tensor, nbytes = self.gemm.fp16_gemm(work.logits, shard.model.hidden, shard.vocab,
                                                             bandwidth)
                head_s, head_bytes = head_s + larger(memory, tensor), head_bytes + nbytes
            else:
                head_s, head_bytes = head_s + larger(op.flops / flop_rate, op.bytes / bandwidth), head_bytes + op.bytes
        reduce_bytes = shard.all_reduce_bytes(work)
        reduce_s = ring_all_reduce_s(reduce_bytes, shard.tp, self.hardware.link.bandwidth)
        layers = shard.model.layers
        seconds = layers * (layer_s + reduce_s) + head_s + self.overhead_s
        flops = layers * sum(op.flops for op in layer_ops) + sum(op.flops for op in head_ops)
        hbm = layers * layer_bytes + head_bytes
        link = layers * (2 * (shard.tp - 1) / shard.tp) * reduce_bytes
        return Cost(seconds, flops * shard.tp, hbm * shard.tp, link * shard.tp, hbm / (seconds * gpu.memory.bandwidth))

