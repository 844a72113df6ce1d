"""The view port between the MMU's memory side and the DQB's GPU side: it turns an MMU read of a quantized
tensor's FP16 view into a DQB read of the weight beat that expands into it, under the view's tag, and hands each
MMU read the one DQB output beat that is its row.

One DQB read of a quantized beat returns 16/bits beats, one MMU row each (the DQB's interface is the MMU's
request width). The MMU reads a view row by row, so a read whose row lies further along the weight beat the
previous read fetched (same address and tag, a later beat) is answered from that read's beats instead of reading
the beat again: this is what makes a quantized load read 4 (INT4) or 2 (INT8) times fewer bytes. Beats no MMU read
asked for are dropped. Answers leave in request order, as the MMU expects: a DQB read's beats arrive in order, and
only a request's immediate successor joins its read."""
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..dqb import ports as dqb_ports
from ..dqb.tags import BYPASS, decode
from ..mmu import ports as mmu_ports
from .params import BaseDieParams
from .ports import MAX_EXPANSION, answer_entry, read_entry, view_write
from .views import ViewTable


class ViewPort(wiring.Component):
    """Ports: `mmu_req` → `mmu_resp` (the MMU's `mc_req`/`mc_resp`, in order, no tag); `dqb_req` → `dqb_resp` (the
    DQB's `gpu_req`/`gpu_resp`); `config` (view-table writes, always ready); `forget` (the DQB's table or the
    view table changes: no later read joins an earlier one); `error`, set until reset once a DQB beat carrying
    `error` (a reserved tag, a view whose weights no usable DQB entry holds) has been answered.

    Reads outside every view and every store pass with the MMU's address (in bytes) and the bypass tag. Timing:
    requests pass combinationally (no added cycle); so do answers."""

    def __init__(self, params: BaseDieParams) -> None:
        self.params = p = params
        mp, dp = p.mmu_params(), p.dqb_params()
        super().__init__({
            "mmu_req": In(stream.Signature(mmu_ports.mc_request(mp))),
            "mmu_resp": Out(stream.Signature(mmu_ports.mc_response(mp))),
            "dqb_req": Out(stream.Signature(dqb_ports.gpu_request(dp))),
            "dqb_resp": In(stream.Signature(dqb_ports.gpu_response(dp))),
            "config": In(stream.Signature(view_write(p))),
            "forget": In(1),
            "error": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.params
        shift = p.mmu_params().offset_bits      # one MMU row = one DQB beat
        m.submodules.views = views = ViewTable(p)
        m.submodules.answers = answers = SyncFIFO(width=answer_entry().size, depth=p.outstanding)
        m.submodules.reads = reads = SyncFIFO(width=read_entry().size, depth=p.outstanding)
        wiring.connect(m, wiring.flipped(self.config), views.config)

        # Request side: translate, and join the previous read when the row is further along its beat.
        request, found = self.mmu_req.payload, views.match
        m.d.comb += views.address.eq(request.address)
        flags = decode(found.tag)
        log2_expansion = Mux(flags.int4, 2, Mux(flags.int8 | flags.fp8, 1, 0))
        translated = found.hit & ~request.is_write
        offset = Signal.like(request.address)
        beat = Signal(range(MAX_EXPANSION))
        address, tag = Signal(p.address_bits), Signal(3)
        m.d.comb += [offset.eq(request.address - found.view_base),
                     beat.eq(Mux(translated, offset & ((1 << log2_expansion) - 1), 0)),
                     address.eq(Mux(translated, found.weight_base + ((offset >> log2_expansion) << shift),
                                    request.address << shift)),
                     tag.eq(Mux(translated, found.tag, BYPASS))]
        last_valid, last_address, last_tag = Signal(), Signal(p.address_bits), Signal(3)
        last_beat, parity = Signal(range(MAX_EXPANSION)), Signal()
        joins = ~request.is_write & last_valid & (address == last_address) & (tag == last_tag) & (beat > last_beat)
        room = answers.w_stream.ready & reads.w_stream.ready
        out = self.dqb_req.payload
        m.d.comb += [self.dqb_req.valid.eq(self.mmu_req.valid & ~joins & room),
                     out.address.eq(address), out.tag.eq(tag), out.is_write.eq(request.is_write),
                     out.mask.eq(request.mask), out.data.eq(request.data),
                     self.mmu_req.ready.eq(room & (joins | self.dqb_req.ready))]
        taken = self.mmu_req.valid & self.mmu_req.ready
        answer, read = answer_entry()(answers.w_stream.payload), read_entry()(reads.w_stream.payload)
        m.d.comb += [answers.w_stream.valid.eq(taken), answer.beat.eq(beat), answer.read.eq(Mux(joins, parity, ~parity)),
                     reads.w_stream.valid.eq(taken & ~joins), read.read.eq(~parity),
                     read.last.eq(Mux(translated, (1 << log2_expansion) - 1, 0))]
        with m.If(taken):
            m.d.sync += last_beat.eq(beat)
            with m.If(~joins):
                m.d.sync += [parity.eq(~parity), last_valid.eq(~request.is_write), last_address.eq(address),
                             last_tag.eq(tag)]
        with m.If(self.forget | (taken & request.is_write)):
            m.d.sync += last_valid.eq(0)

        # Response side: beat `index` of the oldest DQB read answers the oldest MMU read if it asked for it.
        head, wanted_by = read_entry()(reads.r_stream.payload), answer_entry()(answers.r_stream.payload)
        index = Signal(range(MAX_EXPANSION))
        wanted = answers.r_stream.valid & (wanted_by.read == head.read) & (wanted_by.beat == index)
        beat_in = self.dqb_resp
        m.d.comb += [self.mmu_resp.valid.eq(beat_in.valid & wanted), self.mmu_resp.payload.data.eq(beat_in.payload.data),
                     beat_in.ready.eq(~wanted | self.mmu_resp.ready)]
        moved = beat_in.valid & beat_in.ready
        finished = index == head.last
        m.d.comb += [answers.r_stream.ready.eq(moved & wanted), reads.r_stream.ready.eq(moved & finished)]
        with m.If(moved):
            m.d.sync += index.eq(Mux(finished, 0, index + 1))
            with m.If(beat_in.payload.error):
                m.d.sync += self.error.eq(1)
        return m
