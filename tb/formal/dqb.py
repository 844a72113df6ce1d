"""Formal properties of the DQB (rtl/dqb/): the stream rules on its two output ports, at a small parameter set,
under any traffic its neighbours may send (docs/formal.md)."""
from amaranth.hdl import Assert, Assume, Elaboratable, Module, Signal

from rtl.dqb import dqb
from rtl.dqb.params import DQBParams

from .harness import Property, clocked, free, held

PARAMS = DQBParams(interface_bits=32, internal_bits=64, address_bits=16, request_table_bytes=64,
                   sz_buffer_bytes=16, outstanding_reads=4)
"""The smallest DQB its parameters allow: 2 lanes, 2 request-table entries, 4 S/Z lines, 4 reads outstanding."""


class Harness(Elaboratable):
    """The DQB under its ports' contract: input streams keep the stream rules with any payload, `ready`s are free,
    and the memory answers only reads it was sent (one beat each, in order; stores get no answer)."""

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
        reads = Signal(8, name="reads_unanswered")
        issued = dut.mc_req.valid & dut.mc_req.ready & ~dut.mc_req.payload.is_write
        m.d.sync += reads.eq(reads + issued - (dut.mc_resp.valid & dut.mc_resp.ready))
        m.d.comb += Assume(~dut.mc_resp.valid | (reads != 0))
        self.check(m, self)
        return m


def mc_req_stable(m: Module, h: Harness) -> None:
    """`mc_req` keeps the stream rules: a request not taken stays valid and unchanged."""
    m.d.comb += Assert(held(m, h.dut.mc_req, "mc_req_out"))


def gpu_resp_stable(m: Module, h: Harness) -> None:
    """`gpu_resp` keeps the stream rules: a response beat not taken stays valid and unchanged."""
    m.d.comb += Assert(held(m, h.dut.gpu_resp, "gpu_resp_out"))


PROPERTIES = tuple(Property(check.__name__, check, lambda variant, check: Harness(PARAMS, check), ("small",), depth)
                   for check, depth in ((mc_req_stable, 8), (gpu_resp_stable, 16)))
