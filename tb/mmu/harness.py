"""The MMU's surroundings in simulation, and the scoreboard that judges what it did.

- a memory controller: accepts requests under random back-pressure, keeps a memory, answers every request
  after a configurable latency, in request order or (with `out_of_order`) reordered;
- the PNM buffer: answers store-data reads (`buf_rd` → `buf_rdata`) and takes forwarded load data (`buf_wr`);
- stimulus: GPU requests and PNM tensor instructions offered at chosen cycles;
- the scoreboard: every GPU request exactly one MC request and one response with the right data, every
  PNM instruction exactly one completion with the fault the golden model gives, exactly the MC requests
  of the accepted instructions (none from a refused one), and each load's data in the buffer before its
  completion.

Address plan (bytes): protected parameters [0, 1 MiB); PNM loads read [0, 1.5 MiB) and PNM stores write
[1.5 MiB, 2 MiB); the GPU reads [2 MiB, 3 MiB) and writes [3 MiB, 4 MiB). Nothing is read where anybody
writes, so every read's data is the memory's initial contents (`block_data`) whatever the timing.
Buffer rows: loads fill rows from 0, stores read rows from half the buffer.
"""
import heapq
import random
from dataclasses import dataclass, field

import cocotb
from amaranth.hdl import Shape
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from rtl.mmu import ports
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

from .. import bench
from ..models import mmu as model

