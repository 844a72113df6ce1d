"""Package layouts: how many HBM and HBF stacks sit beside each GPU and what lives where.

`hbm` is today's package (the hardware preset's own HBM, nothing in HBF). A, B and C are HBFSim's three
layouts under its 861.1 mm² package budget (§6.4). The seed gives their installed capacity (216 GiB at A,
1,572 GiB at C) and the KV tokens A and B hold, not their composition; ours is reconstructed from those
numbers with 36 GiB HBM4 stacks and 512 GB HBF stacks: A = 6 HBM (216 GiB), B = 3 HBM + 1 HBF (the ~0.54 M
tokens of B need ~108 GiB of HBM), C = 1 HBM + 3 HBF (36 GiB + 3 x 512 GiB = 1,572 GiB). The seed counts HBF
in GiB; we keep its 512 GiB per stack for these layouts so that the capacities compare.
A file (TOML or JSON) describes any other package with the keys of `Layout`.
"""
import json
import math
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path

from ..errors import ConfigError, require
from ..hardware import Hardware
from ..llm import BYTES_PER_VALUE
from ..memory import HBM4_STACK, MemoryTier
from ..operators import Shard
from ..registry import Registry

GIB = 2**30
PLACES = ("hbm", "hbf")


@dataclass(frozen=True)
class Layout:
    """One GPU's package. `weights`: where the weights that dominate decode traffic live (an MoE model's
    experts, a dense model's layer weights); embeddings, attention and routers of an MoE model stay in
    HBM. `kv`: where the sequences' KV cache lives; `prefix`: where a shared KV prefix lives (docs/design/hbf.md).
    `frame_cache_gib`: the HBM region that holds HBF weight pages; `kv_frame_cache_gib`: the one that holds
    HBF KV blocks."""
    name: str
    hbm_stacks: int
    hbm_stack_gib: float = 36.0
    hbf_stacks: int = 0
    hbf_stack_gib: float = 512.0
    weights: str = "hbm"
    kv: str = "hbm"
    prefix: str = "hbm"
    frame_cache_gib: float = 0.0
    kv_frame_cache_gib: float = 0.0

    def __post_init__(self) -> None:
        where = f"layout {self.name}"
        for name in ("hbm_stacks", "hbf_stacks"):
            value = getattr(self, name)
            require(isinstance(value, int) and not isinstance(value, bool) and value >= 0,
                    f"{where}: {name} must be a whole number >= 0, got {value!r}")
        for name in ("hbm_stack_gib", "hbf_stack_gib", "frame_cache_gib", "kv_frame_cache_gib"):
            value = getattr(self, name)
            require(isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                    and value >= 0, f"{where}: {name} must be a finite number >= 0, got {value!r}")
        require(self.hbm_stacks >= 1 and self.hbm_stack_gib > 0, f"{where}: needs at least one HBM stack")
        for name in ("weights", "kv", "prefix"):
            value = getattr(self, name)
            require(value in PLACES, f"{where}: {name} must be hbm or hbf, got {value!r}")
            require(value == "hbm" or (self.hbf_stacks >= 1 and self.hbf_stack_gib > 0),
                    f"{where}: {name} placed in HBF but the package has no HBF stack")
        frames = self.frame_cache_gib + self.kv_frame_cache_gib
        require(frames < self.hbm_bytes / GIB,
                f"{where}: frame cache of {frames:g} GiB does not fit in {self.hbm_bytes / GIB:g} GiB of HBM")

    @property
    def uses_hbf(self) -> bool:
        return "hbf" in (self.weights, self.kv, self.prefix)

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_stacks * self.hbm_stack_gib * GIB

    @property
    def hbf_bytes(self) -> float:
        return self.hbf_stacks * self.hbf_stack_gib * GIB

    @property
    def installed_gib(self) -> float:
        return (self.hbm_bytes + self.hbf_bytes) / GIB

    def hardware(self, base: Hardware) -> Hardware:
        """`base` with each GPU's HBM replaced by this package's HBM stacks (HBM4 bandwidth and energy)."""
        stack = MemoryTier(f"HBM4 stack ({self.hbm_stack_gib:g} GiB)", self.hbm_stack_gib * GIB, HBM4_STACK.bandwidth,
                           HBM4_STACK.latency_s, HBM4_STACK.energy_per_byte)
        return replace(base, gpu=replace(base.gpu, stack=stack, stacks=self.hbm_stacks))

    def hbm_resident_bytes(self, shard: Shard, weight_bytes: float | None = None) -> float:
        """Per GPU: the weights kept in HBM plus the frame regions (what the KV cache cannot use).
        `weight_bytes`: one GPU's weights as stored (quantized ones are smaller; default FP16)."""
        frames = (self.frame_cache_gib + self.kv_frame_cache_gib) * GIB
        stored = shard.weight_bytes if weight_bytes is None else weight_bytes
        return stored - self.hbf_weight_bytes(shard, weight_bytes) + frames

    def hbf_weight_bytes(self, shard: Shard, weight_bytes: float | None = None) -> float:
        if self.weights == "hbm":
            return 0.0
        layers, per_layer, size = objects(shard, weight_bytes)
        return layers * per_layer * size

    def check(self, shard: Shard, weight_bytes: float | None = None) -> None:
        """Refuse a model that fits in neither tier."""
        in_hbf, in_hbm = self.hbf_weight_bytes(shard, weight_bytes), self.hbm_resident_bytes(shard, weight_bytes)
        if in_hbf > self.hbf_bytes or in_hbm >= self.hbm_bytes:
            raise ConfigError(f"{shard.model.name} does not fit layout {self.name}: {in_hbm / GIB:.1f} GiB for HBM "
                              f"(of {self.hbm_bytes / GIB:g}) and {in_hbf / GIB:.1f} GiB for HBF "
                              f"(of {self.hbf_bytes / GIB:g}) per GPU at TP={shard.tp}")


