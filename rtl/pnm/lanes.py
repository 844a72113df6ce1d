"""The compute array of the top: `lanes` PNM lanes (`rtl/pnm_lane/lane.py`) in lockstep, sharing one memory operand.

`PNMArray` takes every lane's buffer operand through one port, which Amaranth cannot build beyond 65,536 bits
(the paper's 16 × 1,024 FP16 is 262,144); here each lane keeps its own operand port, so the paper's array builds.
The arithmetic is the lane's (and `PNMArray`'s in MLP mode): the same FP16 products, adder tree and accumulator."""
from amaranth.hdl import Cat, Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..pnm_lane.lane import PNMLane
from ..pnm_lane.simd import latency_of
from .params import PNMParams
from .ports import lane_beat, lane_results


class LaneArray(wiring.Component):
    """`i`: the shared beat (memory operand and controls); `operand<j>`: lane j's own operand (`width` FP16),
    taken with `i`'s transfer; `o`: every lane's accumulator (MLP) or sublane sums (attention), one beat per
    emitting beat of `i`.

    Every lane gets the same beats and stalls on the same `o.ready`, so the lanes stay in lockstep; `i.ready` and
    `o.valid` are nonetheless the AND over lanes, so a beat moves only when every lane moves it."""

    initiation_interval = 1

    def __init__(self, params: PNMParams) -> None:
        self.params = params
        self.latency = latency_of(params.lane_params())
        self._lanes = [PNMLane(params.lane_params()) for _ in range(params.lanes)]
        super().__init__({"i": In(stream.Signature(lane_beat(params))),
                          **{f"operand{j}": In(16 * params.width) for j in range(params.lanes)},
                          "o": Out(stream.Signature(lane_results(params)))})

    def elaborate(self, platform) -> Module:
        m = Module()
        lanes = self._lanes
        for j, lane in enumerate(lanes):
            m.submodules[f"lane{j}"] = lane
        ready = Cat(lane.i.ready for lane in lanes).all()
        valid = Cat(lane.o.valid for lane in lanes).all()
        beat = self.i.payload
        m.d.comb += [self.i.ready.eq(ready), self.o.valid.eq(valid)]
        for j, lane in enumerate(lanes):
            m.d.comb += [
                lane.i.valid.eq(self.i.valid & ready),
                lane.i.payload.a.eq(getattr(self, f"operand{j}")),
                lane.i.payload.b.eq(beat.memory),
                lane.i.payload.mode.eq(beat.mode), lane.i.payload.clear.eq(beat.clear),
                lane.i.payload.emit.eq(beat.emit),
                lane.o.ready.eq(self.o.ready & valid),
                self.o.payload.accumulator[j].eq(lane.o.payload.accumulator),
                self.o.payload.sublane_sums[j].eq(lane.o.payload.sublane_sums),
            ]
        return m

    @property
    def shared_modules(self) -> dict[str, wiring.Component]:
        return self._lanes[0].shared_modules
