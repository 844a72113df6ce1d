"""Every cell of the composition matrix (`sysmodel.composition`) runs with finite results or is refused for a
physical reason (it does not fit, the package has no HBF stack, no kernel of that kind exists)."""
import pytest

from basedie import verified
from sysmodel.composition import Cell, cells, outcome
from sysmodel.arbitration import MMUArbitration
from sysmodel.base_die import StackDequant
from sysmodel.execution import PNMExecution, PNMFigures, VectorFigures
from sysmodel.hardware import PAPER_HARDWARE
from sysmodel.llm import LLAMA2_70B
from sysmodel.operators import Shard, decode_work, prefill_work, ring_all_reduce_s
from sysmodel.presets import PRESETS
from sysmodel.quantized import GemmModel
from sysmodel.quantized_execution import QuantizedGPUExecution
from sysmodel.quantized import DQBFigures, Quantization, sz_fraction
from sysmodel.simulate import simulate


@pytest.fixture(scope="module")
def table():
    return verified.load()


@pytest.mark.parametrize("cell", cells(), ids=lambda cell: cell.id)
def test_cell_runs_or_is_physically_refused(cell, table):
    kind, detail = outcome(cell, table)
    assert kind in ("runs", "refused"), detail
    if kind == "runs":
        assert float(detail) > 0


@pytest.mark.parametrize("weights, bits", [("w4a16", 4), ("w8a16", 8)])
def test_hbf_pages_hold_the_stored_quantized_bytes(table, weights, bits):
    # Layout C puts the layer weights in HBF: each layer's object, the flash bytes read and the frame cache's
    # capacity in objects all scale by the stored bytes per FP16 byte, bits / 16 with the S/Z share on top.
    def hbf(weights, dequant):
        return simulate(Cell("chunked", weights, dequant, None, "C", "kv-hbm").config(), table).summary["hbf"]
    fp16, quantized = hbf("fp16", None), hbf(weights, "dqb")
    ratio = bits / 16 / (1 - sz_fraction(table, bits, 128))
    assert quantized["object_bytes"] / fp16["object_bytes"] == pytest.approx(ratio, rel=1e-9)
    assert quantized["hbf_media_read_bytes"] / fp16["hbf_media_read_bytes"] == pytest.approx(ratio, rel=0.01)
    # Whole objects: the FP16 cache holds n of them and less than n + 1, so the quantized one n / ratio to
    # (n + 1) / ratio.
    n = fp16["frame_cache_objects"]
    assert n / ratio - 1 < quantized["frame_cache_objects"] < (n + 1) / ratio


def _pnm(table, dequant=None, hw=PAPER_HARDWARE):
    return PNMExecution(hw, Shard(LLAMA2_70B, hw.gpus), PNMFigures.from_verified(table, hw.pnm),
                        MMUArbitration.from_verified(table, "prefill-first", hw),
                        vector=VectorFigures.from_verified(table, hw.pnm), dequant=dequant)


@pytest.mark.parametrize("weights, bits, mode", [("w4a16", 4, "int4_fp16"), ("w8a16", 8, "int8_fp16")])
def test_the_pnm_reads_quantized_weights_through_the_dqbs(table, weights, bits, mode):
    # One decode iteration of LLaMA2-70B on the PNMs: the linear layers' bytes read shrink to bits / 16 with
    # the S/Z on top, the KV cache and the FP16 LM head are read as they are; the weight stream runs at the
    # slower of the stack and the stack's DQBs (64 per HBM4 stack at 328 MHz, the verified beats per cycle).
    quant = Quantization(weights, 128, "dqb")
    dequant = StackDequant.from_verified(table, quant, PAPER_HARDWARE.gpu, dqb_power_w=0.2)
    shard, work = Shard(LLAMA2_70B, 8), decode_work(16, 2048)
    fp16, quantized = _pnm(table).cost(work), _pnm(table, dequant).cost(work)
    linear = sum(op.weight_bytes for op in shard.layer_ops(work) if op.name in ("qkv", "o_proj", "mlp"))
    stored = bits / 16 / (1 - sz_fraction(table, bits, 128))
    saved = PAPER_HARDWARE.gpus * LLAMA2_70B.layers * linear * (1 - stored)     # every GPU's
    assert fp16.hbm_bytes - quantized.hbm_bytes == pytest.approx(saved, rel=1e-9)
    dqb = DQBFigures.from_verified(table, mode)
    fp16_per_s = 64 * dqb.beat_bytes * dqb.clock_hz * min(dqb.output_beats_per_cycle,
                                                          dqb.memory_beats_per_cycle * 16 / bits)
    # The weights' FP16 bytes of one stack cannot come faster than its DQBs deliver them.
    per_stack = LLAMA2_70B.layers * linear / PAPER_HARDWARE.gpu.stacks
    assert quantized.seconds > per_stack / fp16_per_s


@pytest.mark.parametrize("dequant, kernel", [("gpu-fused", "gptq"), ("gpu-split", "gptq"), ("dqb", None)])
def test_an_sm_partition_runs_quantized_kernels_on_its_share_of_the_sms(table, dequant, kernel):
    # Half of an A100's 108 SMs: a compute-bound prefill (8K tokens) takes nearly twice as long as on all of
    # them (tensor and CUDA-core throughput halve; the A100's flat SM-bandwidth curve keeps the bandwidth); a
    # memory-bound decode iteration no shorter.
    a100 = PRESETS["a100-sxm4-80gb"]
    gemm = GemmModel.build(a100.gpu, Quantization("w4a16", 128, dequant, kernel), table)
    shard = Shard(LLAMA2_70B, 8)
    whole = QuantizedGPUExecution(a100, shard, gemm)
    half = QuantizedGPUExecution.partition(a100, shard, gemm, 0.5)
    work = prefill_work(8192)
    prefill = whole.cost(work)
    assert prefill.offered < 0.5           # compute-bound
    reduce_s = LLAMA2_70B.layers * ring_all_reduce_s(shard.all_reduce_bytes(work), shard.tp, a100.link.bandwidth)
    # Everything but the all-reduces slows down, at most twofold (the memory-bound norms and LM head do not).
    ratio = (half.cost(work).seconds - reduce_s) / (prefill.seconds - reduce_s)
    assert 1.9 < ratio <= 2 + 1e-12
    assert half.cost(decode_work(16, 2048)).seconds >= whole.cost(decode_work(16, 2048)).seconds


@pytest.mark.parametrize("weights, dequant, placement", [("fp16", None, "kv-hbm"), ("w4a16", "dqb", "kv-hbm"),
                                                       ("fp16", None, "kv-hbf")])
def test_one_colocated_instance_with_weights_in_hbf_is_the_chunked_system(table, weights, dequant, placement):
    # colocated:1x8 with Sarathi's scheduler is chunked prefill on all eight GPUs: through layout C's HBF tier
    # too (with the KV cache there as well, read per the instance's own sequences), the two wirings give the same
    # token times and the same flash traffic.
    def run(system):
        return simulate(Cell(system, weights, dequant, None, "C", placement).config(), table)
    chunked, colocated = run("chunked"), run("colocated:1x8")
    assert [r.token_times for r in colocated.requests] == [r.token_times for r in chunked.requests]
    assert colocated.summary["hbf"]["hbf_media_read_bytes"] == chunked.summary["hbf"]["hbf_media_read_bytes"] > 0
