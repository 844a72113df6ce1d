"""The controller's surroundings in simulation, and the checks on what it did.

- the host: writes the whole instruction buffer (`write`), starts a program (`start`), watches `status`;
- the units: one player per command port (MMU, array, vector unit) takes commands under random back-pressure and
  answers each with a completion after a random delay: the MMU's in any order, with the fault the MMU's golden
  model gives for this bench's memory (protected parameters in [0, STORE_BASE), MEMORY_SIZE bytes configured); the
  array's and the vector unit's in order;
- the scoreboard (`tb.scoreboard`): each unit's commands, in order, against the golden model's, as they arrive;
  after each program (`check`): the end state, error code and pc; that no command issued before every command of
  an earlier BARRIER epoch had completed, and DONE not before the last completion; the outstanding limits; and
  after an MMU fault at most the one command that was already offered.

Cycles come from probes made together (`tb.bench.CycleCounter`), so they number the cycles alike: a handshake
probe's cycle is the cycle its transfer happens in; the status probe's is the first cycle showing the new status.
"""
import heapq
import random
from dataclasses import dataclass

from rtl.pnm_controller import ports
from rtl.pnm_controller.isa import disassemble
from rtl.pnm_controller.params import ControllerParams
from rtl.pnm_controller.ports import State
from rtl.registry import BLOCKS

from .. import bench
from ..models import pnm_controller as model
from ..payload import Packer
from ..scoreboard import Scoreboard
from ..stream import bits
from . import stimulus

UNITS = ("mmu", "array", "vector")
STORE_BASE_FRACTION, MEMORY_SIZE_FRACTION = 1 / 2, 3 / 4  # of the address space
STATES = {State.DONE.value: "done", State.ERROR.value: "error"}


class StatusProbe(bench.CycleCounter):
    """Every change of `status`, with the first cycle that shows it."""

    def __init__(self, dut, layout) -> None:
        self.signal, self.packer = dut.status, Packer(layout)
        self.changes: list[tuple[int, dict]] = []
        self._bits = ""
        """The status as last read: it is unpacked only when these change (most cycles it does not)."""
        super().__init__(dut.clk)

    def sample(self) -> None:
        raw = bits(self.signal)
        if raw == self._bits:
            return
        self._bits = raw
        value = self.packer.unpack(int(raw, 2))
        if not self.changes or self.changes[-1][1] != value:
            self.changes.append((self.now, value))


class UnitPlayer:
    """One unit behind its command port: answers every command with a completion `delays` cycles later."""

    def __init__(self, harness: "Harness", name: str) -> None:
        self.harness, self.name = harness, name
        self.sink, self.source = bench.sink(harness.dut, f"{name}_cmd"), bench.source(harness.dut, f"{name}_done")
        self.completion = harness.packers[f"{name}_done"]
        self.in_order = name != "mmu"
        self.delays = (1, 1)
        self.due: list[tuple[int, int, int]] = []
        self.answered = self.last_due = 0
        harness.board.add_port(name, self.sink, decode=harness.packers[f"{name}_cmd"].unpack, observe=self.answer)
        bench.every_edge(harness.dut.clk, self._complete)

    def answer(self, command: dict) -> None:
        h = self.harness
        due = h.cycle.now + h.rng.randint(*self.delays)
        if self.in_order:
            due = self.last_due = max(due, self.last_due)
        fields = {"id": command["id"]}
        if self.name == "mmu":
            fields |= {"dest": command["dest"], "store": command["store"], "fault": h.mmu_fault(command)}
        heapq.heappush(self.due, (due, self.answered, self.completion.pack(**fields)))
        self.answered += 1

    def _complete(self) -> None:
        """At each edge: queue the completions due (the source offers them from the next edge)."""
        while self.due and self.due[0][0] <= self.harness.cycle.now:
            self.source.send_nowait(heapq.heappop(self.due)[2])

    def back_pressure(self, probability: float) -> None:
        self.sink.set_pause_generator(bench.random_pauses(self.harness.rng, probability) if probability else None)
        if not probability:
            self.sink.pause = False

    def clear(self) -> None:
        self.due.clear()
        self.last_due = 0
        self.source.clear()
        self.sink.clear()


@dataclass
class Run:
    """One program's run: what the model says, and where its events start in the probes' records."""
    outcome: model.Outcome
    words: list[int]
    marks: dict[str, int]
    status_mark: int


