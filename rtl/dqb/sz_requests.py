"""S/Z request generator (StreamDQ §3.4): forwards GPU requests to the memory controller and, before a
dequantized read, fetches the scale and zero-point beats its groups need unless the S/Z buffer holds them.

Presence is guaranteed by order: the memory controller answers in request order, so a fill issued before a
weight read has been written into its S/Z line by the time that read's data reaches the datapath, and a
later fill that reuses the line arrives only after it. The directory here therefore marks a line present
as soon as its fill is issued. Every read it issues is logged in the tag history buffer (a FIFO), which
steers the response side.
"""
from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from .history import HistoryBuffer
from .params import DQBParams
from .request_table import RequestTable, match_layout
from .ports import Kind, config_write, gpu_request, history_entry, line_bits, mc_request
from .tags import decode


class LineDirectory:
    """Beat addresses held by one half of the S/Z buffer: fully associative, round-robin replacement."""

    def __init__(self, m: Module, p: DQBParams, name: str) -> None:
        self.m, self.params = m, p
        self.tags = [Signal(p.address_bits, name=f"{name}{i}_tag") for i in range(p.sz_lines)]
        self.present = [Signal(name=f"{name}{i}_present") for i in range(p.sz_lines)]
        self.victim = Signal(line_bits(p), name=f"{name}_victim")

    def lookup(self, beat: Signal) -> tuple[Signal, Signal]:
        """(hit, line) for a beat address; at most one line holds a beat."""
        hit, line = Signal(), Signal(line_bits(self.params))
        for i, (tag, present) in enumerate(zip(self.tags, self.present)):
            with self.m.If(present & (tag == beat)):
                self.m.d.comb += [hit.eq(1), line.eq(i)]
        return hit, line

    def invalidate(self, condition, beat=None) -> None:
        """Forget every line (or the one holding `beat`) when `condition`; fills in the same cycle win."""
        for tag, present in zip(self.tags, self.present):
            with self.m.If(condition if beat is None else condition & (tag == beat)):
                self.m.d.sync += present.eq(0)

    def allocate(self, condition, beat) -> None:
        with self.m.If(condition):
            for i, (tag, present) in enumerate(zip(self.tags, self.present)):
                with self.m.If(self.victim == i):
                    self.m.d.sync += [tag.eq(beat), present.eq(1)]
            self.m.d.sync += self.victim.eq(self.victim + 1)


class SZRequestGenerator(wiring.Component):
    """`gpu_req` → (`mc_req`, `history`), with the request table programmed through `config`.

    A GPU request waits one cycle in a lookup register (table match and group index), then leaves as at
    most three memory requests, one per cycle: a scale fill on a scale miss, a zero-point fill on a zero
    miss, then the GPU's own read or store. With S/Z hits a request leaves every cycle. A store invalidates
    an S/Z line holding its beat, and any configuration write invalidates the whole buffer.
    """

    def __init__(self, params: DQBParams) -> None:
        self.params = p = params
        super().__init__({
            "gpu_req": In(stream.Signature(gpu_request(p))),
            "config": In(stream.Signature(config_write(p))),
            "mc_req": Out(stream.Signature(mc_request(p))),
            "history": Out(stream.Signature(history_entry(p))),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        self.build(m)
        return m

    def build(self, m: Module) -> None:
        """Add the logic to `m` (the DQB top builds its parts into one module)."""
        self._MustUse__silence = True  # built inline, so never elaborated on its own
        p = self.params
        beat_shift = exact_log2(p.beat_bytes)
        table = RequestTable(p)
        table.build(m)
        log = HistoryBuffer(m, p)
        wiring.connect(m, wiring.flipped(self.config), table.config)
        m.d.comb += [self.history.valid.eq(log.nonempty), self.history.payload.eq(log.head),
                     log.pop.eq(self.history.valid & self.history.ready)]

        # Lookup register.
        held = Signal()
        request = Signal(gpu_request(p))
        found = Signal(match_layout(p))
        done = Signal()
        m.d.comb += [table.address.eq(self.gpu_req.payload.address), self.gpu_req.ready.eq(~held | done)]
        with m.If(self.gpu_req.ready):
            m.d.sync += [held.eq(self.gpu_req.valid), request.eq(self.gpu_req.payload), found.eq(table.match)]

        flags = decode(request.tag)
        dequantize = held & ~request.is_write & flags.dequantize & found.hit & found.usable
        offset = Signal(p.address_bits)
        group = Signal(p.address_bits)
        scale_beat, zero_beat = Signal(p.address_bits), Signal(p.address_bits)
        # A beat never straddles an S/Z line: it covers at most beat_bytes/2 groups (groups ≥ 2 bytes), an
        # aligned power-of-two run inside the beat_bytes/2 scales of a scale line.
        m.d.comb += [
            offset.eq((request.address - found.weight_base) & ~(p.beat_bytes - 1)),
            group.eq(offset >> found.log2_group_width),
            scale_beat.eq((found.scale_base >> beat_shift) + (group >> (beat_shift - 1))),
        ]
        with m.If(flags.int4):  # two zero points per byte
            m.d.comb += zero_beat.eq((found.zero_base >> beat_shift) + (group >> (beat_shift + 1)))
        with m.Else():
            m.d.comb += zero_beat.eq((found.zero_base >> beat_shift) + (group >> beat_shift))

        scales, zeros = LineDirectory(m, p, "scale"), LineDirectory(m, p, "zero")
        scale_hit, scale_line = scales.lookup(scale_beat)
        zero_hit, zero_line = zeros.lookup(zero_beat)
        fill_scale = dequantize & ~scale_hit
        fill_zero = dequantize & scale_hit & ~zero_hit
        issued = Signal()
        m.d.comb += issued.eq(self.mc_req.valid & self.mc_req.ready)
        store = request.is_write
        entry = log.entry
        mc = self.mc_req.payload

        with m.If(fill_scale):
            m.d.comb += [
                self.mc_req.valid.eq(log.can_push),
                mc.address.eq(scale_beat << beat_shift), mc.kind.eq(Kind.SCALE),
                entry.kind.eq(Kind.SCALE), entry.scale_line.eq(scales.victim),
            ]
        with m.Elif(fill_zero):
            m.d.comb += [
                self.mc_req.valid.eq(log.can_push),
                mc.address.eq(zero_beat << beat_shift), mc.kind.eq(Kind.ZERO),
                entry.kind.eq(Kind.ZERO), entry.zero_line.eq(zeros.victim),
            ]
        with m.Else():
            m.d.comb += [
                self.mc_req.valid.eq(held & (store | log.can_push)),
                mc.address.eq(request.address), mc.is_write.eq(store), mc.data.eq(request.data),
                mc.kind.eq(Kind.GPU),
                entry.kind.eq(Kind.GPU), entry.tag.eq(request.tag),
                entry.table_miss.eq(flags.dequantize & ~(found.hit & found.usable)),
                entry.scale_line.eq(scale_line), entry.zero_line.eq(zero_line),
                entry.offset.eq(offset), entry.log2_group_width.eq(found.log2_group_width),
                done.eq(issued),
            ]
        m.d.comb += log.push.eq(issued & ~(done & store))

        scales.invalidate(self.config.valid)
        zeros.invalidate(self.config.valid)
        store_beat = request.address >> beat_shift
        scales.invalidate(done & store, store_beat)
        zeros.invalidate(done & store, store_beat)
        scales.allocate(issued & fill_scale, scale_beat)
        zeros.allocate(issued & fill_zero, zero_beat)
