"""The DuoPD MMU (§4.3, Fig. 8): GPU and PNM request queues, the PNM load-store unit with protection, the
arbiter into the shared memory controller, and the pending tables that route each response back.

Stores of the PNM take their data from the PNM buffer (§4.3, Fig. 7(b): the buffer drives write data onto
the TSVs): the LSU asks the buffer for each row on `buf_rd` as it queues the sub-request, and the data
(`buf_rdata`, in request order) joins the sub-request when it is issued. Loads forward memory data
straight to the buffer on `buf_wr`.
"""
from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from . import ports
from .arbiter import Arbiter
from .config import ConfigRegisters
from .gpu_path import GPUPath
from .lsu import LoadStoreUnit
from .params import MMUParams
from .pending import Completion, PendingTable
from .ports import tag_layout
from .router import ResponseRouter


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
        m.submodules.config = config = ConfigRegisters(p)
        m.submodules.gpu_path = gpu = GPUPath(p)
        m.submodules.lsu = lsu = LoadStoreUnit(p)
        m.submodules.pending = pending = PendingTable(p)
        m.submodules.arbiter = arbiter = Arbiter(p)
        m.submodules.router = router = ResponseRouter(p)
        m.submodules.completion = completion = Completion(p)
        wiring.connect(m, wiring.flipped(self.config), config.write)
        wiring.connect(m, config.values, arbiter.config, lsu.config)
        wiring.connect(m, wiring.flipped(self.gpu_req), gpu.gpu_req)
        wiring.connect(m, wiring.flipped(self.pnm_instr), lsu.instruction)
        wiring.connect(m, lsu.allocate, pending.allocate)
        wiring.connect(m, lsu.buf_rd, wiring.flipped(self.buf_rd))
        wiring.connect(m, wiring.flipped(self.buf_rdata), lsu.buf_rdata)
        wiring.connect(m, gpu.request, arbiter.gpu)
        wiring.connect(m, lsu.request, arbiter.pnm)
        wiring.connect(m, wiring.flipped(self.mc_resp), router.mc_resp)
        wiring.connect(m, router.slots, gpu.slots)
        wiring.connect(m, router.entries, pending.lookup)
        wiring.connect(m, router.gpu_resp, wiring.flipped(self.gpu_resp))
        wiring.connect(m, router.buf_wr, wiring.flipped(self.buf_wr))
        wiring.connect(m, completion.table, pending.retire)
        wiring.connect(m, completion.completion, wiring.flipped(self.completion))
        m.d.comb += self.stray_response.eq(router.stray_response)

        issued = arbiter.request
        m.d.comb += [self.mc_req.valid.eq(issued.valid), issued.ready.eq(self.mc_req.ready)]
        for name in self.mc_req.payload.shape().members:
            m.d.comb += getattr(self.mc_req.payload, name).eq(getattr(issued.payload, name))
        # Which request a response answers: its tag, or with in-order responses the oldest issued tag.
        if p.out_of_order:
            m.d.comb += [router.tag.valid.eq(self.mc_resp.valid), router.tag.payload.eq(self.mc_resp.payload.tag)]
        else:
            outstanding = p.gpu_outstanding + p.pending_entries * p.max_sub_requests
            m.submodules.issued = in_order = SyncFIFO(width=tag_layout(p).size, depth=outstanding)
            wiring.connect(m, in_order.r_stream, router.tag)
            m.d.comb += [in_order.w_data.eq(issued.payload.tag), in_order.w_en.eq(issued.valid & issued.ready)]
        return m
