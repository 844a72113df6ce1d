"""Request table (StreamDQ §3.4): one entry per quantized layer, found by range match on the address."""
from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .params import DQBParams
from .ports import config_write, log2_width_bits


def match_layout(p: DQBParams) -> data.StructLayout:
    """The entry a read address falls in. `usable` is false for an entry the datapath cannot serve (a
    base not aligned to the beat, or a group narrower than 2 bytes); reads in it get the table-miss error."""
    return data.StructLayout({"hit": 1, "usable": 1, "weight_base": p.address_bits,
                              "scale_base": p.address_bits, "zero_base": p.address_bits,
                              "log2_group_width": log2_width_bits(p)})


class RequestTable(wiring.Component):
    """Entries written through `config` (always ready); `address` → `match` combinationally.

    Entries are registers, not a memory, because every one is compared at once; the lowest matching
    index wins. Reset clears every entry.
    """

    def __init__(self, params: DQBParams) -> None:
        self.params = p = params
        super().__init__({
            "config": In(stream.Signature(config_write(p))),
            "address": In(p.address_bits),
            "match": Out(match_layout(p)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        self.build(m)
        return m

    def build(self, m: Module) -> None:
        """Add the logic to `m` (the DQB top builds its parts into one module)."""
        self._MustUse__silence = True  # built inline, so never elaborated on its own
        p, beat_mask = self.params, self.params.beat_bytes - 1
        m.d.comb += self.config.ready.eq(1)
        cfg = self.config.payload
        aligned = ((cfg.weight_base | cfg.weight_size | cfg.scale_base | cfg.zero_base) & beat_mask) == 0
        matched = Signal()
        for index in reversed(range(p.table_entries)):  # assigned last = highest priority: index 0
            enable, usable = Signal(name=f"entry{index}_enable"), Signal(name=f"entry{index}_usable")
            base = Signal(p.address_bits, name=f"entry{index}_base")
            end = Signal(p.address_bits + 1, name=f"entry{index}_end")
            scale_base = Signal(p.address_bits, name=f"entry{index}_scale_base")
            zero_base = Signal(p.address_bits, name=f"entry{index}_zero_base")
            log2_width = Signal(log2_width_bits(p), name=f"entry{index}_log2_group_width")
            with m.If(self.config.valid & (cfg.index == index)):
                m.d.sync += [
                    enable.eq(cfg.enable), usable.eq(aligned & (cfg.log2_group_width >= 1)),
                    base.eq(cfg.weight_base), end.eq(cfg.weight_base + cfg.weight_size),
                    scale_base.eq(cfg.scale_base), zero_base.eq(cfg.zero_base),
                    log2_width.eq(cfg.log2_group_width),
                ]
            with m.If(enable & (self.address >= base) & (self.address < end)):
                m.d.comb += [
                    matched.eq(1),
                    self.match.usable.eq(usable), self.match.weight_base.eq(base),
                    self.match.scale_base.eq(scale_base), self.match.zero_base.eq(zero_base),
                    self.match.log2_group_width.eq(log2_width),
                ]
        m.d.comb += self.match.hit.eq(matched)
