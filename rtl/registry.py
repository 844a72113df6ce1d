"""The blocks `basedie generate` can elaborate: a name, a parameter dataclass and a component class."""
from dataclasses import dataclass

from amaranth.lib import wiring

from .base_die.params import BaseDieParams
from .base_die.top import BaseDie
from .dqb.dqb import DQB
from .dqb.params import DQBParams
from .fp.add import FP32Add
from .fp.convert import FP32Narrow, FP32NarrowParams, ToFP32, ToFP32Params
from .fp.multiply import FP16MulFP32, FP32Mul
from .mmu.mmu import MMU
from .mmu.params import MMUParams
from .params import NoParams, Params
from .pnm.array import PNMArray
from .pnm.lane import PNMLane
from .pnm.params import ArrayParams, LaneParams
from .pnm_controller.controller import PNMController
from .pnm_controller.params import ControllerParams
from .pnm_buffer.buffer import PNMBuffer
from .pnm_buffer.params import BufferParams
from .pnm_top.params import PNMParams
from .pnm_top.top import PNM
from .pnm_vector.params import VectorParams
from .pnm_vector.vector import PNMVector


@dataclass(frozen=True)
class Block:
    name: str
    params: type[Params]
    component: type[wiring.Component]
    summary: str

    def build(self, params: Params | None = None) -> wiring.Component:
        return self.component(params if params is not None else self.params())


BLOCKS: dict[str, Block] = {block.name: block for block in (
    Block("fp_to_fp32", ToFP32Params, ToFP32, "INT4/INT8/FP8/FP16/BF16 → FP32, exact"),
    Block("fp32_narrow", FP32NarrowParams, FP32Narrow, "FP32 → FP16/BF16, nearest-even or toward-zero + FTZ"),
    Block("fp32_add", NoParams, FP32Add, "FP32 adder, round-to-nearest-even"),
    Block("fp32_mul", NoParams, FP32Mul, "FP32 multiplier, round-to-nearest-even"),
    Block("fp16_mul_fp32", NoParams, FP16MulFP32, "FP16 × FP16 → FP32, exact product"),
    Block("mmu", MMUParams, MMU, "DuoPD MMU: GPU/PNM queues, protected PNM LSU, arbiter, pending tables"),
    Block("pnm_lane", LaneParams, PNMLane, "DuoPD PNM SIMD lane: FP16 dot products, MLP and attention modes"),
    Block("pnm_array", ArrayParams, PNMArray, "DuoPD PNM compute array: lanes sharing one memory operand"),
    Block("pnm_vector", VectorParams, PNMVector,
          "DuoPD PNM vector unit: FP32 element-wise ops, exp/recip/rsqrt/SiLU/GELU, reductions, online softmax"),
    Block("pnm_controller", ControllerParams, PNMController,
          "DuoPD PNM controller: instruction buffer, fetch/decode/issue to the MMU, array and vector unit"),
    Block("pnm_buffer", BufferParams, PNMBuffer,
          "DuoPD PNM buffer: banked SRAM for the array, the vector unit and the MMU's TSV forwarding"),
    Block("pnm", PNMParams, PNM,
          "DuoPD PNM: controller, buffer, compute array, vector unit and MMU, running programs from a host start"),
    Block("dqb", DQBParams, DQB, "StreamDQ dequantization block of one HBM pseudo-channel"),
    Block("base_die", BaseDieParams, BaseDie,
          "Base die of one pseudo-channel group: the PNM and its MMU reading memory through the DQB"),
)}
