"""The composition matrix (DESIGN.md, "The axes compose"): system × weight format × where it is dequantized ×
memory layout × where the KV cache and a shared prefix live, each cell one small simulation.

A cell either runs with finite results or is refused for a physical reason (it does not fit, the package has
no HBF stack to place something in, no kernel of that kind exists); `tests/sysmodel/test_composition.py` walks
every cell and `scripts/composition_matrix.py` writes the table of docs/design/composition.md from the same
cells.
"""
import math
import re
from dataclasses import dataclass, replace

from basedie.verified import VerifiedBlocks
from .config import SimulationConfig
from .errors import ConfigError
from .hbf.layout import PRESETS, Layout
from .quantized import Quantization
from .simulate import simulate
from .workload import FixedBatch

SYSTEMS = ("duopd", "pd-1:1", "chunked", "sm-7:3", "gpu", "colocated:2x4")
# (weights, dequant, kernel): the GPU kernels are GPTQ's (the one family with INT4 and INT8 kernels).
FORMATS = (("fp16", None, None),
           *((weights, dequant, None if dequant == "dqb" else "gptq")
             for weights in ("w4a16", "w8a16", "fp8") for dequant in ("dqb", "gpu-fused", "gpu-split")))
MEMORIES = ("hbm", "A", "B", "C")
# Where the KV cache and the shared prefix live: (name, KV place, prefix place, shared prefix tokens).
PLACEMENTS = (("kv-hbm", "hbm", "hbm", 0), ("kv-hbf", "hbf", "hbm", 0),
              ("prefix-hbm", "hbm", "hbm", 256), ("prefix-hbf", "hbm", "hbf", 256))
# A small dense model whose every shape the GPTQ group of 128 divides at TP 8, on a machine with the CUDA-core
# figures (GPU kernels) and the pseudo-channel count (DQBs) known.
MODEL, HARDWARE = "Llama-3.1-8B", "a100-sxm4-80gb"
WORKLOAD = FixedBatch(2, 512, 4)
# Refusals for a reason outside the model: the machine cannot hold it, or nothing of that kind exists.
PHYSICAL = re.compile(r"does not fit|has no HBF stack|leaves no HBF|has no kernel for")


@dataclass(frozen=True)
class Cell:
    system: str
    weights: str
    dequant: str | None
    kernel: str | None
    memory: str
    placement: str
    model: str = MODEL

    @property
    def id(self) -> str:
        cell = "/".join((self.system, self.weights, self.dequant or "-", self.memory, self.placement))
        return cell if self.model == MODEL else f"{self.model}/{cell}"

    def config(self) -> SimulationConfig:
        """The cell's configuration; a placement the package cannot hold is refused by its `Layout`."""
        _, kv, prefix, tokens = next(p for p in PLACEMENTS if p[0] == self.placement)
        memory: str | Layout = self.memory
        if kv == "hbf" or prefix == "hbf":
            base = PRESETS[self.memory] if self.memory != "hbm" else Layout("hbm", hbm_stacks=1)
            memory = replace(base, name=f"{base.name}+{self.placement}", kv=kv, prefix=prefix)
        return SimulationConfig(system=self.system, model=self.model, hardware=HARDWARE, workload=WORKLOAD,
                                max_batch=WORKLOAD.requests, quantization=_quantization(self), memory=memory,
                                shared_prefix_tokens=tokens)


def _quantization(cell: Cell) -> Quantization:
    if cell.weights == "fp16":
        return Quantization()
    return Quantization(cell.weights, 128, cell.dequant, cell.kernel)


def cells() -> list[Cell]:
    return [Cell(system, weights, dequant, kernel, memory, placement)
            for system in SYSTEMS for weights, dequant, kernel in FORMATS for memory in MEMORIES
            for placement, *_ in PLACEMENTS]


def outcome(cell: Cell, table: VerifiedBlocks | None = None) -> tuple[str, str]:
    """`table`: the verified figures (default: the committed table, loaded and checked on every call).
    ("runs", TPOT p50 in ms, as text), ("refused", the one-line reason) or ("gap", a refusal that is not physical)."""
    try:
        result = simulate(cell.config(), table)
    except ConfigError as error:
        message = str(error)
        return ("refused" if PHYSICAL.search(message) and "\n" not in message else "gap"), message
    tpot, energy = result.summary["tpot_s"]["p50"], result.summary["energy_j"]["total"]
    if not (math.isfinite(tpot) and tpot > 0 and math.isfinite(energy)):
        return "gap", f"not a finite result: TPOT {tpot} s, energy {energy} J"
    return "runs", f"{tpot * 1e3:.3f}"
