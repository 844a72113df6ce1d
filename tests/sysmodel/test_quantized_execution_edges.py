"""How `QuantizedGPUExecution` puts an iteration together (issue 19's mutation testing found it unchecked): the
quantized GEMMs of every linear layer at the bandwidth it is given, the other operators by the roofline, the LM
head as an FP16 GEMM, the tensor-parallel all-reduce; checked by hand with a planted GEMM model whose every GEMM
of k × n weights moves k·n bytes."""
from dataclasses import replace
from types import SimpleNamespace

import pytest

from sysmodel.errors import ConfigError
from sysmodel.hardware import PAPER_HARDWARE, Link
from sysmodel.llm import GPT3_175B, LLM, QWEN3_235B_A22B
from sysmodel.memory import MemoryTier
from sysmodel.operators import Shard, decode_work
from sysmodel.quantized import GemmCost
from sysmodel.quantized_execution import QuantizedGPUExecution, quantized_weight_bytes

# One layer of two heads of 4 (two KV heads), MLP 8 → 16 → 8 (2 matrices), a 4-token vocabulary (64 rows once
# padded as vLLM pads it, to a multiple of 64).
PAIR = LLM("pair", layers=1, hidden=8, heads=2, kv_heads=2, head_dim=4, ffn=16, vocab=4, gated_mlp=False)
WORK = decode_work(4, 10)          # 4 sequences holding 10 KV tokens in all
BANDWIDTH = 1e9


class PlantedGemm:
    """A quantized GEMM of k × n weights moves k·n bytes (k·n / bandwidth seconds); the FP16 LM head moves 3·k·n
    bytes (its tensor time is a third of that)."""
    quant = SimpleNamespace(check_divides=lambda k: None)

    def __init__(self) -> None:
        self.calls = []

    def cost(self, m, k, n, bandwidth):
        self.calls.append((m, k, n, bandwidth))
        return GemmCost(k * n / bandwidth, k * n, k * n / bandwidth, 0.0, 0.0, "memory")

    def fp16_gemm(self, m, k, n, bandwidth):
        self.calls.append(("fp16", m, k, n, bandwidth))
        return 3 * k * n / bandwidth, k * n / bandwidth, 3 * k * n


def executor(tp: int, link_bandwidth: float = 1e30) -> tuple[QuantizedGPUExecution, PlantedGemm]:
    """PAIR on `tp` GPUs of one 1 GB/s stack and endless FLOP/s (every operator memory-bound)."""
    gpu = replace(PAPER_HARDWARE.gpu, flops=1e30, stacks=1, stack=MemoryTier("stack", 1e12, BANDWIDTH, 0.0, 0.0))
    hardware = replace(PAPER_HARDWARE, gpu=gpu, gpus=tp, link=Link("link", link_bandwidth, 0.0))
    gemm = PlantedGemm()
    return QuantizedGPUExecution(hardware, Shard(PAIR, tp), gemm), gemm


def test_one_gpu_adds_its_gemms_the_other_operators_and_the_fp16_lm_head() -> None:
    # Quantized GEMMs (K, N): qkv (8, 24), o_proj (8, 8), MLP (8, 16) and (16, 8): 512 bytes. Other operators
    # (weights + KV + activations, 2 B each): two norms 2 × 2·4·8·2 = 256, attention 2·10·8·2 + 2·4·8·2 = 448.
    # Head: final norm 128, LM head (8, 64) as FP16: 3 × 512 = 1,536. In all 2,880 bytes, each at 1 GB/s.
    quantized, gemm = executor(1)
    cost = quantized.cost(WORK)
    assert cost.seconds == pytest.approx(2880 / BANDWIDTH, rel=1e-12, abs=0) and cost.hbm_bytes == 2880
    assert cost.offered == pytest.approx(1.0, rel=1e-12, abs=0) and cost.link_bytes == 0
    # FLOPs: qkv 1,536, attention 320, o_proj 512, MLP 2,048, norms 2 × 128 + 128, LM head 2·4·8·64 = 4,096.
    assert cost.flops == 1536 + 320 + 512 + 2048 + 384 + 4096
    assert gemm.calls == [(4, 8, 24, BANDWIDTH), (4, 8, 8, BANDWIDTH), (4, 8, 16, BANDWIDTH), (4, 16, 8, BANDWIDTH),
                          ("fp16", 4, 8, 64, BANDWIDTH)]
    # Half the bandwidth: every GEMM is asked at it, and everything takes twice as long.
    gemm.calls.clear()
    assert quantized.cost(WORK, 0.5).seconds == pytest.approx(2 * 2880 / BANDWIDTH, rel=1e-12, abs=0)
    assert {call[-1] for call in gemm.calls} == {BANDWIDTH / 2}


