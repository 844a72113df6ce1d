"""The DuoPD MMU (§4.3, Fig. 8): GPU and PNM request queues, the PNM load-store unit with protection, the
arbiter into the shared memory controller, and the pending tables that route each response back.

Stores of the PNM take their data from the PNM buffer (§4.3, Fig. 7(b): the buffer drives write data onto
the TSVs): the LSU asks the buffer for each row on `buf_rd` as it queues the sub-request, and the data
(`buf_rdata`, in request order) joins the sub-request when it is issued. Loads forward memory data
straight to the buffer on `buf_wr`.
"""
from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from . import ports
from .arbiter import arbitrate
from .config import configuration
from .params import MMUParams
from .ports import Fault
from .protection import fault_of, sub_requests


class MMU(wiring.Component):
    """Ports (all `lib.stream`): `gpu_req` → `gpu_resp` (one response per request, in any order, with its
    id and address); `pnm_instr` → `completion` (one per instruction: its id, destination and `fault`);
    `mc_req` → `mc_resp` to the memory controller, one request per cycle at most; `buf_rd` → `buf_rdata`
    (store data from the PNM buffer) and `buf_wr` (load data into it); `config` register writes.
    `stray_response` goes high, and stays high until reset, when the memory controller answers something
    that is not outstanding; such a response is consumed and dropped.

    Timing depends on the traffic; `latency` is the unloaded minimum: a GPU request accepted on `gpu_req` leaves
    on `mc_req` 2 cycles later on an idle system (its queue, then the registered grant). A PNM instruction
    takes one cycle more (the load-store unit's register). `initiation_interval`: one memory request per cycle.
    """

    latency = 2
    initiation_interval = 1

    def __init__(self, params: MMUParams = MMUParams()) -> None:
        self.params = p = params
        super().__init__({
            "gpu_req": In(stream.Signature(ports.gpu_request(p))),
            "gpu_resp": Out(stream.Signature(ports.gpu_response(p))),
            "pnm_instr": In(stream.Signature(ports.pnm_instruction(p))),
            "completion": Out(stream.Signature(ports.completion(p))),
            "mc_req": Out(stream.Signature(ports.mc_request(p))),
            "mc_resp": In(stream.Signature(ports.mc_response(p))),
            "buf_rd": Out(stream.Signature(ports.buffer_read(p))),
            "buf_rdata": In(stream.Signature(ports.buffer_read_data(p))),
            "buf_wr": Out(stream.Signature(ports.buffer_write(p))),
            "config": In(stream.Signature(ports.config_write(p))),
            "stray_response": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.params
        config = configuration(m, p, self.config)
        tag_layout = ports.tag_layout(p)

        # GPU request queue: requests from the die-to-die interface, as they came.
        gpu_queue = m.submodules.gpu_queue = SyncFIFO(width=ports.gpu_request(p).size, depth=p.queue_depth)
        m.d.comb += [gpu_queue.w_data.eq(self.gpu_req.payload), gpu_queue.w_en.eq(self.gpu_req.valid),
                     self.gpu_req.ready.eq(gpu_queue.w_rdy)]
        gpu_head = data.View(ports.gpu_request(p), gpu_queue.r_data)

        # GPU slots: the id and address of each GPU request the memory controller has not answered.
        slot_busy = Signal(p.gpu_outstanding)
        slot_id = Array(Signal(p.id_bits, name=f"slot{i}_id") for i in range(p.gpu_outstanding))
        slot_address = Array(Signal(p.block_address_bits, name=f"slot{i}_address") for i in range(p.gpu_outstanding))
        slot_is_write = Array(Signal(name=f"slot{i}_is_write") for i in range(p.gpu_outstanding))
        free_slot = Signal(range(p.gpu_outstanding))
        for i in reversed(range(p.gpu_outstanding)):
            with m.If(~slot_busy[i]):
                m.d.comb += free_slot.eq(i)

        # PNM pending table: one entry per tensor in flight, with its completion bitmap (§4.3).
        n = p.pending_entries
        entry_valid = Signal(n)
        entry_store = Array(Signal(name=f"entry{i}_store") for i in range(n))
        entry_id = Array(Signal(p.id_bits, name=f"entry{i}_id") for i in range(n))
        entry_dest = Array(Signal(p.buffer_address_bits, name=f"entry{i}_dest") for i in range(n))
        entry_fault = Array(Signal(Fault, name=f"entry{i}_fault") for i in range(n))
        entry_last = Array(Signal(range(p.max_sub_requests), name=f"entry{i}_last") for i in range(n))
        entry_tail = Array(Signal(p.offset_bits, name=f"entry{i}_tail") for i in range(n))
        entry_expected = Array(Signal(p.max_sub_requests, name=f"entry{i}_expected") for i in range(n))
        entry_bitmap = Array(Signal(p.max_sub_requests, name=f"entry{i}_bitmap") for i in range(n))
        free_entry = Signal(range(n))
        for i in reversed(range(n)):
            with m.If(~entry_valid[i]):
                m.d.comb += free_entry.eq(i)

        def byte_mask(sub, last, tail):
            """All bytes, except in the last request of a tensor whose size is not a whole number of requests."""
            partial = (Const(1, p.request_bytes + 1) << tail) - 1
            return Mux((sub == last) & (tail != 0), partial, (1 << p.request_bytes) - 1)

        # PNM load-store unit: checks an instruction, allocates its entry, then queues one 32-byte request
        # per cycle (§4.2). A refused instruction gets an entry with nothing to wait for: it completes at once.
        pnm_queue_layout = data.StructLayout({"address": p.block_address_bits, "is_write": 1, "mask": p.request_bytes,
                                              "tag": tag_layout})
        pnm_queue = m.submodules.pnm_queue = SyncFIFO(width=pnm_queue_layout.size, depth=p.queue_depth)
        pnm_head = data.View(pnm_queue_layout, pnm_queue.r_data)
        lsu_busy = Signal()
        lsu_store = Signal()
        lsu_entry = Signal(range(n))
        lsu_block = Signal(p.block_address_bits)
        lsu_sub = Signal(range(p.max_sub_requests))
        lsu_last = Signal(range(p.max_sub_requests))
        lsu_tail = Signal(p.offset_bits)
        lsu_row = Signal(p.buffer_address_bits)
        queued = Signal()
        m.d.comb += [
            self.buf_rd.valid.eq(lsu_busy & lsu_store & pnm_queue.w_rdy),
            self.buf_rd.payload.row.eq(lsu_row),
            queued.eq(lsu_busy & pnm_queue.w_rdy & (~lsu_store | self.buf_rd.ready)),
            pnm_queue.w_en.eq(queued),
        ]
        queued_request = data.View(pnm_queue_layout, pnm_queue.w_data)
        m.d.comb += [
            queued_request.address.eq(lsu_block),
            queued_request.is_write.eq(lsu_store),
            queued_request.mask.eq(byte_mask(lsu_sub, lsu_last, lsu_tail)),
            queued_request.tag.pnm.eq(1),
            queued_request.tag.index.pnm.entry.eq(lsu_entry),
            queued_request.tag.index.pnm.sub.eq(lsu_sub),
        ]
        with m.If(queued):
            m.d.sync += [lsu_block.eq(lsu_block + 1), lsu_sub.eq(lsu_sub + 1), lsu_row.eq(lsu_row + 1)]
            with m.If(lsu_sub == lsu_last):
                m.d.sync += lsu_busy.eq(0)

        instr = self.pnm_instr.payload
        fault = Signal(Fault)
        count = Signal(range(p.max_sub_requests + 1))
        m.d.comb += [
            fault.eq(fault_of(m, p, instr, config)),
            count.eq(Mux(fault == Fault.NONE, sub_requests(p, instr.size), 0)),
            self.pnm_instr.ready.eq((~lsu_busy | (queued & (lsu_sub == lsu_last))) & ~entry_valid.all()),
        ]
        accepted = self.pnm_instr.valid & self.pnm_instr.ready
        for i in range(n):
            with m.If(accepted & (free_entry == i)):
                m.d.sync += [
                    entry_valid[i].eq(1),
                    entry_store[i].eq(instr.store),
                    entry_id[i].eq(instr.id),
                    entry_dest[i].eq(instr.dest),
                    entry_fault[i].eq(fault),
                    entry_last[i].eq(count - 1),
                    entry_tail[i].eq(instr.size[:p.offset_bits]),
                    entry_expected[i].eq((Const(1, p.max_sub_requests + 1) << count) - 1),
                    entry_bitmap[i].eq(0),
                ]
        with m.If(accepted):
            with m.If(fault == Fault.NONE):
                m.d.sync += [
                    lsu_busy.eq(1), lsu_store.eq(instr.store), lsu_entry.eq(free_entry),
                    lsu_block.eq(instr.base[p.offset_bits:]), lsu_sub.eq(0), lsu_last.eq(count - 1),
                    lsu_tail.eq(instr.size[:p.offset_bits]), lsu_row.eq(instr.dest),
                ]

        # Issue: the arbiter's choice is registered, so the request holds still while the controller stalls.
        gpu_wants = gpu_queue.r_rdy & ~slot_busy.all()
        pnm_wants = pnm_queue.r_rdy & (~pnm_head.is_write | self.buf_rdata.valid)
        request = Signal(ports.mc_request(p))
        request_tag = Signal(tag_layout)
        load = ~self.mc_req.valid | self.mc_req.ready
        grant = arbitrate(m, config, gpu_wants, pnm_wants, load)
        m.d.comb += [
            self.mc_req.payload.eq(request),
            gpu_queue.r_en.eq(load & grant.gpu),
            pnm_queue.r_en.eq(load & grant.pnm),
            self.buf_rdata.ready.eq(load & grant.pnm & pnm_head.is_write),
        ]
        with m.If(load):
            m.d.sync += self.mc_req.valid.eq(grant.gpu | grant.pnm)
            with m.If(grant.gpu):
                m.d.sync += [
                    request.address.eq(gpu_head.address), request.is_write.eq(gpu_head.is_write),
                    request.mask.eq(gpu_head.mask), request.data.eq(gpu_head.data),
                    request_tag.pnm.eq(0), request_tag.index.gpu_slot.eq(free_slot),
                ]
            for i in range(p.gpu_outstanding):
                with m.If(grant.gpu & (free_slot == i)):
                    m.d.sync += [slot_busy[i].eq(1), slot_id[i].eq(gpu_head.id), slot_address[i].eq(gpu_head.address),
                                 slot_is_write[i].eq(gpu_head.is_write)]
            with m.If(grant.pnm):
                m.d.sync += [
                    request.address.eq(pnm_head.address), request.is_write.eq(pnm_head.is_write),
                    request.mask.eq(pnm_head.mask),
                    # A load reads no buffer row: its data field is zero, not whatever `buf_rdata` holds.
                    request.data.eq(Mux(pnm_head.is_write, self.buf_rdata.payload.data, 0)),
                    request_tag.eq(pnm_head.tag),
                ]

        # Which request a response answers: its tag, or with in-order responses the oldest issued tag.
        answered = Signal(tag_layout)
        response_valid = Signal()
        if p.out_of_order:
            m.d.comb += [self.mc_req.payload.tag.eq(request_tag), answered.eq(self.mc_resp.payload.tag),
                         response_valid.eq(self.mc_resp.valid)]
            in_order = None
        else:
            outstanding = p.gpu_outstanding + p.pending_entries * p.max_sub_requests
            in_order = m.submodules.issued = SyncFIFO(width=tag_layout.size, depth=outstanding)
            m.d.comb += [in_order.w_data.eq(request_tag), in_order.w_en.eq(self.mc_req.valid & self.mc_req.ready),
                         answered.eq(in_order.r_data), response_valid.eq(self.mc_resp.valid & in_order.r_rdy)]

        # Response routing: GPU data and address back to the GPU; PNM load data straight to the buffer
        # (direct TSV forwarding, Fig. 7(b)); every PNM response sets its bitmap bit.
        slot = answered.index.gpu_slot
        entry, sub = answered.index.pnm.entry, answered.index.pnm.sub
        to_gpu = Signal()
        to_pnm = Signal()
        m.d.comb += [
            to_gpu.eq(response_valid & ~answered.pnm & slot_busy.bit_select(slot, 1)),
            to_pnm.eq(response_valid & answered.pnm & entry_valid.bit_select(entry, 1)
                      & entry_expected[entry].bit_select(sub, 1) & ~entry_bitmap[entry].bit_select(sub, 1)),
            self.gpu_resp.valid.eq(to_gpu),
            self.gpu_resp.payload.id.eq(slot_id[slot]),
            self.gpu_resp.payload.address.eq(slot_address[slot]),
            self.gpu_resp.payload.is_write.eq(slot_is_write[slot]),
            self.gpu_resp.payload.data.eq(self.mc_resp.payload.data),
            self.buf_wr.valid.eq(to_pnm & ~entry_store[entry]),
            self.buf_wr.payload.row.eq(entry_dest[entry] + sub),
            self.buf_wr.payload.data.eq(self.mc_resp.payload.data),
            self.buf_wr.payload.mask.eq(byte_mask(sub, entry_last[entry], entry_tail[entry])),
        ]
        stray = self.mc_resp.valid & ~to_gpu & ~to_pnm
        consumed = Signal()
        m.d.comb += [
            consumed.eq((to_gpu & self.gpu_resp.ready) | (to_pnm & (entry_store[entry] | self.buf_wr.ready))),
            self.mc_resp.ready.eq(consumed | stray),
        ]
        if in_order is not None:
            m.d.comb += in_order.r_en.eq(consumed | (stray & in_order.r_rdy))
        for i in range(p.gpu_outstanding):
            with m.If(consumed & to_gpu & (slot == i)):
                m.d.sync += slot_busy[i].eq(0)
        for i in range(n):
            with m.If(consumed & to_pnm & (entry == i)):
                m.d.sync += entry_bitmap[i].eq(entry_bitmap[i] | (1 << sub))
        with m.If(stray):
            m.d.sync += self.stray_response.eq(1)

        # Completion: a finished entry (all bits set, or refused) retires into the completion register.
        finished = Signal(n)
        m.d.comb += finished.eq(Cat(entry_valid[i] & (entry_bitmap[i] == entry_expected[i]) for i in range(n)))
        retiring = Signal(range(n))
        for i in reversed(range(n)):
            with m.If(finished[i]):
                m.d.comb += retiring.eq(i)
        with m.If(~self.completion.valid | self.completion.ready):
            m.d.sync += self.completion.valid.eq(finished.any())
            with m.If(finished.any()):
                m.d.sync += [
                    self.completion.payload.id.eq(entry_id[retiring]),
                    self.completion.payload.dest.eq(entry_dest[retiring]),
                    self.completion.payload.store.eq(entry_store[retiring]),
                    self.completion.payload.fault.eq(entry_fault[retiring]),
                ]
                for i in range(n):
                    with m.If(retiring == i):
                        m.d.sync += entry_valid[i].eq(0)
        return m
