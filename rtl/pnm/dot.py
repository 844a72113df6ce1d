"""The array sequencer: runs the controller's GEMV, SCORE and P·V commands on the lanes, reading operand tiles
from the buffer and writing each FP32 result back (docs/pnm.md, "The array's dataflow").

MLP mode (GEMV, P·V, and SCORE otherwise): for every row r of b, the dot product of each lane's a with b's row r,
`tiles` tiles of `width` FP16 long, folded tile by tile in the lanes' accumulators; result (j, r) goes to element
j·R + r of d. GEMV and SCORE take b as R = n rows of L = k; P·V takes b as V transposed, R = k rows (head
dimensions) of L = n (tokens): the layout docs/pnm.md has the GPU's prefill write.

Attention mode (SCORE with k = `sublane_width` < `width`, a head dimension of one sublane): each beat's b tile
holds `sublanes` keys, one per sublane; lane j's operand is query j copied into every sublane, read once per
command; each beat gives `sublanes` scores per lane, written to d[j][key] for the keys below n."""
from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from ..pnm_lane.ports import Mode
from ..pnm_buffer import ports as buffer_ports
from ..pnm_controller import ports as controller_ports
from ..pnm_controller.ports import ArrayKind
from .params import FP16_BYTES, FP32_BYTES, PNMParams
from .ports import Step, lane_beat, lane_results


