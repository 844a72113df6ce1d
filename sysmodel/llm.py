"""LLM descriptions: presets of the paper's three models and loading from a Hugging Face `config.json`.

Weights and KV cache are FP16 (paper §6.1). Only what the cost model needs is kept: layer shapes,
attention heads (MHA when `kv_heads == heads`, GQA otherwise) and the MLP (dense, or routed experts).
"""
import json
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError, require
from .registry import Registry

BYTES_PER_VALUE = 2  # FP16 weights, activations and KV cache


@dataclass(frozen=True)
class LLM:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int                     # dense MLP width, or one expert's width for MoE
    vocab: int
    gated_mlp: bool              # SwiGLU (3 matrices) or GELU (2 matrices)
    experts: int = 0             # routed experts per layer (0: dense)
    experts_per_token: int = 0
    tied_embeddings: bool = False    # the LM head is the input embedding: its weights are stored once

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab"):
            require(getattr(self, name) >= 1, f"model {self.name}: {name} must be >= 1, got {getattr(self, name)}")
        require(self.heads % self.kv_heads == 0,
                f"model {self.name}: heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        require(self.experts >= 0 and (self.experts == 0) == (self.experts_per_token == 0)
                and self.experts_per_token <= self.experts,
                f"model {self.name}: experts_per_token ({self.experts_per_token}) must be in 1..experts "
                f"({self.experts}) for MoE and 0 for a dense model")

    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def group(self) -> int:
        """Query heads per KV head (1 for MHA)."""
        return self.heads // self.kv_heads

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    @property
    def attention_params(self) -> int:
        return self.hidden * (2 * self.heads + 2 * self.kv_heads) * self.head_dim

    @property
    def expert_params(self) -> int:
        return self.mlp_matrices * self.hidden * self.ffn

    @property
    def layer_params(self) -> int:
        mlp = self.experts * self.expert_params + self.hidden * self.experts if self.moe else self.expert_params
        return self.attention_params + mlp

    @property
    def embedding_matrices(self) -> int:
        """Vocabulary-sized matrices stored: the embedding and the LM head, one when they are tied."""
        return 1 if self.tied_embeddings else 2

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + self.embedding_matrices * self.vocab * self.hidden

    @property
    def weight_bytes(self) -> int:
        return self.params * BYTES_PER_VALUE

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * BYTES_PER_VALUE


# GPT-3 175B: Brown et al., 2020, Table 2.1 (96 layers, d_model 12,288, 96 heads of 128, d_ff = 4 d_model),
# GPT-2 BPE vocabulary of 50,257.
GPT3_175B = LLM("GPT3-175B", layers=96, hidden=12288, heads=96, kv_heads=96, head_dim=128, ffn=49152,
                vocab=50257, gated_mlp=False)
# LLaMA 2 70B: huggingface.co/meta-llama/Llama-2-70b-hf config.json.
LLAMA2_70B = LLM("LLaMA2-70B", layers=80, hidden=8192, heads=64, kv_heads=8, head_dim=128, ffn=28672,
                 vocab=32000, gated_mlp=True)
# Qwen3-235B-A22B: huggingface.co/Qwen/Qwen3-235B-A22B config.json (every layer MoE, 128 experts, top 8).
QWEN3_235B_A22B = LLM("Qwen3-235B-A22B", layers=94, hidden=4096, heads=64, kv_heads=4, head_dim=128, ffn=1536,
                      vocab=151936, gated_mlp=True, experts=128, experts_per_token=8)

# Real-system presets, each from its Hugging Face config.json (huggingface.co/<repo>/blob/main/config.json):
# facebook/opt-13b and opt-66b (ReLU MLP, tied embeddings: OPTForCausalLM ties lm_head to embed_tokens),
# meta-llama/Llama-2-7b-hf and -13b-hf, meta-llama/Llama-3.1-8B and -70B, mistralai/Mistral-7B-v0.1 and
# Mistral-7B-Instruct-v0.3 (StreamDQ's, paper 002 §5.1: vocab 32,768), Qwen/Qwen3-8B and Qwen3-30B-A3B
# (tie_word_embeddings false in each of these but OPT).
OPT_13B = LLM("OPT-13B", layers=40, hidden=5120, heads=40, kv_heads=40, head_dim=128, ffn=20480, vocab=50272,
              gated_mlp=False, tied_embeddings=True)
OPT_66B = LLM("OPT-66B", layers=64, hidden=9216, heads=72, kv_heads=72, head_dim=128, ffn=36864, vocab=50272,
              gated_mlp=False, tied_embeddings=True)
