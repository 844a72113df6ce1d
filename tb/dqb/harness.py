"""The DQB's surroundings in simulation: a GPU (request source, response sink checked by the scoreboard as
beats arrive), a configuration source and the memory-controller model over a PC-local byte image: the ideal one
(`tb.memory`, a latency drawn per request) or, when the run names a DRAM preset (`basedie verify dqb
--memory-model hbm4`), an HBM pseudo channel (`tb.dram`) at the DQB's design clock. Either answers in request
order: the DQB has no response tags and matches memory answers to its tag history by order alone (docs/dram.md),
so the harness refuses a memory that could reorder. The memory answers stores too (their acknowledgements)."""
import random

import cocotb
import numpy as np

from rtl.dqb.params import DQBParams
from rtl.registry import BLOCKS

from .. import bench
from ..dram.channel import DRAMControllerParams
from ..dram.controller import DramController
from ..dram.timing import PRESETS
from ..memory import Contents, MemoryController
from ..models import dqb as golden
from ..models.dqb import LayerEntry, Response
from ..payload import Packer
from ..scoreboard import ANY, Scoreboard
from .stimulus import Operation, response_beats

ELEMENTS_CHECKED = [0]  # 16-bit elements compared with the golden model, over all tests of this run

MODE_NAMES = {golden.BYPASS_TAG: "bypass", golden.RESERVED_TAG: "reserved",
              **{tag: f"{m.weight}_{m.output}" for tag, m in golden.MODES.items()}}


def params() -> DQBParams:
    return DQBParams(**bench.config()["params"])


class BeatContents(Contents):
    """Memory as beats at byte addresses: a request's address bits below the beat are ignored (the DQB forwards a
    GPU request's address unchanged, and reads and stores are whole beats)."""

    def read(self, address: int) -> int:
        return super().read(address & -self.word_bytes)

    def write(self, address: int, data: int, mask: int) -> None:
        super().write(address & -self.word_bytes, data, mask)


def image_contents(image: np.ndarray, beat_bytes: int) -> BeatContents:
    """A PC-local byte image as beats at byte addresses."""
    image = np.array(image, dtype=np.uint8)
    return BeatContents(lambda address: golden.beat_to_int(image[address:address + beat_bytes]), beat_bytes)


def count_checked(elements: int) -> int:
    ELEMENTS_CHECKED[0] += elements
    bench.record(vectors_checked=ELEMENTS_CHECKED[0])
    return elements


class Harness:
    """The DQB between a GPU and a memory controller model."""

    def __init__(self, dut, image: np.ndarray, rng: random.Random, latency=(8, 8), memory_stalls=0.0,
                 request_gaps=0.0, response_stalls=0.0) -> None:
        self.dut, self.params = dut, params()
        component = BLOCKS["dqb"].build(self.params)
        self.clock = bench.CycleCounter(dut.clk)
        contents = image_contents(image, self.params.beat_bytes)
        memory = bench.config()["memory"]
        if memory == "ideal":
            self.memory = MemoryController(dut, component, self.clock, contents, rng, latency=latency,
                                           answer_writes=True)
        else:
            self.memory = DramController(dut, component, self.clock, contents, timing=PRESETS[memory],
                                         params=DRAMControllerParams(in_order=True), clock_hz=self.params.design_clock_hz,
                                         address_bytes=1, answer_writes=True)
        if not self.memory.in_order:
            raise ValueError("the DQB needs its memory answers in request order")
        self.requests, self.responses = bench.source(dut, "gpu_req"), bench.sink(dut, "gpu_resp")
        self.config = bench.source(dut, "config")
        for port, probability in ((self.memory.sink, memory_stalls), (self.requests, request_gaps),
                                  (self.responses, response_stalls)):
            if probability:
                port.set_pause_generator(bench.random_pauses(rng, probability))
        self.request_fields, self.config_fields = (Packer.of_port(component, port) for port in ("gpu_req", "config"))
        response_fields = Packer.of_port(component, "gpu_resp")
        self.board = Scoreboard(self.clock)
        self.board.add_port("gpu_resp", self.responses, decode=lambda payload: _beat(response_fields, payload),
                            describe=lambda beat: "any" if beat is ANY else
                            f"data {beat[0]:#x} error={beat[1]} is_write={beat[2]}")

    async def program(self, entries: list[LayerEntry], enabled: list[bool] | None = None) -> None:
        """Write `entries` to table indices 0, 1, ... as one update (`last` on the final beat); `enabled` (default
        all) gives each one's enable bit."""
        for index, e in enumerate(entries):
            await self.config.send(self.config_fields.pack(
                index=index, weight_base=e.weight_base, weight_size=e.weight_size, scale_base=e.scale_base,
                zero_base=e.zero_base, log2_group_width=e.log2_group_width,
                enable=1 if enabled is None else int(enabled[index]), last=int(index == len(entries) - 1)))
        await self.config.wait()

    async def send(self, ops: list[Operation]) -> None:
        for op in ops:
            payload = self.request_fields.pack(address=op.address, tag=op.tag, is_write=op.store is not None,
                                               mask=op.byte_mask(self.params.beat_bytes) if op.store is not None else 0,
                                               data=op.store or 0)
            await self.requests.send(payload)

    def expect(self, ops: list[Operation], expected: list[Response] | None) -> None:
        """Queue the response beats of `ops`, one `expected` response each (a store's is its acknowledgement;
        `None`: as many unchecked beats as each is owed, for a caller that checks them itself), each with the
        request that asks for it."""
        for index, op in enumerate(ops):
            beats = ([(beat, expected[index].error, expected[index].is_write) for beat in expected[index].beats]
                     if expected is not None else [ANY] * response_beats(op))
            what = "store" if op.store is not None else MODE_NAMES[op.tag]
            self.board.expect("gpu_resp", beats, [f"beat {k} of request {index} (address {op.address:#x}, {what})"
                                                  for k in range(len(beats))])

    async def run(self, ops: list[Operation], expected: list[Response] | None) -> list:
        """Send `ops` and wait for every response beat, each checked on arrival; returns the beats received."""
        first = len(self.board.log["gpu_resp"])
        self.expect(ops, expected)
        cocotb.start_soon(self.send(ops))
        await self.board.drained()
        return [beat for _, beat in self.board.log["gpu_resp"][first:]]

    async def checked(self, ops: list[Operation], expected: list[Response]) -> int:
        """`run`, counting the elements compared (acknowledgements carry none)."""
        await self.run(ops, expected)
        return count_checked(sum(len(r.beats) for r in expected if not r.is_write) * self.params.lanes)

    async def idle(self, cycles: int = 30) -> None:
        """Nothing more comes out: no duplicated or invented beats."""
        self.responses.pause = False
        await self.board.idle(self.dut.gpu_resp__valid, cycles=cycles)

    async def restart(self, image: np.ndarray) -> None:
        """Reset the DQB and give the memory controller a new image (one DQB, the next PC or layout)."""
        self.requests.clear()
        await bench.reset(self.dut)
        self.memory.clear()
        self.memory.contents = image_contents(image, self.params.beat_bytes)
        self.responses.clear()
        self.board.clear()


def _beat(fields: Packer, payload: int) -> tuple[int, bool, bool]:
    beat = fields.unpack(payload)
    return beat["data"], bool(beat["error"]), bool(beat["is_write"])
