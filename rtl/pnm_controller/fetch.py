"""The instruction buffer (an Amaranth `lib.memory`) and the program counter that reads it."""
from amaranth.hdl import Module, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .isa import WORD_BITS
from .params import ControllerParams
from .ports import program_write, start


def fetched(p: ControllerParams) -> data.StructLayout:
    """A word and its address; an address of `depth` (its top bit) is past the last entry: no word."""
    return data.StructLayout({"pc": p.pc_bits + 1, "word": WORD_BITS})


class InstructionBuffer(wiring.Component):
    """`write` stores a word; `start` sets the program counter; `o` then gives one word per cycle in address order
    (the memory's registered read, held under back-pressure) until `flush`, which drops the word on `o` and stops
    fetching until the next `start`. Past the last entry it keeps giving address `depth`. Both inputs are always
    ready: the controller decides when the host may write or start. The contents survive reset."""

    def __init__(self, params: ControllerParams) -> None:
        self.params = params
        super().__init__({
            "write": In(stream.Signature(program_write(params))),
            "start": In(stream.Signature(start(params))),
            "flush": In(1),
            "o": Out(stream.Signature(fetched(params))),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.params
        m.submodules.words = words = memory.Memory(shape=WORD_BITS, depth=p.depth, init=[])
        writer, reader = words.write_port(), words.read_port()
        m.d.comb += [
            self.write.ready.eq(1), self.start.ready.eq(1),
            writer.addr.eq(self.write.payload.address), writer.data.eq(self.write.payload.word),
            writer.en.eq(self.write.valid),
        ]

        pc = Signal(p.pc_bits + 1)
        fetching = Signal()
        advance = ~self.o.valid | self.o.ready
        m.d.comb += [reader.addr.eq(pc[:p.pc_bits]), reader.en.eq(advance), self.o.payload.word.eq(reader.data)]
        with m.If(self.flush):
            m.d.sync += [self.o.valid.eq(0), fetching.eq(0)]
        with m.Elif(advance):
            m.d.sync += [self.o.valid.eq(fetching), self.o.payload.pc.eq(pc)]
            with m.If(fetching & ~pc[p.pc_bits]):
                m.d.sync += pc.eq(pc + 1)
        with m.If(self.start.valid):
            m.d.sync += [pc.eq(self.start.payload.pc), fetching.eq(1)]
        return m
