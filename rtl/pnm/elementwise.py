"""The vector sequencer: runs the controller's vector commands on the vector unit, one buffer row per beat
(docs/pnm.md, "What each unit runs"). VOP and ACT are one pass over the operands; SOFTMAX, NORM and MERGE
are schedules of steps per vector (`SCHEDULES`), every arithmetic step an op of the vector unit."""
from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import enum, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..fp.convert import FP32Narrow, FP32NarrowParams
from ..pnm_buffer import ports as buffer_ports
from ..pnm_controller import ports as controller_ports
from ..pnm_controller.ports import VectorKind
from ..pnm_vector.ports import Op, Reduce, input_layout, output_layout
from .params import FP16_BYTES, FP32_BYTES, PNMParams

OPERANDS = "abcd"                      # the command's operand rows, in this order in the step codes
ELEMENTS = ("2j", "2j+1", "j", "0", "1")  # which element of an operand a FETCH or PUT touches (j: the vector)


class Source(enum.Enum, shape=2):
    """Where a vector step's b comes from: the rows of an operand, one element of b per vector (VOP's broadcast),
    a register (broadcast), or nowhere (+0)."""
    ROWS = 0
    ELEMENT = 1
    REGISTER = 2
    ZERO = 3


class Target(enum.Enum, shape=2):
    """Where a vector step's results go: FP32 rows of an operand, one FP32 per vector (VOP's reduction), a
    register (a reduction's one result), or FP16 rows of an operand (each beat half a row)."""
    ROWS = 0
    ELEMENTS = 1
    REGISTER = 2
    HALVES = 3


class Kind(enum.Enum, shape=2):
    FETCH = 0   # register ← one FP32 element of the buffer
    PUT = 1     # one FP32 element of the buffer ← register
    SCALAR = 2  # one beat of registers through the vector unit
    VECTOR = 3  # a pass over one vector's rows


class State(enum.Enum, shape=3):
    IDLE = 0
    SETUP = 1   # decode the step, load its counters
    FETCH = 2
    PUT = 3
    SCALAR = 4
    RUN = 5
    DONE = 6


@dataclass(frozen=True)
class Step:
    """One step of a schedule. FETCH/PUT: `register` and element `element` of operand `a`. SCALAR: op(x[ra],
    x[rb], x2, x3); its r0..r3 go to x0..x3 (`register` = -1) or its r0 to x[register]. VECTOR: op over the
    vector's rows of operand `a` with b from `source` (`b`: an operand, or a register for REGISTER) into `target`
    (`to`: an operand, or a register); `shared`: b's rows are the same for every vector (NORM's gains)."""
    kind: Kind
    op: Op = Op.MAX
    reduce: Reduce = Reduce.NONE
    a: str = "a"
    element: str = "0"
    register: int = 0
    ra: int = 0
    rb: int = 0
    source: Source = Source.ZERO
    b: str | int = "a"
    shared: bool = False
    target: Target = Target.ROWS
    to: str | int = "d"


def _fetch(register, operand, element):
    return Step(Kind.FETCH, a=operand, element=element, register=register)


def _put(register, operand, element):
    return Step(Kind.PUT, a=operand, element=element, register=register)


def _vector(op, a, b, to, reduce=Reduce.NONE, shared=False, half=False):
    source = Source.REGISTER if isinstance(b, int) else Source.ROWS
    target = Target.REGISTER if isinstance(to, int) else Target.HALVES if half else Target.ROWS
    return Step(Kind.VECTOR, op, reduce, a=a, source=source, b=b if isinstance(b, str) else "a",
                register=b if isinstance(b, int) else 0, shared=shared, target=target, to=to)


def _scalar(op, ra, rb, to=-1):
    return Step(Kind.SCALAR, op, ra=ra, rb=rb, register=to)


