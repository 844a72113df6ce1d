"""Tag history buffer (StreamDQ §3.4): every outstanding memory read in request order, with what its data
is for. A FIFO over `lib.memory`, built inline so that the DQB stays one Verilog module."""
from amaranth.hdl import Module, Signal
from amaranth.lib import memory
from amaranth.utils import exact_log2

from .params import DQBParams
from .ports import history_entry


class HistoryBuffer:
    """`push(entry)` when `can_push`; `head` is valid while `nonempty`; `pop` drops it. Reset empties it."""

    def __init__(self, m: Module, p: DQBParams) -> None:
        depth = p.outstanding_reads
        layout = history_entry(p)
        m.submodules.tag_history = entries = memory.Memory(shape=layout, depth=depth, init=[])
        write, read = entries.write_port(), entries.read_port(domain="comb")
        write_at, read_at = Signal(exact_log2(depth)), Signal(exact_log2(depth))
        count = Signal(range(depth + 1))
        self.push, self.pop = Signal(), Signal()
        self.entry = Signal(layout)
        self.can_push, self.nonempty = Signal(), Signal()
        self.head = read.data
        m.d.comb += [
            self.can_push.eq(count != depth), self.nonempty.eq(count != 0),
            write.addr.eq(write_at), write.data.eq(self.entry), write.en.eq(self.push),
            read.addr.eq(read_at),
        ]
        with m.If(self.push):
            m.d.sync += write_at.eq(write_at + 1)
        with m.If(self.pop):
            m.d.sync += read_at.eq(read_at + 1)
        m.d.sync += count.eq(count + self.push - self.pop)