LLAMA2_7B = LLM("Llama-2-7B", layers=32, hidden=4096, heads=32, kv_heads=32, head_dim=128, ffn=11008, vocab=32000,
                gated_mlp=True)
LLAMA2_13B = LLM("Llama-2-13B", layers=40, hidden=5120, heads=40, kv_heads=40, head_dim=128, ffn=13824,
                 vocab=32000, gated_mlp=True)
LLAMA31_8B = LLM("Llama-3.1-8B", layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336,
                 vocab=128256, gated_mlp=True)
LLAMA31_70B = LLM("Llama-3.1-70B", layers=80, hidden=8192, heads=64, kv_heads=8, head_dim=128, ffn=28672,
                  vocab=128256, gated_mlp=True)
MISTRAL_7B = LLM("Mistral-7B", layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336, vocab=32000,
                 gated_mlp=True)
MISTRAL_7B_V03 = LLM("Mistral-7B-v0.3", layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336,
                     vocab=32768, gated_mlp=True)
QWEN3_8B = LLM("Qwen3-8B", layers=36, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=12288, vocab=151936,
               gated_mlp=True)
QWEN3_30B_A3B = LLM("Qwen3-30B-A3B", layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128, ffn=768,
                    vocab=151936, gated_mlp=True, experts=128, experts_per_token=8)

PRESET_MODELS = (GPT3_175B, LLAMA2_70B, QWEN3_235B_A22B, OPT_13B, OPT_66B, LLAMA2_7B, LLAMA2_13B, LLAMA31_8B,
                 LLAMA31_70B, MISTRAL_7B, MISTRAL_7B_V03, QWEN3_8B, QWEN3_30B_A3B)


def _key(name: str) -> str:
    """Preset names match whatever the case and punctuation: "LLaMA2-70B" = "llama-2-70b" = "Llama2_70B"."""
    return "".join(c for c in name.lower() if c.isalnum())


MODEL_PRESETS: Registry[LLM] = Registry("model", key=_key)
for _preset in PRESET_MODELS:
    MODEL_PRESETS.register(_preset.name, _preset)


def _get(config: dict, *keys: str, default: int | None = None) -> int:
    for key in keys:
        if key in config and config[key] is not None:
            value = config[key]
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"config.json: {key} must be an integer, got {value!r}")
            return value
    if default is None:
        raise ConfigError(f"config.json: missing {' / '.join(keys)}")
    return default


def from_config(config: dict, name: str) -> LLM:
    """An `LLM` from a Hugging Face config dict (Llama/Mistral/Qwen/Mixtral or GPT-2 style keys)."""
    if not isinstance(config, dict):
        raise ConfigError("config.json must hold a JSON object")
    hidden = _get(config, "hidden_size", "n_embd", "d_model")
    heads = _get(config, "num_attention_heads", "n_head")
    experts = _get(config, "num_experts", "num_local_experts", "n_routed_experts", default=0)
    dense_ffn = _get(config, "intermediate_size", "n_inner", "ffn_dim", default=4 * hidden)
    activation = str(config.get("hidden_act", config.get("activation_function", "silu")))
    return LLM(
        name=name,
        layers=_get(config, "num_hidden_layers", "n_layer", "num_layers"),
        hidden=hidden,
        heads=heads,
        kv_heads=_get(config, "num_key_value_heads", "num_kv_heads", default=heads),
        head_dim=_get(config, "head_dim", default=hidden // heads if heads >= 1 and hidden % heads == 0 else 0),
        ffn=_get(config, "moe_intermediate_size", default=dense_ffn) if experts else dense_ffn,
        vocab=_get(config, "vocab_size"),
        gated_mlp=activation in ("silu", "swiglu", "swish"),
        experts=experts,
        experts_per_token=_get(config, "num_experts_per_tok", "num_experts_per_token") if experts else 0,
        # transformers' PretrainedConfig defaults tie_word_embeddings to true when a config omits it
        tied_embeddings=bool(config.get("tie_word_embeddings", True)),
    )


def resolve_model(spec: str) -> LLM:
    """A preset name (case and punctuation ignored), or a Hugging Face `config.json` or the model folder holding it."""
    if spec in MODEL_PRESETS:
        return MODEL_PRESETS[spec]
    path = Path(spec)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise ConfigError(f"unknown model {spec!r}: not a preset ({', '.join(MODEL_PRESETS)})"
                          f" and not a config.json file")
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: not valid JSON ({error})") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read ({error.strerror})") from None
    return from_config(config, name=path.parent.name or path.stem)
