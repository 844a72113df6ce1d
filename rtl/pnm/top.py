"""The DuoPD PNM (§4.2, Fig. 6): the controller runs a program from its instruction buffer after a host start;
tensor loads and stores go to the MMU, which forwards data between memory and the banked buffer; GEMV, SCORE and
P·V run on the compute array and element-wise vector ops on the vector unit, each through a sequencer that
streams operands out of the buffer and results back into it. docs/pnm.md describes the whole."""
from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..mmu.mmu import MMU
from ..pnm_buffer.buffer import PNMBuffer
from ..pnm_controller import ports as controller_ports
from ..pnm_controller.controller import PNMController
from ..pnm_vector.vector import PNMVector
from .arbiter import WriteArbiter
from .dot import DotSequencer
from .elementwise import ElementwiseSequencer
from .lanes import LaneArray
from .params import PNMParams
from .ports import UnitError, status

MMU_PORTS = ("gpu_req", "gpu_resp", "mc_req", "mc_resp", "config")


class PNM(wiring.Component):
    """Ports: the host's `write` (a program word), `start` and `status` (the controller's, with the first command a
    sequencer refused: `unit_error`, `unit_id`); the MMU's GPU side (`gpu_req` → `gpu_resp`), memory-controller
    side (`mc_req` → `mc_resp`), `config` register writes and `stray_response`, all as the MMU has them.

    Timing: `latency` is from `start` accepted to the first memory request on `mc_req`, on an idle PNM whose
    program starts with a LOAD (the controller's fetch, decode and issue, then the MMU's PNM path);
    `initiation_interval`: the smallest gap between the memory requests of one LOAD (the MMU issues one per
    cycle)."""

    initiation_interval = 1

    def __init__(self, params: PNMParams = PNMParams()) -> None:
        self.params = p = params
        cp = p.controller_params()
        self.latency = PNMController.latency + MMU.latency + 1  # the MMU's PNM path has its LSU's register more
        self._lanes, self._vector = LaneArray(p), PNMVector(p.vector_params())
        self._mmu = MMU(p.mmu_params())
        super().__init__({
            "write": In(stream.Signature(controller_ports.program_write(cp))),
            "start": In(stream.Signature(controller_ports.start(cp))),
            "status": Out(status(p)),
            **{name: self._mmu.signature.members[name] for name in (*MMU_PORTS, "stray_response")},
        })

    @property
    def shared_modules(self) -> dict[str, wiring.Component]:
        """The lanes' and the vector unit's element modules (distinct names: `pnm_…` and the vector unit's)."""
        return {**self._lanes.shared_modules, **self._vector.shared_modules}

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.params
        m.submodules.controller = controller = PNMController(p.controller_params())
        m.submodules.mmu = mmu = self._mmu
        m.submodules.buffer = buffer = PNMBuffer(p.buffer_params())
        m.submodules.lanes = lanes = self._lanes
        m.submodules.vector = vector = self._vector
        m.submodules.dot = dot = DotSequencer(p)
        m.submodules.elementwise = elementwise = ElementwiseSequencer(p)
        m.submodules.writes = writes = WriteArbiter(buffer.vu_wr.payload.shape())

        # Host and MMU.
        wiring.connect(m, wiring.flipped(self.write), controller.write)
        wiring.connect(m, wiring.flipped(self.start), controller.start)
        wiring.connect(m, controller.mmu_cmd, mmu.pnm_instr)
        wiring.connect(m, mmu.completion, controller.mmu_done)
        for name in MMU_PORTS:
            inner, outer = getattr(mmu, name), getattr(self, name)
            wiring.connect(m, *((wiring.flipped(outer), inner) if name in ("gpu_req", "mc_resp", "config")
                                else (inner, wiring.flipped(outer))))
        m.d.comb += self.stray_response.eq(mmu.stray_response)
        # TSV forwarding between the MMU and the buffer.
        wiring.connect(m, mmu.buf_wr, buffer.buf_wr)
        wiring.connect(m, mmu.buf_rd, buffer.buf_rd)
        wiring.connect(m, buffer.buf_rdata, mmu.buf_rdata)
        # Each sequencer between its unit's command port, a buffer read port and its unit.
        _join(m, controller.array_cmd, controller.array_done, dot, buffer.array0_rd, buffer.array0_rdata, lanes)
        m.d.comb += [getattr(lanes, f"operand{j}").eq(getattr(dot, f"operand{j}")) for j in range(p.lanes)]
        _join(m, controller.vector_cmd, controller.vector_done, elementwise, buffer.vu_rd, buffer.vu_rdata, vector)
        # Both write back through the vector unit's buffer port.
        wiring.connect(m, dot.wr, writes.first)
        wiring.connect(m, elementwise.wr, writes.second)
        wiring.connect(m, writes.o, buffer.vu_wr)

        # Status: the controller's, and the first command a sequencer refused since the last start.
        unit_error, unit_id = Signal(UnitError), Signal(p.id_bits)
        with m.If(controller.start.valid & controller.start.ready):
            m.d.sync += unit_error.eq(UnitError.NONE)
        with m.Elif(unit_error == UnitError.NONE):
            with m.If(dot.refused):
                m.d.sync += [unit_error.eq(UnitError.ARRAY), unit_id.eq(dot.command.payload.id)]
            with m.Elif(elementwise.refused):
                m.d.sync += [unit_error.eq(UnitError.VECTOR), unit_id.eq(elementwise.command.payload.id)]
        m.d.comb += [self.status.state.eq(controller.status.state), self.status.error.eq(controller.status.error),
                     self.status.pc.eq(controller.status.pc), self.status.unit_error.eq(unit_error),
                     self.status.unit_id.eq(unit_id)]
        return m


def _join(m: Module, command, done, sequencer, read, read_data, unit) -> None:
    """`sequencer` takes the controller's `command` and answers on `done`, reads the buffer on `read` →
    `read_data`, and streams beats through `unit`."""
    wiring.connect(m, command, sequencer.command)
    wiring.connect(m, sequencer.done, done)
    wiring.connect(m, sequencer.rd, read)
    wiring.connect(m, read_data, sequencer.rdata)
    wiring.connect(m, sequencer.beat, unit.i)
    wiring.connect(m, unit.o, sequencer.results)
