"""The vector sequencer: runs the controller's element-wise vector commands (VOP without reduction or broadcast,
and ACT) on the vector unit, one buffer row per beat (docs/pnm-top.md, "What each unit runs")."""
from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..pnm_buffer import ports as buffer_ports
from ..pnm_controller import ports as controller_ports
from ..pnm_controller.ports import VectorKind
from ..pnm_vector.ports import Reduce, input_layout, output_layout
from .params import FP32_BYTES, PNMParams


class ElementwiseSequencer(wiring.Component):
    """Ports: `command` → `done` (the controller's vector command and completion); `rd` → `rdata` and `wr` (the
    buffer's vector-unit ports; `wr` through the top's write arbiter); `beat` → `results` (the vector unit).

    A VOP d a b n m (element-wise, no reduction, no broadcast) or ACT d a n m runs over the m·n FP32 elements
    as ⌈m·n / W⌉ rows of W = `row_bytes / 4` elements: row q of a (and, for VOP, of b) is read, goes through
    the vector unit as one beat (VOP: op(a, b); ACT: op(a, +0)), and its r0s are written to row q of d, the
    last row only up to element m·n. `refused` is high in the cycle any other vector command is taken (SOFTMAX,
    NORM, MERGE, or a VOP with a reduction or broadcast): it completes at once and writes nothing."""

    def __init__(self, params: PNMParams) -> None:
        self.params = p = params
        cp, bp, width = p.controller_params(), p.buffer_params(), p.vector_params().width
        rows = bp.row_bits(p.row_bytes)
        super().__init__({
            "command": In(stream.Signature(controller_ports.vector_command(cp))),
            "done": Out(stream.Signature(controller_ports.unit_completion(cp))),
            "rd": Out(stream.Signature(buffer_ports.read_request(rows))),
            "rdata": In(stream.Signature(buffer_ports.read_data(p.row_bytes))),
            "beat": Out(stream.Signature(input_layout(width))),
            "results": In(stream.Signature(output_layout(width))),
            "wr": Out(stream.Signature(buffer_ports.write_request(rows, p.row_bytes))),
            "refused": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        width = self.params.vector_params().width
        cmd = self.command.payload
        d, a, b, id_, op = Signal.like(cmd.d), Signal.like(cmd.a), Signal.like(cmd.b), Signal.like(cmd.id), \
            Signal.like(cmd.op)
        two = Signal()                    # VOP reads b too
        rows, remaining = Signal(24), Signal(24)
        rq_q, rs_q, wr_q = Signal(24), Signal(24), Signal(24)
        rq_s, rs_s = Signal(), Signal()   # 0: a's row, 1: b's row

        vop = (cmd.kind == VectorKind.VOP) & (cmd.reduce == Reduce.NONE) & ~cmd.broadcast
        runnable = vop | (cmd.kind == VectorKind.ACT)
        taken = self.command.valid & self.command.ready
        m.d.comb += self.refused.eq(taken & ~runnable)
        count = Signal(24)
        m.d.comb += count.eq(cmd.m * cmd.n)

        beat_full = Signal()
        a_row, b_row = Signal(8 * self.params.row_bytes), Signal(8 * self.params.row_bytes)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.command.ready.eq(1)
                with m.If(self.command.valid):
                    m.d.sync += [d.eq(cmd.d), a.eq(cmd.a), b.eq(cmd.b), id_.eq(cmd.id), op.eq(cmd.op), two.eq(vop),
                                 rows.eq((count + width - 1) >> exact_log2(width)), remaining.eq(count),
                                 rq_q.eq(0), rs_q.eq(0), wr_q.eq(0), rq_s.eq(0), rs_s.eq(0)]
                    with m.If(runnable):
                        m.next = "RUN"
                    with m.Else():
                        m.next = "DONE"
            with m.State("RUN"):
                m.d.comb += [self.rd.valid.eq(rq_q < rows), self.rd.payload.row.eq(Mux(rq_s, b, a) + rq_q)]
                with m.If(self.rd.valid & self.rd.ready):
                    with m.If(two & ~rq_s):
                        m.d.sync += rq_s.eq(1)
                    with m.Else():
                        m.d.sync += [rq_s.eq(0), rq_q.eq(rq_q + 1)]
                m.d.comb += self.rdata.ready.eq(~beat_full | self.beat.ready)
                with m.If(self.beat.valid & self.beat.ready):
                    m.d.sync += beat_full.eq(0)
                with m.If(self.rdata.valid & self.rdata.ready):
                    with m.If(rs_s):
                        m.d.sync += b_row.eq(self.rdata.payload.data)
                    with m.Else():
                        m.d.sync += a_row.eq(self.rdata.payload.data)
                    with m.If(two & ~rs_s):
                        m.d.sync += rs_s.eq(1)
                    with m.Else():
                        m.d.sync += [rs_s.eq(0), rs_q.eq(rs_q + 1), beat_full.eq(1)]
                lanes = self.results.payload.lanes
                m.d.comb += [
                    self.wr.valid.eq(self.results.valid),
                    self.wr.payload.row.eq(d + wr_q),
                    self.wr.payload.data.eq(Cat(lanes[k].r0 for k in range(width))),
                    self.wr.payload.mask.eq(Cat((remaining > k).replicate(FP32_BYTES) for k in range(width))),
                    self.results.ready.eq(self.wr.ready),
                ]
                with m.If(self.wr.valid & self.wr.ready):
                    m.d.sync += [wr_q.eq(wr_q + 1), remaining.eq(remaining - width)]
                    with m.If(wr_q == rows - 1):
                        m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += [self.done.valid.eq(1), self.done.payload.id.eq(id_)]
                with m.If(self.done.ready):
                    m.next = "IDLE"

        beat = self.beat.payload
        m.d.comb += [self.beat.valid.eq(beat_full), beat.op.eq(op), beat.reduce.eq(Reduce.NONE), beat.last.eq(1)]
        for k in range(width):
            m.d.comb += [beat.lanes[k].a.eq(a_row[32 * k:32 * (k + 1)]),
                         beat.lanes[k].b.eq(Mux(two, b_row[32 * k:32 * (k + 1)], 0))]
        return m
