"""The vector sequencer: runs the controller's VOP and ACT commands on the vector unit, one buffer row per beat
(docs/pnm-top.md, "What each unit runs")."""
from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..pnm_buffer import ports as buffer_ports
from ..pnm_controller import ports as controller_ports
from ..pnm_controller.ports import VectorKind
from ..pnm_vector.ports import Reduce, input_layout, output_layout
from .params import FP32_BYTES, PNMParams
from .ports import Step


class ElementwiseSequencer(wiring.Component):
    """Ports: `command` → `done` (the controller's vector command and completion); `rd` → `rdata` and `wr` (the
    buffer's vector-unit ports; `wr` through the top's write arbiter); `beat` → `results` (the vector unit).

    A VOP d a b n m or ACT d a n m runs over the m·n FP32 elements as ⌈m·n / W⌉ rows of W = `row_bytes / 4`
    elements: row q of a (and, for VOP, of b) is read and goes through the vector unit as one beat (VOP:
    op(a, b); ACT: op(a, +0)). Without a reduction the beat's r0s are written to row q of d, the last row only up
    to element m·n. A VOP with `broadcast` takes b[j] for every element of vector j; with a reduction, vector j's
    beats fold (`last` on its final beat) and the one result goes to d[j]. Both need n to be a multiple of W, so
    that no beat holds two vectors. `refused` is high in the cycle any other vector command is taken (SOFTMAX,
    NORM, MERGE, or a broadcast or reduction with n not a multiple of W): it completes at once and writes
    nothing."""

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
        lane_bits = exact_log2(width)
        cmd = self.command.payload
        d, a, b, id_ = Signal.like(cmd.d), Signal.like(cmd.a), Signal.like(cmd.b), Signal.like(cmd.id)
        op, reduce, broadcast = Signal.like(cmd.op), Signal.like(cmd.reduce), Signal()
        two = Signal()                    # VOP reads b too
        reducing = reduce != Reduce.NONE
        rows, remaining, outputs = Signal(24), Signal(24), Signal(24)
        per_vector = Signal(16)           # beats (rows) of one vector when broadcasting or reducing
        rq_q, rs_q, wr_q = Signal(24), Signal(24), Signal(24)
        rq_s, rs_s = Signal(), Signal()   # 0: a's row, 1: b's row
        rq_j, rq_t, rs_j, rs_t = Signal(8), Signal(16), Signal(8), Signal(16)  # vector and beat within it

        vop = cmd.kind == VectorKind.VOP
        whole_beats = cmd.n[:lane_bits] == 0 if lane_bits else Const(1)
        runnable = (vop & (whole_beats | ((cmd.reduce == Reduce.NONE) & ~cmd.broadcast))) \
            | (cmd.kind == VectorKind.ACT)
        taken = self.command.valid & self.command.ready
        m.d.comb += self.refused.eq(taken & ~runnable)
        count = Signal(24)
        m.d.comb += count.eq(cmd.m * cmd.n)

        beat_full, last = Signal(), Signal()
        a_row, b_row = Signal(8 * self.params.row_bytes), Signal(8 * self.params.row_bytes)

        def step(j, t):
            """The next (vector, beat) after a beat."""
            return Mux(t == per_vector - 1, j + 1, j), Mux(t == per_vector - 1, 0, t + 1)

        # An If chain, not an FSM: Yosys writes a state switch as a case statement Verilator finds incomplete.
        state = Signal(Step)
        with m.If(state == Step.IDLE):
            m.d.comb += self.command.ready.eq(1)
            with m.If(self.command.valid):
                rows_needed = (count + width - 1) >> lane_bits
                m.d.sync += [d.eq(cmd.d), a.eq(cmd.a), b.eq(cmd.b), id_.eq(cmd.id), op.eq(cmd.op),
                             reduce.eq(Mux(vop, cmd.reduce, Reduce.NONE)), broadcast.eq(vop & cmd.broadcast),
                             two.eq(vop), rows.eq(rows_needed), remaining.eq(count),
                             outputs.eq(Mux(vop & (cmd.reduce != Reduce.NONE), cmd.m, rows_needed)),
                             per_vector.eq(cmd.n >> lane_bits),
                             rq_q.eq(0), rs_q.eq(0), wr_q.eq(0), rq_s.eq(0), rs_s.eq(0),
                             rq_j.eq(0), rq_t.eq(0), rs_j.eq(0), rs_t.eq(0)]
                with m.If(runnable):
                    m.d.sync += state.eq(Step.RUN)
                with m.Else():
                    m.d.sync += state.eq(Step.DONE)
        with m.Elif(state == Step.RUN):
            b_at = Mux(broadcast, b + (rq_j >> lane_bits), b + rq_q)
            m.d.comb += [self.rd.valid.eq(rq_q < rows), self.rd.payload.row.eq(Mux(rq_s, b_at, a + rq_q))]
            with m.If(self.rd.valid & self.rd.ready):
                with m.If(two & ~rq_s):
                    m.d.sync += rq_s.eq(1)
                with m.Else():
                    j, t = step(rq_j, rq_t)
                    m.d.sync += [rq_s.eq(0), rq_q.eq(rq_q + 1), rq_j.eq(j), rq_t.eq(t)]
            m.d.comb += self.rdata.ready.eq(~beat_full | self.beat.ready)
            with m.If(self.beat.valid & self.beat.ready):
                m.d.sync += beat_full.eq(0)
            with m.If(self.rdata.valid & self.rdata.ready):
                data = self.rdata.payload.data
                scalar = data.word_select(rs_j[:lane_bits], 32) if lane_bits else data
                with m.If(rs_s):
                    m.d.sync += b_row.eq(Mux(broadcast, Cat(scalar for _ in range(width)), data))
                with m.Else():
                    m.d.sync += a_row.eq(data)
                with m.If(two & ~rs_s):
                    m.d.sync += rs_s.eq(1)
                with m.Else():
                    j, t = step(rs_j, rs_t)
                    m.d.sync += [rs_s.eq(0), rs_q.eq(rs_q + 1), beat_full.eq(1),
                                 last.eq(rs_t == per_vector - 1), rs_j.eq(j), rs_t.eq(t)]
            lanes = self.results.payload.lanes
            slot = wr_q[:lane_bits] if lane_bits else Const(0)
            m.d.comb += [
                self.wr.valid.eq(self.results.valid),
                # A reduction's result j goes to element j of d; a row of results to row q of d.
                self.wr.payload.row.eq(d + Mux(reducing, wr_q >> lane_bits, wr_q)),
                self.wr.payload.data.eq(Mux(reducing, Cat(lanes[0].r0 for _ in range(width)),
                                            Cat(lanes[k].r0 for k in range(width)))),
                self.wr.payload.mask.eq(Cat(Mux(reducing, slot == k, remaining > k).replicate(FP32_BYTES)
                                            for k in range(width))),
                self.results.ready.eq(self.wr.ready),
            ]
            with m.If(self.wr.valid & self.wr.ready):
                m.d.sync += [wr_q.eq(wr_q + 1), remaining.eq(remaining - width)]
                with m.If(wr_q == outputs - 1):
                    m.d.sync += state.eq(Step.DONE)
        with m.Else():
            m.d.comb += [self.done.valid.eq(1), self.done.payload.id.eq(id_)]
            with m.If(self.done.ready):
                m.d.sync += state.eq(Step.IDLE)

        beat = self.beat.payload
        m.d.comb += [self.beat.valid.eq(beat_full), beat.op.eq(op), beat.reduce.eq(reduce),
                     beat.last.eq(~reducing | last)]
        for k in range(width):
            m.d.comb += [beat.lanes[k].a.eq(a_row[32 * k:32 * (k + 1)]),
                         beat.lanes[k].b.eq(Mux(two, b_row[32 * k:32 * (k + 1)], 0))]
        return m
