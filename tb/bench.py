"""Parts every cocotb bench shares: its configuration, clock and reset, stream ends with pause
generators for random back-pressure, handshake probes that count cycles, and the figures file.

The stream ends are also the benches' one X/Z check: a four-state simulator (Icarus) shows state that
depends on uninitialised or don't-care bits as X, and a user who sees X on a payload while its `valid` is
high, or on a `valid`/`ready`, concludes the block is broken. Every sink rejects a received beat whose
payload is not all 0/1, and every end watches the handshake bit the DUT drives (a sink's `valid`, a
source's `ready`) for X or Z at every change."""
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


def soak_beats() -> int:
    """Beats per port this run's soak streams (`basedie verify BLOCK --soak N`); 0 in an ordinary run, which
    skips the benches' `soak` tests."""
    return int(config().get("soak", 0))


SOAK_CHUNK = 10_000
"""Beats a soak expects at a time: what a scoreboard keeps stays bounded whatever N is."""


def soak_chunks(total: int, chunk: int = SOAK_CHUNK) -> Iterator[int]:
    """Chunk sizes adding up to `total`."""
    while total > 0:
        yield min(chunk, total)
        total -= chunk


def record_soak(beats: dict[str, int], cycles: int) -> None:
    """The soak figure: N (`soak_beats`, streamed at least on every input port), the beats each port carried (every
    one checked) and over how many cycles, with nothing lost, duplicated or reordered (a soak that passes saw
    none: its scoreboard fails on the first)."""
    record(soak={"beats_per_port": soak_beats(), "beats": beats, "cycles": cycles, "memory": config()["memory"],
                 "lost": 0, "duplicated": 0, "reordered": 0})


def under_icarus() -> bool:
    """Whether this run is under Icarus (four-state, and tens of times slower than Verilator per cycle)."""
    return config().get("simulator") == "icarus"


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
    end = StreamSource(StreamBus.from_prefix(dut, f"{port}_"), dut.clk, dut.rst)
    cocotb.start_soon(_two_state(getattr(dut, f"{port}__ready"), f"{port}__ready"))
    return end


def sink(dut, port: str) -> StreamSink:
    cocotb.start_soon(_two_state(getattr(dut, f"{port}__valid"), f"{port}__valid"))
    return CheckedSink(StreamBus.from_prefix(dut, f"{port}_"), dut.clk, dut.rst)


class CheckedSink(StreamSink):
    """A sink whose every received beat (sampled with `valid` and `ready` high) has a two-state payload."""

    def _recv(self, item):
        payload = item.payload
        assert payload.is_resolvable, \
            f"{self.bus._name}_payload holds X/Z while valid: {payload} (bit 0 rightmost)"
        return super()._recv(item)


async def _two_state(signal, name: str) -> None:
    """Fail the test as soon as a handshake bit the DUT drives settles at X or Z (checked after every change,
    once the time step has settled: a `ready` may follow the bench's `valid` combinationally)."""
    while True:
        await ReadOnly()
        assert signal.value.is_resolvable, f"{name} is {signal.value} at {get_sim_time('ns')} ns"
        await signal.value_change


def random_pauses(rng: random.Random, probability: float) -> Iterator[bool]:
    """A pause generator: each cycle pauses with the given probability."""
    while True:
        yield rng.random() < probability


async def send_all(port: StreamSource, payloads) -> None:
    for payload in payloads:
        await port.send(StreamTransaction(payload=int(payload)))


async def receive(port: StreamSink, count: int) -> list[int]:
    return [int((await port.recv()).payload) for _ in range(count)]


class CycleCounter:
    """Numbers the rising edges of `clk`, sampling after each has settled (`ReadOnly`), as every monitor does:
    counters and probes made together number cycles alike."""

    def __init__(self, clk) -> None:
        self.clk, self.now = clk, 0
        self._task = cocotb.start_soon(self._run())

    async def _run(self) -> None:
        while True:
            await RisingEdge(self.clk)
            await ReadOnly()
            self.now += 1
            self.sample()

    def sample(self) -> None:
        """Called once per cycle, after the edge."""

    def stop(self) -> None:
        self._task.cancel()


class HandshakeProbe(CycleCounter):
    """Records the cycle number of every transfer (valid and ready high) on one stream port, and with
    `payloads` what each transfer carried (so a figure can count what the datapath actually consumed)."""

    def __init__(self, dut, port: str, payloads: bool = False) -> None:
        self.valid = getattr(dut, f"{port}__valid")
        self.ready = getattr(dut, f"{port}__ready")
        self.payload = getattr(dut, f"{port}__payload") if payloads else None
        self.cycles: list[int] = []
        self.payloads: list[int] = []
        super().__init__(dut.clk)

    def sample(self) -> None:
        # Seen after this edge, a transfer completes at the next one; the offset is common to all probes.
        if self.valid.value == 1 and self.ready.value == 1:
            self.cycles.append(self.now)
            if self.payload is not None:
                self.payloads.append(int(self.payload.value))


class HeldUntilTaken(CycleCounter):
    """Checks the stream rule a DUT's output port must keep whatever happens inside it (an error, a flush): once
    `valid` is high it stays high, with the same payload, until the transfer. `broken` lists each cycle it did not."""

    def __init__(self, dut, port: str) -> None:
        self.port = port
        self.valid, self.ready = getattr(dut, f"{port}__valid"), getattr(dut, f"{port}__ready")
        self.payload = getattr(dut, f"{port}__payload")
        self.waiting: int | None = None  # the payload offered and not taken in the last cycle
        self.broken: list[str] = []
        super().__init__(dut.clk)

    def sample(self) -> None:
        valid = self.valid.value == 1
        if self.waiting is not None and (not valid or int(self.payload.value) != self.waiting):
            self.broken.append(f"{self.port} at cycle {self.now}: offered {self.waiting:#x}, then "
                               + (f"changed it to {int(self.payload.value):#x}" if valid else "withdrew it"))
        self.waiting = int(self.payload.value) if valid and self.ready.value != 1 else None


def cycles_simulated() -> int:
    return round(get_sim_time("ns") / config()["clock_period_ns"])


def record(**figures) -> None:
    """Merge measured figures into the file the host reads after the run."""
    path = config()["figures"]
    current = json.loads(open(path).read()) if os.path.exists(path) else {}
    current.update(figures, cycles_simulated=cycles_simulated())
    with open(path, "w") as f:
        json.dump(current, f, indent=2)
