"""Every cell of the composition matrix (`sysmodel.composition`) runs with finite results or is refused for a
physical reason (it does not fit, the package has no HBF stack, no kernel of that kind exists)."""
import math

import pytest

from basedie import verified
from sysmodel import composition
from sysmodel.composition import Cell, cells, outcome
from sysmodel.config import SimulationConfig
from sysmodel.errors import ConfigError
from sysmodel.hbf.layout import Layout
from sysmodel.workload import FixedBatch
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


def test_the_matrix_is_every_system_format_memory_and_placement_once() -> None:
    # 6 systems x (FP16 + 3 formats x 3 places to dequantize) x 4 memories x 4 placements.
    every = cells()
    assert len(every) == len({cell.id for cell in every}) == 6 * 10 * 4 * 4
    assert every[0].id == "duopd/fp16/-/hbm/kv-hbm" and every[-1].id == "colocated:2x4/fp8/gpu-split/C/prefix-hbf"
    assert {(c.weights, c.dequant, c.kernel) for c in every if c.weights == "w8a16"} == {
        ("w8a16", "dqb", None), ("w8a16", "gpu-fused", "gptq"), ("w8a16", "gpu-split", "gptq")}
    assert Cell("gpu", "fp16", None, None, "hbm", "kv-hbm", model="Other").id == "Other/gpu/fp16/-/hbm/kv-hbm"


def test_a_cells_configuration_places_the_kv_and_prefix_it_names() -> None:
    plain = Cell("gpu", "w4a16", "gpu-fused", "gptq", "B", "kv-hbm").config()
    assert plain == SimulationConfig(system="gpu", model="Llama-3.1-8B", hardware="a100-sxm4-80gb",
                                     workload=FixedBatch(2, 512, 4), max_batch=2, memory="B",
                                     quantization=Quantization("w4a16", 128, "gpu-fused", "gptq"),
                                     shared_prefix_tokens=0)
    kv = Cell("chunked", "fp16", None, None, "B", "kv-hbf").config()
    assert (kv.memory, kv.quantization, kv.shared_prefix_tokens) == (
        Layout("B+kv-hbf", hbm_stacks=3, hbf_stacks=1, weights="hbf", kv="hbf", frame_cache_gib=8.0), Quantization(), 0)
    with pytest.raises(ConfigError) as refused:    # today's package (one HBM stack) has no HBF to hold it
        Cell("chunked", "fp16", None, None, "hbm", "kv-hbf").config()
    assert str(refused.value) == "layout hbm+kv-hbf: kv placed in HBF but the package has no HBF stack"
    prefix = Cell("chunked", "fp16", None, None, "C", "prefix-hbf").config()
    assert (prefix.memory, prefix.shared_prefix_tokens) == (
        Layout("C+prefix-hbf", hbm_stacks=1, hbf_stacks=3, weights="hbf", prefix="hbf", frame_cache_gib=8.0), 256)
    assert Cell("chunked", "fp16", None, None, "A", "prefix-hbm").config().memory == "A"


class _Run:
    def __init__(self, tpot: float, energy: float) -> None:
        self.summary = {"tpot_s": {"p50": tpot}, "energy_j": {"total": energy}}


@pytest.mark.parametrize("raised, expected", [
    (ConfigError("model weights (160 GB) does not fit in 80 GB"), "refused"),
    (ConfigError("memory layout A has no HBF stack for the KV cache"), "refused"),
    (ConfigError("layout C leaves no HBF for the prefix"), "refused"),
    (ConfigError("GPTQ has no kernel for fp8"), "refused"),
    (ConfigError("does not fit\nsecond line"), "gap"),           # not one line: a gap whatever it says
    (ConfigError("chunk tokens must be >= 1"), "gap"),
    (_Run(0.0123456, 5.0), ("runs", "12.346")),
    (_Run(math.nan, 5.0), ("gap", "not a finite result: TPOT nan s, energy 5.0 J")),
    (_Run(0.0, 5.0), "gap"), (_Run(math.inf, 5.0), "gap"), (_Run(0.01, math.inf), "gap")])
def test_a_cell_runs_is_refused_for_a_physical_reason_or_is_a_gap(monkeypatch, raised, expected) -> None:
    cell = Cell("gpu", "fp16", None, None, "hbm", "kv-hbm")
    seen = []

    def simulate(config, table):
        seen.append((config, table))
        if isinstance(raised, Exception):
            raise raised
        return raised
    monkeypatch.setattr(composition, "simulate", simulate)
    kind, detail = outcome(cell, "the table")
    assert seen == [(cell.config(), "the table")]
    assert (kind, detail) == expected if isinstance(expected, tuple) else kind == expected
    if isinstance(raised, Exception):
        assert detail == str(raised)


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
