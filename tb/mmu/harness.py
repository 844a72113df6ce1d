"""The MMU's surroundings in simulation, and the scoreboard that judges what it did.

- the memory-controller model: the fixed-latency one (`tb.memory`), accepting requests under random back-pressure
  and answering every request (writes too) after a configurable latency, in request order or reordered; or, when
  the run names a DRAM preset (`basedie verify mmu --memory-model hbm3`), an HBM pseudo channel (`tb.dram`) at
  the MMU's design clock, answering in request order unless the MMU is built for out-of-order answers;
- the PNM buffer: answers store-data reads (`buf_rd` → `buf_rdata`) and takes forwarded load data (`buf_wr`);
- stimulus: GPU requests and PNM tensor instructions offered at chosen cycles;
- the scoreboard (`tb.scoreboard`), checking as beats arrive: every GPU request exactly one response with
  the right data, every PNM instruction exactly one completion with the fault the golden model gives, every
  load's data in the buffer (these ports in any order: the MMU may reorder); after draining: every GPU request
  exactly one MC request, exactly the MC requests of the accepted instructions (none from a refused one), and
  each load's data in the buffer before its completion.

Address plan (bytes): protected parameters [0, 1 MiB); PNM loads read [0, 1.5 MiB) and PNM stores write
[1.5 MiB, 2 MiB); the GPU reads [2 MiB, 3 MiB) and writes [3 MiB, 4 MiB). The arbitration grid's streams
(`tb.mmu.streams`) have their own plan in a 32 MiB memory: weights [4 MiB, 20 MiB), read by both and protected
(region 1), the PNM's KV cache [20 MiB, 24 MiB), the GPU's KV writes [24 MiB, 28 MiB). Nothing is read where
anybody writes, so every read's data is the memory's initial contents (`block_data`) whatever the timing.
Buffer rows: loads fill rows from 0, stores read rows from half the buffer.
"""
import operator
import random
from collections import defaultdict, deque
from dataclasses import dataclass, field

import cocotb
from cocotb.triggers import ClockCycles

from rtl.mmu.params import (
    POLICIES,
    REG_MEMORY_SIZE,
    REG_POLICY,
    REG_REGION_BASE,
    REG_REGION_LIMIT,
    REG_WEIGHT_GPU,
    REG_WEIGHT_PNM,
    MMUParams,
)

from rtl.registry import BLOCKS

from .. import bench
from ..dram.channel import DRAMControllerParams
from ..dram.controller import DramController
from ..dram.timing import PRESETS
from ..memory import Contents, MemoryController
from ..models import mmu as model
from ..payload import Packer
from ..scoreboard import Scoreboard
from .streams import unmerge

