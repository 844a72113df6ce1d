"""The GPU side of the MMU (§4.3, Fig. 8): the GPU request queue and the slots that remember each request the
memory controller has not answered."""
from amaranth.hdl import Array, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .params import MMUParams
from .ports import gpu_request, tagged_request


def slot_lookup(params: MMUParams) -> wiring.Signature:
    """The response router's view of the GPU slots: what `slot` holds, and `release` to free it."""
    return wiring.Signature({
        "slot": Out(max(1, ceil_log2(params.gpu_outstanding))), "release": Out(1),
        "state": In(data.StructLayout({"busy": 1, "id": params.id_bits, "address": params.block_address_bits,
                                       "is_write": 1})),
    })


class GPUPath(wiring.Component):
    """`gpu_req` → queue → `request` (tagged with a free slot; offered only while a slot is free). A request
    the arbiter takes fills its slot with its id and address until the router releases it through `slots`.
    The queue depth (`queue_depth`) and the slot count (`gpu_outstanding`) are our choices: DuoPD states
    neither."""

    def __init__(self, params: MMUParams) -> None:
        self.params = params
        super().__init__({"gpu_req": In(stream.Signature(gpu_request(params))),
                          "request": Out(stream.Signature(tagged_request(params))),
                          "slots": In(slot_lookup(params))})

    def elaborate(self, platform) -> Module:
        m = Module()
        p, n = self.params, self.params.gpu_outstanding
        # The requests from the die-to-die interface, as they came.
        m.submodules.queue = queue = SyncFIFO(width=gpu_request(p).size, depth=p.queue_depth)
        wiring.connect(m, wiring.flipped(self.gpu_req), queue.w_stream)
        head = data.View(gpu_request(p), queue.r_data)

        busy = Signal(n)
        ids = Array(Signal(p.id_bits, name=f"slot{i}_id") for i in range(n))
        addresses = Array(Signal(p.block_address_bits, name=f"slot{i}_address") for i in range(n))
        is_write = Array(Signal(name=f"slot{i}_is_write") for i in range(n))
        free = Signal(range(n))
        for i in reversed(range(n)):
            with m.If(~busy[i]):
                m.d.comb += free.eq(i)

        request = self.request.payload
        m.d.comb += [
            self.request.valid.eq(queue.r_rdy & ~busy.all()),
            request.address.eq(head.address), request.is_write.eq(head.is_write),
            request.mask.eq(head.mask), request.data.eq(head.data),
            request.tag.pnm.eq(0), request.tag.index.gpu_slot.eq(free),
            queue.r_en.eq(self.request.ready),
        ]
        for i in range(n):
            with m.If(self.request.valid & self.request.ready & (free == i)):
                m.d.sync += [busy[i].eq(1), ids[i].eq(head.id), addresses[i].eq(head.address),
                             is_write[i].eq(head.is_write)]

        slot = self.slots.slot
        m.d.comb += [self.slots.state.busy.eq(busy.bit_select(slot, 1)), self.slots.state.id.eq(ids[slot]),
                     self.slots.state.address.eq(addresses[slot]), self.slots.state.is_write.eq(is_write[slot])]
        for i in range(n):
            with m.If(self.slots.release & (slot == i)):
                m.d.sync += busy[i].eq(0)
        return m
