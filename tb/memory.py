"""The benches' fixed-latency memory-controller model and what it shares with the DRAM model: serve a block's
`mc_req` stream from a sparse memory and answer reads (and, for blocks that wait for write acknowledgements,
writes) on `mc_resp`.

Its interface (`MemoryPort`) is what the DRAM model (`tb.dram.controller`) shares: built on the block's two
ports; `requests` logs every accepted request (its decoded fields and the cycle); `reads()` filters them;
`clear()` forgets everything after a reset; `contents` is the memory. `MemoryController` adds `latency` (a
(min, max) range, drawn per request) and `in_order`; its timing lives in one method, `due`."""
import heapq
import random
from collections.abc import Callable

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


class MemoryPort:
    """What every memory-controller model shares: a block's `mc_req`/`mc_resp` ports, the memory behind them, the
    log of accepted requests and the count of answers that overtook older ones. Subclasses say when to accept
    (`take`) and when to answer (`answer`)."""

    def __init__(self, dut, component, clock: bench.CycleCounter, contents: Contents, *,
                 answer_writes: bool = False) -> None:
        self.clock, self.contents, self.answer_writes = clock, contents, answer_writes
        self.sink, self.source = bench.sink(dut, "mc_req"), bench.source(dut, "mc_resp")
        self._request, self._response = Packer.of_port(component, "mc_req"), Packer.of_port(component, "mc_resp")
        self.requests: list[dict] = []
        self.overtaken = 0
        """Responses sent before an earlier request's."""
        self._sequence = self._latest_answered = 0

    def reads(self, **fields) -> list[dict]:
        """The read requests whose fields have the given values."""
        return [r for r in self.requests if not r["is_write"] and all(r[k] == v for k, v in fields.items())]

    def clear(self) -> None:
        """Forget requests in flight and the log (the DUT was reset)."""
        self.requests.clear()
        self._sequence = self._latest_answered = self.overtaken = 0
        self.source.clear()
        self.sink.clear()

    def take(self, payload: int) -> tuple[dict, tuple[int, int] | None]:
        """Log an accepted request and apply it to the memory (in acceptance order, whatever order the answers
        take): the request and its answer (sequence number, response payload), None for a write nobody waits
        for. Requests without a `mask` field write whole words; a response carries the request's `tag` when its
        layout has one."""
        request = self._request.unpack(payload)
        request["cycle"] = self.clock.now
        self.requests.append(request)
        if request["is_write"]:
            self.contents.write(request["address"], request["data"],
                                request.get("mask", (1 << self.contents.word_bytes) - 1))
            if not self.answer_writes:
                return request, None
            data = 0
        else:
            data = self.contents.read(request["address"])
        fields = {"data": data, **({"tag": request["tag"]} if "tag" in self._response.fields else {})}
        self._sequence += 1
        return request, (self._sequence - 1, self._response.pack(**fields))

    def answer(self, sequence: int, payload: int) -> None:
        self.overtaken += sequence < self._latest_answered
        self._latest_answered = max(self._latest_answered, sequence)
        self.source.send_nowait(payload)


class MemoryController(MemoryPort):
    """Accepts requests (under the sink's pause generator), answers each read `due` cycles after its
    acceptance; `in_order` keeps answers in request order whatever the drawn latencies."""

    def __init__(self, dut, component, clock: bench.CycleCounter, contents: Contents, rng: random.Random, *,
                 latency: tuple[int, int] = (8, 8), in_order: bool = True, answer_writes: bool = False) -> None:
        super().__init__(dut, component, clock, contents, answer_writes=answer_writes)
        self.rng, self.latency, self.in_order = rng, latency, in_order
        self._pending: list[tuple[int, int, int]] = []
        self._last_due = 0
        self.sink.on_beat = self._accept
        bench.every_edge(dut.clk, self._respond)

    def clear(self) -> None:
        self._pending.clear()
        self._last_due = 0
        super().clear()

    def due(self, cycle: int) -> int:
        lo, hi = self.latency
        due = cycle + (self.rng.randint(lo, hi) if hi > lo else lo)
        if self.in_order:
            due = self._last_due = max(due, self._last_due)
        return due

    def _accept(self, payload: int) -> None:
        _, answer = self.take(payload)
        if answer is not None:
            heapq.heappush(self._pending, (self.due(self.clock.now), *answer))

    def _respond(self) -> None:
        """At each edge: queue the answers due (the source offers them from the next edge)."""
        while self._pending and self._pending[0][0] <= self.clock.now:
            _, sequence, payload = heapq.heappop(self._pending)
            self.answer(sequence, payload)