class DotSequencer(wiring.Component):
    """Ports: `command` → `done` (the controller's array command and completion); `rd` → `rdata` (the buffer's
    operand-tile port); `beat` and `operand<j>` into the lanes, `results` out of them; `wr` (FP32 results, one
    per request, into the buffer's vector write port through the top's write arbiter). `refused` is high in the
    cycle a command is taken that this schedule cannot run: in MLP mode L not a multiple of `width`, a or b not on
    a tile boundary; in attention mode b not on a tile boundary or a not on a query (2·`sublane_width`-byte)
    boundary; or more than `lanes` vectors. Such a command completes at once and writes nothing.

    One command at a time. Tile reads go out back to back; a beat needs the tile of b and, unless the lanes'
    operands stay the same for the whole command (MLP dot products one tile long, and attention mode: then they
    are read once per command and kept), a tile of each vector's a."""

    def __init__(self, params: PNMParams) -> None:
        self.params = p = params
        cp, bp = p.controller_params(), p.buffer_params()
        super().__init__({
            "command": In(stream.Signature(controller_ports.array_command(cp))),
            "done": Out(stream.Signature(controller_ports.unit_completion(cp))),
            "rd": Out(stream.Signature(buffer_ports.read_request(bp.row_bits(p.tile_bytes)))),
            "rdata": In(stream.Signature(buffer_ports.read_data(p.tile_bytes))),
            "beat": Out(stream.Signature(lane_beat(p))),
            **{f"operand{j}": Out(16 * p.width) for j in range(p.lanes)},
            "results": In(stream.Signature(lane_results(p))),
            "wr": Out(stream.Signature(buffer_ports.write_request(bp.row_bits(p.row_bytes), p.row_bytes))),
            "refused": Out(1),
        })

    def _units(self, row, unit_bytes: int):
        """Which `unit_bytes`-long unit of the buffer buffer row `row` starts in, and whether it starts one."""
        row_bytes = self.params.row_bytes
        if unit_bytes >= row_bytes:
            shift = exact_log2(unit_bytes // row_bytes)
            return row >> shift, row[:shift] == 0 if shift else Const(1)
        return row << exact_log2(row_bytes // unit_bytes), Const(1)

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.params
        sublanes = p.width // p.sublane_width
        sub_bits, width_bits = exact_log2(sublanes), exact_log2(p.width)
        query_bytes = FP16_BYTES * p.sublane_width
        tile_bits = len(self.rd.payload.row)
        unit_bits = tile_bits + sub_bits          # a's position in tiles (MLP) or in queries (attention)
        cmd = self.command.payload

        # The command being run.
        d, id_ = Signal.like(cmd.d), Signal.like(cmd.id)
        vectors = Signal(range(p.lanes + 1))
        rows, tiles, keys = Signal(16), Signal(16), Signal(16)  # R beats of b (rows or key tiles), tiles per dot
        a_first = Signal(unit_bits)
        reload = Signal()                          # the lanes' operands change from tile to tile
        attention = Signal()

        pv = cmd.kind == ArrayKind.PV
        length = Mux(pv, cmd.n, cmd.k)
        scoring = (cmd.kind == ArrayKind.SCORE) & (cmd.k == p.sublane_width) if sublanes > 1 else Const(0)
        (a_tile, a_aligned), (b_tile, b_aligned) = self._units(cmd.a, p.tile_bytes), self._units(cmd.b, p.tile_bytes)
        a_query, query_aligned = self._units(cmd.a, query_bytes)
        whole_tiles = length[:width_bits] == 0 if width_bits else Const(1)
        runnable = Mux(scoring, query_aligned, whole_tiles & a_aligned) & b_aligned & (cmd.m <= p.lanes)
        taken = self.command.valid & self.command.ready
        m.d.comb += self.refused.eq(taken & ~runnable)

        # Requests: (beat r, tile t, slot s): slot 0 is b's tile, slot s ≥ 1 the tile of vector s − 1's a.
        rq_r, rq_t, rq_s = Signal(17), Signal(16), Signal(ceil_log2(p.lanes + 1))
        rq_row = Signal(tile_bits)                 # b's tile of (r, 0)
        rq_a = Signal(unit_bits)                   # slot s ≥ 1: vector s − 1's first tile (MLP), its query (attention)
        # Responses walk the same sequence.
        rs_r, rs_t, rs_s, rs_a = Signal(17), Signal(16), Signal.like(rq_s), Signal(unit_bits)
        # Writes. MLP: result (j, r) to element j·R + r of d. Attention: score (j, key0 + s) to element j·n + key0 + s.
        wr_r, wr_j, wr_s, element = Signal(17), Signal(range(p.lanes)), Signal(range(sublanes)), Signal(24)
        key0, base = Signal(17), Signal(24)

        def last_slot(r):
            return Mux(reload | (r == 0), vectors, 0)

        beat_full = Signal()
        b_operand = Signal(16 * p.width)
        a_operands = [Signal(16 * p.width, name=f"a_operand{j}") for j in range(p.lanes)]
        clear, emit = Signal(), Signal()

        # An If chain, not an FSM: Yosys writes a state switch as a case statement Verilator finds incomplete.
        state = Signal(Step)
        with m.If(state == Step.IDLE):
            m.d.comb += self.command.ready.eq(1)
            with m.If(self.command.valid):
                first = Mux(scoring, a_query, a_tile)
                m.d.sync += [d.eq(cmd.d), id_.eq(cmd.id), vectors.eq(cmd.m), keys.eq(cmd.n), attention.eq(scoring),
                             rows.eq(Mux(scoring, (cmd.n + sublanes - 1) >> sub_bits, Mux(pv, cmd.k, cmd.n))),
                             tiles.eq(Mux(scoring, 1, length >> width_bits)),
                             reload.eq(~scoring & ((length >> width_bits) != 1)), a_first.eq(first),
                             rq_r.eq(0), rq_t.eq(0), rq_s.eq(0), rq_row.eq(b_tile), rq_a.eq(first),
                             rs_r.eq(0), rs_t.eq(0), rs_s.eq(0), rs_a.eq(first),
                             wr_r.eq(0), wr_j.eq(0), wr_s.eq(0), element.eq(0), key0.eq(0), base.eq(0)]
                with m.If(runnable):
                    m.d.sync += state.eq(Step.RUN)
                with m.Else():
                    m.d.sync += state.eq(Step.DONE)
        with m.Elif(state == Step.RUN):
            # Tile reads.
            a_address = Mux(attention, rq_a >> sub_bits, rq_a + rq_t)
            a_step = Mux(attention, 1, tiles)
            m.d.comb += [self.rd.valid.eq(rq_r < rows),
                         self.rd.payload.row.eq(Mux(rq_s == 0, rq_row + rq_t, a_address))]
            with m.If(self.rd.valid & self.rd.ready):
                with m.If(rq_s == last_slot(rq_r)):
                    m.d.sync += [rq_s.eq(0), rq_a.eq(a_first)]
                    with m.If(rq_t == tiles - 1):
                        m.d.sync += [rq_t.eq(0), rq_r.eq(rq_r + 1), rq_row.eq(rq_row + tiles)]
                    with m.Else():
                        m.d.sync += rq_t.eq(rq_t + 1)
                with m.Else():
                    m.d.sync += rq_s.eq(rq_s + 1)
                    with m.If(rq_s != 0):
                        m.d.sync += rq_a.eq(rq_a + a_step)
            # Tile data into the operand registers; the last tile of a beat makes the beat. In attention mode
            # a lane's operand is its query, cut out of its tile and copied into every sublane.
            # One signal each, so that the netlist holds the selection once, not once per use (per lane).
            data = self.rdata.payload.data
            query, operand = Signal(8 * query_bytes), Signal(16 * p.width)
            m.d.comb += [query.eq(data.word_select(rs_a[:sub_bits], 8 * query_bytes) if sub_bits else data),
                         operand.eq(Mux(attention, Cat(query for _ in range(sublanes)), data))]
            m.d.comb += self.rdata.ready.eq(~beat_full | self.beat.ready)
            with m.If(self.beat.valid & self.beat.ready):
                m.d.sync += beat_full.eq(0)
            with m.If(self.rdata.valid & self.rdata.ready):
                with m.If(rs_s == 0):
                    m.d.sync += b_operand.eq(data)
                for j in range(p.lanes):
                    with m.Elif(rs_s == j + 1):
                        m.d.sync += a_operands[j].eq(operand)
                with m.If(rs_s == last_slot(rs_r)):
                    m.d.sync += [rs_s.eq(0), rs_a.eq(a_first), beat_full.eq(1), clear.eq(rs_t == 0),
                                 emit.eq(rs_t == tiles - 1)]
                    with m.If(rs_t == tiles - 1):
                        m.d.sync += [rs_t.eq(0), rs_r.eq(rs_r + 1)]
                    with m.Else():
                        m.d.sync += rs_t.eq(rs_t + 1)
                with m.Else():
                    m.d.sync += rs_s.eq(rs_s + 1)
                    with m.If(rs_s != 0):
                        m.d.sync += rs_a.eq(rs_a + 1)
            self._writes(m, state, d, vectors, rows, keys, attention, wr_r, wr_j, wr_s, element, key0, base)
        with m.Else():
            m.d.comb += [self.done.valid.eq(1), self.done.payload.id.eq(id_)]
            with m.If(self.done.ready):
                m.d.sync += state.eq(Step.IDLE)

        m.d.comb += [self.beat.valid.eq(beat_full), self.beat.payload.mode.eq(Mux(attention, Mode.ATTENTION, Mode.MLP)),
                     self.beat.payload.clear.eq(clear), self.beat.payload.emit.eq(emit),
                     self.beat.payload.memory.eq(b_operand)]
        m.d.comb += [getattr(self, f"operand{j}").eq(a_operands[j]) for j in range(p.lanes)]
        return m

    def _writes(self, m, state, d, vectors, rows, keys, attention, wr_r, wr_j, wr_s, element, key0, base) -> None:
        """One FP32 result per write. MLP: vector j's accumulator to element j·R + r. Attention: sublane s of lane j
        to element j·n + key0 + s, for the keys of the beat below n (key0 = r · sublanes)."""
        p = self.params
        sublanes = p.width // p.sublane_width
        slots = p.row_bytes // FP32_BYTES
        slot_bits = exact_log2(slots)
        at = Mux(attention, base + wr_s, element)
        slot = at[:slot_bits] if slot_bits else Const(0)
        results = self.results.payload
        value = Mux(attention, results.sublane_sums[wr_j][wr_s], results.accumulator[wr_j])
        left = keys - key0
        last_s = Mux(attention & (left < sublanes), left - 1, sublanes - 1)
        last_s = Mux(attention, last_s, 0)
        beat_done = (wr_j == vectors - 1) & (wr_s == last_s)
        m.d.comb += [
            self.wr.valid.eq(self.results.valid),
            self.wr.payload.row.eq(d + (at >> slot_bits)),
            self.wr.payload.data.eq(Cat(value for _ in range(slots))),
            self.wr.payload.mask.eq(Cat((slot == k).replicate(FP32_BYTES) for k in range(slots))),
            self.results.ready.eq(self.wr.ready & beat_done),
        ]
        with m.If(self.wr.valid & self.wr.ready):
            with m.If(wr_s != last_s):
                m.d.sync += wr_s.eq(wr_s + 1)
            with m.Elif(wr_j != vectors - 1):
                m.d.sync += [wr_s.eq(0), wr_j.eq(wr_j + 1), element.eq(element + rows), base.eq(base + keys)]
            with m.Else():
                m.d.sync += [wr_s.eq(0), wr_j.eq(0), wr_r.eq(wr_r + 1), element.eq(wr_r + 1),
                             key0.eq(key0 + sublanes), base.eq(key0 + sublanes)]
                with m.If(wr_r == rows - 1):
                    m.d.sync += state.eq(Step.DONE)