# Per vector j (docs/pnm-isa.md gives the arithmetic, docs/pnm.md the steps): x0..x3 are registers.
SCHEDULES = {
    VectorKind.SOFTMAX: (
        _fetch(0, "d", "2j"), _fetch(1, "d", "2j+1"),                        # the state (m_j, l_j)
        _vector(Op.MAX, "a", 0, 2, Reduce.MAX),                              # m' = max over max(a[j][t], m_j)
        _vector(Op.EXP, "a", 2, "b", half=True),                             # b[j][t] = FP16(e^(a[j][t] − m'))
        _vector(Op.EXP, "a", 2, 3, Reduce.SUM),                              # Σ_t e^(a[j][t] − m')
        _scalar(Op.SOFTMAX, 0, 1),                                           # (m', l_j·α + Σ·1, α, 1)
        _put(0, "d", "2j"), _put(1, "d", "2j+1"), _put(2, "c", "j")),
    VectorKind.NORM: (
        _fetch(0, "c", "0"), _fetch(1, "c", "1"),                            # c₀ = 1/n, c₁ = ε
        _vector(Op.MUL, "a", "a", 2, Reduce.SUM),                            # Σ_i a[j][i]²
        _scalar(Op.MUL, 2, 0, 2), _scalar(Op.ADD, 2, 1, 2), _scalar(Op.RSQRT, 2, 2, 2),  # r_j
        _vector(Op.MUL, "a", 2, "d"),                                        # d[j][i] = a[j][i]·r_j
        _vector(Op.MUL, "d", "b", "d", shared=True)),                        # d[j][i] ·= b[i]
    VectorKind.MERGE: (
        _fetch(0, "a", "2j"), _fetch(1, "a", "2j+1"), _fetch(2, "b", "2j"), _fetch(3, "b", "2j+1"),
        _scalar(Op.MERGE, 0, 1),                                             # (m, l, w1, w2)
        _put(0, "a", "2j"), _put(1, "a", "2j+1"),
        _vector(Op.MUL, "c", 3, "c"),                                        # c[j][e] = w2·c[j][e] (scratch)
        _vector(Op.MUL, "d", 2, "d"),                                        # d[j][e] = w1·d[j][e]
        _vector(Op.ADD, "d", "c", "d")),                                     # d[j][e] += c[j][e]
}


def _pick(index, values):
    """values[index] as a chain of Muxes (an `Array` becomes a case statement Verilator finds incomplete)."""
    out, index = values[0], Value.cast(index)
    for k, value in enumerate(values[1:], 1):
        out = Mux(index == k, value, out)
    return out


def _write(m: Module, registers: list, index, value) -> None:
    """registers[index] ← value at the clock edge (an If per register, for the reason `_pick` gives)."""
    for k, register in enumerate(registers):
        with m.If(index == k):
            m.d.sync += register.eq(value)


