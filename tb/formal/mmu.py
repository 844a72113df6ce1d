"""Formal properties of the MMU (rtl/mmu/), at a small parameter set: each property is one harness around the MMU,
whose environment is free within the contract of its ports (docs/guides/formal.md states each in words)."""
from dataclasses import dataclass, replace

from amaranth.asserts import AnyConst
from amaranth.hdl import Assert, Assume, Const, Elaboratable, Module, Mux, Signal

from rtl.mmu import mmu
from rtl.mmu.params import POLICIES, MMUParams
from rtl.mmu.ports import Fault

from .harness import Internals, Property, clocked, free, held

PARAMS = MMUParams(address_bits=6, data_bits=16, id_bits=2, queue_depth=2, gpu_outstanding=2, pending_entries=2,
                   max_sub_requests=2, protected_regions=2, buffer_address_bits=3)
"""Two of everything: 2-byte requests, tensors of up to 2 requests, 2 GPU slots, 2 pending entries, 2 protected
regions, queues of 2, 6-bit byte addresses. Small enough for the solver, large enough that every queue can fill,
every table can run out and a tensor can end in a partial request."""

WRR_WEIGHTS = (2, 3)
"""Weights (GPU, PNM) of the round-robin property: unequal, so a bound that swapped them would fail."""

MEMORY_GAP = 2
"""A fair memory (the delivery properties) answers its oldest request within this many cycles of the previous
answer or of the request's issue."""

GPU_BOUND = 16
PNM_BOUND = 22
"""Cycles from acceptance to response (GPU) or completion (PNM) under the fair environment: above the worst cases
the solver found (13 and 18 cycles, docs/guides/formal.md), with a margin, not derived by hand."""

COUNTER_BITS = 8


@dataclass(frozen=True)
class Environment:
    """What the MMU's neighbours may do. The defaults are the general contract: every input stream keeps the
    stream rules with any payload, every `ready` is free, the buffer answers each read once and in order, the
    memory answers only requests it was sent (in order, or with their tag), config writes come at any time."""
    config_writes: str = "any"
    """"any", "pnm_idle" (only while no PNM instruction is in flight) or "none"."""
    fair: bool = False
    """Every `ready` high, the buffer answers at once and the memory within MEMORY_GAP cycles (in order)."""


