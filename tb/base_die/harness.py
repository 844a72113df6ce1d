"""The base die's surroundings in simulation: the PNM bench's host and golden model (`tb.pnm.harness`), the
DQB's and the view table's configuration, a GPU reading through the MMU's GPU port, and a memory-controller
model behind the DQB (the ideal one, `tb.memory`, or an HBM pseudo channel, `tb.dram`, when the run names one).

Memory holds plain data at row addresses and quantized weights in the DQB's layout. The golden model's memory
image holds, at each view, the FP16 the dequantization golden model gives (`tb.models.base_die`): the decode-layer
golden model then reads those values where the PNM's LOADs read the view."""
import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from rtl.registry import BLOCKS

from .. import bench
from ..dram.channel import DRAMControllerParams
from ..dram.controller import DramController
from ..dram.timing import PRESETS
from ..memory import Contents, MemoryController
from ..models import dqb as dqb_model
from ..models import pnm_controller as control
from ..models import pnm as model
from ..payload import Packer
from ..pnm import harness as pnm_harness
from .stimulus import Stored


class ByteAddressed:
    """Row-addressed memory contents seen at byte addresses (the DQB's requests), the low bits ignored."""

    def __init__(self, rows: Contents) -> None:
        self.rows, self.word_bytes = rows, rows.word_bytes

    def read(self, address: int) -> int:
        return self.rows.read(address // self.word_bytes)

    def write(self, address: int, data: int, mask: int) -> None:
        self.rows.write(address // self.word_bytes, data, mask)


class Harness(pnm_harness.Harness):
    """The PNM bench's harness (program runs checked against the golden model, `put`, `load`, `store`) around the
    base die, whose memory port is the DQB's."""

    def __init__(self, dut, seed: int) -> None:   # the PNM harness's attributes, built for the base die
        self.dut = dut
        self.params = p = BLOCKS["base_die"].params(**bench.config()["params"])
        self.rng = random.Random(seed)
        component = BLOCKS["base_die"].build(p)
        self.packers = {name: Packer.of_port(component, name)
                        for name in ("write", "start", "config", "dqb_config", "view_config", "gpu_req")}
        self.status_packer = Packer(component.signature.members["status"].shape)
        self.response_packer = Packer.of_port(component, "gpu_resp")
        self.clock = bench.CycleCounter(dut.clk)
        self.write, self.start = bench.source(dut, "write"), bench.source(dut, "start")
        self.config, self.dqb_config = bench.source(dut, "config"), bench.source(dut, "dqb_config")
        self.view_config = bench.source(dut, "view_config")
        self.gpu_req, self.gpu_resp = bench.source(dut, "gpu_req"), bench.sink(dut, "gpu_resp")
        self.memory_bytes = np.frombuffer(self.rng.randbytes(1 << p.address_bits), np.uint8).copy()
        rb = p.row_bytes
        initial = self.memory_bytes.copy()
        self.contents = Contents(lambda row: int.from_bytes(initial[row * rb:(row + 1) * rb], "little"), rb)
        memory = bench.config()["memory"]
        if memory == "ideal":
            self.memory = MemoryController(dut, component, self.clock, ByteAddressed(self.contents), self.rng,
                                           latency=(4, 4), answer_writes=True)
        else:
            self.memory = DramController(dut, component, self.clock, ByteAddressed(self.contents),
                                         timing=PRESETS[memory], params=DRAMControllerParams(in_order=True),
                                         clock_hz=p.design_clock_hz, address_bytes=1, answer_writes=True)
        self.buffer = np.zeros(p.buffer_bytes, np.uint8)
        self.control = control.Config(depth=p.depth, buffer_rows=1 << p.buffer_address_bits,
                                      address_bits=p.address_bits, row_bytes=rb,
                                      max_tensor_bytes=p.mmu_params().max_tensor_bytes, id_bits=p.id_bits)
        self.shape = model.Shape(row_bytes=rb, width=p.width, lanes=p.lanes, sublane_width=p.sublane_width)
        self.regions: list[tuple[int, int]] = []
        self.programs_checked = self.bytes_checked = self.gpu_reads_checked = 0
        self.mc_probe = bench.HandshakeProbe(dut, "mc_req")
        self.start_probe = bench.HandshakeProbe(dut, "start")
        self.gpu_probe = bench.HandshakeProbe(dut, "gpu_req")

    def surroundings(self, back_pressure: float, latency: tuple[int, int]) -> None:
        """As the PNM's, on the ideal memory; an HBM channel keeps its own timing and is always ready when it can."""
        if isinstance(self.memory, MemoryController):
            super().surroundings(back_pressure, latency)

    # ---- the quantized weights and their views ---------------------------------------------------------------
    def place(self, stored: Stored, base: int) -> None:
        """The quantized weights' image from `base` on, in the DUT's memory and the golden model's."""
        self.put(base, stored.image[base:])

    def golden_view(self, address: int, view: np.ndarray) -> None:
        """The golden model's memory reads `view` at `address`; the DUT's keeps what it held (its view translates)."""
        self.memory_bytes[address:address + view.size] = view

    async def configure(self, stored: Stored, view_addresses: list[int], tags: list[int] | None = None) -> None:
        """The DQB table holds `stored`'s entries (indices 0, 1, …, one update); view i maps the rows from
        `view_addresses[i]` on onto entry i under its tag (or `tags[i]`)."""
        for index, e in enumerate(stored.entries):
            await self.dqb_config.send(self.packers["dqb_config"].pack(
                index=index, weight_base=e.weight_base, weight_size=e.weight_size, scale_base=e.scale_base,
                zero_base=e.zero_base, log2_group_width=e.log2_group_width, enable=1,
                last=int(index == len(stored.entries) - 1)))
        rb = self.params.row_bytes
        for index, (address, view) in enumerate(zip(view_addresses, stored.views)):
            tag = stored.tags[index] if tags is None else tags[index]
            await self.view_config.send(self.packers["view_config"].pack(
                index=index, view_base=address // rb, view_rows=view.size // rb,
                weight_base=stored.entries[index].weight_base, tag=tag, enable=1))
        await self.dqb_config.wait()
        await self.view_config.wait()
        await ClockCycles(self.dut.clk, 2)

    # ---- the GPU -------------------------------------------------------------------------------------------------
    async def gpu_reads(self, rows: list[int], expected: list[int]) -> None:
        """Read `rows` (MMU row addresses) through the GPU port; every answer, in request order, must carry its
        row's `expected` data."""
        ids = 1 << self.params.id_bits
        task = cocotb.start_soon(bench.send_all(self.gpu_req, (self.packers["gpu_req"].pack(
            address=row, is_write=0, mask=0, data=0, id=k % ids) for k, row in enumerate(rows))))
        for k, (row, want) in enumerate(zip(rows, expected)):
            got = self.response_packer.unpack(await self.gpu_resp.recv())
            assert (got["address"], got["id"], got["is_write"]) == (row, k % ids, 0), \
                f"GPU read {k} of row {row:#x}: answered {got}"
            assert got["data"] == want, (f"GPU read {k} of row {row:#x}: data {got['data']:#x}, the golden model "
                                         f"says {want:#x}")
            self.gpu_reads_checked += 1
        await task

    def row_value(self, row: int) -> int:
        rb = self.params.row_bytes
        return dqb_model.beat_to_int(self.memory_bytes[row * rb:(row + 1) * rb])

    async def reset(self) -> None:
        await super().reset()
        for port in (self.dqb_config, self.view_config, self.gpu_req):
            port.clear()
