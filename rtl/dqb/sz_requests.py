"""S/Z request generator (StreamDQ §3.4): forwards GPU requests to the memory controller and, before a
dequantized read, fetches the scale and zero-point beats its groups need unless the S/Z buffer holds them.

Presence is guaranteed by order: the memory controller answers in request order, so a fill issued before a
weight read has been written into its S/Z line by the time that read's data reaches the datapath, and a
later fill that reuses the line arrives only after it. The directory here therefore marks a line present
as soon as its fill is issued. Every request it issues is logged in the tag history buffer (a FIFO), which
steers the response side: the `history` port feeds it, and a request is issued only while it has room (the
memory answers stores too, with an acknowledgement that becomes the GPU's).
"""
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from .params import DQBParams
from .request_table import RequestTable, match_layout
from .ports import Kind, config_write, gpu_request, history_entry, line_bits, mc_request
from .tags import BYPASS, decode


class LineDirectory(wiring.Component):
    """Beat addresses held by one half of the S/Z buffer: fully associative, round-robin replacement.

    `beat` → (`hit`, `line`) combinationally; at most one line holds a beat. `victim` is the line the next fill
    takes. In a cycle with `flush` every line is forgotten, with `invalidate` the line holding
    `invalidate_beat`; with `allocate`, `beat` takes the victim line (a fill wins over an invalidation).
    """

    def __init__(self, params: DQBParams) -> None:
        self.params = params
        super().__init__({
            "beat": In(params.address_bits), "hit": Out(1), "line": Out(line_bits(params)),
            "victim": Out(line_bits(params)), "allocate": In(1),
            "flush": In(1), "invalidate": In(1), "invalidate_beat": In(params.address_bits),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.params
        tags = [Signal(p.address_bits, name=f"line{i}_tag") for i in range(p.sz_lines)]
        present = [Signal(name=f"line{i}_present") for i in range(p.sz_lines)]
        for i, (tag, held) in enumerate(zip(tags, present)):
            with m.If(held & (tag == self.beat)):
                m.d.comb += [self.hit.eq(1), self.line.eq(i)]
            with m.If(self.flush | (self.invalidate & (tag == self.invalidate_beat))):
                m.d.sync += held.eq(0)
            with m.If(self.allocate & (self.victim == i)):
                m.d.sync += [tag.eq(self.beat), held.eq(1)]
        with m.If(self.allocate):
            m.d.sync += self.victim.eq(self.victim + 1)
        return m


class SZRequestGenerator(wiring.Component):
    """`gpu_req` → (`mc_req`, `history`), with the request table programmed through `config`.

    A GPU request waits one cycle in a lookup register (table match and group index), then leaves as at
    most three memory requests, one per cycle: a scale fill on a scale miss, a zero-point fill on a zero
    miss, then the GPU's own read or store. With S/Z hits a request leaves every cycle. A store invalidates
    an S/Z line holding its beat, and any configuration write invalidates the whole buffer (once the request
    `mc_req` offers, if any, is taken).
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
        p = self.params
        beat_shift = exact_log2(p.beat_bytes)
        m.submodules.table = table = RequestTable(p)
        m.submodules.scales = scales = LineDirectory(p)
        m.submodules.zeros = zeros = LineDirectory(p)
        wiring.connect(m, wiring.flipped(self.config), table.config)
        # Lookup register.
        held = Signal()
        request = Signal(gpu_request(p))
        found = Signal(match_layout(p))
        done = Signal()
        # No request is looked up while a multi-entry table update is half written (`table.updating`): each sees
        # the whole table before the update or after it. One already held completes with what it found.
        free = ~held | done
        m.d.comb += [table.address.eq(self.gpu_req.payload.address),
                     self.gpu_req.ready.eq(free & ~table.updating)]
        with m.If(free):
            m.d.sync += [held.eq(self.gpu_req.valid & self.gpu_req.ready), request.eq(self.gpu_req.payload),
                         found.eq(table.match)]

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

        m.d.comb += [scales.beat.eq(scale_beat), zeros.beat.eq(zero_beat)]
        scale_hit, scale_line = scales.hit, scales.line
        zero_hit, zero_line = zeros.hit, zeros.line
        fill_scale = dequantize & ~scale_hit
        fill_zero = dequantize & scale_hit & ~zero_hit
        issued = Signal()
        m.d.comb += issued.eq(self.mc_req.valid & self.mc_req.ready)
        store = request.is_write
        entry = self.history.payload
        can_push = self.history.ready
        mc = self.mc_req.payload

        with m.If(fill_scale):
            m.d.comb += [
                self.mc_req.valid.eq(can_push),
                mc.address.eq(scale_beat << beat_shift), mc.kind.eq(Kind.SCALE),
                entry.kind.eq(Kind.SCALE), entry.scale_line.eq(scales.victim),
            ]
        with m.Elif(fill_zero):
            m.d.comb += [
                self.mc_req.valid.eq(can_push),
                mc.address.eq(zero_beat << beat_shift), mc.kind.eq(Kind.ZERO),
                entry.kind.eq(Kind.ZERO), entry.zero_line.eq(zeros.victim),
            ]
        with m.Else():
            m.d.comb += [
                self.mc_req.valid.eq(held & can_push),
                mc.address.eq(request.address), mc.is_write.eq(store), mc.data.eq(request.data),
                mc.mask.eq(Mux(store, request.mask, 0)), mc.kind.eq(Kind.GPU),
                entry.kind.eq(Kind.GPU), entry.is_write.eq(store),
                # A store's answer is a one-beat acknowledgement: logged as an untagged beat.
                entry.tag.eq(Mux(store, BYPASS, request.tag)),
                entry.table_miss.eq(~store & flags.dequantize & ~(found.hit & found.usable)),
                entry.scale_line.eq(scale_line), entry.zero_line.eq(zero_line),
                entry.offset.eq(offset), entry.log2_group_width.eq(found.log2_group_width),
                done.eq(issued),
            ]
        # Every request issued is logged: the memory answers each one, a store with an acknowledgement.
        m.d.comb += self.history.valid.eq(issued)

        # A config write empties the directories, but not under a request offered on mc_req and not yet taken:
        # the emptied directory would turn it into another request (a fill) before the memory controller took
        # it, against the stream rules (found by the formal proof `dqb mc_req_stable`, docs/formal.md). The
        # flush waits for that request to be taken.
        stalled = self.mc_req.valid & ~self.mc_req.ready
        flush_waiting = Signal()
        flush = (self.config.valid | flush_waiting) & ~stalled
        m.d.sync += flush_waiting.eq((self.config.valid | flush_waiting) & stalled)
        for directory in (scales, zeros):
            m.d.comb += [directory.flush.eq(flush), directory.invalidate.eq(done & store),
                         directory.invalidate_beat.eq(request.address >> beat_shift)]
        m.d.comb += [scales.allocate.eq(issued & fill_scale), zeros.allocate.eq(issued & fill_zero)]
        return m