class Harness:
    def __init__(self, dut, seed: int = 0) -> None:
        self.dut = dut
        self.params = p = ControllerParams(**bench.config()["params"])
        self.rng = random.Random(seed)
        component = BLOCKS["pnm_controller"].build(p)
        self.packers = {name: Packer.of_port(component, name) for name in
                        ("write", "start", *(f"{unit}_{end}" for unit in UNITS for end in ("cmd", "done")))}
        size = 1 << p.address_bits
        self.space = stimulus.Space(p, store_base=int(size * STORE_BASE_FRACTION),
                                    memory_size=int(size * MEMORY_SIZE_FRACTION))
        buffer_rows = 1 << p.buffer_address_bits
        self.config = model.Config(depth=p.depth, buffer_rows=buffer_rows, address_bits=p.address_bits,
                                   row_bytes=p.row_bytes, max_tensor_bytes=self.space.max_tensor_bytes,
                                   id_bits=p.id_bits)
        self.mmu_fault = model.mmu_faults(p.row_bytes, p.max_sub_requests, buffer_rows, self.space.memory_size,
                                          [(0, self.space.store_base)])
        self.write, self.start = bench.source(dut, "write"), bench.source(dut, "start")
        # Made together, so that they number cycles alike.
        self.cycle = bench.CycleCounter(dut.clk)
        self.probes = {name: bench.HandshakeProbe(dut, name, payloads=True)
                       for name in ("start", *(f"{unit}_{end}" for unit in UNITS for end in ("cmd", "done")))}
        self.status = StatusProbe(dut, ports.status(p))
        self.held = [bench.HeldUntilTaken(dut, f"{unit}_cmd") for unit in UNITS]
        self.board = Scoreboard(self.cycle)
        self.units = {name: UnitPlayer(self, name) for name in UNITS}
        self.commands_checked = self.programs_checked = self.offered_at_fault = 0

    # ---- driving ---------------------------------------------------------------------------------------------
    def surroundings(self, back_pressure: float = 0.0, delays: tuple[int, int] = (1, 1)) -> None:
        for unit in self.units.values():
            unit.back_pressure(back_pressure)
            unit.delays = delays

    def buffer(self, programs: dict[int, list], fill=None) -> list[int]:
        """The whole instruction buffer: each program (instructions) at its address, the rest `fill` (a word per
        address; default: zero, which is no instruction)."""
        words = [fill(address) if fill else 0 for address in range(self.params.depth)]
        for start, instructions in programs.items():
            words[start:start + len(instructions)] = [i.encode() for i in instructions]
        return words[:self.params.depth]

    async def load(self, words: list[int]) -> None:
        packer = self.packers["write"]
        for address, word in enumerate(words):
            self.write.send_nowait(packer.pack(address=address, word=word))
        await self.write.wait()

    def begin(self, words: list[int], start: int) -> Run:
        """Expect what the model says the program at `start` in the loaded `words` issues, and start it."""
        outcome = model.run(words, start, self.config, self.mmu_fault)
        for unit in UNITS:
            mine = [c for c in outcome.commands if c.unit == unit]
            self.board.expect(unit, [c.fields for c in mine], [f"pc {c.pc}: {disassemble(words[c.pc])}" for c in mine])
        run = Run(outcome, words, {name: len(probe.cycles) for name, probe in self.probes.items()},
                  len(self.status.changes))
        self.start.send_nowait(self.packers["start"].pack(pc=start))
        return run

    async def run(self, words: list[int], start: int, patience: int = 3_000) -> Run:
        """`begin`, wait for the program to stop and every command to complete, and check everything (`check`)."""
        run = self.begin(words, start)
        await self.stopped(patience)
        self.check(run)
        return run

    async def stopped(self, patience: int) -> None:
        """Wait until the program has stopped and nothing is outstanding (start is accepted again); fail after
        `patience` cycles without that (a hang)."""
        if await bench.wait_until(self.dut.clk, lambda: self.start.idle() and bits(self.start.ready) == "1"
                                  and (int(self.dut.status.value) & 3) in STATES, patience):
            return
        raise AssertionError(f"the controller did not stop within {patience} cycles: status {self.status.changes[-1]}")

    async def reset(self) -> None:
        """Reset the controller and the bench's units (their queued completions are lost with the commands)."""
        for unit in self.units.values():
            unit.clear()
        self.write.clear()
        self.start.clear()
        marks = [len(probe.broken) for probe in self.held]
        await bench.reset(self.dut)
        for probe, mark in zip(self.held, marks, strict=True):   # a reset empties the ports: offers it cut short
            del probe.broken[mark:]                              # are owed to nobody
            probe.waiting = None
        self.board.clear()
        for unit in self.units.values():
            unit.clear()

    # ---- checking --------------------------------------------------------------------------------------------
    def events(self, run: Run, end: str) -> list[tuple[int, str, int]]:
        """(cycle, unit, id) of every command (`end` "cmd") or completion ("done") of the run."""
        out = []
        for unit in UNITS:
            probe, packer = self.probes[f"{unit}_{end}"], self.packers[f"{unit}_{end}"]
            mark = run.marks[f"{unit}_{end}"]
            out += [(cycle, unit, packer.unpack(payload)["id"])
                    for cycle, payload in zip(probe.cycles[mark:], probe.payloads[mark:], strict=True)]
        return sorted(out)

    def check(self, run: Run) -> None:
        outcome = run.outcome
        issued, completed = self.events(run, "cmd"), self.events(run, "done")
        by_id = {(c.unit, c.fields["id"]): c for c in outcome.commands}
        if self.board.failure:
            raise AssertionError(self.board.failure)
        broken = [message for probe in self.held for message in probe.broken]
        assert not broken, f"stream rule broken: {broken}"
        for unit in UNITS:
            expected = [c for c in outcome.commands if c.unit == unit]
            got = sum(1 for _, u, _ in issued if u == unit)
            required = sum(1 for c in outcome.commands[:outcome.required] if c.unit == unit)
            assert required <= got <= len(expected), \
                f"{unit}: {got} commands issued; the model requires {required}, allows {len(expected)}"
            self.board.expected[unit].clear()  # the optional ones after an MMU fault that did not issue
        assert len(completed) == len(issued), f"{len(issued)} commands issued, {len(completed)} completed"

        # The end: state, error code and pc.
        cycle, status = next(change for change in self.status.changes[run.status_mark:]
                             if change[1]["state"] in STATES)
        got = (STATES[status["state"]], status["error"], status["pc"])
        assert got == (outcome.state, outcome.error, outcome.pc), \
            f"ended (state, error, pc) = {got} at cycle {cycle}, expected {(outcome.state, outcome.error, outcome.pc)}"

        # BARRIER epochs: a command issues only after every command of an earlier epoch completed.
        done_at = {(unit, ident): c for c, unit, ident in completed}
        for c, unit, ident in issued:
            epoch = by_id[(unit, ident)].epoch
            waited = [done_at[key] for key, earlier in by_id.items() if earlier.epoch < epoch and key in done_at]
            assert all(d < c for d in waited), \
                f"{unit} command pc {by_id[(unit, ident)].pc} (epoch {epoch}) issued at cycle {c}, before an " \
                f"earlier epoch's completion at cycle {max(waited)}"
        if outcome.state == "done":
            assert not completed or cycle > completed[-1][0], \
                f"DONE at cycle {cycle}, before the last completion at cycle {completed[-1][0]}"

        # Outstanding limits.
        limits = {"mmu": self.params.mmu_outstanding, "array": self.params.array_outstanding,
                  "vector": self.params.vector_outstanding}
        for unit in UNITS:
            mine_done = [c for c, u, _ in completed if u == unit]
            for k, (c, u, _) in enumerate(e for e in issued if e[1] == unit):
                in_flight = k - sum(1 for d in mine_done if d < c)
                assert in_flight < limits[unit], f"{unit}: command {k} issued at cycle {c} with {in_flight} outstanding"

        # After an MMU fault, at most the command already offered still goes.
        if outcome.error in model.MMU_FAULTS.values():
            fault_cycle = next(c for c, u, ident in completed if u == "mmu" and ident == outcome.pc
                               and self.mmu_fault(by_id[("mmu", ident)].fields))
            late = [e for e in issued if e[0] > fault_cycle]
            assert len(late) <= 1, f"{len(late)} commands issued after the fault at cycle {fault_cycle}: {late}"
            self.offered_at_fault += len(late)
        self.commands_checked += len(issued)
        self.programs_checked += 1
