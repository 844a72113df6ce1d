"""The PNM buffer: banked single-ported SRAM behind stream ports for the array, the vector unit and the MMU.

A request is accepted (`ready`) in the cycle its banks are granted, and it reaches the banks at that edge:
accesses take effect in the order they are accepted, and accesses accepted in one cycle touch disjoint
banks. A read's data leaves the banks one cycle later into its port's response queue, in request order."""
from amaranth.hdl import Cat, Module, ResetSignal, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from .arbiter import BankArbiter
from .params import BufferParams, Port
from .ports import signature_members

RESPONSE_DEPTH = 3
"""Entries of a read port's response queue: one read in the banks and two waiting, so a port whose consumer
takes one response per cycle issues one read per cycle."""


class Bank(wiring.Component):
    """One single-ported SRAM bank of `depth` words of `nbytes`: `word` is read (on `read` in the next cycle)
    and, where `enable` has a bit set, written byte by byte with `data`."""

    def __init__(self, nbytes: int, depth: int) -> None:
        self.nbytes, self.depth = nbytes, depth
        super().__init__({"word": In(range(depth)), "enable": In(nbytes), "data": In(8 * nbytes),
                          "read": Out(8 * nbytes)})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.memory = memory = Memory(shape=data.ArrayLayout(8, self.nbytes), depth=self.depth, init=[])
        write, read = memory.write_port(granularity=1), memory.read_port()  # one enable per byte
        m.d.comb += [write.addr.eq(self.word), read.addr.eq(self.word), write.en.eq(self.enable),
                     write.data.eq(self.data), self.read.eq(read.data)]
        return m


class ReadReturn(wiring.Component):
    """A read port's response queue. `issue`: a read is accepted now; its bank data arrives on `data` next
    cycle. `credit`: the queue has room for a read accepted now, counting the one arriving."""

    def __init__(self, width: int) -> None:
        super().__init__({"issue": In(1), "data": In(width), "credit": Out(1), "o": Out(stream.Signature(width))})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.queue = queue = SyncFIFO(width=len(self.data), depth=RESPONSE_DEPTH)
        arriving = Signal()
        m.d.sync += arriving.eq(self.issue)
        m.d.comb += [queue.w_en.eq(arriving), queue.w_data.eq(self.data),
                     self.credit.eq(queue.level + arriving < RESPONSE_DEPTH)]
        wiring.connect(m, queue.r_stream, wiring.flipped(self.o))
        return m


class Placement:
    """Where one port's request falls: `port.bytes // bank_bytes` adjacent banks of one aligned group, all at
    the same word. Row r covers bytes [r·bytes, (r+1)·bytes): group r mod groups, word r div groups."""

    def __init__(self, params: BufferParams, port: Port, row) -> None:
        self.words = port.bytes // params.bank_bytes
        self.groups = params.banks // self.words
        bits = exact_log2(self.groups)
        self.group, self.word = row[:bits], row[bits:]
        self.banks = Cat((self.group == g).replicate(self.words) for g in range(self.groups))

    def slot(self, bank: int) -> int:
        """Which `bank_bytes` slice of the request bank `bank` holds (the same in every group)."""
        return bank % self.words


class PNMBuffer(wiring.Component):
    """Ports (`lib.stream`, layouts in `ports.py`): for each client in `params.ports`, a request stream
    `<name>_rd` (`row`) with its response stream `<name>_rdata` (`data`), or `<name>_wr` (`row`, `data`,
    `mask`). Requests that need a bank another request holds this cycle wait (`ready` low), chosen by
    `BankArbiter`'s rotating priority; a read also waits while its response queue is full. During reset no
    request is accepted; reset empties the response queues and leaves the banks' contents as they were.

    `latency`: a read accepted at cycle t responds at t + 2 (the bank's registered read, then the queue).
    `initiation_interval`: every port may issue one request per cycle when nothing conflicts."""

    latency = 2
    initiation_interval = 1

    def __init__(self, params: BufferParams = BufferParams()) -> None:
        self.params = params
        super().__init__(signature_members(params))

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.params
        m.submodules.arbiter = arbiter = BankArbiter(len(p.ports), p.banks)
        requests = [getattr(self, port.request) for port in p.ports]
        places = [Placement(p, port, request.payload.row) for port, request in zip(p.ports, requests)]
        returns = {}
        for k, port in enumerate(p.ports):
            if not port.write:
                returns[k] = m.submodules[f"{port.name}_return"] = ReadReturn(8 * port.bytes)
                wiring.connect(m, returns[k].o, wiring.flipped(getattr(self, port.response)))
            credit = 1 if port.write else returns[k].credit
            # Nothing is accepted during reset: a write then would outlive it in the banks.
            wants = requests[k].valid & credit & ~ResetSignal()
            m.d.comb += [arbiter.want[k].eq(wants), arbiter.banks[k].eq(places[k].banks),
                         requests[k].ready.eq(arbiter.grant[k])]

        bank_data = []
        for b in range(p.banks):
            bank = m.submodules[f"bank{b}"] = Bank(p.bank_bytes, p.depth)
            width = 8 * p.bank_bytes
            for k, (port, place, request) in enumerate(zip(p.ports, places, requests)):
                here = Signal(name=f"bank{b}_{port.request}")
                m.d.comb += here.eq(arbiter.grant[k] & place.banks[b])
                # At most one port holds a bank in a cycle: the bank takes that port's word, data and byte enables.
                with m.If(here):
                    m.d.comb += bank.word.eq(place.word)
                    if port.write:
                        s = place.slot(b)
                        m.d.comb += [bank.data.eq(request.payload.data[s * width:(s + 1) * width]),
                                     bank.enable.eq(request.payload.mask[s * p.bank_bytes:(s + 1) * p.bank_bytes])]
            bank_data.append(bank.read)

        for k, ret in returns.items():
            place = places[k]
            m.d.comb += ret.issue.eq(arbiter.grant[k])
            if place.groups == 1:
                m.d.comb += ret.data.eq(Cat(bank_data))
                continue
            group = Signal.like(place.group, name=f"{p.ports[k].response}_group")  # of the read in the banks
            m.d.sync += group.eq(place.group)
            with m.Switch(group):
                for g in range(place.groups):
                    with m.Case(g):
                        m.d.comb += ret.data.eq(Cat(bank_data[g * place.words:(g + 1) * place.words]))
        return m
