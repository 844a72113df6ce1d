"""The PNM buffer's surroundings in simulation, and the scoreboard that judges what it did.

- a stream source on every request port and a sink on every response port, each with its own pauses;
- one watcher that, every cycle, hands the requests accepted in that cycle to the golden model
  (`tb.models.pnm_buffer`, which also fails two accesses of one bank in one cycle) and queues each read's
  expected data on its port's scoreboard queue: responses are checked as they arrive, in request order per
  port, so a lost, duplicated, reordered or stale response names its port, cycle and request;
- handshake probes on the response ports, numbered like the watcher's cycles, for latency and rates.
"""
import functools
import random

from rtl.pnm_buffer.params import Port
from rtl.registry import BLOCKS

from .. import bench
from ..models import pnm_buffer as model
from ..payload import Packer
from ..scoreboard import Scoreboard


@functools.cache
def banks_model(total_bytes: int, banks: int, bank_bytes: int) -> model.Buffer:
    """The model of the one simulated buffer: its banks keep their contents from test to test of a run (the DUT
    is not rebuilt, and SRAM has no reset), so the model does too. What was never written is undefined in both:
    the simulator may even take a request from its random initial inputs before the first reset."""
    return model.Buffer(total_bytes, banks, bank_bytes)


class Watcher(bench.CycleCounter):
    """Each cycle's accepted requests, to the model and the scoreboard; their cycles per port."""

    def __init__(self, harness: "Harness") -> None:
        self.h = harness
        self.accepted: dict[str, list[int]] = {port.request: [] for port in harness.ports}
        self.conflicts: list[str] = []
        super().__init__(harness.dut.clk)

    def sample(self) -> None:
        h, accesses = self.h, []
        for port in h.ports:
            if getattr(h.dut, f"{port.request}__valid").value == 1 and \
                    getattr(h.dut, f"{port.request}__ready").value == 1:
                fields = h.packers[port.request].unpack(getattr(h.dut, f"{port.request}__payload").value)
                accesses.append(model.Access(port.request, fields["row"], port.bytes, port.write,
                                             fields.get("data", 0), fields.get("mask", 0)))
                self.accepted[port.request].append(self.now)
        if not accesses:
            return
        try:
            results = h.model.cycle(accesses)
        except model.BankConflict as conflict:
            self.conflicts.append(f"cycle {self.now}: {conflict}")
            return
        for access, data in zip(accesses, results):
            if data is not None:
                h.board.expect(h.response_of[access.port], [data],
                               f"{access.port} row {access.row} accepted at cycle {self.now}")


class Harness:
    def __init__(self, dut, seed: int = 0) -> None:
        self.dut = dut
        config = bench.config()
        self.params = p = BLOCKS[config["block"]].params(**config["params"])
        self.component = component = BLOCKS[config["block"]].build(p)
        self.ports: tuple[Port, ...] = p.ports
        self.reads = [port for port in self.ports if not port.write]
        self.response_of = {port.request: port.response for port in self.reads}
        self.rng = random.Random(seed)
        self.packers = {name: Packer.of_port(component, name)
                        for port in self.ports for name in (port.request, port.response) if name}
        self.sources = {port.request: bench.source(dut, port.request) for port in self.ports}
        self.sinks = {port.response: bench.sink(dut, port.response) for port in self.reads}
        self.model = banks_model(p.total_bytes, p.banks, p.bank_bytes)
        # Made together, so that they number cycles alike.
        self.watcher = Watcher(self)
        self.responded = {port.response: bench.HandshakeProbe(dut, port.response) for port in self.reads}
        self.board = Scoreboard(self.watcher)
        for port in self.reads:
            packer = self.packers[port.response]
            self.board.add_port(port.response, self.sinks[port.response],
                                decode=lambda payload, packer=packer: packer.unpack(payload)["data"],
                                compare=lambda got, expected: expected.matches(got))

    # ---- stimulus -----------------------------------------------------------------------------------
    def rows(self, port: Port) -> int:
        return self.params.total_bytes // port.bytes

    def offer(self, port: Port, row: int) -> None:
        """One request on `port`: a read of `row`, or a write of random bytes under a random byte mask."""
        if port.write:
            payload = self.packers[port.request].pack(row=row, data=self.rng.getrandbits(8 * port.bytes),
                                                      mask=self.rng.getrandbits(port.bytes))
        else:
            payload = self.packers[port.request].pack(row=row)
        self.sources[port.request].send_nowait(payload)

    def pause(self, sources: float, sinks: float) -> None:
        """Random gaps on every request port and random back-pressure on every response port (0: none)."""
        for ends, probability in ((self.sources.values(), sources), (self.sinks.values(), sinks)):
            for end in ends:
                end.set_pause_generator(bench.random_pauses(self.rng, probability) if probability else None)
                end.pause = False

    # ---- completion ---------------------------------------------------------------------------------
    async def drain(self) -> None:
        """Wait until every request offered is accepted and every read answered (each checked as it came),
        then a while longer: anything extra would show now. A bank conflict is the first failure named."""
        try:
            for source in self.sources.values():
                await source.wait()
            await self.board.drained()
            await self.board.idle(*(getattr(self.dut, f"{port.response}__valid") for port in self.reads))
        finally:
            assert not self.watcher.conflicts, self.watcher.conflicts[0]

    def clear(self) -> None:
        """After a reset: forget the requests offered and the responses expected; the banks keep their
        contents (SRAM has no reset), and so does the model."""
        for end in (*self.sources.values(), *self.sinks.values()):
            end.clear()
        self.board.clear()