class ElementwiseSequencer(wiring.Component):
    """Ports: `command` → `done` (the controller's vector command and completion); `rd` → `rdata` and `wr` (the
    buffer's vector-unit ports; `wr` through the top's write arbiter); `beat` → `results` (the vector unit).

    A VOP d a b n m or ACT d a n m runs over the m·n FP32 elements as ⌈m·n / W⌉ rows of W = `row_bytes / 4`
    elements: row q of a (and, for VOP, of b) is read and goes through the vector unit as one beat (VOP:
    op(a, b); ACT: op(a, +0)). Without a reduction the beat's r0s are written to row q of d, the last row only up
    to element m·n (with VOP's `narrow`, as FP16 to half q mod 2 of row q / 2). A VOP with `broadcast` takes
    b[j] for every element of vector j; with a reduction, vector j's beats fold (`last` on its final beat) and
    the one result goes to d[j]. Both need n to be a multiple of W, so
    that no beat holds two vectors. SOFTMAX, NORM and MERGE run their `SCHEDULES` vector after vector, and need
    their vectors (n, or k for MERGE) to be whole rows. `refused` is high in the cycle any other vector command
    is taken: it completes at once and writes nothing. FP16 results pass through `FP32Narrow` (nearest even)."""

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
        row_bits = 8 * self.params.row_bytes
        cmd = self.command.payload
        kind, operands = Signal.like(cmd.kind), [Signal.like(cmd.d) for _ in OPERANDS]
        id_, cmd_n, cmd_m = Signal.like(cmd.id), Signal.like(cmd.n), Signal.like(cmd.m)
        op, reduce, broadcast, narrowing = Signal(Op), Signal(Reduce), Signal(), Signal()
        x = [Signal(32, name=f"x{k}") for k in range(4)]
        step, j, head = Signal(range(max(len(s) for s in SCHEDULES.values()) + 1)), Signal(8), Signal(24)
        length = Signal(16)               # elements of one vector (n, or k for MERGE)
        flat = Signal()                   # VOP/ACT: one pass over all m·n elements

        # ---- the step, decoded from (kind, step) ----------------------------------------------------------
        s = {name: Signal(shape, name=f"step_{name}") for name, shape in (
            ("kind", Kind), ("op", Op), ("reduce", Reduce), ("a", 2), ("element", 3), ("register", 2),
            ("all", 1), ("ra", 2), ("rb", 2), ("source", Source), ("b", 2), ("shared", 1), ("target", Target),
            ("to", 2), ("last", 1))}
        with m.If(flat):   # VOP/ACT as one vector step over everything
            m.d.comb += [s["kind"].eq(Kind.VECTOR), s["op"].eq(op), s["reduce"].eq(reduce), s["a"].eq(0),
                         s["source"].eq(Mux(kind == VectorKind.ACT, Source.ZERO,
                                            Mux(broadcast, Source.ELEMENT, Source.ROWS))),
                         s["b"].eq(1), s["target"].eq(Mux(reduce != Reduce.NONE, Target.ELEMENTS,
                                                          Mux(narrowing, Target.HALVES, Target.ROWS))),
                         s["to"].eq(3), s["last"].eq(1)]
        for command_kind, schedule in SCHEDULES.items():
            for index, st in enumerate(schedule):
                with m.Elif((kind == command_kind) & (step == index)):
                    m.d.comb += [s["kind"].eq(st.kind), s["op"].eq(st.op), s["reduce"].eq(st.reduce),
                                 s["a"].eq(OPERANDS.index(st.a)), s["element"].eq(ELEMENTS.index(st.element)),
                                 s["register"].eq(max(st.register, 0)), s["all"].eq(st.register < 0),
                                 s["ra"].eq(st.ra), s["rb"].eq(st.rb), s["source"].eq(st.source),
                                 s["b"].eq(OPERANDS.index(st.b)), s["shared"].eq(st.shared),
                                 s["target"].eq(st.target),
                                 s["to"].eq(st.to if isinstance(st.to, int) else OPERANDS.index(st.to)),
                                 s["last"].eq(index == len(schedule) - 1)]
        element = _pick(s["element"], [j << 1, (j << 1) + 1, j, Const(0, 9), Const(1, 9)])
        element_row = _pick(s["a"], operands) + (element >> lane_bits)
        slot = element[:lane_bits] if lane_bits else Const(0)

        vop = cmd.kind == VectorKind.VOP
        whole = (lambda v: v[:lane_bits] == 0) if lane_bits else (lambda v: Const(1))
        online = (cmd.kind == VectorKind.SOFTMAX) | (cmd.kind == VectorKind.NORM)
        runnable = (vop & (whole(cmd.n) | ((cmd.reduce == Reduce.NONE) & ~cmd.broadcast))) \
            | (cmd.kind == VectorKind.ACT) | (online & whole(cmd.n)) | ((cmd.kind == VectorKind.MERGE) & whole(cmd.k))
        taken = self.command.valid & self.command.ready
        m.d.comb += self.refused.eq(taken & ~runnable)

        # ---- a vector step's counters ----------------------------------------------------------------------
        rows, remaining, outputs = Signal(24), Signal(24), Signal(24)
        per_vector = Signal(16)           # beats (rows) of one vector when broadcasting or reducing
        rq_q, rs_q, wr_q = Signal(24), Signal(24), Signal(24)
        rq_s, rs_s = Signal(), Signal()   # 0: a's row, 1: b's row
        rq_j, rq_t, rs_j, rs_t = Signal(8), Signal(16), Signal(8), Signal(16)  # vector and beat within it
        a_row, b_row, d_row, half_q = Signal(24), Signal(24), Signal(24), Signal(24)
        source, target, to_reg, b_reg = Signal(Source), Signal(Target), Signal(2), Signal(2)
        beat_full, last, asked, sent = Signal(), Signal(), Signal(), Signal()
        a_data, b_data = Signal(row_bits), Signal(row_bits)
        two = (source == Source.ROWS) | (source == Source.ELEMENT)
        reducing = reduce != Reduce.NONE

        # FP16 results: each lane's r0 narrowed by its own FP32Narrow (all fed alike, so in lockstep).
        narrow = [FP32Narrow(FP32NarrowParams(target="fp16", rounding="nearest_even")) for _ in range(width)]
        for k, unit in enumerate(narrow):
            m.submodules[f"narrow{k}"] = unit

        def advance(j_, t_):
            """The next (vector, beat) after a beat."""
            return Mux(t_ == per_vector - 1, j_ + 1, j_), Mux(t_ == per_vector - 1, 0, t_ + 1)

        def next_step():
            with m.If(~s["last"]):
                m.d.sync += [step.eq(step + 1), state.eq(State.SETUP)]
            with m.Elif(flat | (j == cmd_m - 1)):
                m.d.sync += state.eq(State.DONE)
            with m.Else():
                m.d.sync += [step.eq(0), j.eq(j + 1), head.eq(head + (length >> lane_bits)), state.eq(State.SETUP)]

        # An If chain, not an FSM: Yosys writes a state switch as a case statement Verilator finds incomplete.
        state = Signal(State)
        with m.If(state == State.IDLE):
            m.d.comb += self.command.ready.eq(1)
            with m.If(self.command.valid):
                m.d.sync += [kind.eq(cmd.kind), *(r.eq(getattr(cmd, name)) for r, name in zip(operands, OPERANDS)),
                             id_.eq(cmd.id), cmd_n.eq(cmd.n), cmd_m.eq(cmd.m),
                             op.eq(cmd.op), reduce.eq(Mux(vop, cmd.reduce, Reduce.NONE)),
                             broadcast.eq(vop & cmd.broadcast), narrowing.eq(vop & cmd.narrow),
                             flat.eq(vop | (cmd.kind == VectorKind.ACT)),
                             length.eq(Mux(cmd.kind == VectorKind.MERGE, cmd.k, cmd.n)),
                             step.eq(0), j.eq(0), head.eq(0),
                             state.eq(Mux(runnable, State.SETUP, State.DONE))]
        with m.Elif(state == State.SETUP):
            count = Signal(24)
            m.d.comb += count.eq(cmd_m * cmd_n)
            flat_rows = (count + width - 1) >> lane_bits
            vector_rows = length >> lane_bits
            m.d.sync += [
                rows.eq(Mux(flat, flat_rows, vector_rows)), remaining.eq(Mux(flat, count, length)),
                outputs.eq(Mux(flat, Mux(reducing, cmd_m, flat_rows),
                               Mux(s["target"] == Target.REGISTER, 1, vector_rows))),
                per_vector.eq(Mux(flat, cmd_n >> lane_bits, vector_rows)),
                a_row.eq(_pick(s["a"], operands) + head),
                b_row.eq(_pick(s["b"], operands) + Mux(s["shared"], 0, head)),
                d_row.eq(_pick(s["to"], operands) + Mux(s["target"] == Target.HALVES, 0, head)), half_q.eq(head),
                source.eq(s["source"]), target.eq(s["target"]), to_reg.eq(s["to"]), b_reg.eq(s["register"]),
                op.eq(s["op"]), reduce.eq(s["reduce"]),
                rq_q.eq(0), rs_q.eq(0), wr_q.eq(0), rq_s.eq(0), rs_s.eq(0),
                rq_j.eq(0), rq_t.eq(0), rs_j.eq(0), rs_t.eq(0), asked.eq(0), sent.eq(0)]
            m.d.sync += state.eq(_pick(s["kind"], [State.FETCH, State.PUT, State.SCALAR, State.RUN]))
        with m.Elif(state == State.FETCH):
            m.d.comb += [self.rd.valid.eq(~asked), self.rd.payload.row.eq(element_row), self.rdata.ready.eq(1)]
            with m.If(self.rd.valid & self.rd.ready):
                m.d.sync += asked.eq(1)
            with m.If(self.rdata.valid):
                _write(m, x, s["register"], self.rdata.payload.data.word_select(slot, 32) if lane_bits
                       else self.rdata.payload.data)
                next_step()
        with m.Elif(state == State.PUT):
            m.d.comb += [self.wr.valid.eq(1), self.wr.payload.row.eq(element_row),
                         self.wr.payload.data.eq(_pick(s["register"], x).replicate(width)),
                         self.wr.payload.mask.eq(Cat((slot == k).replicate(FP32_BYTES) for k in range(width)))]
            with m.If(self.wr.ready):
                next_step()
        with m.Elif(state == State.SCALAR):
            m.d.comb += [self.beat.valid.eq(~sent), self.results.ready.eq(1)]
            with m.If(self.beat.valid & self.beat.ready):
                m.d.sync += sent.eq(1)
            with m.If(self.results.valid):
                lane = self.results.payload.lanes[0]
                with m.If(s["all"]):
                    m.d.sync += [x[k].eq(getattr(lane, f"r{k}")) for k in range(4)]
                with m.Else():
                    _write(m, x, s["register"], lane.r0)
                next_step()
        with m.Elif(state == State.RUN):
            b_at = Mux(source == Source.ELEMENT, b_row + (rq_j >> lane_bits), b_row + rq_q)
            m.d.comb += [self.rd.valid.eq(rq_q < rows), self.rd.payload.row.eq(Mux(rq_s, b_at, a_row + rq_q))]
            with m.If(self.rd.valid & self.rd.ready):
                with m.If(two & ~rq_s):
                    m.d.sync += rq_s.eq(1)
                with m.Else():
                    j_, t_ = advance(rq_j, rq_t)
                    m.d.sync += [rq_s.eq(0), rq_q.eq(rq_q + 1), rq_j.eq(j_), rq_t.eq(t_)]
            m.d.comb += self.rdata.ready.eq(~beat_full | self.beat.ready)
            with m.If(self.beat.valid & self.beat.ready):
                m.d.sync += beat_full.eq(0)
            with m.If(self.rdata.valid & self.rdata.ready):
                data = self.rdata.payload.data
                scalar = data.word_select(rs_j[:lane_bits], 32) if lane_bits else data
                with m.If(rs_s):
                    m.d.sync += b_data.eq(Mux(source == Source.ELEMENT, scalar.replicate(width), data))
                with m.Else():
                    m.d.sync += a_data.eq(data)
                with m.If(two & ~rs_s):
                    m.d.sync += rs_s.eq(1)
                with m.Else():
                    j_, t_ = advance(rs_j, rs_t)
                    m.d.sync += [rs_s.eq(0), rs_q.eq(rs_q + 1), beat_full.eq(1),
                                 last.eq(rs_t == per_vector - 1), rs_j.eq(j_), rs_t.eq(t_)]
            lanes = self.results.payload.lanes
            wr_slot = wr_q[:lane_bits] if lane_bits else Const(0)
            halves = target == Target.HALVES
            written = Signal()
            with m.If(halves):   # r0s → FP32Narrow → half a row of FP16
                fp16 = Cat(unit.o.payload for unit in narrow)
                half_mask = Cat((remaining > k).replicate(FP16_BYTES) for k in range(width))
                m.d.comb += [self.results.ready.eq(narrow[0].i.ready), self.wr.valid.eq(narrow[0].o.valid),
                             self.wr.payload.row.eq(d_row + (half_q >> 1)),
                             self.wr.payload.data.eq(fp16.replicate(2)),
                             self.wr.payload.mask.eq(Mux(half_q[0], half_mask << FP16_BYTES * width, half_mask))]
                for k, unit in enumerate(narrow):
                    m.d.comb += [unit.i.valid.eq(self.results.valid), unit.i.payload.eq(lanes[k].r0),
                                 unit.o.ready.eq(self.wr.ready)]
                m.d.comb += written.eq(self.wr.valid & self.wr.ready)
            with m.Elif(target == Target.REGISTER):
                m.d.comb += self.results.ready.eq(1)
                with m.If(self.results.valid):
                    _write(m, x, to_reg, lanes[0].r0)
                m.d.comb += written.eq(self.results.valid)
            with m.Else():
                element_target = target == Target.ELEMENTS
                m.d.comb += [
                    self.wr.valid.eq(self.results.valid),
                    # A reduction's result j goes to element j of d; a row of results to row q of d.
                    self.wr.payload.row.eq(d_row + Mux(element_target, wr_q >> lane_bits, wr_q)),
                    self.wr.payload.data.eq(Mux(element_target, lanes[0].r0.replicate(width),
                                                Cat(lanes[k].r0 for k in range(width)))),
                    self.wr.payload.mask.eq(Cat(Mux(element_target, wr_slot == k, remaining > k)
                                                .replicate(FP32_BYTES) for k in range(width))),
                    self.results.ready.eq(self.wr.ready),
                    written.eq(self.wr.valid & self.wr.ready),
                ]
            with m.If(written):
                m.d.sync += [wr_q.eq(wr_q + 1), half_q.eq(half_q + 1), remaining.eq(remaining - width)]
                with m.If(wr_q == outputs - 1):
                    next_step()
        with m.Else():
            m.d.comb += [self.done.valid.eq(1), self.done.payload.id.eq(id_)]
            with m.If(self.done.ready):
                m.d.sync += state.eq(State.IDLE)

        beat = self.beat.payload
        scalar_beat = state == State.SCALAR
        m.d.comb += [beat.op.eq(Mux(scalar_beat, s["op"], op)), beat.reduce.eq(Mux(scalar_beat, 0, reduce)),
                     beat.last.eq(scalar_beat | ~reducing | last)]
        with m.If(state == State.RUN):
            m.d.comb += self.beat.valid.eq(beat_full)
        for k in range(width):
            lane_b = Mux(source == Source.REGISTER, _pick(b_reg, x), Mux(two, b_data[32 * k:32 * (k + 1)], 0))
            m.d.comb += [beat.lanes[k].a.eq(Mux(scalar_beat, _pick(s["ra"], x), a_data[32 * k:32 * (k + 1)])),
                         beat.lanes[k].b.eq(Mux(scalar_beat, _pick(s["rb"], x), lane_b)),
                         beat.lanes[k].c.eq(Mux(scalar_beat, x[2], 0)),
                         beat.lanes[k].d.eq(Mux(scalar_beat, x[3], 0))]
        return m