class Harness(Elaboratable):
    """The MMU of `params` in `environment`, with the counters and trackers every check reads; `check(m, h)` adds
    the property's assertions."""

    def __init__(self, params: MMUParams, environment: Environment, check) -> None:
        self.params, self.environment, self.check = params, environment, check

    def elaborate(self, platform) -> Module:
        m = Module()
        clocked(m)
        p, env = self.params, self.environment
        self.dut = dut = mmu.MMU(p)
        self.internals = Internals(dut, platform)
        m.submodules.dut = self.internals.fragment

        for name in ("gpu_req", "pnm_instr", "config"):
            port = getattr(dut, name)
            free(m, port.valid, port.payload)
            m.d.comb += Assume(held(m, port, name))
        for name in ("gpu_resp", "completion", "mc_req", "buf_rd", "buf_wr"):
            ready = getattr(dut, name).ready
            if env.fair:
                m.d.comb += ready.eq(1)
            else:
                free(m, ready)
        pnm_in_flight = self._count(m, dut.pnm_instr, dut.completion, "pnm_in_flight")
        if env.config_writes == "none":
            m.d.comb += Assume(~dut.config.valid)
        elif env.config_writes == "pnm_idle":
            m.d.comb += Assume(~dut.config.valid | ((pnm_in_flight == 0) & ~dut.pnm_instr.valid))
        self._buffer(m)
        self._memory(m)
        self.gpu = self._track_gpu(m)
        self.pnm = self._track_pnm(m)
        self.check(m, self)
        return m

    def _count(self, m: Module, into, out_of, name: str) -> Signal:
        """Beats taken on `into` and not yet given back on `out_of`."""
        count = Signal(COUNTER_BITS, name=name)
        m.d.sync += count.eq(count + (into.valid & into.ready) - (out_of.valid & out_of.ready))
        return count

    def _buffer(self, m: Module) -> None:
        """The PNM buffer: each row read on `buf_rd` comes back once, in order, on `buf_rdata`, a cycle later or
        more (at once when fair)."""
        dut = self.dut
        waiting = self._count(m, dut.buf_rd, dut.buf_rdata, "buffer_reads")
        free(m, dut.buf_rdata.payload)
        m.d.comb += Assume(held(m, dut.buf_rdata, "buf_rdata"))
        if self.environment.fair:
            m.d.comb += dut.buf_rdata.valid.eq(waiting != 0)
        else:
            free(m, dut.buf_rdata.valid)
            m.d.comb += Assume(~dut.buf_rdata.valid | (waiting != 0))

    def _memory(self, m: Module) -> None:
        """The memory controller: one answer per request, a cycle after it or later, in request order, or (out of
        order) with the tag of any request still unanswered."""
        dut, p = self.dut, self.params
        waiting = self._count(m, dut.mc_req, dut.mc_resp, "memory_waiting")
        free(m, dut.mc_resp.valid, dut.mc_resp.payload)
        m.d.comb += Assume(held(m, dut.mc_resp, "mc_resp"))
        m.d.comb += Assume(~dut.mc_resp.valid | (waiting != 0))
        if p.out_of_order:
            tags = 2 ** len(dut.mc_req.payload.tag.as_value())
            self.unanswered = unanswered = Signal(tags, name="unanswered_tags")
            issued, answered = dut.mc_req.payload.tag.as_value(), dut.mc_resp.payload.tag.as_value()
            m.d.comb += Assume(~dut.mc_resp.valid | unanswered.bit_select(answered, 1))
            set_bits = Const(0, tags) | ((dut.mc_req.valid & dut.mc_req.ready) << issued)
            clear_bits = Const(0, tags) | ((dut.mc_resp.valid & dut.mc_resp.ready) << answered)
            m.d.sync += unanswered.eq((unanswered & ~clear_bits) | set_bits)
        if self.environment.fair:
            gap = Signal(range(MEMORY_GAP + 1), name="memory_gap")
            with m.If((waiting == 0) | (dut.mc_resp.valid & dut.mc_resp.ready)):
                m.d.sync += gap.eq(0)
            with m.Else():
                m.d.sync += gap.eq(gap + 1)
            m.d.comb += Assume(~((waiting != 0) & (gap == MEMORY_GAP - 1)) | dut.mc_resp.valid)

    def _track_gpu(self, m: Module) -> "Tracked":
        """One GPU request id, chosen by the solver: the GPU never reuses it while a request with it is in
        flight (the id is the GPU's name for the request)."""
        dut = self.dut
        request, response = dut.gpu_req.payload, dut.gpu_resp.payload
        t = Tracked(m, "gpu", AnyConst(self.params.id_bits),
                    accepted=dut.gpu_req.valid & dut.gpu_req.ready, accepted_id=request.id,
                    answered=dut.gpu_resp.valid & dut.gpu_resp.ready, answered_id=response.id)
        m.d.comb += Assume(~(dut.gpu_req.valid & (request.id == t.id) & t.in_flight))
        t.remember(m, address=request.address, is_write=request.is_write)
        return t

    def _track_pnm(self, m: Module) -> "Tracked":
        """One PNM instruction id, likewise; with the fault the specification gives it when it is accepted and the
        pending entry it takes."""
        dut, p = self.dut, self.params
        instruction = dut.pnm_instr.payload
        t = Tracked(m, "pnm", AnyConst(p.id_bits),
                    accepted=dut.pnm_instr.valid & dut.pnm_instr.ready, accepted_id=instruction.id,
                    answered=dut.completion.valid & dut.completion.ready, answered_id=dut.completion.payload.id)
        m.d.comb += Assume(~(dut.pnm_instr.valid & (instruction.id == t.id) & t.in_flight))
        config = self.internals.part("config").values
        entry = self.internals.part("lsu").allocate.index
        t.remember(m, dest=instruction.dest, store=instruction.store, entry=entry,
                   fault=expected_fault(m, p, instruction, config))
        return t


class Tracked:
    """A request (or instruction) the solver picks by its id: whether it is in flight, how long it has been, and
    what the harness remembered when it was accepted."""

    def __init__(self, m: Module, name: str, chosen, *, accepted, accepted_id, answered, answered_id) -> None:
        self.name = name
        self.id = Signal.like(accepted_id, name=f"{name}_tracked_id")
        m.d.comb += self.id.eq(chosen)
        self.in_flight = Signal(name=f"{name}_tracked_in_flight")
        self.age = Signal(COUNTER_BITS, name=f"{name}_tracked_age")
        self.accepted = accepted & (accepted_id == self.id)
        self.answered = answered & (answered_id == self.id)
        with m.If(self.accepted):
            m.d.sync += self.in_flight.eq(1)
        with m.Elif(self.answered):
            m.d.sync += self.in_flight.eq(0)
        m.d.sync += self.age.eq(0)
        with m.If(self.in_flight & (self.age != 2 ** COUNTER_BITS - 1)):
            m.d.sync += self.age.eq(self.age + 1)

    def remember(self, m: Module, **values) -> None:
        """Keep each value as it was when the tracked request was accepted, as an attribute of that name."""
        for field, value in values.items():
            kept = Signal.like(value, name=f"{self.name}_tracked_{field}")
            with m.If(self.accepted):
                m.d.sync += kept.eq(value)
            setattr(self, field, kept)


