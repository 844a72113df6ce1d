"""The pipeline shared by the PNM lane and the compute array: FP16 products, FP32 adder trees, accumulators.

Every lane multiplies `width` FP16 operand pairs exactly into FP32 (`fp16_mul_fp32`) and reduces
them with FP32 round-to-nearest-even additions (`fp32_add`, its stages per tree level) in one fixed order:
a balanced pairwise tree over adjacent elements (one 2-input `fp32_add` per node, log2(width) levels). The
paper's 8-way adder trees (§4.2) are this tree grouped three levels at a time: an 8-input node built from
balanced binary trees is the same network, so the fan-in is no parameter. After
log2(`sublane_width`) levels the partial sums are the sublane dot products (attention mode); the remaining
levels sum the sublane sums into the lane's dot product (MLP mode). Then the dot product folds into the lane's
exact accumulator (`accumulator.py`: one stage, the loop) and the sum is rounded to FP32 (`ROUND_STAGES`), while
the sublane sums travel beside it, so that both modes have the same latency.
"""
from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, Shape, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..fp.add import FP32Add, fp32_add
from ..fp.formats import FP16, FP32
from ..fp.multiply import FP16MulFP32, fp16_mul_fp32
from ..pipeline import SharedDatapath, Stages
from .accumulator import ROUND_STAGES, fold, round_to_fp32
from .params import LaneParams
from .ports import Mode, lane_operands, output_layout

MULTIPLY_STAGES = FP16MulFP32.latency
ADD_STAGES = FP32Add.latency


def elements(payload: data.View, *path: str | int) -> list[Value]:
    """The elements of the array at `path` in `payload` (`"buffer", 3`: lane 3's buffer operand), each a slice of
    the payload signal itself. Amaranth does not merge nested slices and emits an inner slice again wherever its
    expression recurs, so `payload.a[k]` would emit all of `payload.a` at every use of every element: time
    quadratic in the width."""
    layout, offset = payload.shape(), 0
    for key in path:
        field = layout[key]
        layout, offset = data.Layout.cast(field.shape), offset + field.offset
    size = Shape.cast(layout.elem_shape).width
    signal = Value.cast(payload)
    return [signal[offset + k * size:offset + (k + 1) * size] for k in range(layout.length)]


def latency_of(params: LaneParams) -> int:
    """Multiply, log2(width) adder levels, the accumulator's fold, and its rounding to FP32."""
    return MULTIPLY_STAGES + ADD_STAGES * exact_log2(params.width) + 1 + ROUND_STAGES


class SIMDPipeline(wiring.Component):
    """`lanes` SIMD lanes in lockstep between a stream input `i` and a stream output `o`, one beat per cycle.

    Like `rtl.pipeline.PipelinedUnit`, every stage advances whenever the output register can move, so a
    stalled output holds the whole pipeline and `i.ready` is that advance condition. MLP beats without `emit`
    produce no output beat. An `operands` component routes the input payload to each lane's `a` and `b`.
    """

    initiation_interval = 1

    def __init__(self, params: LaneParams, in_layout: data.StructLayout, lanes: int | None,
                 operands: type[wiring.Component]) -> None:
        self.params = params
        self._lanes = 1 if lanes is None else lanes
        self._operands = operands
        super().__init__({"i": In(stream.Signature(in_layout)),
                          "o": Out(stream.Signature(output_layout(params, lanes)))})

    @property
    def latency(self) -> int:
        """Cycles from a beat accepted on `i` to its output on `o` (every beat, both modes)."""
        return latency_of(self.params)

    @property
    def shared_modules(self) -> dict[str, wiring.Component]:
        """The element modules the pipeline instantiates by name; `rtl.generate` writes each once beside it."""
        return {"pnm_fp16_mul_fp32": SharedDatapath(fp16_mul_fp32, FP16.width, FP32.width, MULTIPLY_STAGES),
                "pnm_fp32_add": SharedDatapath(fp32_add, FP32.width, FP32.width, ADD_STAGES)}

    def elaborate(self, platform) -> Module:
        m = Module()
        advance = Signal()
        m.d.comb += advance.eq(~self.o.valid | self.o.ready)
        payload = self.i.payload
        # Values travelling beside the trees: the beat's controls, then the finished sublane sums.
        carried = {"valid": self.i.valid, "attention": payload.mode == Mode.ATTENTION,
                   "clear": payload.clear, "emit": payload.emit}
        beside = Stages(m, advance)

        def element(module: str, name: str, a: Value, b: Value) -> Signal:
            result = Signal(FP32.width, name=name)
            m.submodules[f"{name}_unit"] = SharedDatapath.instance(module, advance, a, b, result)
            return result

        m.submodules.operands = operands = self._operands(self.params)
        m.d.comb += operands.beat.eq(payload)
        a, b = (data.View(lane_operands(self.params, self._lanes), port) for port in (operands.a, operands.b))
        partials = [[element("pnm_fp16_mul_fp32", f"lane{lane}_mul{k}", x, y)
                     for k, (x, y) in enumerate(zip(elements(a, lane), elements(b, lane)))]
                    for lane in range(self._lanes)]
        carried = self._carry(beside, MULTIPLY_STAGES, carried)

        sublane_levels = exact_log2(self.params.sublane_width)
        for depth in range(exact_log2(self.params.width)):
            if depth == sublane_levels:
                carried |= {f"sum{lane}_{s}": value for lane, sums in enumerate(partials)
                            for s, value in enumerate(sums)}
            partials = [[element("pnm_fp32_add", f"lane{lane}_add{depth}_{k // 2}", sums[k], sums[k + 1])
                         for k in range(0, len(sums), 2)]
                        for lane, sums in enumerate(partials)]
            carried = self._carry(beside, ADD_STAGES, carried)
        if sublane_levels == exact_log2(self.params.width):  # one sublane: its sum is the lane's
            carried |= {f"sum{lane}_0": sums[0] for lane, sums in enumerate(partials)}

        c = SimpleNamespace(**carried)
        mlp_beat = advance & c.valid & ~c.attention
        states = [fold(m, f"lane{lane}_accumulator", mlp_beat, c.clear, dot, self.params.width)
                  for lane, (dot,) in enumerate(partials)]
        carried = vars(beside(valid=c.valid & (c.attention | c.emit), attention=c.attention,
                              sums=Cat(carried[f"sum{lane}_{s}"] for lane in range(self._lanes)
                                       for s in range(self.params.sublanes))))
        accumulators = [round_to_fp32(beside.fork(), state) for state in states]
        out = SimpleNamespace(**self._carry(beside, ROUND_STAGES, carried))
        beside.require_depth(self.latency, self)

        m.d.comb += [
            self.i.ready.eq(advance),
            self.o.valid.eq(out.valid),
            Value.cast(self.o.payload).eq(Cat(out.attention, Mux(out.attention, 0, Cat(*accumulators)),
                                              Mux(out.attention, out.sums, 0))),
        ]
        return m

    @staticmethod
    def _carry(beside: Stages, stages: int, values: dict) -> dict:
        """Register `values` through `stages` stages beside the element modules of one level."""
        for _ in range(stages):
            values = vars(beside(**values))
        return values
