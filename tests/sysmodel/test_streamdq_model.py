"""StreamDQ in the system model: GPU-side dequantization kernels against hand-computed costs (memory-, tensor-
and CUDA-core-bound), S/Z bytes, the DQB path's coupling to the verified table, the model presets, the `gpu`
system and bad input on the command line (one line, exit 2, nothing written)."""
import copy
import json

import pytest

from basedie.cli import main
from basedie import verified
from sysmodel.hardware import A100_PCIE_40GB
from sysmodel.presets import PRESETS
from sysmodel.llm import resolve_model
from sysmodel.operators import Shard, decode_work
from sysmodel.errors import ConfigError
from sysmodel.quantized import DQB_DESIGN_CLOCK_HZ, DQBFigures, GemmModel, Quantization, sz_fraction
from sysmodel.quantized_execution import QuantizedGPUExecution

K = N = 4096
A100 = A100_PCIE_40GB
SM_CLOCKS = 108 * 1.41e9          # SM-clocks per second on the A100 (108 SMs at 1.41 GHz)
BANDWIDTH = 1555e9
SZ = 0.04                          # an S/Z fraction for the hand computations (the verified one is tested apart)
# What the 32-bit DQB bench measured for the memory side (the paper-size entry gets it when re-verified).
MEMORY_RATES = {"bypass": 1.0, "reserved": 1.0, "int4_bf16": 0.25, "int4_fp16": 0.25, "int8_bf16": 0.5,
                "int8_fp16": 0.5, "fp8_e4m3_bf16": 0.5, "fp8_e4m3_fp16": 0.5}


def table(**figures) -> verified.VerifiedBlocks:
    """The committed table with the paper-size DQB entry's figures replaced by `figures` (and the memory-side
    rates supplied if the table predates them)."""
    entries = copy.deepcopy(verified.load().entries)
    for entry in entries:
        if entry.block == "dqb" and entry.params["interface_bits"] == 512:
            entry.figures.setdefault("memory_beats_per_cycle_by_mode", MEMORY_RATES)
            entry.figures.update(figures)
    return verified.VerifiedBlocks(entries)


DQB_W = 0.2   # one DQB's power in these tests (the model takes it as given: sysmodel.power)


def model(weights="w4a16", dequant="gpu-fused", kernel="awq-v1", activations="fp16", sz=SZ, **dqb) -> GemmModel:
    quant = Quantization(weights, 128, dequant, kernel, activations)
    figures = DQBFigures(**{"latency_cycles": 11, "output_beats_per_cycle": 1.0, "memory_beats_per_cycle": 0.25,
                            "bypass_beats_per_cycle": 1.0, "beat_bytes": 64, **dqb}) if dequant == "dqb" else None
    return GemmModel(A100, quant, sz, figures, DQB_W if dequant == "dqb" else None)


def test_fused_kernel_at_batch_1_is_memory_bound() -> None:
    # AWQ-v1, M = 1: 4096² INT4 weights (8 MiB) plus S/Z, one activation row in and one out.
    cost = model().cost(1, K, N)
    memory = (K * N / 2 / (1 - SZ) + 2 * (K + N)) / BANDWIDTH
    assert cost.seconds == pytest.approx(memory, rel=1e-12) and cost.bound == "memory"


def test_fused_awq_v1_at_batch_256_is_tensor_plus_cuda_core_bound() -> None:
    # Tensor cores: 2 × 256 × 4096² FLOPs at 312 TFLOPS. CUDA cores: 16-row tiles re-dequantize every weight
    # 256 / 16 = 16 times, 17 issue slots per 8 weights at 128 per SM-clock.
    tensor = 2 * 256 * K * N / 312e12
    cuda = 16 * K * N * (17 / 8) / 128 / SM_CLOCKS
    cost = model().cost(256, K, N)
    assert cost.tensor_s == pytest.approx(tensor) and cost.cuda_s == pytest.approx(cuda)
    assert cost.seconds == pytest.approx(tensor + cuda)


def test_fused_gptq_at_batch_32_is_cuda_core_bound() -> None:
    # No tensor cores: 8-row blocks dequantize 4 times (9 instructions per 8 weights) and the dot products take
    # 32 × 4096² / 2 HFMA2, all through the 128 issue slots per SM-clock.
    issue = (4 * K * N * 9 / 8 + 32 * K * N / 2) / 128
    cost = model(kernel="gptq").cost(32, K, N)
    assert cost.tensor_s == 0 and cost.seconds == pytest.approx(issue / SM_CLOCKS)
    assert cost.seconds > 2 * cost.memory_s and cost.bound == "cuda"


