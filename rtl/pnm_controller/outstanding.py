"""Commands issued to one unit and not yet completed."""
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class Outstanding(wiring.Component):
    """Counts `issue` up and `complete` (a completion transfer) down. `room`: another command may issue (fewer
    than `limit` outstanding). `drained`: none is left once this cycle's completion counts (a barrier may retire
    in the cycle its last completion arrives). `stray`: a completion with nothing outstanding (not counted)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__({"issue": In(1), "complete": In(1), "count": Out(range(limit + 1)), "room": Out(1),
                          "drained": Out(1), "stray": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        count = Signal(range(self.limit + 1))
        m.d.comb += [
            self.count.eq(count),
            self.room.eq(count < self.limit),
            self.stray.eq(self.complete & (count == 0)),
            self.drained.eq(count == self.complete),
        ]
        m.d.sync += count.eq(count + self.issue - (self.complete & ~self.stray))
        return m
