"""The view table: which MMU block addresses are a quantized tensor's FP16 view, and where its weights are."""
from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..dqb.params import DQBParams
from .params import BaseDieParams
from .ports import view_write


def view_match(p: BaseDieParams) -> data.StructLayout:
    block_bits = p.mmu_params().block_address_bits
    return data.StructLayout({"hit": 1, "view_base": block_bits, "weight_base": p.address_bits,
                              "tag": DQBParams.tag_bits})


class ViewTable(wiring.Component):
    """Entries written through `config` (always ready); `address` → `match` combinationally, every entry compared
    at once, the lowest matching index wins (as the DQB's request table). Reset clears every entry."""

    def __init__(self, params: BaseDieParams) -> None:
        self.params = params
        super().__init__({
            "config": In(stream.Signature(view_write(params))),
            "address": In(params.mmu_params().block_address_bits),
            "match": Out(view_match(params)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        p, write = self.params, self.config.payload
        block_bits = p.mmu_params().block_address_bits
        m.d.comb += self.config.ready.eq(1)
        for index in reversed(range(p.views)):   # assigned last = highest priority: index 0
            enable = Signal(name=f"view{index}_enable")
            base = Signal(block_bits, name=f"view{index}_base")
            end = Signal(block_bits + 1, name=f"view{index}_end")
            weight_base = Signal(p.address_bits, name=f"view{index}_weight_base")
            tag = Signal(DQBParams.tag_bits, name=f"view{index}_tag")
            with m.If(self.config.valid & (write.index == index)):
                m.d.sync += [enable.eq(write.enable), base.eq(write.view_base),
                             end.eq(write.view_base + write.view_rows), weight_base.eq(write.weight_base),
                             tag.eq(write.tag)]
            with m.If(enable & (self.address >= base) & (self.address < end)):
                m.d.comb += [self.match.hit.eq(1), self.match.view_base.eq(base),
                             self.match.weight_base.eq(weight_base), self.match.tag.eq(tag)]
        return m
