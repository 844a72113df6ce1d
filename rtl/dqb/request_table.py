"""Request table (StreamDQ §3.4): one entry per quantized layer, found by range match on the address."""
from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .params import DQBParams
from .ports import config_write, log2_width_bits


def match_layout(params: DQBParams) -> data.StructLayout:
    """The entry a read address falls in. `usable` is false for an entry the datapath cannot serve (a
    base not aligned to the beat, or a group narrower than 2 bytes); reads in it get the table-miss error."""
    return data.StructLayout({"hit": 1, "usable": 1, "weight_base": params.address_bits,
                              "scale_base": params.address_bits, "zero_base": params.address_bits,
                              "log2_group_width": log2_width_bits(params)})


class RequestTable(wiring.Component):
    """Entries written through `config` (always ready); `address` → `match` combinationally.

    Entries are registers, not a memory, because every one is compared at once; the lowest matching
    index wins. `updating` is high from the cycle after an update's first beat to the cycle after its last
    (`last` set): while it is, the table may hold a mix of old and new entries and must not be looked up. Reset
    clears every entry.
    """

    def __init__(self, params: DQBParams) -> None:
        self.params = params
        super().__init__({
            "config": In(stream.Signature(config_write(params))),
            "address": In(params.address_bits),
            "match": Out(match_layout(params)),
            "updating": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        p, beat_mask = self.params, self.params.beat_bytes - 1
        m.d.comb += self.config.ready.eq(1)
        write = self.config.payload
        with m.If(self.config.valid):
            m.d.sync += self.updating.eq(~write.last)
        aligned = ((write.weight_base | write.weight_size | write.scale_base | write.zero_base) & beat_mask) == 0
        matched = Signal()
        for index in reversed(range(p.table_entries)):  # assigned last = highest priority: index 0
            enable, usable = Signal(name=f"entry{index}_enable"), Signal(name=f"entry{index}_usable")
            base = Signal(p.address_bits, name=f"entry{index}_base")
            end = Signal(p.address_bits + 1, name=f"entry{index}_end")
            scale_base = Signal(p.address_bits, name=f"entry{index}_scale_base")
            zero_base = Signal(p.address_bits, name=f"entry{index}_zero_base")
            log2_width = Signal(log2_width_bits(p), name=f"entry{index}_log2_group_width")
            with m.If(self.config.valid & (write.index == index)):
                m.d.sync += [
                    enable.eq(write.enable), usable.eq(aligned & (write.log2_group_width >= 1)),
                    base.eq(write.weight_base), end.eq(write.weight_base + write.weight_size),
                    scale_base.eq(write.scale_base), zero_base.eq(write.zero_base),
                    log2_width.eq(write.log2_group_width),
                ]
            with m.If(enable & (self.address >= base) & (self.address < end)):
                m.d.comb += [
                    matched.eq(1),
                    self.match.usable.eq(usable), self.match.weight_base.eq(base),
                    self.match.scale_base.eq(scale_base), self.match.zero_base.eq(zero_base),
                    self.match.log2_group_width.eq(log2_width),
                ]
        m.d.comb += self.match.hit.eq(matched)
        return m
