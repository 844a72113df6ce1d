"""Quantized MoE checkpoints: GPTQ/AWQ quantize attention and every expert's MLP, and keep the routers, embeddings
and LM head in FP16. The expected bytes below are counted by hand from Qwen3-30B-A3B's config.json (48 layers,
hidden 2,048, 32 query and 4 KV heads of 128, 128 experts of FFN 768, top 8)."""
import pytest

from basedie import verified
from sysmodel.arbitration import MMUArbitration
from sysmodel.base_die import StackDequant
from sysmodel.composition import SYSTEMS, Cell, outcome
from sysmodel.presets import PRESETS
from sysmodel.execution import PNMExecution, PNMFigures, VectorFigures
from sysmodel.hardware import PAPER_HARDWARE
from sysmodel.hbf.layout import objects
from sysmodel.llm import QWEN3_30B_A3B
from sysmodel.operators import Shard, decode_work
from sysmodel.quantized import GemmModel, Quantization, sz_fraction
from sysmodel.quantized_execution import QuantizedGPUExecution, quantized_weight_bytes

ATTENTION = 2048 * (4096 + 2 * 512) + 4096 * 2048       # QKV and output projection, per layer
EXPERT = 2048 * 2 * 768 + 768 * 2048                   # gate/up and down of one expert
ROUTER_BYTES = 2048 * 128 * 2                           # FP16
A100 = PRESETS["a100-sxm4-80gb"]


@pytest.fixture(scope="module")
def table():
    return verified.load()


def stored_per_fp16_byte(table, bits: int) -> float:
    return bits / 16 / (1 - sz_fraction(table, bits, 128))


def gemm(table, weights: str = "w4a16", dequant: str = "gpu-fused") -> GemmModel:
    quant = Quantization(weights, 128, dequant, None if dequant == "dqb" else "gptq")
    return GemmModel.build(A100.gpu, quant, table)


@pytest.mark.parametrize("weights, bits", [("w4a16", 4), ("w8a16", 8)])
def test_attention_and_every_expert_are_stored_quantized_and_the_routers_in_fp16(table, weights, bits):
    shard = Shard(QWEN3_30B_A3B, 2)                     # 64 experts per GPU
    quantized = 48 * ((ATTENTION / 2 + 64 * EXPERT) * 2 * stored_per_fp16_byte(table, bits) + ROUTER_BYTES)
    assert quantized_weight_bytes(shard, gemm(table, weights)) == pytest.approx(
        quantized + shard.embedding_bytes, rel=1e-12)


@pytest.mark.parametrize("sequences, touched", [(1, 8), (4096, 128)])
def test_a_decode_batch_reads_the_experts_it_touches_at_the_stored_bytes(table, sequences, touched):
    # On TP = EP = 1 one token touches its top 8 experts; 4,096 tokens touch all 128 (the expected count under
    # uniform routing, 128 · (1 − (120/128)^4096), is 128 to double precision). The quantized iteration reads those
    # experts' and the attention's weights at the stored bytes per FP16 byte; everything else (KV, activations,
    # router, LM head) is read alike at INT4 and INT8.
    shard, work = Shard(QWEN3_30B_A3B, 1), decode_work(sequences, 1000 * sequences)
    w8 = QuantizedGPUExecution(A100, shard, gemm(table, "w8a16")).cost(work)
    w4 = QuantizedGPUExecution(A100, shard, gemm(table)).cost(work)
    weights = 48 * (ATTENTION + touched * EXPERT) * 2
    expected = weights * (stored_per_fp16_byte(table, 8) - stored_per_fp16_byte(table, 4))
    assert w8.hbm_bytes - w4.hbm_bytes == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("bits", [4, 8])
def test_hbf_pages_of_an_moe_model_hold_one_quantized_expert(table, bits):
    shard = Shard(QWEN3_30B_A3B, 2)
    layers, per_layer, size = objects(shard, quantized_weight_bytes(shard, gemm(table, f"w{bits}a16")))
    assert (layers, per_layer) == (48, 64)
    assert size == pytest.approx(EXPERT * 2 * stored_per_fp16_byte(table, bits), rel=1e-12)


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("weights, dequant, kernel", [("w4a16", "dqb", None), ("w4a16", "gpu-fused", "gptq"),
                                                      ("w8a16", "gpu-split", "gptq")])
@pytest.mark.parametrize("memory", ["hbm", "C"])
def test_every_system_runs_a_quantized_moe_model_or_refuses_it_physically(table, system, weights, dequant, kernel,
                                                                          memory):
    kind, detail = outcome(Cell(system, weights, dequant, kernel, memory, "kv-hbm", model=QWEN3_30B_A3B.name), table)
    assert kind in ("runs", "refused"), detail


def test_the_pnms_read_the_touched_experts_through_the_dqbs_at_the_stored_bytes(table):
    # DuoPD on its paper hardware (8 GPUs, EP 8: 16 experts each) decoding one token: each GPU's PNMs read the
    # attention and the 8 experts the token routes to, one per GPU on average (8 · 8 / 128 · 16 touched of 16),
    # at the stored bytes per FP16 byte; the router, KV and LM head as they are.
    hw = PAPER_HARDWARE
    shard, work = Shard(QWEN3_30B_A3B, hw.gpus), decode_work(1, 1000)

    def pnm(dequant=None):
        return PNMExecution(hw, shard, PNMFigures.from_verified(table, hw.pnm),
                            MMUArbitration.from_verified(table, "prefill-first", hw),
                            vector=VectorFigures.from_verified(table, hw.pnm), dequant=dequant).cost(work)
    dequant = StackDequant.from_verified(table, Quantization("w4a16", 128, "dqb"), hw.gpu, dqb_power_w=0.2)
    attention = 2048 * (4096 // 8 + 2 * 128) + 4096 // 8 * 2048      # 4 query heads per GPU, 1 KV head (replicated)
    weights = hw.gpus * 48 * (attention + 8 / 8 * EXPERT) * 2
    saved = pnm().hbm_bytes - pnm(dequant).hbm_bytes
    assert saved == pytest.approx(weights * (1 - stored_per_fp16_byte(table, 4)), rel=1e-9)
