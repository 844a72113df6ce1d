"""cocotb bench of the PNM controller: start-to-first-command latency, issue rate, barrier overhead and DONE latency;
random valid programs under random back-pressure and completion delays, every command scoreboarded against
`tb.models.pnm_controller`; every way an instruction can be malformed, and running off the end of the buffer; MMU
faults; a stray completion; reset mid-program. `harness.Harness.check` lists what is checked after each program.
"""
import random

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from rtl.pnm_controller.isa import Instruction, Opcode
from rtl.pnm_controller.ports import State
from rtl.registry import BLOCKS

from .. import bench
from ..models import pnm_controller as model
from . import stimulus
from .harness import Harness

DONE = Instruction(Opcode.DONE.value)
CHECKED = {"programs_checked": 0, "vectors_checked": 0}  # over the tests of a run (vectors: commands)
BACK_PRESSURE = (0.0, 0.3, 0.7)
DELAYS = ((1, 2), (1, 20), (8, 40))


def _record(h: Harness, **figures) -> None:
    CHECKED["programs_checked"] += h.programs_checked
    CHECKED["vectors_checked"] += h.commands_checked
    bench.record(**figures, **CHECKED)


def _stated():
    cfg = bench.config()
    block = BLOCKS[cfg["block"]]
    return block.component(block.params(**cfg["params"]))


def _junk(rng: random.Random):
    return lambda address: rng.getrandbits(128)


def _random_surroundings(h: Harness) -> None:
    h.surroundings(h.rng.choice(BACK_PRESSURE), h.rng.choice(DELAYS))


async def _random_program(h: Harness) -> None:
    """A random valid program at a random address (the rest of the buffer random words), under its own mix of
    back-pressure and completion delays, run and checked."""
    depth = h.params.depth
    length = h.rng.randint(1, depth - 1)
    start = h.rng.randint(0, depth - 1 - length)
    words = h.buffer({start: stimulus.program(h.rng, length, h.space)}, _junk(h.rng))
    _random_surroundings(h)
    await h.load(words)
    await h.run(words, start)


@cocotb.test()
async def timing(dut):
    """Ports always ready: start to the first command, then one instruction per cycle over commands that take turns
    among the units; BARRIER after each LOAD with 6-cycle completions: the next command's cycle after the LOAD's
    completion; DONE's status after the last completion."""
    h = Harness(dut, seed=1)
    stated = _stated()
    await bench.start(dut)
    body = [stimulus.valid(h.rng, op, h.space) for op in (Opcode.LOAD, Opcode.GEMV, Opcode.VOP) * 16]
    words = h.buffer({0: body + [DONE]})
    await h.load(words)
    run = await h.run(words, 0)
    cycles = [c for c, _, _ in h.events(run, "cmd")]
    latency = cycles[0] - h.probes["start"].cycles[run.marks["start"]]
    interval = min(b - a for a, b in zip(cycles, cycles[1:]))
    rate = len(cycles) / (cycles[-1] - cycles[0] + 1)
    done_cycle = next(c for c, status in h.status.changes[run.status_mark:] if status["state"] == State.DONE.value)
    done_latency = done_cycle - h.events(run, "done")[-1][0]
    assert latency == stated.latency, f"start to first command: {latency} cycles, stated {stated.latency}"
    assert interval == stated.initiation_interval and rate == 1.0, f"II {interval}, {rate} instructions per cycle"

    h.surroundings(delays=(6, 6))
    body = [x for _ in range(8) for x in (stimulus.valid(h.rng, Opcode.LOAD, h.space), Instruction(Opcode.BARRIER.value))]
    words = h.buffer({3: body + [DONE]})
    await h.load(words)
    run = await h.run(words, 3)
    issued, completed = h.events(run, "cmd"), h.events(run, "done")
    overheads = {nxt[0] - done[0] for done, nxt in zip(completed, issued[1:])}
    _record(h, latency_cycles=latency, initiation_interval=interval, issue_rate_instructions_per_cycle=rate,
            barrier_overhead_cycles=max(overheads), done_latency_cycles=done_latency)
    assert overheads == {1}, f"cycles from the last completion to the next command after a BARRIER: {overheads}"


@cocotb.test()
async def random_programs(dut):
    """Random valid programs at random addresses (the rest of the buffer random words), each under its own mix of
    back-pressure and completion delays."""
    h = Harness(dut, seed=2)
    await bench.start(dut)
    for _ in range(40):
        await _random_program(h)
    _record(h, random_programs=h.programs_checked, random_commands=h.commands_checked)