def test_gptq_int8_dequantization_is_bound_by_the_conversion_pipe() -> None:
    # One I2F per weight at 16 per SM-clock outruns 4.5 issue slots at 128 (M = 1: 1 HFMA2 per 2 weights).
    cuda = model(weights="w8a16", kernel="gptq").cost(1, K, N).cuda_s
    assert cuda == pytest.approx(K * N / 16 / SM_CLOCKS)


def test_split_kernel_writes_and_rereads_an_fp16_copy() -> None:
    # TorchAO INT8 → BF16, M = 1: the dequantization kernel reads 1 byte + S/Z and writes 2 bytes per weight;
    # the FP16 GEMM reads the 2 bytes again plus one activation row in and out.
    cost = model(weights="w8a16", dequant="gpu-split", kernel="torchao", activations="bf16").cost(1, K, N)
    dequant = (K * N / (1 - SZ) + 2 * K * N) / BANDWIDTH
    gemm = (2 * K * N + 2 * (K + N)) / BANDWIDTH
    assert cost.seconds == pytest.approx(dequant + gemm)
    assert cost.hbm_bytes == pytest.approx(K * N / (1 - SZ) + 4 * K * N + 2 * (K + N))


def test_family_switch_follows_the_kernels_dispatch() -> None:
    gptq = model(dequant="gpu", kernel="gptq")
    assert gptq.cost(32, K, N).bound != "split" and gptq.cost(64, K, N).bound == "split"
    awq = model(dequant="gpu", kernel="awq-v1")
    assert awq.cost(255, K, N).bound != "split" and awq.cost(256, K, N).bound == "split"


def test_sz_bytes_are_the_verified_fraction_and_match_the_checkpoint_layout() -> None:
    # GPTQ/AWQ store one FP16 scale and one zero point of the weight's width per group and column.
    t = table()
    for bits, weights in ((4, "w4a16"), (8, "w8a16")):
        for group in (64, 128, 256):
            gemm = GemmModel.build(A100, Quantization(weights, group, "dqb"), t)
            assert gemm.sz == sz_fraction(t, bits, group)
            hand = K * N * bits / 8 + K // group * N * (2 + bits / 8)
            assert gemm.weight_bytes(K, N) == pytest.approx(hand, rel=1e-5)


def test_dqb_path_at_batch_1_is_bound_by_the_link_carrying_16_bit_weights() -> None:
    # 80 DQBs (5 stacks × 16 pseudo-channels) × 64 B × 328 MHz = 1,679 GB/s out, above the link's 1,555 GB/s.
    gemm = model(dequant="dqb", kernel=None)
    cost = gemm.cost(1, K, N)
    link = (2 * K * N + 2 * (K + N)) / BANDWIDTH
    assert cost.bound == "link" and cost.seconds == pytest.approx(link + 11 / DQB_DESIGN_CLOCK_HZ)
    assert gemm.dqbs == 80


def test_dqb_path_at_batch_256_is_tensor_bound() -> None:
    # 2 × 256 × 4096² FLOPs at 312 TFLOPS (27.5 µs) outlast the 16-bit weight stream over the link (21.6 µs + rows).
    cost = model(dequant="dqb", kernel=None).cost(256, K, N)
    assert cost.bound == "tensor" and cost.seconds == pytest.approx(2 * 256 * K * N / 312e12 + 11 / 328e6)


def test_fp8_weights_go_through_the_dqb_only_and_cost_what_int8_does() -> None:
    t = table()
    int8, fp8 = (GemmModel.build(A100, Quantization(w, 128, "dqb"), t).cost(8, K, N) for w in ("w8a16", "fp8"))
    assert fp8 == int8        # same bytes, and the bench measured the same rates and latency for both modes


