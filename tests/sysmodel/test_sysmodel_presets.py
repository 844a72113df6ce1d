"""Real-system presets: model shapes against published parameter counts, hardware against datasheet totals."""
import json

import pytest

from sysmodel.errors import ConfigError
from sysmodel.llm import LLAMA2_7B, LLAMA31_8B, OPT_13B, resolve_model
from sysmodel.operators import Shard
from sysmodel.config import resolve_hardware


@pytest.mark.parametrize("model,published,norms", [
    # Hugging Face model cards / safetensors totals; the RMSNorm weights (2 per layer + the final one, hidden
    # each) are not modelled, so they are subtracted.
    (LLAMA2_7B, 6_738_415_616, 65 * 4096),
    (LLAMA31_8B, 8_030_261_248, 65 * 4096),
])
def test_llama_presets_have_the_published_parameter_count(model, published, norms) -> None:
    assert model.params == published - norms


def test_tied_embeddings_are_stored_once() -> None:
    # OPT-13B: 40 layers × (4 × 5120² attention + 2 × 5120 × 20480 MLP) + one 50272 × 5120 embedding.
    assert OPT_13B.params == 40 * (4 * 5120 ** 2 + 2 * 5120 * 20480) + 50272 * 5120
    untied = Shard(OPT_13B.__class__(**{**OPT_13B.__dict__, "tied_embeddings": False}), 1)
    # A GPU holds the matrix padded to 50,304 rows (786 · 64, as vLLM pads the vocabulary).
    assert untied.weight_bytes - Shard(OPT_13B, 1).weight_bytes == 50304 * 5120 * 2


def test_model_folder_or_its_config_json(tmp_path) -> None:
    folder = tmp_path / "Mistral-7B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 8, "vocab_size": 32000, "hidden_act": "silu", "tie_word_embeddings": False}))
    assert resolve_model(str(folder)) == resolve_model(str(folder / "config.json"))
    preset = resolve_model("mistral-7b")
    assert resolve_model(str(folder)) == preset.__class__(**{**preset.__dict__, "name": "Mistral-7B"})


@pytest.mark.parametrize("name,capacity_gb,bandwidth_tb_s,link_gb_s", [
    ("A100-SXM4-80GB", 80, 2.039, 300), ("a100-pcie-40gb", 40, 1.555, 32), ("h100-sxm5-80gb", 80, 3.35, 450),
    ("h200", 141, 4.8, 450), ("b200", 180, 7.7, 900), ("gb300", 384, 16.0, 900),
])
def test_hardware_presets_match_their_datasheet_totals(name, capacity_gb, bandwidth_tb_s, link_gb_s) -> None:
    hw = resolve_hardware(name)
    assert hw.gpu.memory.capacity_bytes == pytest.approx(capacity_gb * 1e9)
    assert hw.gpu.memory.bandwidth == pytest.approx(bandwidth_tb_s * 1e12)
    assert hw.link.bandwidth == pytest.approx(link_gb_s * 1e9)       # one direction
    assert hw.gpus == 8


def test_unknown_hardware_lists_the_presets() -> None:
    with pytest.raises(ConfigError, match="unknown hardware 'tpu'.*h100-sxm5-80gb"):
        resolve_hardware("tpu")


@pytest.mark.parametrize("name,link_gb_s,nvls,hop_us,network_gb_s,stack", [
    # One direction: half the bidirectional NVLink/PCIe total; InfiniBand HDR 200 Gb/s = 25 GB/s, NDR 50 GB/s.
    ("a100-sxm4-80gb", 300, False, 0.6, 25, "HBM2e stack"), ("a100-pcie-40gb", 32, False, 1.0, 25, None),
    ("h100-sxm5-80gb", 450, True, 0.6, 50, "HBM3 stack"), ("h200", 450, True, 0.6, 50, "HBM3e stack"),
    ("b200", 900, True, 0.6, 50, "HBM3e stack"),
])
def test_hardware_presets_links_networks_and_the_papers_per_stack_figures(name, link_gb_s, nvls, hop_us,
                                                                         network_gb_s, stack) -> None:
    hw = resolve_hardware(name)
    link, network = hw.link, hw.network
    assert (link.bandwidth, link.nvls, link.hop_latency_s) == pytest.approx((link_gb_s * 1e9, nvls, hop_us * 1e-6))
    assert (network.bandwidth, network.nvls, network.hop_latency_s) == pytest.approx((network_gb_s * 1e9, False,
                                                                                      2.7e-6))
    # No per-SKU figures: the paper's NVLink 8 pJ/bit on every link, HBM4's 42 ns and 41.6 W / 2 TB/s per stack.
    assert link.energy_per_bit == network.energy_per_bit == 8e-12
    if stack is not None:
        assert hw.gpu.stack.name == stack
        assert hw.gpu.stack.latency_s == 42e-9 and hw.gpu.stack.energy_per_byte == pytest.approx(20.8e-12)
