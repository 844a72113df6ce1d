"""The PNM top's surroundings in simulation: the host (program writes, start, status), the memory controller
behind the MMU (`tb.memory.MemoryController`, random latency and back-pressure) and an idle GPU; and the golden
model (`tb.models.pnm`) run beside it on the same memory, so that every byte a program stores is compared."""
import random

import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from rtl.mmu.params import REG_REGION_BASE, REG_REGION_LIMIT
from rtl.pnm_controller.isa import Instruction
from rtl.pnm_controller.ports import State
from rtl.pnm.params import PNMParams
from rtl.registry import BLOCKS

from .. import bench
from ..memory import Contents, MemoryController
from ..models import mmu as mmu_model
from ..models import pnm_controller as control
from ..models import pnm as model
from ..payload import Packer
from ..stream import bits
from . import rows

PROTECTED = (0x0000, 0x1000)   # model parameters: stores there fault (the MMU's first protected region)
STOPPED = {State.DONE.value: "done", State.ERROR.value: "error"}


class Harness:
    def __init__(self, dut, seed: int) -> None:
        self.dut = dut
        self.params = p = PNMParams(**bench.config()["params"])
        self.rng = random.Random(seed)
        component = BLOCKS["pnm"].build(p)
        self.packers = {name: Packer.of_port(component, name) for name in ("write", "start", "config")}
        self.status_packer = Packer(component.signature.members["status"].shape)
        self.clock = bench.CycleCounter(dut.clk)
        self.write, self.start = bench.source(dut, "write"), bench.source(dut, "start")
        self.config = bench.source(dut, "config")
        self.gpu_req, self.gpu_resp = bench.source(dut, "gpu_req"), bench.sink(dut, "gpu_resp")
        self.memory_bytes = np.frombuffer(self.rng.randbytes(1 << p.address_bits), np.uint8).copy()
        rb = p.row_bytes
        initial = self.memory_bytes.copy()
        self.contents = Contents(lambda block: int.from_bytes(initial[block * rb:(block + 1) * rb], "little"), rb)
        self.memory = MemoryController(dut, component, self.clock, self.contents, self.rng, latency=(4, 4),
                                       in_order=not p.out_of_order, answer_writes=True)
        self.buffer = np.zeros(p.buffer_bytes, np.uint8)   # the model's buffer
        self.control = control.Config(depth=p.depth, buffer_rows=1 << p.buffer_address_bits,
                                      address_bits=p.address_bits, row_bytes=rb,
                                      max_tensor_bytes=p.mmu_params().max_tensor_bytes, id_bits=p.id_bits)
        self.shape = model.Shape(row_bytes=rb, width=p.width, lanes=p.lanes, sublane_width=p.sublane_width)
        self.regions: list[tuple[int, int]] = []
        self.programs_checked = self.bytes_checked = 0
        self.mc_probe = bench.HandshakeProbe(dut, "mc_req")
        self.start_probe = bench.HandshakeProbe(dut, "start")

    # ---- surroundings ---------------------------------------------------------------------------------
    def surroundings(self, back_pressure: float, latency: tuple[int, int]) -> None:
        """The memory controller's readiness (probability of a pause each cycle) and answer latency."""
        self.memory.latency = latency
        self.memory.sink.set_pause_generator(bench.random_pauses(self.rng, back_pressure) if back_pressure else None)
        if not back_pressure:
            self.memory.sink.pause = False

    async def protect(self, base: int, limit: int) -> None:
        """Make [base, limit) the MMU's first protected region."""
        for reg, value in ((REG_REGION_BASE, base), (REG_REGION_LIMIT, limit)):
            await self.config.send(self.packers["config"].pack(reg=reg, value=value))
            await self.config.wait()
        await ClockCycles(self.dut.clk, 2)
        self.regions = [(base, limit)]

    def mmu_fault(self, fields: dict) -> int:
        p = self.params
        return control.mmu_faults(p.row_bytes, p.max_sub_requests, 1 << p.buffer_address_bits,
                                  1 << p.address_bits, self.regions)(fields)

    # ---- the host -------------------------------------------------------------------------------------
    def status(self) -> dict:
        return self.status_packer.unpack(int(self.dut.status.value))

    async def run(self, instructions: list[Instruction], start: int = 0, patience: int = 100_000) -> dict:
        """Write the program at `start` (the rest of the buffer DONE-less zeros), run it to its end, compare the
        end state and every byte it stored with the model; returns the status and the cycles from the start's
        transfer to the first cycle showing the program stopped. `patience` bounds a program that never stops: a
        SOFTMAX or NORM waits for the vector unit's whole pipeline (about 230 cycles) six times per vector, so
        the online programs of 4 lanes × 16 run for over 20,000 cycles."""
        p = self.params
        words = [0] * p.depth
        words[start:start + len(instructions)] = [i.encode() for i in instructions]
        for address, word in enumerate(words[start:start + len(instructions)], start):
            await self.write.send(self.packers["write"].pack(address=address, word=word))
        await self.write.wait()
        expected = model.run(words, start, self.control, self.shape, self.memory_bytes, self.buffer,
                             self.mmu_fault)
        mark = len(self.start_probe.cycles)
        await self.start.send(self.packers["start"].pack(pc=start))
        # Checked at every edge while the program runs: the cheap tests first, the status only once `start` is ready.
        if not await bench.wait_until(self.dut.clk, lambda: len(self.start_probe.cycles) > mark and bits(
                self.start.ready) == "1" and self.status()["state"] in STOPPED, patience):
            raise AssertionError(f"the program did not stop in {patience} cycles: {self.status()}")
        status, cycles = self.status(), self.clock.now - self.start_probe.cycles[mark]
        outcome = expected.outcome
        want = {"state": outcome.state, "error": outcome.error, "pc": outcome.pc,
                "unit_error": expected.unit_error, "unit_id": expected.unit_id}
        got = {"state": STOPPED[status["state"]], **{k: status[k] for k in ("error", "pc", "unit_error", "unit_id")}}
        assert got == want, f"program ended {got}, the model says {want}"
        await RisingEdge(self.dut.clk)
        self._compare_stores(outcome)
        self.programs_checked += 1
        return {"status": status, "cycles": cycles}

    def _compare_stores(self, outcome: control.Outcome) -> None:
        """Every byte the program's STOREs wrote, DUT memory against the model's memory."""
        rb = self.params.row_bytes
        for command in outcome.commands[:outcome.required]:
            f = command.fields
            if command.unit != "mmu" or not f["store"] or self.mmu_fault(f) != mmu_model.NONE:
                continue
            first, last = f["base"] // rb, (f["base"] + f["size"] - 1) // rb
            got = np.frombuffer(b"".join(self.contents.read(block).to_bytes(rb, "little")
                                         for block in range(first, last + 1)), np.uint8)[:f["size"]]
            want = self.memory_bytes[f["base"]:f["base"] + f["size"]]
            bad = np.flatnonzero(got != want)
            assert not bad.size, (f"STORE at pc {command.pc} ({f}): byte {bad[0]} (of {bad.size} wrong) is "
                                  f"{got[bad[0]]:#04x}, the model says {want[bad[0]]:#04x}")
            self.bytes_checked += f["size"]

    # ---- programs ---------------------------------------------------------------------------------------
    def load(self, row: int, address: int, size: int) -> list[Instruction]:
        """LOADs of `size` bytes into rows `row`, …, cut into tensors the MMU takes (max_sub_requests rows)."""
        return rows.loads(row, address, size, self.params.row_bytes, self.params.mmu_params().max_tensor_bytes)

    def store(self, row: int, address: int, size: int) -> list[Instruction]:
        return rows.stores(row, address, size, self.params.row_bytes, self.params.mmu_params().max_tensor_bytes)

    def put(self, address: int, values: np.ndarray) -> None:
        """Place operand values (their bytes) in memory at `address`, in the DUT's and the model's."""
        raw = np.frombuffer(values.tobytes(), np.uint8)
        self.memory_bytes[address:address + raw.size] = raw
        rb = self.params.row_bytes
        for block in range(address // rb, -(-(address + raw.size) // rb)):
            self.contents.written[block] = int.from_bytes(self.memory_bytes[block * rb:(block + 1) * rb].tobytes(),
                                                          "little")

    def fp16(self, *shape) -> np.ndarray:
        return np.asarray([self.rng.gauss(0, 1) for _ in range(int(np.prod(shape)))], np.float16).reshape(shape)

    def fp32(self, *shape) -> np.ndarray:
        return np.asarray([self.rng.gauss(0, 2) for _ in range(int(np.prod(shape)))], np.float32).reshape(shape)

    async def reset(self) -> None:
        await bench.reset(self.dut)
        self.memory.clear()
        for port in (self.write, self.start, self.config):
            port.clear()
