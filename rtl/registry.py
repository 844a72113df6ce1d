"""The one registry of blocks: each block's parameter dataclass, component and the bench that verifies it.

`basedie generate`, `verify`, `synth`, the port tables, the tests' parametrisations and the docs' tables all
read `BLOCKS`. Adding a block is its module(s) plus one `register(Block(...))` line, here or in the new module
(docs/guides/benches.md, "Adding a block"). Nothing here is in a block's or a bench's verified-sources closure:
a bench names `rtl.registry` only to look a block up (`basedie.verified.sources`)."""
from dataclasses import dataclass

from amaranth.lib import wiring

from .base_die.params import BaseDieParams
from .base_die.top import BaseDie
from .dqb.dqb import DQB
from .dqb.params import DQBParams
from .fp.add import FP32Add
from .fp.convert import ROUNDINGS, FP32Narrow, FP32NarrowParams, ToFP32, ToFP32Params
from .fp.multiply import FP16MulFP32, FP32Mul
from .mmu.mmu import MMU
from .mmu.params import MMUParams
from .params import NoParams, Params
from .pnm_lane.array import PNMArray
from .pnm_lane.lane import PNMLane
from .pnm_lane.params import ArrayParams, LaneParams
from .pnm_controller.controller import PNMController
from .pnm_controller.params import ControllerParams
from .pnm_buffer.buffer import PNMBuffer
from .pnm_buffer.params import BufferParams
from .pnm.params import PNMParams
from .pnm.top import PNM
from .pnm_vector.params import VectorParams
from .pnm_vector.vector import PNMVector


@dataclass(frozen=True)
class Bench:
    """How `basedie verify` (and `pytest`) prove a block: its cocotb bench module and the parameter sets."""
    module: str
    configs: tuple[dict, ...] = ({},)
    """Parameter sets proved by both `pytest` and `basedie verify` (less `pytest_leaves`)."""
    pytest_leaves: tuple[dict, ...] = ()
    """Of `configs`, the sets `pytest` leaves to `basedie verify` under Verilator (Icarus still runs them, on its
    shorter stimulus), because the other sets already build and exercise their logic: keeps the default test run
    short. `basedie verify`, `--quick` included, proves them as any other."""
    verify_only: tuple[dict, ...] = ()
    """Parameter sets too slow to build on every test run (full-width datapaths): `basedie verify` proves them,
    and `pytest` checks that the committed table holds their figures for the current RTL."""
    verify_only_minutes: float | None = None
    """Stated wall time of one `verify_only` set's first build and bench run on 2 cores: the progress estimate
    until a time has been recorded on this machine."""
    synthesis_budget_s: float | None = None
    """Seconds of Yosys after which a `configs` set may stand in the synthesis table as attempted (no figures);
    None: its figures are required. The table test checks that an attempt was given at least this budget."""
    dram: bool = False
    """Its bench can put the DRAM model (`tb.dram`) behind the block's memory port (`basedie verify --memory`)."""
    memory: str = "ideal"
    """The memory model `basedie verify` puts behind the block unless `--memory-model` names another."""


@dataclass(frozen=True)
class Block:
    name: str
    params: type[Params]
    component: type[wiring.Component]
    summary: str
    bench: Bench

    def build(self, params: Params | None = None) -> wiring.Component:
        return self.component(params if params is not None else self.params())


BLOCKS: dict[str, Block] = {}


def register(block: Block) -> Block:
    """Add `block` under its name; a name registered twice is a programming error, refused."""
    if block.name in BLOCKS:
        raise ValueError(f"block {block.name!r} is registered already")
    BLOCKS[block.name] = block
    return block


register(Block("fp_to_fp32", ToFP32Params, ToFP32, "INT4/INT8/FP8/FP16/BF16 → FP32, exact",
               Bench("tb.fp.bench", tuple({"source": s} for s in ("int4", "int8", "fp8_e4m3", "fp16", "bf16")))))
# ~300,000 vectors per set, 85 s of bench each on the 2-core CI machine: pytest proves each target once and each
# rounding once (FP16 to nearest even, BF16 toward zero); `basedie verify` all four.
register(Block("fp32_narrow", FP32NarrowParams, FP32Narrow, "FP32 → FP16/BF16, nearest-even or toward-zero + FTZ",
               Bench("tb.fp.bench", tuple({"target": t, "rounding": r} for t in ("fp16", "bf16") for r in ROUNDINGS),
                     pytest_leaves=({"target": "fp16", "rounding": "toward_zero_ftz"},
                                    {"target": "bf16", "rounding": "nearest_even"}))))
register(Block("fp32_add", NoParams, FP32Add, "FP32 adder, round-to-nearest-even", Bench("tb.fp.bench")))
register(Block("fp32_mul", NoParams, FP32Mul, "FP32 multiplier, round-to-nearest-even", Bench("tb.fp.bench")))
register(Block("fp16_mul_fp32", NoParams, FP16MulFP32, "FP16 × FP16 → FP32, exact product", Bench("tb.fp.bench")))
# The table's MMU figures come from an HBM4 pseudo channel, DuoPD's memory (§4.2: eight HBM4 stacks per GPU);
# pytest runs its bench behind the ideal controller, where the arbiter's exact grant order is checked.
register(Block("mmu", MMUParams, MMU, "DuoPD MMU: GPU/PNM queues, protected PNM LSU, arbiter, pending tables",
               Bench("tb.mmu.bench", ({"out_of_order": False}, {"out_of_order": True}), dram=True, memory="hbm4")))
