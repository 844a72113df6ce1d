"""The benches' one memory-controller model: serves a block's `mc_req` stream from a sparse memory and answers
reads (and, for blocks that wait for write acknowledgements, writes) on `mc_resp` after a latency.

Its interface is what a DRAM model replacing it keeps: built on the block's two ports with `latency` (a
(min, max) range, drawn per request) and `in_order`; `requests` logs every accepted request (its decoded
fields and the cycle); `reads()` filters them; `clear()` forgets everything after a reset; `contents` is the
memory. Timing lives in one method, `due`."""
import heapq
import random
from collections.abc import Callable

import cocotb
from cocotb.triggers import RisingEdge

from . import bench
from .payload import Packer


class Contents:
    """Memory as words of `word_bytes` at word addresses: what was written, else `initial(address)`."""

    def __init__(self, initial: Callable[[int], int], word_bytes: int) -> None:
        self.initial, self.word_bytes, self.written = initial, word_bytes, {}

    def read(self, address: int) -> int:
        return self.written[address] if address in self.written else self.initial(address)

    def write(self, address: int, data: int, mask: int) -> None:
        byte_mask = sum(0xFF << (8 * b) for b in range(self.word_bytes) if mask >> b & 1)
        self.written[address] = (self.read(address) & ~byte_mask) | (data & byte_mask)


class MemoryController:
    """Accepts requests (under the sink's pause generator), answers each read `due` cycles after its
    acceptance; `in_order` keeps answers in request order whatever the drawn latencies. Requests without a
    `mask` field write whole words; a response carries the request's `tag` when its layout has one."""

    def __init__(self, dut, component, clock: bench.CycleCounter, contents: Contents, rng: random.Random, *,
                 latency: tuple[int, int] = (8, 8), in_order: bool = True, answer_writes: bool = False) -> None:
        self.clock, self.contents, self.rng = clock, contents, rng
        self.latency, self.in_order, self.answer_writes = latency, in_order, answer_writes
        self.sink, self.source = bench.sink(dut, "mc_req"), bench.source(dut, "mc_resp")
        self._request, self._response = Packer.of_port(component, "mc_req"), Packer.of_port(component, "mc_resp")
        self.requests: list[dict] = []
        self.overtaken = 0
        """Responses sent before an earlier request's (only without `in_order`)."""
        self._pending: list[tuple[int, int, int]] = []
        self._sequence = self._latest_answered = self._last_due = 0
        cocotb.start_soon(self._accept())
        cocotb.start_soon(self._respond(dut.clk))

    def reads(self, **fields) -> list[dict]:
        """The read requests whose fields have the given values."""
        return [r for r in self.requests if not r["is_write"] and all(r[k] == v for k, v in fields.items())]

    def clear(self) -> None:
        """Forget requests in flight and the log (the DUT was reset)."""
        self._pending.clear()
        self.requests.clear()
        self._sequence = self._latest_answered = self._last_due = self.overtaken = 0
        self.source.clear()
        self.sink.clear()

    def due(self, cycle: int) -> int:
        lo, hi = self.latency
        due = cycle + (self.rng.randint(lo, hi) if hi > lo else lo)
        if self.in_order:
            due = self._last_due = max(due, self._last_due)
        return due

    async def _accept(self) -> None:
        full = (1 << self.contents.word_bytes) - 1
        while True:
            request = self._request.unpack(int((await self.sink.recv()).payload))
            request["cycle"] = self.clock.now
            self.requests.append(request)
            if request["is_write"]:
                self.contents.write(request["address"], request["data"], request.get("mask", full))
                if not self.answer_writes:
                    continue
                data = 0
            else:
                data = self.contents.read(request["address"])
            fields = {"data": data, **({"tag": request["tag"]} if "tag" in self._response.fields else {})}
            heapq.heappush(self._pending, (self.due(self.clock.now), self._sequence, self._response.pack(**fields)))
            self._sequence += 1

    async def _respond(self, clk) -> None:
        while True:
            await RisingEdge(clk)
            while self._pending and self._pending[0][0] <= self.clock.now:
                _, sequence, payload = heapq.heappop(self._pending)
                self.overtaken += sequence < self._latest_answered
                self._latest_answered = max(self._latest_answered, sequence)
                self.source.send_nowait(bench.StreamTransaction(payload=payload))
