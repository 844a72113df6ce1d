"""Models from Hugging Face `config.json` files and presets; every bad input is a ConfigError naming the key."""
import json
from pathlib import Path

import pytest

from sysmodel.errors import ConfigError
from sysmodel.llm import LLAMA2_70B, LLM, QWEN3_235B_A22B, from_config, resolve_model

# Abridged from huggingface.co/meta-llama/Llama-2-70b-hf/blob/main/config.json.
LLAMA2_70B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "hidden_size": 8192,
    "intermediate_size": 28672, "max_position_embeddings": 4096, "model_type": "llama",
    "num_attention_heads": 64, "num_hidden_layers": 80, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False, "torch_dtype": "float16", "vocab_size": 32000,
}
# Abridged from huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/config.json.
QWEN3_MOE_CONFIG = {
    "architectures": ["Qwen3MoeForCausalLM"], "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
    "intermediate_size": 12288, "moe_intermediate_size": 1536, "model_type": "qwen3_moe",
    "norm_topk_prob": True, "num_attention_heads": 64, "num_experts": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 94, "num_key_value_heads": 4, "vocab_size": 151936, "mlp_only_layers": [],
    "tie_word_embeddings": False,
}
# Abridged from huggingface.co/openai-community/gpt2/blob/main/config.json.
GPT2_CONFIG = {
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
    "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_inner": None, "n_layer": 12, "n_positions": 1024,
    "vocab_size": 50257,
}


def test_llama_style_config_gives_the_llama2_70b_preset() -> None:
    assert from_config(LLAMA2_70B_CONFIG, "LLaMA2-70B") == LLAMA2_70B


def test_qwen3_moe_style_config_gives_the_qwen3_preset() -> None:
    model = from_config(QWEN3_MOE_CONFIG, "Qwen3-235B-A22B")
    assert model == QWEN3_235B_A22B
    assert model.ffn == 1536                        # one expert's width, not the dense intermediate_size
    assert (model.experts, model.experts_per_token, model.moe) == (128, 8, True)


def test_gpt2_style_config() -> None:
    model = from_config(GPT2_CONFIG, "gpt2")
    # MHA (no separate KV heads), head_dim = 768 / 12, n_inner null → 4 × n_embd, GELU → two MLP matrices; no
    # tie_word_embeddings key → transformers' default, tied.
    assert model == LLM("gpt2", layers=12, hidden=768, heads=12, kv_heads=12, head_dim=64, ffn=3072, vocab=50257,
                        gated_mlp=False, tied_embeddings=True)
    # GPT-2 small has 124,439,808 parameters, its tied wte (50,257 × 768) counted once. Not modelled: the
    # position embedding (1,024 × 768), per layer the biases (2,304 + 768 + 3,072 + 768) and the two layer
    # norms (4 × 768), and the final norm (2 × 768).
    assert model.params == 124_439_808 - 1024 * 768 - 12 * (6912 + 3072) - 1536
    assert model.group == 1 and model.mlp_matrices == 2


def test_resolve_model_by_preset_name_or_config_path(tmp_path: Path) -> None:
    assert resolve_model("LLaMA2-70B") is resolve_model("llama2-70b") is LLAMA2_70B
    assert resolve_model("Llama-2-70B") is resolve_model("llama2_70b") is LLAMA2_70B
    path = tmp_path / "my-model" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(GPT2_CONFIG))
    model = resolve_model(str(path))
    assert model.name == "my-model" and model.hidden == 768


def without(config: dict, key: str) -> dict:
    return {k: v for k, v in config.items() if k != key}


@pytest.mark.parametrize(("config", "named"), [
    (without(LLAMA2_70B_CONFIG, "vocab_size"), "missing vocab_size"),
    (without(LLAMA2_70B_CONFIG, "num_hidden_layers"), "missing num_hidden_layers"),
    (without(LLAMA2_70B_CONFIG, "hidden_size"), "missing hidden_size"),
    (without(GPT2_CONFIG, "n_head"), "missing num_attention_heads / n_head"),
    (without(QWEN3_MOE_CONFIG, "num_experts_per_tok"), "missing num_experts_per_tok"),
    ({**LLAMA2_70B_CONFIG, "hidden_size": "8192"}, "hidden_size must be an integer, got '8192'"),
    ({**LLAMA2_70B_CONFIG, "num_key_value_heads": 8.0}, "num_key_value_heads must be an integer"),
    ({**LLAMA2_70B_CONFIG, "num_hidden_layers": True}, "num_hidden_layers must be an integer"),
    ({**QWEN3_MOE_CONFIG, "num_experts": [128]}, "num_experts must be an integer"),
    ({**LLAMA2_70B_CONFIG, "num_attention_heads": 0}, "heads must be >= 1"),
    ({**LLAMA2_70B_CONFIG, "num_key_value_heads": 6}, "heads \\(64\\) must be a multiple of kv_heads \\(6\\)"),
    ({**LLAMA2_70B_CONFIG, "hidden_size": 8190}, "head_dim"),   # not a multiple of the heads, no head_dim
    ([LLAMA2_70B_CONFIG], "must hold a JSON object"),
])
def test_bad_configs_name_what_is_wrong(config, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        from_config(config, "bad")


def test_unknown_preset_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown model 'llama-9000'.*GPT3-175B"):
        resolve_model("llama-9000")
    broken = tmp_path / "config.json"
    broken.write_text('{"hidden_size": 8192,')
    with pytest.raises(ConfigError, match="config.json: not valid JSON"):
        resolve_model(str(broken))
    broken.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="not valid JSON"):
        resolve_model(str(broken))