def test_two_gpus_split_the_gemms_and_pay_a_ring_all_reduce_per_layer() -> None:
    # Per GPU: GEMMs qkv (8, 12), o_proj (4, 8), MLP (8, 8) and (8, 8): 256 bytes; norms 256, attention
    # 2·10·4·2 + 2·4·4·2 = 224; final norm 128, LM head (8, 32): 768. 1,632 bytes per GPU. The layer's
    # all-reduces of 2 × 4 tokens × 8 × 2 B = 128 B over a ring of 2: 2 · ½ · 128 B at 1 GB/s per GPU, 128 B of
    # link each.
    quantized, gemm = executor(2, link_bandwidth=1e9)
    cost = quantized.cost(WORK)
    assert cost.seconds == pytest.approx(1632 / BANDWIDTH + 128 / 1e9, rel=1e-12, abs=0)
    assert cost.hbm_bytes == 2 * 1632 and cost.link_bytes == 2 * 128
    assert cost.offered == pytest.approx(1632 / 1760, rel=1e-12, abs=0)   # 1,632 B per GPU in 1,760 ns at 1 GB/s
    assert cost.flops == 2 * (768 + 160 + 256 + 1024 + 384 + 2048)
    assert [call[1:3] for call in gemm.calls[:4]] == [(8, 12), (4, 8), (8, 8), (8, 8)]


def test_a_vocabulary_tp_does_not_divide_is_padded_as_vllm_pads_it_on_both_paths() -> None:
    """GPT-3 175B's 50,257 tokens at TP 8: vLLM pads the vocabulary to a multiple of 64, 50,304 = 786 · 64, and
    gives each rank 50,304 / 8 = 6,288 rows of the embedding and of the LM head; its MLP of 49,152 splits into
    6,144 per GPU. The FP16 operators and the quantized path price the same LM head and the same embeddings."""
    shard = Shard(GPT3_175B, 8)
    assert (shard.vocab, shard.ffn) == (6288, 6144)
    gemm = PlantedGemm()
    QuantizedGPUExecution(PAPER_HARDWARE, shard, gemm).cost(decode_work(2, 100))
    assert gemm.calls[-1][1:4] == (2, 12288, 6288)                        # the LM head, (K, N) = (hidden, rows)
    assert [call[1:3] for call in gemm.calls[2:4]] == [(12288, 6144), (6144, 12288)]      # the MLP's up and down
    head = {op.name: op for op in shard.head_ops(decode_work(2, 100))}["lm_head"]
    assert head.weight_bytes == 12288 * 6288 * 2 and head.flops == 2 * 2 * 12288 * 6288
    # Embedding and LM head on one GPU: 2 · 6,288 · 12,288 FP16 values, on both paths.
    linear = quantized_weight_bytes(shard, PlantedBytes()) - 2 * 6288 * 12288 * 2
    assert linear == 96 * (12288 * 3 * 1536 + 1536 * 12288 + 12288 * 6144 + 6144 * 12288)
    fp16_linear = 96 * (12288 * (3 * 1536) + 1536 * 12288 + 2 * 12288 * 6144) * 2
    assert shard.weight_bytes == fp16_linear + 2 * 6288 * 12288 * 2


class PlantedBytes:
    """Quantized weights of one byte per value."""
    def weight_bytes(self, k, n):
        return k * n
