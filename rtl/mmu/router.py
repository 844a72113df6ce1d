"""Response routing (§4.3): GPU data and address back to the GPU; PNM load data straight to the buffer (direct
TSV forwarding, Fig. 7(b)); every PNM response sets its bit in the pending table's bitmap."""
from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .gpu_path import slot_lookup
from .params import MMUParams
from .pending import entry_lookup
from .ports import buffer_write, gpu_response, mc_response, tag_layout


class ResponseRouter(wiring.Component):
    """`mc_resp` with the `tag` of the request it answers → `gpu_resp` or `buf_wr`. `tag` is the response's own
    (out-of-order memory) or the oldest issued one (in-order memory); a response whose tag is not outstanding
    is consumed and dropped, and sets `stray_response` until reset."""

    def __init__(self, params: MMUParams) -> None:
        super().__init__({
            "mc_resp": In(stream.Signature(mc_response(params))),
            "tag": In(stream.Signature(tag_layout(params))),
            "slots": Out(slot_lookup(params)),
            "entries": Out(entry_lookup(params)),
            "gpu_resp": Out(stream.Signature(gpu_response(params))),
            "buf_wr": Out(stream.Signature(buffer_write(params))),
            "stray_response": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        answered, slot, entry = self.tag.payload, self.slots.state, self.entries.state
        response_valid = self.mc_resp.valid & self.tag.valid
        data = self.mc_resp.payload.data
        to_gpu, to_pnm, consumed = Signal(), Signal(), Signal()
        m.d.comb += [
            self.slots.slot.eq(answered.index.gpu_slot),
            self.entries.entry.eq(answered.index.pnm.entry), self.entries.sub.eq(answered.index.pnm.sub),
            to_gpu.eq(response_valid & ~answered.pnm & slot.busy),
            to_pnm.eq(response_valid & answered.pnm & entry.awaited),
            self.gpu_resp.valid.eq(to_gpu),
            self.gpu_resp.payload.id.eq(slot.id), self.gpu_resp.payload.address.eq(slot.address),
            self.gpu_resp.payload.is_write.eq(slot.is_write), self.gpu_resp.payload.data.eq(data),
            self.buf_wr.valid.eq(to_pnm & ~entry.store),
            self.buf_wr.payload.row.eq(entry.row), self.buf_wr.payload.data.eq(data),
            self.buf_wr.payload.mask.eq(entry.mask),
        ]
        stray = self.mc_resp.valid & ~to_gpu & ~to_pnm
        m.d.comb += [
            consumed.eq((to_gpu & self.gpu_resp.ready) | (to_pnm & (entry.store | self.buf_wr.ready))),
            self.mc_resp.ready.eq(consumed | stray),
            self.tag.ready.eq(consumed | (stray & self.tag.valid)),
            self.slots.release.eq(consumed & to_gpu),
            self.entries.mark.eq(consumed & to_pnm),
        ]
        with m.If(stray):
            m.d.sync += self.stray_response.eq(1)
        return m
