"""The array sequencer: runs the controller's GEMV, SCORE and P·V commands on the lanes, reading operand tiles
from the buffer and writing each FP32 result back (docs/pnm-top.md, "The array's dataflow").

All three are one schedule: for every row r of b, the dot product of each lane's a with b's row r, `tiles`
tiles of `width` FP16 long, folded tile by tile in the lanes' accumulators (MLP mode); result (j, r) goes to
element j·R + r of d. GEMV and SCORE take b as R = n rows of L = k; P·V takes b as V transposed, R = k rows
(head dimensions) of L = n (tokens): the layout docs/pnm-top.md has the GPU's prefill write."""
from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from ..pnm.ports import Mode
from ..pnm_buffer import ports as buffer_ports
from ..pnm_controller import ports as controller_ports
from ..pnm_controller.ports import ArrayKind
from .params import FP32_BYTES, PNMParams
from .ports import lane_beat, lane_results


class DotSequencer(wiring.Component):
    """Ports: `command` → `done` (the controller's array command and completion); `rd` → `rdata` (the buffer's
    operand-tile port); `beat` and `operand<j>` into the lanes, `results` out of them; `wr` (FP32 results, one
    per request, into the buffer's vector write port through the top's write arbiter). `refused` is high in the
    cycle a command is taken that this schedule cannot run: L not a multiple of `width`, a or b not on a tile
    boundary, or more than `lanes` vectors; such a command completes at once and writes nothing.

    One command at a time. Tile reads go out back to back; a beat needs the tile of b and, unless every dot
    product is one tile long (then the lanes' operands are read once per command and kept), a tile of each
    vector's a."""

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

    def _tile(self, row):
        """The tile index of buffer row `row`, and whether the row starts a tile."""
        p = self.params
        if p.tile_bytes >= p.row_bytes:
            shift = exact_log2(p.tile_bytes // p.row_bytes)
            return row >> shift, row[:shift] == 0 if shift else Const(1)
        return row << exact_log2(p.row_bytes // p.tile_bytes), Const(1)

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.params
        tile_bits = len(self.rd.payload.row)
        slot_bits = ceil_log2(p.lanes + 1)
        cmd = self.command.payload

        # The command being run.
        d, id_ = Signal.like(cmd.d), Signal.like(cmd.id)
        vectors = Signal(range(p.lanes + 1))
        rows, tiles = Signal(16), Signal(16)       # R rows of b, each `tiles` tiles long
        a_tile, b_tile = Signal(tile_bits), Signal(tile_bits)
        reload = Signal()                          # the lanes' operands change from tile to tile

        pv = cmd.kind == ArrayKind.PV
        length = Mux(pv, cmd.n, cmd.k)
        (a_start, a_aligned), (b_start, b_aligned) = self._tile(cmd.a), self._tile(cmd.b)
        width_bits = exact_log2(p.width)
        runnable = ((length[:width_bits] == 0 if width_bits else Const(1)) & a_aligned & b_aligned
                    & (cmd.m <= p.lanes))
        taken = self.command.valid & self.command.ready
        m.d.comb += self.refused.eq(taken & ~runnable)

        # Requests: (row r, tile t, slot s): slot 0 is b's tile, slot s ≥ 1 the tile of vector s − 1's a.
        rq_r, rq_t, rq_s = Signal(17), Signal(16), Signal(slot_bits)
        rq_row, rq_a = Signal(tile_bits), Signal(tile_bits)   # b's tile of (r, 0); a's tile of (s, 0) for s ≥ 1
        # Responses walk the same sequence.
        rs_r, rs_t, rs_s = Signal(17), Signal(16), Signal(slot_bits)
        # Writes: result (j, r) to element j·R + r of d.
        wr_r, wr_j, element = Signal(17), Signal(range(p.lanes)), Signal(24)

        def last_slot(r):
            return Mux(reload | (r == 0), vectors, 0)

        beat_full = Signal()
        b_operand = Signal(16 * p.width)
        a_operands = [Signal(16 * p.width, name=f"a_operand{j}") for j in range(p.lanes)]
        clear, emit = Signal(), Signal()

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.command.ready.eq(1)
                with m.If(self.command.valid):
                    m.d.sync += [d.eq(cmd.d), id_.eq(cmd.id), vectors.eq(cmd.m), rows.eq(Mux(pv, cmd.k, cmd.n)),
                                 tiles.eq(length >> width_bits), a_tile.eq(a_start), b_tile.eq(b_start),
                                 reload.eq((length >> width_bits) != 1),
                                 rq_r.eq(0), rq_t.eq(0), rq_s.eq(0), rq_row.eq(b_start), rq_a.eq(a_start),
                                 rs_r.eq(0), rs_t.eq(0), rs_s.eq(0), wr_r.eq(0), wr_j.eq(0), element.eq(0)]
                    with m.If(runnable):
                        m.next = "RUN"
                    with m.Else():
                        m.next = "DONE"
            with m.State("RUN"):
                # Tile reads.
                m.d.comb += [self.rd.valid.eq(rq_r < rows),
                             self.rd.payload.row.eq(Mux(rq_s == 0, rq_row, rq_a) + rq_t)]
                with m.If(self.rd.valid & self.rd.ready):
                    with m.If(rq_s == last_slot(rq_r)):
                        m.d.sync += [rq_s.eq(0), rq_a.eq(a_tile)]
                        with m.If(rq_t == tiles - 1):
                            m.d.sync += [rq_t.eq(0), rq_r.eq(rq_r + 1), rq_row.eq(rq_row + tiles)]
                        with m.Else():
                            m.d.sync += rq_t.eq(rq_t + 1)
                    with m.Else():
                        m.d.sync += rq_s.eq(rq_s + 1)
                        with m.If(rq_s != 0):
                            m.d.sync += rq_a.eq(rq_a + tiles)
                # Tile data into the operand registers; the last tile of a beat makes the beat.
                m.d.comb += self.rdata.ready.eq(~beat_full | self.beat.ready)
                with m.If(self.beat.valid & self.beat.ready):
                    m.d.sync += beat_full.eq(0)
                with m.If(self.rdata.valid & self.rdata.ready):
                    with m.Switch(rs_s):
                        with m.Case(0):
                            m.d.sync += b_operand.eq(self.rdata.payload.data)
                        for j in range(p.lanes):
                            with m.Case(j + 1):
                                m.d.sync += a_operands[j].eq(self.rdata.payload.data)
                    with m.If(rs_s == last_slot(rs_r)):
                        m.d.sync += [rs_s.eq(0), beat_full.eq(1), clear.eq(rs_t == 0), emit.eq(rs_t == tiles - 1)]
                        with m.If(rs_t == tiles - 1):
                            m.d.sync += [rs_t.eq(0), rs_r.eq(rs_r + 1)]
                        with m.Else():
                            m.d.sync += rs_t.eq(rs_t + 1)
                    with m.Else():
                        m.d.sync += rs_s.eq(rs_s + 1)
                # Results: vector j's accumulator to element j·R + r of d, one FP32 per write.
                slots = p.row_bytes // FP32_BYTES
                slot_bits_row = exact_log2(slots)
                slot = element[:slot_bits_row] if slot_bits_row else Const(0)
                accumulators = self.results.payload.accumulator
                m.d.comb += [
                    self.wr.valid.eq(self.results.valid),
                    self.wr.payload.row.eq(d + (element >> slot_bits_row)),
                    self.wr.payload.data.eq(Cat(accumulators[wr_j] for _ in range(slots))),
                    self.wr.payload.mask.eq(Cat((slot == k).replicate(FP32_BYTES) for k in range(slots))),
                    self.results.ready.eq(self.wr.ready & (wr_j == vectors - 1)),
                ]
                with m.If(self.wr.valid & self.wr.ready):
                    with m.If(wr_j == vectors - 1):
                        m.d.sync += [wr_j.eq(0), wr_r.eq(wr_r + 1), element.eq(wr_r + 1)]
                        with m.If(wr_r == rows - 1):
                            m.next = "DONE"
                    with m.Else():
                        m.d.sync += [wr_j.eq(wr_j + 1), element.eq(element + rows)]
            with m.State("DONE"):
                m.d.comb += [self.done.valid.eq(1), self.done.payload.id.eq(id_)]
                with m.If(self.done.ready):
                    m.next = "IDLE"

        m.d.comb += [self.beat.valid.eq(beat_full), self.beat.payload.mode.eq(Mode.MLP),
                     self.beat.payload.clear.eq(clear), self.beat.payload.emit.eq(emit),
                     self.beat.payload.memory.eq(b_operand)]
        m.d.comb += [getattr(self, f"operand{j}").eq(a_operands[j]) for j in range(p.lanes)]
        return m