MIB = 1 << 20
PROTECTED = (0, MIB)
PNM_LOAD_SPACE = (0, 3 * MIB // 2)
PNM_STORE_SPACE = (3 * MIB // 2, 2 * MIB)
GPU_READ_SPACE = (2 * MIB, 3 * MIB)
GPU_WRITE_SPACE = (3 * MIB, 4 * MIB)
MEMORY_SIZE = 4 * MIB
GRID_WEIGHTS = (4 * MIB, 20 * MIB)
GRID_PNM_KV = (20 * MIB, 24 * MIB)
GRID_GPU_KV = (24 * MIB, 28 * MIB)
GRID_MEMORY_SIZE = 32 * MIB


@dataclass
class Offered:
    """What the bench sent, with the cycle it was offered, for the scoreboard and the wait figures."""
    gpu: list[tuple[int, dict]] = field(default_factory=list)
    pnm: list[tuple[int, model.Instruction]] = field(default_factory=list)


class Harness:
    def __init__(self, dut, *, mc_latency: int = 6, reorder_spread: int = 0, seed: int = 0) -> None:
        self.dut = dut
        self.params = p = MMUParams(**bench.config()["params"])
        self.rng = random.Random(seed)
        component = BLOCKS["mmu"].build(p)
        self.fields = {name: Packer.of_port(component, name) for name in (
            "gpu_req", "gpu_resp", "pnm_instr", "completion", "buf_rd", "buf_wr", "config")}
        self.sources = {name: bench.source(dut, name) for name in ("gpu_req", "pnm_instr", "buf_rdata", "config")}
        self.sinks = {name: bench.sink(dut, name) for name in ("gpu_resp", "completion", "buf_rd", "buf_wr")}
        self.cycle = bench.CycleCounter(dut.clk)
        contents = Contents(lambda block: model.block_data(block, p.data_bits), p.request_bytes)
        self.memory_model = bench.config()["memory"]
        if self.memory_model == "ideal":
            self.memory = MemoryController(dut, component, self.cycle, contents, self.rng, answer_writes=True)
        else:
            self.memory = DramController(dut, component, self.cycle, contents, timing=PRESETS[self.memory_model],
                                         params=DRAMControllerParams(in_order=not p.out_of_order),
                                         clock_hz=p.design_clock_hz, answer_writes=True)
        self.sources["mc_resp"], self.sinks["mc_req"] = self.memory.source, self.memory.sink
        # Made after every stream end, so each probe is told of transfers by its port's end (no watcher of its own).
        self.probes = {name: bench.HandshakeProbe(dut, name, payloads=name in ("gpu_resp", "completion"))
                       for name in ("gpu_req", "pnm_instr", "mc_req", "gpu_resp", "buf_wr", "completion")}
        self.mc_latency = mc_latency
        self.reorder(reorder_spread)
        self.board = Scoreboard(self.cycle)
        for port in ("gpu_resp", "completion", "buf_wr"):
            self.board.add_port(port, self.sinks[port], decode=self.fields[port].unpack, ordered=False,
                                compare=_same_gpu_response if port == "gpu_resp" else operator.eq)
        self.buffer_rows = 2 ** p.buffer_address_bits
        self.regions: list[tuple[int, int]] = [(0, 0)] * p.protected_regions
        self.memory_size = 2 ** p.address_bits
        self.new_phase()
        cocotb.start_soon(self._buffer())

    @property
    def ideal_memory(self) -> bool:
        """The fixed-latency, always-ready memory controller (not a DRAM model) answers."""
        return isinstance(self.memory, MemoryController)

    def reorder(self, spread: int) -> None:
        """Spread the fixed-latency controller's latency over `spread` cycles (answers then overtake each other).
        A DRAM model's order is the build's: answers as they finish when the MMU takes them out of order."""
        if self.ideal_memory:
            self.memory.latency = (self.mc_latency, self.mc_latency + max(spread, 1) - 1)
            self.memory.in_order = spread == 0

    def new_phase(self) -> None:
        """Forget everything seen so far (after a reset): a fresh scoreboard."""
        self.offered = Offered()
        self.expected_pnm: list[tuple] = []
        self.load_rows: dict[int, int] = {}
        self.memory.clear()
        self.board.clear()
        self.load_row, self.store_row = 0, self.buffer_rows // 2
        for probe in self.probes.values():
            probe.cycles.clear()
            probe.payloads.clear()
        for port in (*self.sources.values(), *self.sinks.values()):
            port.clear()

    # ---- surroundings -------------------------------------------------------------------------------
    async def _buffer(self) -> None:
        while True:
            row = self.fields["buf_rd"].unpack(await self.sinks["buf_rd"].recv())["row"]
            self.sources["buf_rdata"].send_nowait(self.buffer_data(row))

    def buffer_data(self, row: int) -> int:
        """What the PNM buffer holds in a row a store reads (rows and blocks get different contents)."""
        return model.block_data(row + (1 << 40), self.params.data_bits)

    def pause_everything(self, probability: float) -> None:
        for port in (*self.sources.values(), *self.sinks.values()):
            port.set_pause_generator(bench.random_pauses(self.rng, probability))

    # ---- configuration ------------------------------------------------------------------------------
    async def configure(self, reg: int, value: int) -> None:
        """A register write; it takes effect before the next request the bench offers afterwards."""
        await self.sources["config"].send(self.fields["config"].pack(reg=reg, value=value))
        await self.sources["config"].wait()
        await ClockCycles(self.dut.clk, 2)
        if reg == REG_MEMORY_SIZE:
            self.memory_size = value if value <= 2 ** self.params.address_bits else self.memory_size
        elif reg >= REG_REGION_BASE and reg < REG_REGION_BASE + 2 * self.params.protected_regions:
            i = (reg - REG_REGION_BASE) // 2
            lo, hi = self.regions[i]
            self.regions[i] = (value, hi) if reg == REG_REGION_BASE + 2 * i else (lo, value)

    async def set_policy(self, policy: str, weight_gpu: int | None = None, weight_pnm: int | None = None) -> None:
        await self.configure(REG_POLICY, POLICIES.index(policy))
        if weight_gpu is not None:
            await self.configure(REG_WEIGHT_GPU, weight_gpu)
        if weight_pnm is not None:
            await self.configure(REG_WEIGHT_PNM, weight_pnm)

    async def standard_memory_map(self) -> None:
        await self.configure(REG_MEMORY_SIZE, MEMORY_SIZE)
        await self.configure(REG_REGION_BASE, PROTECTED[0])
        await self.configure(REG_REGION_LIMIT, PROTECTED[1])

    async def grid_memory_map(self) -> None:
        """The grid's plan: its larger memory, its weights protected as region 1 (the parameters stay region 0)."""
        await self.configure(REG_MEMORY_SIZE, GRID_MEMORY_SIZE)
        await self.configure(REG_REGION_BASE + 2, GRID_WEIGHTS[0])
        await self.configure(REG_REGION_LIMIT + 2, GRID_WEIGHTS[1])

    # ---- stimulus -----------------------------------------------------------------------------------
    def gpu_request(self, write: bool | None = None, address: int | None = None) -> dict:
        """A GPU request: at `address` (a request address) if given, else at random in the GPU's read or write space."""
        write = self.rng.random() < 0.3 if write is None else write
        lo, hi = GPU_WRITE_SPACE if write else GPU_READ_SPACE
        rb = self.params.request_bytes
        address = self.rng.randrange(lo // rb, hi // rb) if address is None else address
        return {"address": address, "is_write": int(write),
                "mask": self.rng.getrandbits(rb) if write else (1 << rb) - 1,
                "data": self.rng.getrandbits(self.params.data_bits) if write else 0,
                "id": len(self.offered.gpu) % (1 << self.params.id_bits)}

    def offer_gpu(self, request: dict) -> None:
        """Send a GPU request and expect its response: a read's data is the memory's initial contents."""
        self.offered.gpu.append((self.cycle.now, request))
        self.sources["gpu_req"].send_nowait(self.fields["gpu_req"].pack(**request))
        fields = ("address", "is_write", "id")
        data = 0 if request["is_write"] else model.block_data(request["address"], self.params.data_bits)
        self.board.expect("gpu_resp", [{**{f: request[f] for f in fields}, "data": data}],
                          f"GPU request {len(self.offered.gpu) - 1} offered at cycle {self.cycle.now}: {request}")

    def tensor(self, store: bool, size: int | None = None, base: int | None = None) -> model.Instruction:
        """A well-formed tensor in the address plan (unless `base`/`size` say otherwise), with fresh rows."""
        rb = self.params.request_bytes
        size = self.rng.randint(1, self.params.max_tensor_bytes) if size is None else size
        lo, hi = PNM_STORE_SPACE if store else PNM_LOAD_SPACE
        if base is None:
            base = self.rng.randrange(lo // rb, (hi - self.params.max_tensor_bytes) // rb) * rb
        rows = max(1, -(-size // rb))
        if store:
            dest, self.store_row = self.store_row, self.store_row + rows
        else:
            dest, self.load_row = self.load_row, self.load_row + rows
        return model.Instruction(base=base, size=size, dest=dest, store=store,
                                 id=len(self.offered.pnm) % (1 << self.params.id_bits))

    def offer_pnm(self, instr: model.Instruction) -> None:
        """Send a PNM instruction and expect, under the configuration now in force, its completion with the
        golden model's fault and (an accepted load) its data in the buffer; note its memory requests."""
        self.offered.pnm.append((self.cycle.now, instr))
        self.sources["pnm_instr"].send_nowait(self.fields["pnm_instr"].pack(
            base=instr.base, size=instr.size, dest=instr.dest, store=int(instr.store), id=instr.id))
        inputs = f"PNM instruction {len(self.offered.pnm) - 1} offered at cycle {self.cycle.now}: {instr}"
        fault = self.fault(instr)
        self.board.expect("completion", [{"id": instr.id, "dest": instr.dest, "store": int(instr.store),
                                          "fault": fault}], inputs)
        if fault != model.NONE:
            return
        for sub in model.sub_requests(instr, self.params.request_bytes):
            self.expected_pnm.append((sub.block, int(instr.store), sub.mask,
                                      self.buffer_data(sub.row) if instr.store else None))
            if not instr.store:
                self.board.expect("buf_wr", [{"row": sub.row, "data": model.block_data(sub.block, self.params.data_bits),
                                              "mask": sub.mask}], inputs)
                self.load_rows[sub.row] = instr.dest

    def fault(self, instr: model.Instruction) -> int:
        return model.fault(instr, request_bytes=self.params.request_bytes, max_sub_requests=self.params.max_sub_requests,
                           buffer_rows=self.buffer_rows, memory_size=self.memory_size, regions=self.regions)

    # ---- completion and checking --------------------------------------------------------------------
    async def drain(self, patience_cycles: int = 20_000) -> None:
        """Wait until every offered request has its response and every instruction its completion (each
        checked as it arrived), then a while longer: anything extra would show now."""
        await self.board.drained(patience_cycles)
        await self.board.idle(cycles=50)

    def turnarounds(self) -> dict[str, list[int]]:
        """Cycles from each GPU request's entry into the MMU (`gpu_req`) to its response, and from each PNM
        instruction's entry to its completion, in answer order; matched by id (an id returns only after
        2**id_bits later requests, far more than can be in flight)."""
        out = {}
        for source, offered, start, end in (("gpu", [r["id"] for _, r in self.offered.gpu], "gpu_req", "gpu_resp"),
                                             ("pnm", [i.id for _, i in self.offered.pnm], "pnm_instr", "completion")):
            waiting: dict[int, deque[int]] = defaultdict(deque)
            for cycle, ident in zip(self.probes[start].cycles, offered, strict=True):
                waiting[ident].append(cycle)
            out[source] = [cycle - waiting[self.fields[end].unpack(payload)["id"]].popleft()
                           for cycle, payload in zip(self.probes[end].cycles, self.probes[end].payloads, strict=True)]
        return out

    def origins(self) -> list[str]:
        """Which source ("gpu" or "pnm") each memory-controller request came from: they must be a merge of the GPU
        requests sent and the accepted instructions' sub-requests, each in its own order (`streams.unmerge`; both
        sources read the same weights, so an address does not say whose a request is)."""
        gpu = [tuple(r[f] for f in ("address", "is_write", "mask", "data")) for _, r in self.offered.gpu]
        seen = [((r["address"], r["is_write"], r["mask"], r["data"]),
                 (r["address"], r["is_write"], r["mask"], r["data"] if r["is_write"] else None))
                for r in self.memory.requests]
        return ["gpu" if first else "pnm" for first in unmerge(seen, gpu, self.expected_pnm)]

    def check(self) -> dict[str, int]:
        """What only the whole run shows; call after `drain`. The memory controller saw exactly the GPU
        requests sent, in order, and exactly the accepted instructions' requests, in order (`origins`); no PNM
        write reached a protected region or beyond memory; a load completed only after its data reached the buffer."""
        rb = self.params.request_bytes
        for r, source in zip(self.memory.requests, self.origins(), strict=True):
            assert not (r["is_write"] and any(lo <= r["address"] * rb < hi for lo, hi in self.regions if lo < hi)) \
                or source == "gpu", f"a PNM write reached protected block {r['address']:#x}"
            assert (r["address"] + 1) * rb <= self.memory_size or source == "gpu", "a PNM access beyond memory"
        # A load completes only after the last of its data reached the buffer.
        last_write = {}
        for cycle, w in self.board.log["buf_wr"]:
            last_write[self.load_rows[w["row"]]] = cycle
        for cycle, c in self.board.log["completion"]:
            if not c["store"] and c["fault"] == model.NONE:
                assert last_write[c["dest"]] < cycle, f"load {c['id']} completed before its data arrived"
        assert self.dut.stray_response.value == 0, "the MMU saw a response it did not expect"
        return {"gpu_requests": len(self.offered.gpu), "pnm_instructions": len(self.offered.pnm),
                "pnm_requests": len(self.expected_pnm), "refused": sum(c["fault"] != model.NONE
                                                                       for _, c in self.board.log["completion"])}


def _same_gpu_response(got: dict, expected: dict) -> bool:
    """A write's response data is undefined."""
    return all(got[f] == expected[f] for f in ("address", "is_write", "id")) and \
        (bool(got["is_write"]) or got["data"] == expected["data"])