@pytest.mark.parametrize(("field", "value", "named"), [
    ("layers", 0, "layers must be >= 1, got 0"),
    ("kv_heads", 3, "heads \\(8\\) must be a multiple of kv_heads \\(3\\)"),
    ("experts", 4, "experts_per_token \\(0\\) must be in 1..experts \\(4\\)"),
    ("experts_per_token", 2, "experts_per_token \\(2\\) must be in 1..experts \\(0\\)"),
])
def test_invalid_models_name_the_model_and_field(field: str, value: int, named: str) -> None:
    fields = dict(name="tiny", layers=2, hidden=64, heads=8, kv_heads=2, head_dim=8, ffn=128, vocab=100,
                  gated_mlp=True)
    with pytest.raises(ConfigError, match=f"model tiny: {named}"):
        LLM(**{**fields, field: value})


def test_qwen3_30b_a3b_preset_has_its_published_size() -> None:
    """Qwen3-30B-A3B: 30.5 B parameters (huggingface.co/Qwen/Qwen3-30B-A3B model card), 54.0 GiB of experts
    (48 layers x 128 experts x 3 x 2,048 x 768 x 2 B; HBFSim §6.4), 96 KiB of KV per token (48 x 2 x 4 x 128 x 2 B)."""
    model = resolve_model("Qwen3-30B-A3B")
    assert model.params == pytest.approx(30.5e9, rel=2e-3)
    assert model.layers * model.experts * model.expert_params * 2 / 2**30 == pytest.approx(54.0, abs=0.01)
    assert model.kv_bytes_per_token == 96 * 1024


# A tiny Llama-style config: every other key spelling is tried against it below.
TINY_CONFIG = {"hidden_size": 64, "num_attention_heads": 8, "num_hidden_layers": 2, "intermediate_size": 256,
               "vocab_size": 100, "hidden_act": "silu", "tie_word_embeddings": False}


@pytest.mark.parametrize(("replaced", "given", "field", "value"), [
    ("hidden_size", {"d_model": 64}, "hidden", 64),
    ("num_hidden_layers", {"num_layers": 2}, "layers", 2),
    ("intermediate_size", {"n_inner": 192}, "ffn", 192),      # not the default, 4 × hidden = 256
    ("intermediate_size", {"ffn_dim": 192}, "ffn", 192),
    (None, {"num_kv_heads": 2}, "kv_heads", 2),
    (None, {"num_local_experts": 4, "num_experts_per_tok": 2}, "experts", 4),
    (None, {"n_routed_experts": 4, "num_experts_per_tok": 2}, "experts", 4),
    (None, {"num_experts": 4, "num_experts_per_token": 2}, "experts_per_token", 2),
])
def test_every_key_spelling_of_a_field_is_read(replaced, given, field, value) -> None:
    config = {k: v for k, v in TINY_CONFIG.items() if k != replaced} | given
    assert getattr(from_config(config, "tiny"), field) == value


@pytest.mark.parametrize(("activation", "gated"), [
    ({"hidden_act": "silu"}, True), ({"hidden_act": "swiglu"}, True), ({"hidden_act": "swish"}, True),
    ({"hidden_act": "gelu"}, False), ({"activation_function": "silu"}, True),
    ({"activation_function": "relu"}, False), ({}, True),
])
def test_silu_swiglu_and_swish_are_gated_mlps_and_silu_is_the_default(activation, gated) -> None:
    config = {k: v for k, v in TINY_CONFIG.items() if k != "hidden_act"} | activation
    assert from_config(config, "tiny").gated_mlp is gated


def test_the_head_size_defaults_to_the_hidden_size_over_the_heads_as_an_integer() -> None:
    model = from_config(TINY_CONFIG, "tiny")
    assert model.head_dim == 8 and type(model.head_dim) is int
    assert from_config(TINY_CONFIG | {"num_attention_heads": 1}, "tiny").head_dim == 64


def test_a_mixtral_config_takes_its_expert_width_from_intermediate_size() -> None:
    """Mixtral-8x7B (huggingface.co/mistralai/Mixtral-8x7B-v0.1 config.json, abridged): no moe_intermediate_size,
    8 local experts of width 14,336; 46.7 B parameters (its model card)."""
    config = {"hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
              "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
              "tie_word_embeddings": False, "vocab_size": 32000}
    model = from_config(config, "Mixtral-8x7B")
    assert model == LLM("Mixtral-8x7B", layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336,
                        vocab=32000, gated_mlp=True, experts=8, experts_per_token=2)
    assert model.params == pytest.approx(46.7e9, rel=1e-3)


def test_a_dense_model_ignores_an_expert_width() -> None:
    assert from_config(TINY_CONFIG | {"moe_intermediate_size": 32}, "tiny").ffn == 256


def test_one_kv_head_is_a_valid_model() -> None:
    """Multi-query attention: every size may be 1."""
    assert LLM("mqa", layers=1, hidden=1, heads=1, kv_heads=1, head_dim=1, ffn=1, vocab=1, gated_mlp=True).group == 1


def test_the_messages_of_unreadable_models_are_exact(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(ConfigError) as error:
        from_config([1, 2], "bad")
    assert str(error.value) == "config.json must hold a JSON object"
    with pytest.raises(ConfigError) as error:
        resolve_model("llama-9000")
    assert "not a preset (GPT3-175B, LLaMA2-70B, Qwen3-235B-A22B, OPT-13B," in str(error.value)
    path = tmp_path / "config.json"
    path.write_text("{}")

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))
    monkeypatch.setattr(Path, "read_text", denied)
    with pytest.raises(ConfigError) as error:
        resolve_model(str(path))
    assert str(error.value) == f"{path}: cannot be read (Permission denied)"
