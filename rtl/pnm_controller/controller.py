"""The DuoPD PNM controller (§4.2): the host writes a program into the instruction buffer and starts it; the
controller fetches, decodes and checks one instruction per cycle and issues each as a command to its unit (tensor
loads and stores to the MMU, GEMV/score/P·V to the array, the rest to the vector unit), counting completions so
that BARRIER and DONE wait for everything issued before them. docs/pnm-isa.md is the instruction set."""
from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..mmu.ports import Fault
from . import ports
from .decode import Decode
from .fetch import InstructionBuffer
from .isa import INSTRUCTION, VOP_FUNC, ErrorCode, Opcode, Unit
from .outstanding import Outstanding
from .params import ControllerParams
from .ports import State

UNITS = {Unit.MMU: "mmu", Unit.ARRAY: "array", Unit.VECTOR: "vector"}


class PNMController(wiring.Component):
    """Ports (all `lib.stream` but `status`): `write` (host: a word into the instruction buffer, accepted while no
    program runs), `start` (host: run from `pc`, accepted when idle with nothing outstanding), `status` (state,
    error code, pc); per unit a command port `<unit>_cmd` and a completion port `<unit>_done` (always ready), for
    `mmu` (the MMU's own PNM-instruction and completion layouts), `array` and `vector`.

    Timing: `latency` is from `start` to the first command on an idle controller whose ports are ready;
    `initiation_interval`: one instruction per cycle. A BARRIER or DONE retires in the cycle its last awaited
    completion arrives.
    """

    latency = 4  # fetch read, two decode stages, the issue register
    initiation_interval = 1

    def __init__(self, params: ControllerParams = ControllerParams()) -> None:
        self.params = p = params
        super().__init__({
            "write": In(stream.Signature(ports.program_write(p))),
            "start": In(stream.Signature(ports.start(p))),
            "status": Out(ports.status(p)),
            "mmu_cmd": Out(stream.Signature(ports.mmu_command(p))),
            "mmu_done": In(stream.Signature(ports.mmu_completion(p))),
            "array_cmd": Out(stream.Signature(ports.array_command(p))),
            "array_done": In(stream.Signature(ports.unit_completion(p))),
            "vector_cmd": Out(stream.Signature(ports.vector_command(p))),
            "vector_done": In(stream.Signature(ports.unit_completion(p))),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.params
        m.submodules.buffer = buffer = InstructionBuffer(p)
        m.submodules.decode = decode = Decode(p)
        wiring.connect(m, buffer.o, decode.i)
        limits = {"mmu": p.mmu_outstanding, "array": p.array_outstanding, "vector": p.vector_outstanding}
        counters = {name: Outstanding(limit) for name, limit in limits.items()}
        for name, counter in counters.items():
            m.submodules[f"{name}_outstanding"] = counter
            done = getattr(self, f"{name}_done")
            m.d.comb += [done.ready.eq(1), counter.complete.eq(done.valid)]
        drained = Cat(*(c.drained for c in counters.values())).all()
        idle = Cat(*(c.count == 0 for c in counters.values())).all()

        state, error, pc = Signal(State), Signal(ErrorCode), Signal(p.pc_bits + 1)
        running = state == State.RUNNING
        offering = Signal()  # a command is offered and not yet taken: it stays offered (stream rule), even if stopped
        m.d.comb += [self.status.state.eq(state), self.status.error.eq(error), self.status.pc.eq(pc),
                     buffer.flush.eq(~running & ~offering), decode.flush.eq(~running & ~offering)]

        # The host: writes while no program runs, a start when nothing is left from the last one.
        m.d.comb += [
            self.write.ready.eq(~running),
            buffer.write.valid.eq(self.write.valid & ~running), buffer.write.payload.eq(self.write.payload),
            self.start.ready.eq(~running & ~offering & idle),
            buffer.start.valid.eq(self.start.valid & self.start.ready), buffer.start.payload.eq(self.start.payload),
        ]

        # Issue: the decoded head goes to its unit's port when that unit has room.
        head = decode.o.payload
        word = data.View(INSTRUCTION, head.word)
        opcode, unit = word.r.opcode, word.r.opcode[4:]
        clean = decode.o.valid & (head.error == ErrorCode.NONE)
        self._commands(m, word, head.pc[:p.id_bits])
        for code, name in UNITS.items():
            command, counter = getattr(self, f"{name}_cmd"), counters[name]
            m.d.comb += [command.valid.eq(clean & (unit == code.value) & counter.room & (running | offering)),
                         counter.issue.eq(command.valid & command.ready)]
        issued = Cat(*(counter.issue for counter in counters.values())).any()
        offered = Cat(*(getattr(self, f"{name}_cmd").valid & ~getattr(self, f"{name}_cmd").ready
                        for name in UNITS.values())).any()
        m.d.sync += offering.eq(offered)
        control = clean & running & (unit == Unit.CONTROL.value) & drained
        barrier, finished = control & (opcode == Opcode.BARRIER.value), control & (opcode == Opcode.DONE.value)
        m.d.comb += decode.o.ready.eq(issued | barrier)

        # Stopping: an MMU fault, then a stray completion, then the head's own error, then DONE.
        fault = self.mmu_done.valid & (self.mmu_done.payload.fault != Fault.NONE)
        stray = Cat(*(c.stray for c in counters.values())).any()
        with m.If(self.start.valid & self.start.ready):
            m.d.sync += [state.eq(State.RUNNING), error.eq(ErrorCode.NONE), pc.eq(self.start.payload.pc)]
        with m.Elif(state != State.ERROR):
            with m.If(running & fault):
                code = self.mmu_done.payload.fault
                m.d.sync += [state.eq(State.ERROR), pc.eq(self.mmu_done.payload.id),
                             error.eq(Mux(code == Fault.PROTECTED, ErrorCode.MMU_PROTECTED,
                                          Mux(code == Fault.OUT_OF_RANGE, ErrorCode.MMU_OUT_OF_RANGE,
                                              ErrorCode.MMU_MALFORMED)))]
            with m.Elif(stray):
                m.d.sync += [state.eq(State.ERROR), error.eq(ErrorCode.STRAY), pc.eq(self._stray_id(counters))]
            with m.Elif(running & decode.o.valid & (head.error != ErrorCode.NONE)):
                m.d.sync += [state.eq(State.ERROR), error.eq(head.error), pc.eq(head.pc)]
            with m.Elif(finished):
                m.d.sync += [state.eq(State.DONE), pc.eq(head.pc)]
            with m.Elif(running & decode.o.valid):
                m.d.sync += pc.eq(head.pc)
        return m

    def _stray_id(self, counters: dict) -> Value:
        """The id of a stray completion (the MMU's first, then the array's, then the vector unit's)."""
        return Mux(counters["mmu"].stray, self.mmu_done.payload.id,
                   Mux(counters["array"].stray, self.array_done.payload.id, self.vector_done.payload.id))

    def _commands(self, m: Module, word, id_) -> None:
        """Every unit's command fields from the head word (each port's `valid` says whether it is for that unit)."""
        r, func = word.r, data.View(VOP_FUNC, word.r.func)
        mmu = self.mmu_cmd.payload
        m.d.comb += [mmu.base.eq(word.mem.address), mmu.size.eq(r.n), mmu.dest.eq(r.d),
                     mmu.store.eq(r.opcode == Opcode.STORE.value), mmu.id.eq(id_)]
        for name, rows in (("array", "dab"), ("vector", "dabc")):
            command = getattr(self, f"{name}_cmd").payload
            m.d.comb += [command.kind.eq(r.opcode[:len(command.kind.as_value())]), command.id.eq(id_)]
            m.d.comb += [getattr(command, f).eq(getattr(r, f)) for f in (*rows, "n", "k", "m")]
        vector = self.vector_cmd.payload
        m.d.comb += [vector.op.eq(func.op), vector.reduce.eq(func.reduce), vector.broadcast.eq(func.broadcast),
                     vector.narrow.eq(func.narrow)]