# pytest proves 2-wide lanes (two 1-wide sublanes); `basedie verify` adds the paper's 1,024-wide lane (a 13-minute
# build) and the 16-lane array at a reduced width.
register(Block("pnm_lane", LaneParams, PNMLane, "DuoPD PNM SIMD lane: FP16 dot products, MLP and attention modes",
               Bench("tb.pnm_lane.bench", ({"width": 2, "sublane_width": 1},),
                     verify_only=({"width": 1024, "sublane_width": 128},), verify_only_minutes=2)))
register(Block("pnm_array", ArrayParams, PNMArray, "DuoPD PNM compute array: lanes sharing one memory operand",
               Bench("tb.pnm_lane.bench", ({"width": 2, "sublane_width": 1, "lanes": 2},),
                     verify_only=({"width": 16, "sublane_width": 4, "lanes": 16},))))
# Two FP32 lanes in pytest and `basedie verify` (built and run in about 96 CPU s); wider sets by name
# (`--param width=4`). Yosys ran the 2-wide vector unit (a 123-stage FP32 chain per lane) for over 40 minutes
# without finishing.
register(Block("pnm_vector", VectorParams, PNMVector,
               "DuoPD PNM vector unit: FP32 element-wise ops, exp/recip/rsqrt/SiLU/GELU, reductions, online softmax",
               Bench("tb.pnm_vector.bench", ({"width": 2},), synthesis_budget_s=300)))
# A 64-word buffer, 1,024 buffer rows, a 1 MiB address space and 128-byte tensors keep the random programs'
# operands and tensors small enough to cover the buffer's ends and the address space's; the logic is the same.
register(Block("pnm_controller", ControllerParams, PNMController,
               "DuoPD PNM controller: instruction buffer, fetch/decode/issue to the MMU, array and vector unit",
               Bench("tb.pnm_controller.bench", ({"depth": 64, "buffer_address_bits": 10, "address_bits": 20,
                                                  "max_sub_requests": 4, "mmu_outstanding": 4},))))
# pytest: 16 KB in 8 banks of 4 bytes, where a 16-byte array row spans half the banks, so every port fits on
# disjoint banks at once. `basedie verify` adds the paper's banking and ports (64 banks of 32 B, 2 KB rows) at
# 64 KB (a 10-minute build on the loaded 2-core machine): conflicts depend on the banks, not the depth.
register(Block("pnm_buffer", BufferParams, PNMBuffer,
               "DuoPD PNM buffer: banked SRAM for the array, the vector unit and the MMU's TSV forwarding",
               Bench("tb.pnm_buffer.bench", ({"total_bytes": 16384, "banks": 8, "bank_bytes": 4, "mmu_bytes": 4,
                                              "array_bytes": 16, "vector_bytes": 4},),
                     verify_only=({"total_bytes": 65536},), verify_only_minutes=1)))
# The whole PNM at a small size: 2 lanes of 8 FP16 (2 sublanes of 4), 4-byte rows (so a 1-lane vector unit), 4 KB
# of buffer in 8 banks of 4 B, a 64-word program and a 64 KB address space. Its build is dominated by the vector
# unit's, and so is its synthesis: Yosys did not finish in 15 minutes (as for the vector unit alone).
register(Block("pnm", PNMParams, PNM,
               "DuoPD PNM: controller, buffer, compute array, vector unit and MMU, running programs from a host start",
               Bench("tb.pnm.bench", ({"lanes": 2, "width": 8, "sublane_width": 4, "buffer_bytes": 4096,
                                           "banks": 8, "bank_bytes": 4, "depth": 64, "address_bits": 16,
                                           "data_bits": 32, "mmu_outstanding": 4},), synthesis_budget_s=900)))
# A 32-bit interface (2 lanes, 8 table entries, 32+32 S/Z lines) keeps the pytest builds to minutes; the full
# Table 5 configuration (512-bit interface, 32 lanes: a 7-minute build) is proved by `basedie verify`.
register(Block("dqb", DQBParams, DQB, "StreamDQ dequantization block of one HBM pseudo-channel",
               Bench("tb.dqb.bench", tuple({"interface_bits": 32, "internal_bits": 64, "request_table_bytes": 256,
                                            "sz_buffer_bytes": 256, "outstanding_reads": 16, "rounding": r}
                                           for r in ROUNDINGS),
                     verify_only=({"interface_bits": 512, "internal_bits": 1024, "rounding": "nearest_even"},),
                     verify_only_minutes=2, dram=True)))
# The PNM's small set (2 lanes of 8 FP16, 4-byte rows) with a 128 KiB address space (the decode layer's operands
# below 64 KiB, the quantized weights above) and the small DQB's sizes (8 table entries, 32+32 S/Z lines); its build
# (79 s), like the PNM's, is dominated by the vector unit's. The table's figures
# come from the ideal controller, as pytest's; `--memory-model hbm4` puts DuoPD's memory behind the DQB (each decode
# layer then takes minutes more of simulation).
register(Block("base_die", BaseDieParams, BaseDie,
               "Base die of one pseudo-channel group: the PNM and its MMU reading memory through the DQB",
               Bench("tb.base_die.bench",
                     ({"lanes": 2, "width": 8, "sublane_width": 4, "buffer_bytes": 4096, "banks": 8, "bank_bytes": 4,
                       "depth": 64, "address_bits": 17, "data_bits": 32, "mmu_outstanding": 4,
                       "request_table_bytes": 256, "sz_buffer_bytes": 256, "outstanding_reads": 16, "views": 8,
                       "outstanding": 32},),
                     synthesis_budget_s=900, dram=True)))