def expected_fault(m: Module, p: MMUParams, instruction, config) -> Signal:
    """The fault the specification gives an instruction (docs/reference/ports.md), written byte by byte: MALFORMED
    before OUT_OF_RANGE before PROTECTED. Enumerating a tensor's bytes is only practical at formal sizes, and shares
    nothing with the LSU's range arithmetic."""
    base, size, dest = instruction.base, instruction.size, instruction.dest
    row_overflow = beyond_memory = protected = Const(0)
    for k in range(p.max_tensor_bytes):
        byte = Signal(p.address_bits + 1, name=f"spec_byte{k}")
        m.d.comb += byte.eq(base + k)
        inside = size > k
        row_overflow |= inside & (dest + k // p.request_bytes >= 2 ** p.buffer_address_bits)
        beyond_memory |= inside & ((byte >= config.memory_size) | (byte >= 2 ** p.address_bits))
        for low, high in zip(config.region_base, config.region_limit):
            protected |= inside & (low <= byte) & (byte < high)
    fault = Signal(Fault, name="spec_fault")
    with m.If((size == 0) | (size > p.max_tensor_bytes) | (base[:p.offset_bits] != 0) | row_overflow):
        m.d.comb += fault.eq(Fault.MALFORMED)
    with m.Elif(beyond_memory):
        m.d.comb += fault.eq(Fault.OUT_OF_RANGE)
    with m.Elif(protected & instruction.store):
        m.d.comb += fault.eq(Fault.PROTECTED)
    return fault


# --- The properties: each adds its assertions to a harness. ---

def gpu_once(m: Module, h: Harness) -> None:
    """A GPU response names a request in flight and carries that request's address and direction: no response
    without a request, none twice."""
    response, t = h.dut.gpu_resp, h.gpu
    mine = response.valid & (response.payload.id == t.id)
    m.d.comb += Assert(~mine | (t.in_flight & (response.payload.address == t.address)
                                & (response.payload.is_write == t.is_write)))


def gpu_delivered(m: Module, h: Harness) -> None:
    """Under a fair environment every accepted GPU request is answered within GPU_BOUND cycles."""
    m.d.comb += Assert(~h.gpu.in_flight | (h.gpu.age < GPU_BOUND))


def pnm_once(m: Module, h: Harness) -> None:
    """A completion names an instruction in flight, with its destination, direction and the fault the
    specification gives it: no completion without an instruction, none twice, none with the wrong verdict."""
    completion, t = h.dut.completion, h.pnm
    mine = completion.valid & (completion.payload.id == t.id)
    m.d.comb += Assert(~mine | (t.in_flight & (completion.payload.dest == t.dest)
                                & (completion.payload.store == t.store) & (completion.payload.fault == t.fault)))


def pnm_delivered(m: Module, h: Harness) -> None:
    """Under a fair environment every accepted PNM instruction completes within PNM_BOUND cycles."""
    m.d.comb += Assert(~h.pnm.in_flight | (h.pnm.age < PNM_BOUND))


def protected_store(m: Module, h: Harness) -> None:
    """No PNM write to memory touches a byte of a protected region, and a refused instruction (any fault, so a
    store overlapping a region too) sends no request at all, not even for its bytes outside the region."""
    p = h.params
    issued = h.internals.part("arbiter").request
    request, tag = issued.payload, issued.payload.tag
    config = h.internals.part("config").values
    pnm_write = issued.valid & tag.pnm & request.is_write
    for i in range(p.request_bytes):
        byte = Signal(p.address_bits + 1, name=f"written_byte{i}")
        m.d.comb += byte.eq(request.address * p.request_bytes + i)
        for low, high in zip(config.region_base, config.region_limit):
            m.d.comb += Assert(~(pnm_write & request.mask[i] & (low <= byte) & (byte < high)))
    t, completion = h.pnm, h.dut.completion
    owns_entry = Signal(name="pnm_tracked_owns_entry")   # from acceptance until its completion shows
    with m.If(t.accepted):
        m.d.sync += owns_entry.eq(1)
    with m.Elif(completion.valid & (completion.payload.id == t.id)):
        m.d.sync += owns_entry.eq(0)
    m.d.comb += Assert(~(owns_entry & (t.fault != Fault.NONE) & issued.valid & tag.pnm
                         & (tag.index.pnm.entry == t.entry)))


def wrr_bound(m: Module, h: Harness) -> None:
    """Weighted round robin: while one source has a request at the arbiter, the other gets at most its weight of
    memory-controller slots before this one gets a slot (slots, not cycles: a stalled controller offers none)."""
    arbiter = h.internals.part("arbiter")
    credit = h.internals.signal("arbiter", name="wrr_credit")
    favour_pnm = h.internals.signal("arbiter", name="wrr_favour_pnm")
    load = ~arbiter.request.valid | arbiter.request.ready
    weight_gpu, weight_pnm = WRR_WEIGHTS
    # Helper invariants, proved with the bound, that make it inductive: the registers keep their reset values (no
    # config writes here), the favoured source's credit is below its weight, and a source has been passed over at
    # most as often as the favoured other one has been granted since it last was.
    config = h.internals.part("config").values
    m.d.comb += Assert((config.policy == POLICIES.index("mixed")) & (config.weight_gpu == weight_gpu)
                       & (config.weight_pnm == weight_pnm))
    m.d.comb += Assert(credit < Mux(favour_pnm, weight_pnm, weight_gpu))
    for name, source, other, bound, other_favoured in (("gpu", arbiter.gpu, arbiter.pnm, weight_pnm, favour_pnm),
                                                       ("pnm", arbiter.pnm, arbiter.gpu, weight_gpu, ~favour_pnm)):
        passed_over = Signal(range(bound + 2), name=f"{name}_passed_over")
        with m.If(source.valid & source.ready):
            m.d.sync += passed_over.eq(0)
        with m.Elif(load & source.valid & other.ready & (passed_over <= bound)):
            m.d.sync += passed_over.eq(passed_over + 1)
        m.d.comb += Assert(passed_over <= bound)
        m.d.comb += Assert(~other_favoured | (passed_over <= credit))


def no_fifo_overflow(m: Module, h: Harness) -> None:
    """No FIFO is written while full. The LSU's request queue and the in-order tag FIFO are written without a
    handshake (the GPU queue's writes are its stream's transfers, so it cannot overflow)."""
    fifos = [h.internals.part("lsu", "queue")] + ([] if h.params.out_of_order else [h.internals.part("issued")])
    for fifo in fifos:
        m.d.comb += Assert(~(fifo.w_en & ~fifo.w_rdy))


def mc_req_stable(m: Module, h: Harness) -> None:
    """`mc_req` keeps the stream rules: a request not taken stays valid and unchanged."""
    m.d.comb += Assert(held(m, h.dut.mc_req, "mc_req_out"))


def outputs_stable(m: Module, h: Harness) -> None:
    """The other output streams keep the stream rules too, given inputs that keep them."""
    for name in ("gpu_resp", "completion", "buf_rd", "buf_wr"):
        m.d.comb += Assert(held(m, getattr(h.dut, name), f"{name}_out"))


def responses_routed(m: Module, h: Harness) -> None:
    """Every memory response finds its request (`stray_response` never rises), and out of order a tag is never
    reused while its request is unanswered."""
    m.d.comb += Assert(~h.dut.stray_response)
    if h.params.out_of_order:
        request = h.dut.mc_req
        m.d.comb += Assert(~(request.valid & h.unanswered.bit_select(request.payload.tag.as_value(), 1)))


VARIANTS = {"in_order": PARAMS, "out_of_order": replace(PARAMS, out_of_order=True)}
"""The bench's two memory modes."""

FAIR = Environment(config_writes="none", fair=True)
MIXED = {"policy": "mixed", "wrr_weight_gpu": WRR_WEIGHTS[0], "wrr_weight_pnm": WRR_WEIGHTS[1]}


def harnesses(environment: Environment = Environment(), **overrides):
    """The harnesses of one property: the variant's parameters with `overrides`, in `environment`."""
    return lambda variant, check: Harness(replace(VARIANTS[variant], **overrides), environment, check)


BOTH = tuple(VARIANTS)
PROPERTIES = (
    Property("gpu_once", gpu_once, harnesses(), BOTH, depth=12),
    Property("gpu_delivered", gpu_delivered, harnesses(FAIR, **MIXED), ("in_order",), depth=GPU_BOUND + 8),
    Property("pnm_once", pnm_once, harnesses(), BOTH, depth=12),
    Property("pnm_delivered", pnm_delivered, harnesses(FAIR, **MIXED), ("in_order",), depth=PNM_BOUND + 7),
    Property("protected_store", protected_store, harnesses(Environment(config_writes="pnm_idle")), BOTH, depth=10),
    Property("wrr_bound", wrr_bound, harnesses(Environment(config_writes="none"), **MIXED), BOTH, depth=12),
    Property("no_fifo_overflow", no_fifo_overflow, harnesses(), BOTH, depth=14),
    Property("mc_req_stable", mc_req_stable, harnesses(), BOTH, depth=8),
    Property("outputs_stable", outputs_stable, harnesses(), BOTH, depth=14),
    Property("responses_routed", responses_routed, harnesses(), BOTH, depth=10),
)