@cocotb.test()
async def malformed_programs(dut):
    """Each malformation, several times, after a random valid prefix and before more instructions; and programs
    without DONE that run off the end of the buffer. Every error code a program can cause is seen."""
    h = Harness(dut, seed=3)
    await bench.start(dut)
    depth, seen = h.params.depth, set()
    for how in stimulus.MALFORMATIONS * 4:
        before, after = h.rng.randint(0, 12), h.rng.randint(0, 4)
        instructions = (stimulus.program(h.rng, before, h.space, done=False) + [stimulus.malformed(h.rng, how, h.space)]
                        + stimulus.program(h.rng, after, h.space))
        start = h.rng.randint(0, depth - len(instructions))
        words = h.buffer({start: instructions}, _junk(h.rng))
        _random_surroundings(h)
        await h.load(words)
        run = await h.run(words, start)
        assert run.outcome.state == "error" and run.outcome.pc == start + before, f"{how}: {run.outcome}"
        seen.add(run.outcome.error)
    for _ in range(3):
        start = depth - h.rng.randint(1, 12)
        words = h.buffer({start: stimulus.program(h.rng, depth - start, h.space, done=False)})
        await h.load(words)
        run = await h.run(words, start)
        assert (run.outcome.error, run.outcome.pc) == (model.END, depth)
        seen.add(run.outcome.error)
    assert seen == set(range(model.OPCODE, model.END + 1)), f"error codes seen: {sorted(seen)}"
    _record(h, malformed_programs=h.programs_checked)


@cocotb.test()
async def mmu_faults(dut):
    """A STORE into the protected region, or a LOAD past the MMU's configured memory, among valid instructions: the
    fault stops the program with its own error code and the command's id, whatever else was in flight. Heavy
    back-pressure leaves a command offered when most faults arrive: it must stay offered until taken."""
    h = Harness(dut, seed=4)
    await bench.start(dut)
    codes = set()
    for k in range(24):
        opcode = (Opcode.STORE, Opcode.LOAD)[k % 2]
        bad = stimulus.valid(h.rng, opcode, h.space)
        low, high = (0, h.space.store_base) if opcode == Opcode.STORE else (h.space.memory_size, 1 << h.params.address_bits)
        address = h.rng.randrange(low, high - bad.n + 1) // h.params.row_bytes * h.params.row_bytes
        instructions = (stimulus.program(h.rng, h.rng.randint(0, 8), h.space, done=False)
                        + [Instruction(bad.opcode, n=bad.n, d=bad.d, address=address)]
                        + stimulus.program(h.rng, h.rng.randint(4, 14), h.space))
        words = h.buffer({0: instructions})
        h.surroundings(h.rng.choice((0.5, 0.8)), (1, 12))
        await h.load(words)
        run = await h.run(words, 0)
        codes.add(run.outcome.error)
    assert codes == {model.MMU_PROTECTED, model.MMU_OUT_OF_RANGE}, codes
    assert h.offered_at_fault >= 3, f"only {h.offered_at_fault} faults came while a command was offered"
    _record(h, fault_programs=h.programs_checked, faults_while_offered=h.offered_at_fault)


@cocotb.test()
async def stray_completion(dut):
    """A completion while nothing is outstanding stops the controller with STRAY and the completion's id; the next
    start runs normally."""
    h = Harness(dut, seed=5)
    await bench.start(dut)
    words = h.buffer({0: stimulus.program(h.rng, 6, h.space)})
    await h.load(words)
    await h.run(words, 0)
    mark = len(h.status.changes)
    h.units["array"].source.send_nowait(h.packers["array_done"].pack(id=77))
    await ClockCycles(dut.clk, 4)
    assert [s for _, s in h.status.changes[mark:]] == [{"state": State.ERROR.value, "error": model.STRAY, "pc": 77}], h.status.changes
    await h.run(words, 0)
    _record(h)


@cocotb.test()
async def reset_mid_program(dut):
    """Resets at random points of a long program with slow completions: afterwards the controller is idle with
    nothing offered, the program (kept in the buffer) runs again from the start, exactly."""
    h = Harness(dut, seed=6)
    await bench.start(dut)
    words = h.buffer({0: stimulus.program(h.rng, 40, h.space)})
    await h.load(words)
    for _ in range(3):
        h.surroundings(0.3, (5, 30))
        h.begin(words, 0)
        await ClockCycles(dut.clk, h.rng.randint(10, 120))
        await ReadOnly()
        assert dut.write__ready.value == 0 and dut.start__ready.value == 0, "host ports ready while running"
        assert h.board.failure is None, h.board.failure  # what issued so far is the program's beginning
        await RisingEdge(dut.clk)
        await h.reset()
        await ReadOnly()
        idle = {"status": 0, "start__ready": 1, **{f"{u}_cmd__valid": 0 for u in ("mmu", "array", "vector")}}
        got = {name: int(getattr(dut, name).value) for name in idle}
        assert got == idle, f"after reset: {got}"
        await RisingEdge(dut.clk)
        await h.run(words, 0)
    _record(h)


@cocotb.test(skip=not bench.soak_beats())
async def soak(dut):
    """`basedie verify pnm_controller --soak N`: random valid programs, each under its own mix of back-pressure and
    completion delays (as in `random_programs`), until N commands have been issued and completed, every one
    scoreboarded against the model."""
    h = Harness(dut, seed=9)
    await bench.start(dut)
    start = bench.cycles_simulated()
    while h.commands_checked < bench.soak_beats():
        await _random_program(h)
    bench.record_soak({"commands": h.commands_checked, "completions": h.commands_checked,
                       "programs": h.programs_checked}, bench.cycles_simulated() - start)
