"""The PNM load-store unit (§4.2, §4.3): checks an instruction, allocates its pending-table entry, then queues
one request per cycle. Stores take their data from the PNM buffer (Fig. 7(b): the buffer drives write data
onto the TSVs): the LSU asks for each row on `buf_rd` as it queues the request, and the data (`buf_rdata`, in
request order) joins the request when the arbiter takes it."""
from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from .config import configuration
from .params import MMUParams
from .pending import allocation
from .ports import Fault, buffer_read, buffer_read_data, pnm_instruction, tag_layout, tagged_request
from .protection import byte_mask, fault_of, sub_requests


class LoadStoreUnit(wiring.Component):
    """`instruction` → `request` (one per 32-byte row, through a queue of `queue_depth`, our choice). A refused
    instruction gets an entry with nothing to wait for, so it completes at once and reaches no memory."""

    def __init__(self, params: MMUParams) -> None:
        self.params = p = params
        super().__init__({
            "instruction": In(stream.Signature(pnm_instruction(p))),
            "allocate": Out(allocation(p)),
            "config": In(configuration(p)),
            "buf_rd": Out(stream.Signature(buffer_read(p))),
            "buf_rdata": In(stream.Signature(buffer_read_data(p))),
            "request": Out(stream.Signature(tagged_request(p))),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.params
        queued_layout = data.StructLayout({"address": p.block_address_bits, "is_write": 1, "mask": p.request_bytes,
                                           "tag": tag_layout(p)})
        m.submodules.queue = queue = SyncFIFO(width=queued_layout.size, depth=p.queue_depth)
        head = data.View(queued_layout, queue.r_data)

        # The instruction being split into requests.
        busy, store = Signal(name="lsu_busy"), Signal(name="lsu_store")
        entry = Signal(range(p.pending_entries), name="lsu_entry")
        block = Signal(p.block_address_bits, name="lsu_block")
        sub, last = Signal(range(p.max_sub_requests), name="lsu_sub"), Signal(range(p.max_sub_requests), name="lsu_last")
        tail = Signal(p.offset_bits, name="lsu_tail")
        row = Signal(p.buffer_address_bits, name="lsu_row")
        queued = Signal()
        queued_request = data.View(queued_layout, queue.w_data)
        m.d.comb += [
            self.buf_rd.valid.eq(busy & store & queue.w_rdy),
            self.buf_rd.payload.row.eq(row),
            queued.eq(busy & queue.w_rdy & (~store | self.buf_rd.ready)),
            queue.w_en.eq(queued),
            queued_request.address.eq(block),
            queued_request.is_write.eq(store),
            queued_request.mask.eq(byte_mask(p, sub, last, tail)),
            queued_request.tag.pnm.eq(1),
            queued_request.tag.index.pnm.entry.eq(entry),
            queued_request.tag.index.pnm.sub.eq(sub),
        ]
        with m.If(queued):
            m.d.sync += [block.eq(block + 1), sub.eq(sub + 1), row.eq(row + 1)]
            with m.If(sub == last):
                m.d.sync += busy.eq(0)

        instruction = self.instruction.payload
        fault = Signal(Fault)
        count = Signal(range(p.max_sub_requests + 1))
        allocated = self.allocate.payload
        m.d.comb += [
            fault.eq(fault_of(m, p, instruction, self.config)),
            count.eq(Mux(fault == Fault.NONE, sub_requests(p, instruction.size), 0)),
            self.allocate.valid.eq(self.instruction.valid & (~busy | (queued & (sub == last)))),
            self.instruction.ready.eq((~busy | (queued & (sub == last))) & self.allocate.ready),
            allocated.store.eq(instruction.store), allocated.id.eq(instruction.id),
            allocated.dest.eq(instruction.dest), allocated.fault.eq(fault),
            allocated.last.eq(count - 1), allocated.tail.eq(instruction.size[:p.offset_bits]),
            allocated.expected.eq((Const(1, p.max_sub_requests + 1) << count) - 1),
        ]
        with m.If(self.instruction.valid & self.instruction.ready & (fault == Fault.NONE)):
            m.d.sync += [
                busy.eq(1), store.eq(instruction.store), entry.eq(self.allocate.index),
                block.eq(instruction.base[p.offset_bits:]), sub.eq(0), last.eq(count - 1),
                tail.eq(instruction.size[:p.offset_bits]), row.eq(instruction.dest),
            ]

        # The head of the queue, with its store data once the buffer has delivered it.
        request = self.request.payload
        m.d.comb += [
            self.request.valid.eq(queue.r_rdy & (~head.is_write | self.buf_rdata.valid)),
            request.address.eq(head.address), request.is_write.eq(head.is_write), request.mask.eq(head.mask),
            # A load reads no buffer row: its data field is zero, not whatever `buf_rdata` holds.
            request.data.eq(Mux(head.is_write, self.buf_rdata.payload.data, 0)),
            request.tag.eq(head.tag),
            queue.r_en.eq(self.request.ready),
            self.buf_rdata.ready.eq(self.request.ready & head.is_write),
        ]
        return m
