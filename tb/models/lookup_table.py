"""StreamDQ Table 1: the GPU-side region-lookup table holds one 16-byte entry per quantized linear layer (§3.2).

Layer counts come from each model's Hugging Face `config.json` (`num_hidden_layers`); a decoder block has 7
quantized linear layers (q, k, v, o projections; gate, up, down of the MLP).
"""
from dataclasses import dataclass

QUANTIZED_LINEARS_PER_BLOCK = 7
REGION_ENTRY_BYTES = 16
"""§3.2: region start address, region size and tag bits in 16 B."""
REQUEST_TABLE_ENTRY_BYTES = 32
"""§3.4 (Fig. 9): about 32 B per layer entry of the DQB's S/Z request table, "about 7-8 KB" per DQB."""


@dataclass(frozen=True)
class Model:
    name: str
    num_hidden_layers: int
    source: str

    @property
    def entries(self) -> int:
        return QUANTIZED_LINEARS_PER_BLOCK * self.num_hidden_layers

    @property
    def region_table_bytes(self) -> int:
        return REGION_ENTRY_BYTES * self.entries

    @property
    def request_table_bytes(self) -> int:
        return REQUEST_TABLE_ENTRY_BYTES * self.entries


MODELS = (
    Model("Llama-3.1-8B", 32, "https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json"),
    Model("Qwen3-8B", 36, "https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json"),
    Model("Mistral-7B", 32, "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json"),
)

PAPER_TABLE_1 = {  # StreamDQ Table 1: model -> (entries, lookup-table size as printed)
    "Llama-3.1-8B": (224, "3.5 KB"), "Qwen3-8B": (252, "3.9 KB"), "Mistral-7B": (224, "3.5 KB"),
}


def kilobytes(size: int) -> str:
    """A size in KB (1024 B) to one decimal, as Table 1 prints it."""
    return f"{size / 1024:.1f} KB"