def objects(shard: Shard, weight_bytes: float | None = None) -> tuple[int, int, float]:
    """The HBF-resident objects of one GPU as (layers, objects per layer, bytes each): an MoE model's local
    experts, or a dense model's layer weights, as stored (`weight_bytes`, one GPU's weights with the FP16
    embeddings and routers: quantized layers hold fewer bytes; default FP16). A quantized checkpoint stores
    every quantized layer (attention and experts alike) at the same bytes per FP16 byte, so an expert's share
    of the quantized layers' bytes is its share of their FP16 bytes."""
    m = shard.model
    stored = shard.weight_bytes if weight_bytes is None else weight_bytes
    if m.moe:
        fp16 = shard.embedding_bytes + m.layers * shard.router_bytes
        per_fp16_byte = (stored - fp16) / (shard.weight_bytes - fp16)
        return m.layers, m.experts // shard.tp, m.expert_params * BYTES_PER_VALUE * per_fp16_byte
    return m.layers, 1, float((stored - shard.embedding_bytes) / m.layers)


PRESETS: Registry[Layout] = Registry("memory layout", key=str.upper)
PRESETS.register("A", Layout("A", hbm_stacks=6), "HBFSim's layout A: 6 HBM stacks")
PRESETS.register("B", Layout("B", hbm_stacks=3, hbf_stacks=1, weights="hbf", frame_cache_gib=8.0),
                 "3 HBM + 1 HBF stack, weights in HBF")
PRESETS.register("C", Layout("C", hbm_stacks=1, hbf_stacks=3, weights="hbf", frame_cache_gib=8.0),
                 "1 HBM + 3 HBF stacks, weights in HBF")


def resolve_layout(spec: str) -> Layout | None:
    """`hbm` (None: today's package), a preset name (A, B, C; any case) or a TOML/JSON file."""
    if spec.lower() == "hbm":
        return None
    if spec in PRESETS:
        return PRESETS[spec]
    path = Path(spec)
    if not path.is_file():
        raise ConfigError(f"unknown memory layout {spec!r}: not hbm, {', '.join(PRESETS)} or a .toml/.json file")
    try:
        text = path.read_text()
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: malformed layout file ({str(error).splitlines()[0]})") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read ({error.strerror})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a layout file holds one table/object of layout keys")
    known = {f.name for f in fields(Layout)}
    unknown = sorted(set(data) - known)
    require(not unknown, f"{path}: unknown layout key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    require("hbm_stacks" in data, f"{path}: layout needs hbm_stacks")
    return Layout(**{"name": path.stem, **data})
