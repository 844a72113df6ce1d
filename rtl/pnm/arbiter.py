"""Two writers sharing the buffer's vector write port: the array's results and the vector unit's."""
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


class WriteArbiter(wiring.Component):
    """`first` and `second` → `o`. While both wait the choice alternates from grant to grant, so neither starves.
    A request offered and not yet taken stays the one offered (stream rule: payload holds until the transfer)."""

    def __init__(self, layout) -> None:
        super().__init__({"first": In(stream.Signature(layout)), "second": In(stream.Signature(layout)),
                          "o": Out(stream.Signature(layout))})

    def elaborate(self, platform) -> Module:
        m = Module()
        prefer_second = Signal()   # whom to pick when both wait (alternates after each grant)
        held, holding = Signal(), Signal()  # an offer not taken last cycle, and whose it was (1: second)
        pick = Mux(holding, held,
                   Mux(self.first.valid & self.second.valid, prefer_second, self.second.valid))
        m.d.comb += [
            self.o.valid.eq(self.first.valid | self.second.valid),
            self.o.payload.eq(Mux(pick, self.second.payload, self.first.payload)),
            self.first.ready.eq(self.o.ready & ~pick),
            self.second.ready.eq(self.o.ready & pick),
        ]
        m.d.sync += [holding.eq(self.o.valid & ~self.o.ready), held.eq(pick)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += prefer_second.eq(~pick)
        return m