MIB = 1 << 20
PROTECTED = (0, MIB)
PNM_LOAD_SPACE = (0, 3 * MIB // 2)
PNM_STORE_SPACE = (3 * MIB // 2, 2 * MIB)
GPU_READ_SPACE = (2 * MIB, 3 * MIB)
GPU_WRITE_SPACE = (3 * MIB, 4 * MIB)
MEMORY_SIZE = 4 * MIB


def pack(layout, **values: int) -> int:
    word = 0
    for name, f in layout:
        word |= (int(values.get(name, 0)) & ((1 << Shape.cast(f.shape).width) - 1)) << f.offset
    return word


def unpack(layout, word: int) -> dict[str, int]:
    return {name: (word >> f.offset) & ((1 << Shape.cast(f.shape).width) - 1) for name, f in layout}


class CycleCounter:
    """Counts rising edges with the same sampling as `bench.HandshakeProbe`; made together with the
    probes, it numbers cycles the way they do."""

    def __init__(self, clk) -> None:
        self.clk, self.now = clk, 0
        self._task = cocotb.start_soon(self._run())

    async def _run(self) -> None:
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            self.now += 1


@dataclass
class Offered:
    """What the bench sent, with the cycle it was offered, for the scoreboard and the wait figures."""
    gpu: list[tuple[int, dict]] = field(default_factory=list)
    pnm: list[tuple[int, model.Instruction]] = field(default_factory=list)


class Harness:
    def __init__(self, dut, *, mc_latency: int = 6, reorder_spread: int = 0, seed: int = 0) -> None:
        self.dut = dut
        self.p = p = MMUParams(**bench.config()["params"])
        self.rng = random.Random(seed)
        self.layout = {name: fn(p) for name, fn in (
            ("gpu_req", ports.gpu_request), ("gpu_resp", ports.gpu_response),
            ("pnm_instr", ports.pnm_instruction), ("completion", ports.completion),
            ("mc_req", ports.mc_request), ("mc_resp", ports.mc_response), ("buf_rd", ports.buffer_read),
            ("buf_rdata", ports.buffer_read_data), ("buf_wr", ports.buffer_write), ("config", ports.config_write))}
        self.sources = {name: bench.source(dut, name) for name in ("gpu_req", "pnm_instr", "mc_resp",
                                                                   "buf_rdata", "config")}
        self.sinks = {name: bench.sink(dut, name) for name in ("gpu_resp", "completion", "mc_req", "buf_rd",
                                                               "buf_wr")}
        self.probes = {name: bench.HandshakeProbe(dut, name)
                       for name in ("gpu_req", "pnm_instr", "mc_req", "gpu_resp", "buf_wr", "completion")}
        self.cycle = CycleCounter(dut.clk)
        self.mc_latency, self.reorder_spread = mc_latency, reorder_spread
        self.buffer_rows = 2 ** p.buffer_address_bits
        self.regions: list[tuple[int, int]] = [(0, 0)] * p.protected_regions
        self.memory_size = 2 ** p.address_bits
        self.new_phase()
        cocotb.start_soon(self._memory_controller())
        cocotb.start_soon(self._responder())
        cocotb.start_soon(self._buffer())

    def new_phase(self) -> None:
        """Forget everything seen so far (after a reset): a fresh scoreboard."""
        self.offered = Offered()
        self.mc_log: list[dict] = []
        self.pending_responses: list = []
        self.sequence = 0
        self.latest_answered, self.overtaken = -1, 0  # responses that overtook an earlier request's
        self.load_row, self.store_row = 0, self.buffer_rows // 2
        for probe in self.probes.values():
            probe.cycles.clear()
        for port in (*self.sources.values(), *self.sinks.values()):
            port.clear()

    # ---- surroundings -------------------------------------------------------------------------------
    async def _memory_controller(self) -> None:
        memory: dict[int, int] = {}
        request_bytes = self.p.request_bytes
        while True:
            request = unpack(self.layout["mc_req"], int((await self.sinks["mc_req"].recv()).payload))
            self.mc_log.append(request)
            block = request["address"]
            old = memory.get(block)
            if old is None:
                old = model.block_data(block, self.p.data_bits)[0]
            if request["is_write"]:
                bytes_mask = sum(0xFF << (8 * b) for b in range(request_bytes) if request["mask"] >> b & 1)
                memory[block] = (old & ~bytes_mask) | (request["data"] & bytes_mask)
                data = 0
            else:
                data = old
            due = self.cycle.now + self.mc_latency + (self.rng.randrange(self.reorder_spread)
                                                      if self.reorder_spread else 0)
            response = pack(self.layout["mc_resp"], data=data, tag=request.get("tag", 0))
            heapq.heappush(self.pending_responses, (due, self.sequence, response))
            self.sequence += 1

    async def _responder(self) -> None:
        while True:
            await RisingEdge(self.dut.clk)
            while self.pending_responses and self.pending_responses[0][0] <= self.cycle.now:
                _, sequence, response = heapq.heappop(self.pending_responses)
                self.overtaken += sequence < self.latest_answered
                self.latest_answered = max(self.latest_answered, sequence)
                self.sources["mc_resp"].send_nowait(bench.StreamTransaction(payload=response))

    async def _buffer(self) -> None:
        while True:
            row = unpack(self.layout["buf_rd"], int((await self.sinks["buf_rd"].recv()).payload))["row"]
            self.sources["buf_rdata"].send_nowait(bench.StreamTransaction(payload=self.buffer_data(row)))

    def buffer_data(self, row: int) -> int:
        """What the PNM buffer holds in a row a store reads (rows and blocks get different contents)."""
        return model.block_data(row + (1 << 40), self.p.data_bits)[0]

    def pause_everything(self, probability: float) -> None:
        for port in (*self.sources.values(), *self.sinks.values()):
            port.set_pause_generator(bench.random_pauses(self.rng, probability))

    # ---- configuration ------------------------------------------------------------------------------
    async def configure(self, reg: int, value: int) -> None:
        """A register write; it takes effect before the next request the bench offers afterwards."""
        await self.sources["config"].send(bench.StreamTransaction(payload=pack(self.layout["config"], reg=reg, value=value)))
        await self.sources["config"].wait()
        await ClockCycles(self.dut.clk, 2)
        if reg == REG_MEMORY_SIZE:
            self.memory_size = value
        elif reg >= REG_REGION_BASE and reg < REG_REGION_BASE + 2 * self.p.protected_regions:
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

    # ---- stimulus -----------------------------------------------------------------------------------
    def gpu_request(self, write: bool | None = None) -> dict:
        write = self.rng.random() < 0.3 if write is None else write
        lo, hi = GPU_WRITE_SPACE if write else GPU_READ_SPACE
        rb = self.p.request_bytes
        return {"address": self.rng.randrange(lo // rb, hi // rb), "is_write": int(write),
                "mask": self.rng.getrandbits(rb) if write else (1 << rb) - 1,
                "data": self.rng.getrandbits(self.p.data_bits) if write else 0,
                "id": len(self.offered.gpu) % (1 << self.p.id_bits)}

    def offer_gpu(self, request: dict) -> None:
        self.offered.gpu.append((self.cycle.now, request))
        self.sources["gpu_req"].send_nowait(bench.StreamTransaction(payload=pack(self.layout["gpu_req"], **request)))

    def tensor(self, store: bool, size: int | None = None, base: int | None = None) -> model.Instruction:
        """A well-formed tensor in the address plan (unless `base`/`size` say otherwise), with fresh rows."""
        rb = self.p.request_bytes
        size = self.rng.randint(1, self.p.max_tensor_bytes) if size is None else size
        lo, hi = PNM_STORE_SPACE if store else PNM_LOAD_SPACE
        if base is None:
            base = self.rng.randrange(lo // rb, (hi - self.p.max_tensor_bytes) // rb) * rb
        rows = max(1, -(-size // rb))
        if store:
            dest, self.store_row = self.store_row, self.store_row + rows
        else:
            dest, self.load_row = self.load_row, self.load_row + rows
        return model.Instruction(base=base, size=size, dest=dest, store=store,
                                 id=len(self.offered.pnm) % (1 << self.p.id_bits))

    def offer_pnm(self, instr: model.Instruction) -> None:
        self.offered.pnm.append((self.cycle.now, instr))
        self.sources["pnm_instr"].send_nowait(bench.StreamTransaction(payload=pack(
            self.layout["pnm_instr"], base=instr.base, size=instr.size, dest=instr.dest,
            store=int(instr.store), id=instr.id)))

    def fault(self, instr: model.Instruction) -> int:
        return model.fault(instr, request_bytes=self.p.request_bytes, max_sub_requests=self.p.max_sub_requests,
                           buffer_rows=self.buffer_rows, memory_size=self.memory_size, regions=self.regions)

    # ---- completion and checking --------------------------------------------------------------------
    async def drain(self, timeout_cycles: int = 20_000) -> None:
        """Wait until every offered request has its response and every instruction its completion."""
        for _ in range(timeout_cycles // 16):
            if (len(self.probes["gpu_resp"].cycles) >= len(self.offered.gpu)
                    and len(self.probes["completion"].cycles) >= len(self.offered.pnm)):
                await ClockCycles(self.dut.clk, 50)  # anything extra would show now
                return
            await ClockCycles(self.dut.clk, 16)
        raise AssertionError(f"timeout: {len(self.probes['gpu_resp'].cycles)} of {len(self.offered.gpu)} GPU "
                             f"responses, {len(self.probes['completion'].cycles)} of {len(self.offered.pnm)} "
                             f"completions")

    def received(self, port: str) -> list[dict]:
        sink = self.sinks[port]
        return [unpack(self.layout[port], int(sink.recv_nowait().payload)) for _ in range(sink.count())]

    def is_gpu(self, mc_request: dict) -> bool:
        return mc_request["address"] * self.p.request_bytes >= GPU_READ_SPACE[0]

    def check(self) -> dict[str, int]:
        """The scoreboard; call after `drain` with the configuration the instructions were offered under."""
        rb, faults = self.p.request_bytes, []
        gpu_sent = [r for _, r in self.offered.gpu]
        mc = self.mc_log
        mc_gpu = [r for r in mc if self.is_gpu(r)]
        mc_pnm = [r for r in mc if not self.is_gpu(r)]
        fields = ("address", "is_write", "mask", "data")
        seen, sent = ([tuple(r[f] for f in fields) for r in rs] for rs in (mc_gpu, gpu_sent))
        assert seen == sent, (f"the memory controller saw {len(seen)} GPU requests for {len(sent)} sent; first "
                              f"difference at {_first_difference(seen, sent)}")

        responses = self.received("gpu_resp")
        assert len(responses) == len(gpu_sent), f"{len(responses)} GPU responses for {len(gpu_sent)} requests"
        waiting = {}
        for r in gpu_sent:
            waiting.setdefault(r["id"], []).append(r)
        for got in responses:
            candidates = waiting.get(got["id"], [])
            match = next((r for r in candidates if r["address"] == got["address"] and r["is_write"] == got["is_write"]), None)
            assert match is not None, f"GPU response {got} answers no outstanding request"
            candidates.remove(match)
            if not got["is_write"]:
                assert got["data"] == model.block_data(got["address"], self.p.data_bits)[0], \
                    f"GPU read of block {got['address']:#x}: wrong data"

        expected_pnm, expected_buffer, expected_completions, load_rows = [], [], [], {}
        for _, instr in self.offered.pnm:
            f = self.fault(instr)
            faults.append(f)
            expected_completions.append((instr.id, instr.dest, int(instr.store), f))
            if f != model.NONE:
                continue
            for sub in model.sub_requests(instr, rb):
                data = self.buffer_data(sub.row) if instr.store else None
                expected_pnm.append((sub.block, int(instr.store), sub.mask, data))
                if not instr.store:
                    expected_buffer.append((sub.row, model.block_data(sub.block, self.p.data_bits)[0], sub.mask))
                    load_rows[sub.row] = instr.dest
        got_pnm = [(r["address"], r["is_write"], r["mask"], r["data"] if r["is_write"] else None) for r in mc_pnm]
        assert got_pnm == expected_pnm, (
            f"PNM memory requests differ from the accepted instructions' ({len(got_pnm)} seen, "
            f"{len(expected_pnm)} expected; first difference at {_first_difference(got_pnm, expected_pnm)})")
        for r in mc:
            assert not (r["is_write"] and any(lo <= r["address"] * rb < hi for lo, hi in self.regions if lo < hi)) \
                or self.is_gpu(r), f"a PNM write reached protected block {r['address']:#x}"
            assert (r["address"] + 1) * rb <= self.memory_size or self.is_gpu(r), "a PNM access beyond memory"

        writes = self.received("buf_wr")
        assert sorted((w["row"], w["data"], w["mask"]) for w in writes) == sorted(expected_buffer), \
            "the PNM buffer did not receive exactly the loaded data"
        completions = self.received("completion")
        got_completions = sorted((c["id"], c["dest"], c["store"], c["fault"]) for c in completions)
        assert got_completions == sorted(expected_completions), "completions differ from one per instruction"
        # A load completes only after the last of its data reached the buffer.
        last_write = {}
        for w, cycle in zip(writes, self.probes["buf_wr"].cycles):
            last_write[load_rows[w["row"]]] = cycle
        for c, cycle in zip(completions, self.probes["completion"].cycles):
            if not c["store"] and c["fault"] == model.NONE:
                assert last_write[c["dest"]] < cycle, f"load {c['id']} completed before its data arrived"
        assert self.dut.stray_response.value == 0, "the MMU saw a response it did not expect"
        return {"gpu_requests": len(gpu_sent), "pnm_instructions": len(self.offered.pnm),
                "pnm_requests": len(expected_pnm), "refused": sum(f != model.NONE for f in faults)}


def _first_difference(a: list, b: list) -> int:
    return next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
