"""Formal properties of the DQB (rtl/dqb/): the stream rules on its two output ports, and responses in GPU-request
order with the right number and kind of beats each, at a small parameter set, under any traffic its neighbours may
send (docs/guides/formal.md)."""
from amaranth.asserts import AnyConst
from amaranth.hdl import Assert, Assume, Elaboratable, Module, Mux, Signal

from rtl.dqb import dqb
from rtl.dqb.params import DQBParams
from rtl.dqb.ports import Kind
from rtl.dqb.tags import BYPASS, MODES, RESERVED

from .harness import Property, clocked, free, held

PARAMS = DQBParams(interface_bits=32, internal_bits=64, address_bits=16, request_table_bytes=64,
                   sz_buffer_bytes=16, outstanding_reads=4)
"""The smallest DQB its parameters allow: 2 lanes, 2 request-table entries, 4 S/Z lines, 4 requests outstanding."""

COUNTER_BITS = 8
"""Requests and beats counted from reset: far more than a BMC run of a few dozen steps can send."""


class Harness(Elaboratable):
    """The DQB under its ports' contract: input streams keep the stream rules with any payload, `ready`s are free,
    and the memory answers only requests it was sent (one beat each, in order; a store's is its acknowledgement)."""

    def __init__(self, params: DQBParams, check) -> None:
        self.params, self.check = params, check

    def elaborate(self, platform) -> Module:
        m = Module()
        clocked(m)
        self.dut = dut = dqb.DQB(self.params)
        m.submodules.dut = dut
        for name in ("gpu_req", "config", "mc_resp"):
            port = getattr(dut, name)
            free(m, port.valid, port.payload)
            m.d.comb += Assume(held(m, port, name))
        free(m, dut.mc_req.ready, dut.gpu_resp.ready)
        unanswered = Signal(COUNTER_BITS, name="requests_unanswered")
        m.d.sync += unanswered.eq(unanswered + self.issued - self.answered)
        m.d.comb += Assume(~dut.mc_resp.valid | (unanswered != 0))
        self.check(m, self)
        return m

    @property
    def issued(self):
        return self.dut.mc_req.valid & self.dut.mc_req.ready

    @property
    def answered(self):
        return self.dut.mc_resp.valid & self.dut.mc_resp.ready


def mc_req_stable(m: Module, h: Harness) -> None:
    """`mc_req` keeps the stream rules: a request not taken stays valid and unchanged."""
    m.d.comb += Assert(held(m, h.dut.mc_req, "mc_req_out"))


def gpu_resp_stable(m: Module, h: Harness) -> None:
    """`gpu_resp` keeps the stream rules: a response beat not taken stays valid and unchanged."""
    m.d.comb += Assert(held(m, h.dut.gpu_resp, "gpu_resp_out"))


def beats_of(request) -> Mux:
    """Response beats a request is owed: one acknowledgement per store, 16/bits per dequantizing read, one for a
    bypass or reserved-tag read (docs/reference/ports.md)."""
    int4 = request.tag.matches(*(t for t, (w, _) in MODES.items() if w == "int4"))
    return Mux(request.is_write | request.tag.matches(BYPASS, RESERVED), 1, Mux(int4, 4, 2))


def in_order(m: Module, h: Harness) -> None:
    """Responses in GPU-request order: the beats on `gpu_resp` are, in turn, those owed to each accepted request
    (`beats_of`), and never more than are owed. Checked on one request the solver picks (its position in the
    request order): each of its beats carries `is_write` exactly if it is a store (so a store gets exactly one
    acknowledgement, data 0, and a read none); a bypass or reserved-tag beat carries the memory's answer to that
    very request (`error` only for the reserved tag), no beat of it leaves before that answer came in, and a
    dequantizing read's beats not sooner than `DQB.latency` after it (so a pass-through beat delivered in a
    dequantizing read's place, having overtaken it, shows within a few steps)."""
    dut = h.dut
    request, response = dut.gpu_req.payload, dut.gpu_resp.payload
    accepted_now = dut.gpu_req.valid & dut.gpu_req.ready
    delivered_now = dut.gpu_resp.valid & dut.gpu_resp.ready
    accepted, owed, delivered = (Signal(COUNTER_BITS, name=n) for n in ("accepted", "beats_owed", "beats_delivered"))
    gpu_issued, issued, answers = (Signal(COUNTER_BITS, name=n) for n in ("gpu_issued", "issued", "answers"))
    gpu_now = h.issued & (dut.mc_req.payload.kind == Kind.GPU)
    m.d.sync += [accepted.eq(accepted + accepted_now), owed.eq(owed + Mux(accepted_now, beats_of(request), 0)),
                 delivered.eq(delivered + delivered_now), issued.eq(issued + h.issued),
                 answers.eq(answers + h.answered), gpu_issued.eq(gpu_issued + gpu_now)]
    m.d.comb += Assert(~delivered_now | (delivered < owed))

    chosen = Signal(COUNTER_BITS, name="chosen")
    m.d.comb += chosen.eq(AnyConst(COUNTER_BITS))
    taken, is_write, tag, first, count = (Signal(name="chosen_taken"), Signal(name="chosen_is_write"),
                                          Signal(3, name="chosen_tag"), Signal(COUNTER_BITS, name="chosen_first"),
                                          Signal(3, name="chosen_beats"))
    with m.If(accepted_now & (accepted == chosen)):
        m.d.sync += [taken.eq(1), is_write.eq(request.is_write), tag.eq(request.tag), first.eq(owed),
                     count.eq(beats_of(request))]
    # The DQB forwards GPU requests in order, and the memory answers every request in order: the chosen request's
    # answer is the one at its memory request's position.
    sent, answer_at = Signal(name="chosen_sent"), Signal(COUNTER_BITS, name="chosen_answer_at")
    with m.If(gpu_now & (gpu_issued == chosen)):
        m.d.sync += [sent.eq(1), answer_at.eq(issued)]
    answered, data = Signal(name="chosen_answered"), Signal.like(dut.mc_resp.payload.data, name="chosen_data")
    since = Signal(range(dqb.DQB.latency + 1), name="chosen_cycles_since_answer")
    with m.If(h.answered & sent & (answers == answer_at)):
        m.d.sync += [answered.eq(1), data.eq(dut.mc_resp.payload.data), since.eq(0)]
    with m.Elif(answered & (since != dqb.DQB.latency)):
        m.d.sync += since.eq(since + 1)

    mine = delivered_now & taken & (delivered >= first) & (delivered < first + count)
    one_beat = tag.matches(BYPASS, RESERVED) & ~is_write
    with m.If(mine):
        m.d.comb += [Assert(response.is_write == is_write), Assert(answered)]
        with m.If(is_write):
            m.d.comb += Assert((response.data == 0) & ~response.error)
        with m.If(one_beat):
            m.d.comb += Assert((response.data == data) & (response.error == (tag == RESERVED)))
        with m.Else():  # through the datapath: never sooner than its latency (the answer's cycle is since = -1)
            m.d.comb += Assert(is_write | (since >= dqb.DQB.latency - 1))


PROPERTIES = tuple(Property(check.__name__, check, lambda variant, check: Harness(PARAMS, check), ("small",), depth)
                   for check, depth in ((mc_req_stable, 8), (gpu_resp_stable, 16), (in_order, 13)))
