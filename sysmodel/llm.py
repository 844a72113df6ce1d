"""LLM descriptions: presets of the paper's three models and loading from a Hugging Face `config.json`.

Weights and KV cache are FP16 (paper §6.1). Only what the cost model needs is kept: layer shapes,
attention heads (MHA when `kv_heads == heads`, GQA otherwise) and the MLP (dense, or routed experts).
"""
import json
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError, require

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
    def params(self) -> int:
        return self.layers * self.layer_params + 2 * self.vocab * self.hidden

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

# Qwen3-30B-A3B (HBFSim's model, issue 14): huggingface.co/Qwen/Qwen3-30B-A3B config.json (48 layers, hidden
# 2,048, 32 query / 4 KV heads of 128, 128 experts of width 768, top 8).
QWEN3_30B_A3B = LLM("Qwen3-30B-A3B", layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128, ffn=768,
                    vocab=151936, gated_mlp=True, experts=128, experts_per_token=8)

MODEL_PRESETS = {m.name.lower(): m for m in (GPT3_175B, LLAMA2_70B, QWEN3_235B_A22B, QWEN3_30B_A3B)}


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
    )


def resolve_model(spec: str) -> LLM:
    """A preset name (case-insensitive) or the path of a Hugging Face `config.json`."""
    if spec.lower() in MODEL_PRESETS:
        return MODEL_PRESETS[spec.lower()]
    path = Path(spec)
    if not path.is_file():
        raise ConfigError(f"unknown model {spec!r}: not a preset ({', '.join(m.name for m in MODEL_PRESETS.values())})"
                          f" and not a config.json file")
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: not valid JSON ({error})") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read ({error.strerror})") from None
    return from_config(config, name=path.parent.name or path.stem)
