"""The PNM pending table (§4.3): one entry per tensor in flight with its completion bitmap, and the completion
register that retires finished entries."""
from amaranth.hdl import Array, Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .params import MMUParams
from .ports import Fault, completion
from .protection import byte_mask


def entry_layout(params: MMUParams) -> data.StructLayout:
    """A tensor's entry: `expected` has one bit per sub-request to wait for (none for a refused instruction),
    `last` and `tail` give the last sub-request and the bytes it carries (0: all)."""
    p = params
    return data.StructLayout({"store": 1, "id": p.id_bits, "dest": p.buffer_address_bits, "fault": Fault,
                              "last": range(p.max_sub_requests), "tail": p.offset_bits,
                              "expected": p.max_sub_requests})


def allocation(params: MMUParams) -> wiring.Signature:
    """The load-store unit's request for an entry: a stream of entries, with the index the next one takes."""
    return wiring.Signature({"valid": Out(1), "ready": In(1), "payload": Out(entry_layout(params)),
                             "index": In(range(params.pending_entries))})


def entry_lookup(params: MMUParams) -> wiring.Signature:
    """The response router's view of the sub-request `sub` of `entry`: whether it is awaited (its entry live,
    expected and not yet answered), where its load data goes, and `mark` to record its answer."""
    p = params
    return wiring.Signature({
        "entry": Out(max(1, ceil_log2(p.pending_entries))), "sub": Out(max(1, ceil_log2(p.max_sub_requests))),
        "mark": Out(1),
        "state": In(data.StructLayout({"awaited": 1, "store": 1, "row": p.buffer_address_bits,
                                       "mask": p.request_bytes})),
    })


def retirement(params: MMUParams) -> wiring.Signature:
    """The completion register's view of the table: the `finished` entries, and `retire` one of them."""
    return wiring.Signature({"finished": In(params.pending_entries), "retire": Out(1),
                             "entry": Out(range(params.pending_entries)), "retired": In(completion(params))})


class PendingTable(wiring.Component):
    """Entries allocated through `allocate` (ready while one is free, lowest free index first), answered through
    `lookup`, retired through `retire`. An entry is finished when every expected bit is set; a refused
    instruction's entry expects nothing and is finished at once. `pending_entries` is our choice (DuoPD
    states no number)."""

    def __init__(self, params: MMUParams) -> None:
        self.params = params
        super().__init__({"allocate": In(allocation(params)), "lookup": In(entry_lookup(params)),
                          "retire": In(retirement(params))})

    def elaborate(self, platform) -> Module:
        m = Module()
        p, n = self.params, self.params.pending_entries
        valid = Signal(n)
        entries = Array(Signal(entry_layout(p), name=f"entry{i}") for i in range(n))
        bitmaps = Array(Signal(p.max_sub_requests, name=f"entry{i}_bitmap") for i in range(n))
        for i in reversed(range(n)):
            with m.If(~valid[i]):
                m.d.comb += self.allocate.index.eq(i)
        m.d.comb += self.allocate.ready.eq(~valid.all())
        for i in range(n):
            with m.If(self.allocate.valid & self.allocate.ready & (self.allocate.index == i)):
                m.d.sync += [valid[i].eq(1), entries[i].eq(self.allocate.payload), bitmaps[i].eq(0)]

        lookup, entry = self.lookup, entries[self.lookup.entry]
        m.d.comb += [
            lookup.state.awaited.eq(valid.bit_select(lookup.entry, 1) & entry.expected.bit_select(lookup.sub, 1)
                                    & ~bitmaps[lookup.entry].bit_select(lookup.sub, 1)),
            lookup.state.store.eq(entry.store),
            lookup.state.row.eq(entry.dest + lookup.sub),
            lookup.state.mask.eq(byte_mask(p, lookup.sub, entry.last, entry.tail)),
        ]
        for i in range(n):
            with m.If(lookup.mark & (lookup.entry == i)):
                m.d.sync += bitmaps[i].eq(bitmaps[i] | (1 << lookup.sub))

        retired = entries[self.retire.entry]
        m.d.comb += [
            self.retire.finished.eq(Cat(valid[i] & (bitmaps[i] == entries[i].expected) for i in range(n))),
            self.retire.retired.id.eq(retired.id), self.retire.retired.dest.eq(retired.dest),
            self.retire.retired.store.eq(retired.store), self.retire.retired.fault.eq(retired.fault),
        ]
        for i in range(n):
            with m.If(self.retire.retire & (self.retire.entry == i)):
                m.d.sync += valid[i].eq(0)
        return m


class Completion(wiring.Component):
    """One `completion` per instruction: a finished entry (lowest index first) retires into the register."""

    def __init__(self, params: MMUParams) -> None:
        super().__init__({"table": Out(retirement(params)),
                          "completion": Out(stream.Signature(completion(params)))})

    def elaborate(self, platform) -> Module:
        m = Module()
        finished = self.table.finished
        for i in reversed(range(len(finished))):
            with m.If(finished[i]):
                m.d.comb += self.table.entry.eq(i)
        load = ~self.completion.valid | self.completion.ready
        m.d.comb += self.table.retire.eq(load & finished.any())
        with m.If(load):
            m.d.sync += self.completion.valid.eq(finished.any())
            with m.If(finished.any()):
                m.d.sync += self.completion.payload.eq(self.table.retired)
        return m
