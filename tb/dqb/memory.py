"""A memory-controller / pseudo-channel model: serves the DQB's `mc_req` from a PC-local byte image, in
request order, after a fixed or random latency, and logs every request (what the S/Z figures count)."""
import random
from collections import deque
from dataclasses import dataclass

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from rtl.dqb.params import DQBParams
from rtl.dqb.ports import Kind, mc_request, mc_response

from .. import bench
from ..models.dqb import beat_to_int, int_to_beat
from .fields import Fields


@dataclass(frozen=True)
class Request:
    kind: Kind
    address: int
    is_write: bool
    data: int
    cycle: int


class MemoryController:
    """Accepts requests (with optional random back-pressure), answers reads `latency` cycles after their
    acceptance (a (min, max) range draws each one at random) but never before an earlier read: in order."""

    def __init__(self, dut, p: DQBParams, image: np.ndarray, rng: random.Random,
                 latency: tuple[int, int] = (8, 8), stall_probability: float = 0.0) -> None:
        self.dut, self.p, self.rng, self.latency = dut, p, rng, latency
        self.image = np.array(image, dtype=np.uint8)
        self.requests: list[Request] = []
        self._request_fields, self._response_fields = Fields(mc_request(p)), Fields(mc_response(p))
        self._pending: deque[tuple[int, int]] = deque()
        self._last_due = 0
        self._cycle = 0
        self._sink, self._source = bench.sink(dut, "mc_req"), bench.source(dut, "mc_resp")
        if stall_probability:
            self._sink.set_pause_generator(bench.random_pauses(rng, stall_probability))
        for task in (self._count(), self._accept(), self._respond()):
            cocotb.start_soon(task)

    def reads(self, kind: Kind | None = None) -> list[Request]:
        return [r for r in self.requests if not r.is_write and (kind is None or r.kind == kind)]

    def clear(self) -> None:
        """Forget requests in flight (the DUT was reset)."""
        self._pending.clear()
        self._source.clear()
        self._sink.clear()

    async def _count(self) -> None:
        while True:
            await RisingEdge(self.dut.clk)
            await ReadOnly()
            self._cycle += 1

    async def _accept(self) -> None:
        beat = self.p.beat_bytes
        while True:
            fields = self._request_fields.unpack(int((await self._sink.recv()).payload))
            address = fields["address"]
            request = Request(Kind(fields["kind"]), address, bool(fields["is_write"]), fields["data"], self._cycle)
            self.requests.append(request)
            assert address % beat == 0, f"unaligned memory request {request}"
            if request.is_write:
                self.image[address:address + beat] = int_to_beat(request.data, self.p.interface_bits)
            else:
                data = beat_to_int(self.image[address:address + beat])
                self._last_due = max(self._cycle + self.rng.randint(*self.latency), self._last_due)
                self._pending.append((self._last_due, data))

    async def _respond(self) -> None:
        while True:
            await RisingEdge(self.dut.clk)
            while self._pending and self._pending[0][0] <= self._cycle:
                _, data = self._pending.popleft()
                await self._source.send(bench.StreamTransaction(payload=self._response_fields.pack(data=data)))