def test_dqb_latency_adds_exactly_its_time() -> None:
    latencies = table().entry("dqb", interface_bits=512).figures["read_latency_cycles"]
    t, slow = table(), table(read_latency_cycles={**latencies, "int4_fp16": latencies["int4_fp16"] + 1000})
    quant = Quantization("w4a16", 128, "dqb")
    for m in (1, 64, 256):
        base, late = (GemmModel.build(A100, quant, x).cost(m, K, N).seconds for x in (t, slow))
        assert late - base == pytest.approx(1000 / 328e6, rel=1e-9)
    # End to end: every quantized GEMM of every layer (QKV, O, gate/up, down) pays it once per iteration.
    shard = Shard(resolve_model("Llama-3.1-8B"), 1)
    work = decode_work(8, 8 * 1024)
    hw = PRESETS["a100-pcie-40gb"]
    base, late = (QuantizedGPUExecution(hw, shard, GemmModel.build(A100, quant, x)).cost(work).seconds
                  for x in (t, slow))
    assert late - base == pytest.approx(32 * 4 * 1000 / 328e6, rel=1e-9)


def test_halving_the_output_rate_halves_dqb_bound_throughput() -> None:
    quant = Quantization("w4a16", 128, "dqb", link_expanded=False)
    rates = table().entry("dqb", interface_bits=512).figures["beats_per_cycle_by_mode"]
    full = GemmModel.build(A100, quant, table())
    half = GemmModel.build(A100, quant, table(beats_per_cycle_by_mode={**rates, "int4_fp16": rates["int4_fp16"] / 2}))
    beats = 80 * 64 * 328e6                     # bytes/s of one beat per cycle in all 80 DQBs
    other = (K * N / 2 * full.sz / (1 - full.sz) + 2 * K) / beats    # S/Z fills and one activation row, bypass
    throughput = [2 * K * N / (g.dqb_bounds(1, K, N)["dqb"] - other) for g in (full, half)]
    assert throughput[1] == pytest.approx(throughput[0] / 2, rel=1e-12)
    assert throughput[0] == pytest.approx(beats, rel=1e-12)           # one output beat per cycle per DQB
    assert full.cost(1, K, N).bound == "dqb"


def test_dqb_energy_adds_every_dqbs_power() -> None:
    gemm = model(dequant="dqb", kernel=None)
    cost = gemm.cost(1, K, N)
    assert gemm.energy_j(cost) == pytest.approx(cost.seconds * (250 + 80 * DQB_W) + cost.hbm_bytes * 31.2e-12)


def test_the_dqb_path_refuses_to_price_energy_without_the_dqbs_power() -> None:
    gemm = GemmModel(A100, Quantization("w4a16", 128, "dqb"), SZ, model(dequant="dqb", kernel=None).dqb)
    with pytest.raises(ConfigError, match="DQB's"):
        gemm.power_w()


def test_quantized_footprint_is_packed_linear_layers_plus_fp16_embeddings() -> None:
    from sysmodel.quantized_execution import quantized_weight_bytes
    llama = resolve_model("Llama-3.1-8B")
    gemm = GemmModel(A100, Quantization("w4a16", 128, "gpu", "gptq"), SZ)
    linear = 32 * (4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336)   # QKV, O, gate/up/down
    assert quantized_weight_bytes(Shard(llama, 1), gemm) == pytest.approx(
        linear / 2 / (1 - SZ) + 2 * 2 * 128256 * 4096)


@pytest.mark.parametrize("name,params", [("llama-3.1-8b", 8.03e9), ("qwen3-8b", 8.19e9), ("mistral-7b-v0.3", 7.25e9)])
def test_model_presets_have_their_published_parameter_counts(name: str, params: float) -> None:
    # Hugging Face model cards: 8.03B, 8.19B, 7.25B parameters.
    assert resolve_model(name).params == pytest.approx(params, rel=5e-3)


def test_the_committed_table_carries_the_memory_side_rates() -> None:
    """Fails until the DQB is re-verified with the bench that measures them (`basedie verify dqb`)."""
    figures = DQBFigures.from_verified(verified.load(), "int4_fp16")
    assert figures.memory_beats_per_cycle == 0.25


def run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


GPU = ["simulate", "--system", "gpu", "--model", "Llama-3.1-8B", "--hardware", "a100-pcie-40gb", "--batch", "4",
       "--input-len", "256", "--output-len", "8", "--no-plots"]


