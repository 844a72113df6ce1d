"""Parts every cocotb bench shares: its configuration, clock and reset, stream ends with pause
generators for random back-pressure, handshake probes that count cycles, and the figures file."""
import json
import os
import random
from collections.abc import Iterator

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotbext.axi.stream import define_stream

from .runner import BENCH_ENV

# Amaranth flattens a `stream.Signature` port `i` into i__payload / i__valid / i__ready.
StreamBus, StreamTransaction, StreamSource, StreamSink, StreamMonitor = define_stream(
    "Stream", signals=["payload", "valid", "ready"])


def config() -> dict:
    """The configuration the host runner handed this bench (block, params, figures path, clock)."""
    return json.loads(os.environ[BENCH_ENV])


async def start(dut, cycles_in_reset: int = 2) -> None:
    """Start the clock and hold a synchronous reset: every test starts idle (cocotb stops a test's
    tasks, the clock among them, when the test ends, and the DUT keeps its state between tests)."""
    cocotb.start_soon(Clock(dut.clk, config()["clock_period_ns"], unit="ns").start())
    await reset(dut, cycles_in_reset)


async def reset(dut, cycles_in_reset: int = 2) -> None:
    dut.rst.value = 1
    await ClockCycles(dut.clk, cycles_in_reset)
    dut.rst.value = 0


def source(dut, port: str) -> StreamSource:
    return StreamSource(StreamBus.from_prefix(dut, f"{port}_"), dut.clk, dut.rst)


def sink(dut, port: str) -> StreamSink:
    return StreamSink(StreamBus.from_prefix(dut, f"{port}_"), dut.clk, dut.rst)


def random_pauses(rng: random.Random, probability: float) -> Iterator[bool]:
    """A pause generator: each cycle pauses with the given probability."""
    while True:
        yield rng.random() < probability


async def send_all(port: StreamSource, payloads) -> None:
    for payload in payloads:
        await port.send(StreamTransaction(payload=int(payload)))


async def receive(port: StreamSink, count: int) -> list[int]:
    return [int((await port.recv()).payload) for _ in range(count)]


class HandshakeProbe:
    """Records the cycle number of every transfer (valid and ready high) on one stream port, and with
    `payloads` what each transfer carried (so a figure can count what the datapath actually consumed)."""

    def __init__(self, dut, port: str, payloads: bool = False) -> None:
        self.clk = dut.clk
        self.valid = getattr(dut, f"{port}__valid")
        self.ready = getattr(dut, f"{port}__ready")
        self.payload = getattr(dut, f"{port}__payload") if payloads else None
        self.cycles: list[int] = []
        self.payloads: list[int] = []
        self._task = cocotb.start_soon(self._run())

    async def _run(self) -> None:
        cycle = 0
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            cycle += 1
            # Seen after this edge, a transfer completes at the next one; the offset is common to all probes.
            if self.valid.value == 1 and self.ready.value == 1:
                self.cycles.append(cycle)
                if self.payload is not None:
                    self.payloads.append(int(self.payload.value))

    def stop(self) -> None:
        self._task.cancel()


def cycles_simulated() -> int:
    return round(get_sim_time("ns") / config()["clock_period_ns"])


def record(**figures) -> None:
    """Merge measured figures into the file the host reads after the run."""
    path = config()["figures"]
    current = json.loads(open(path).read()) if os.path.exists(path) else {}
    current.update(figures, cycles_simulated=cycles_simulated())
    with open(path, "w") as f:
        json.dump(current, f, indent=2)