def test_gpu_system_runs_a_quantized_model_and_records_it(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    code, _, _ = run([*GPU, "--weights", "w4a16", "--dequant", "gpu", "--kernel", "gptq", "--out", str(out)], capsys)
    config = json.loads((out / "config.json").read_text())
    assert code == 0 and config["quantization"]["kernel"] == "gptq" and "dqb" in config["verified_blocks"]
    fp16 = tmp_path / "fp16"
    assert run([*GPU, "--out", str(fp16)], capsys)[0] == 0
    tpot = [json.loads((f / "summary.json").read_text())["tpot_s"]["p50"] for f in (out, fp16)]
    assert tpot[0] < tpot[1] / 2        # decode reads a quarter of the weight bytes, memory-bound at batch 4


def test_pd_accepts_quantized_weights(tmp_path, capsys) -> None:
    base = ["simulate", "--system", "pd-1:1", "--model", "Llama-3.1-8B", "--hardware", "a100-pcie-40gb", "--hw",
            "gpus=8", "--input-len", "2048", "--output-len", "8", "--requests", "4", "--no-plots"]
    tpot = []
    for extra in ([], ["--weights", "w8a16", "--dequant", "gpu", "--kernel", "gptq"]):
        out = tmp_path / str(len(extra))
        assert run([*base, *extra, "--out", str(out)], capsys)[0] == 0
        tpot.append(json.loads((out / "summary.json").read_text())["tpot_s"]["p50"])
    assert tpot[1] < tpot[0]


BAD = [
    (["--dequant", "dqb"], "fp16 weights need no dequantization"),
    (["--group-size", "128"], "fp16 weights need no dequantization"),
    (["--weights", "w4a16"], "w4a16 weights need --dequant"),
    (["--weights", "w4a16", "--dequant", "gpu-split", "--kernel", "torchao", "--activations", "bf16"],
     "torchao has no kernel for w4a16 weights"),
    (["--weights", "w8a16", "--dequant", "gpu-fused", "--kernel", "torchao", "--activations", "bf16"],
     "torchao has no fused kernel"),
    (["--weights", "w8a16", "--dequant", "gpu", "--kernel", "awq-v1"], "awq-v1 has no kernel for w8a16"),
    (["--weights", "fp8", "--dequant", "gpu", "--kernel", "gptq"], "gptq has no kernel for fp8"),
    (["--weights", "w4a16", "--dequant", "gpu", "--kernel", "awq-v2", "--activations", "bf16"],
     "awq-v2 has no kernel for bf16 activations"),
    (["--weights", "w4a16", "--dequant", "dqb", "--kernel", "gptq"], "the DQB needs none"),
    (["--weights", "w4a16", "--dequant", "gpu"], "needs --kernel"),
    (["--weights", "w4a16", "--dequant", "cpu", "--kernel", "gptq"], "need --dequant, one of"),
    (["--weights", "int3"], "unknown weights 'int3'"),
    (["--weights", "w4a16", "--dequant", "gpu", "--kernel", "gptq", "--group-size", "96"],
     "no measured S/Z fraction for group size 96"),
    (["--weights", "w4a16", "--dequant", "gpu", "--kernel", "gptq", "--model", "{odd}"],
     "group size 128 does not divide K = 4160"),
    (["--weights", "w4a16", "--dequant", "gpu", "--kernel", "gptq", "--dqb-link", "unbounded"],
     "--dqb-link applies to --dequant dqb only"),
    (["--hardware", "h300"], "unknown hardware 'h300'"),
    (["--weights", "w4a16", "--dequant", "gpu", "--kernel", "gptq", "--hardware", "paper"],
     "needs its CUDA-core figures"),
]


@pytest.mark.parametrize("extra,message", BAD, ids=[" ".join(extra) for extra, _ in BAD])
def test_bad_quantization_input_is_one_line_exit_2_and_writes_nothing(tmp_path, monkeypatch, capsys, extra,
                                                                       message) -> None:
    odd = tmp_path / "odd" / "config.json"      # hidden 4,160 = 32 heads × 130: no 128-wide groups
    odd.parent.mkdir()
    odd.write_text(json.dumps({"hidden_size": 4160, "intermediate_size": 14336, "num_attention_heads": 32,
                               "num_hidden_layers": 4, "num_key_value_heads": 8, "vocab_size": 32000}))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    argv = [*GPU[:-6], *GPU[-6:]]
    if "--hardware" in extra:
        argv = [a for a in argv if a not in ("--hardware", "a100-pcie-40gb")]
    code, stdout, err = run([*argv, *(a.format(odd=str(odd)) for a in extra)], capsys)
    assert code == 2 and stdout == "" and err.count("\n") == 1, err
    assert err.startswith("basedie simulate: error: ") and message in err
    assert list(cwd.iterdir()) == []
