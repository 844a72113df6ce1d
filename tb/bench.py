"""Parts every cocotb bench shares: its configuration, clock and reset, stream ends with pause
generators for random back-pressure, handshake probes that count cycles, and the figures file.

The stream ends are also the benches' one X/Z check: a four-state simulator (Icarus) shows state that
depends on uninitialised or don't-care bits as X, and a user who sees X on a payload while its `valid` is
high, or on a `valid`/`ready`, concludes the block is broken. Every sink rejects a received beat whose
payload is not all 0/1, and every end checks the handshake bit the DUT drives (a sink's `valid`, a
source's `ready`) for X or Z at every edge (`tb.stream`)."""
import json
import os
import random
from collections.abc import Iterator

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import Event, First

from basedie.flow.runner import BENCH_ENV
from .stream import StreamSink, StreamSource, Streams, Watcher, bits


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
    """Hold `rst` for `cycles_in_reset` edges; the stream ends withdraw their beats and take none meanwhile. They
    step again from the edge after `rst` falls, the first whose pre-edge values show the DUT reset (the per-edge
    task counts the edges, so the release never lands on the edge it is processing)."""
    streams = _streams(dut.clk)
    dut.rst.value = 1
    streams.hold_reset()
    await streams.after(cycles_in_reset).wait()
    dut.rst.value = 0
    streams.in_reset = False


def _streams(clk) -> Streams:
    return Streams.of(clk, x_checks=under_icarus())


def source(dut, port: str) -> StreamSource:
    return StreamSource(_streams(dut.clk), dut, port)


def sink(dut, port: str) -> StreamSink:
    return StreamSink(_streams(dut.clk), dut, port)


def every_edge(clk, step) -> None:
    """Call `step()` at every rising edge of `clk`, after the stream ends made before (a sink's beat of this
    edge is in its queue, a beat sent to a source is offered from the next edge)."""
    _streams(clk).steps.append(step)


async def wait_until(clk, condition, patience: int) -> bool:
    """Wait for the first rising edge (at most `patience` of them) at which `condition()` holds of the values the
    DUT settled at before it; whether one did. Checked in the per-edge task before the stream ends step, so the
    bench's state (probes, queues) is that of the same cycle as the DUT's; no await per cycle."""
    streams, met = _streams(clk), Event()

    def check() -> None:
        if condition():
            met.set()
            streams.steps.remove(check)

    streams.steps.insert(0, check)
    await First(met.wait(), streams.after(patience).wait())
    if check in streams.steps:
        streams.steps.remove(check)
    return met.is_set()


def random_pauses(rng: random.Random, probability: float) -> Iterator[bool]:
    """A pause generator: each cycle pauses with the given probability."""
    while True:
        yield rng.random() < probability


async def send_all(port: StreamSource, payloads) -> None:
    for payload in payloads:
        await port.send(int(payload))


async def receive(port: StreamSink, count: int) -> list[int]:
    return [await port.recv() for _ in range(count)]


class CycleCounter:
    """Numbers the rising edges of `clk` from its making (a transfer is numbered by the edge that completes it,
    as every stream end and probe numbers it); a subclass's `sample` runs at every edge, reading the values
    the DUT settled at in the cycle before it."""

    def __init__(self, clk) -> None:
        self.clk = clk
        self.streams = _streams(clk)
        self._start = self.streams.now
        if type(self).sample is not CycleCounter.sample:
            self.streams.steps.append(self.sample)

    @property
    def now(self) -> int:
        return self.streams.now - self._start

    def sample(self) -> None:
        """Called once per cycle, at the edge."""

    def stop(self) -> None:
        if self.sample in self.streams.steps:
            self.streams.steps.remove(self.sample)


class HandshakeProbe(CycleCounter):
    """Records the cycle number of every transfer (valid and ready high) on one stream port, and with
    `payloads` what each transfer carried (so a figure can count what the datapath actually consumed). It is told
    of each transfer by the port's stream end, or watches the port itself where the bench has none."""

    def __init__(self, dut, port: str, payloads: bool = False) -> None:
        super().__init__(dut.clk)
        self.cycles: list[int] = []
        self.payloads: list[int] = []
        self._keep_payloads = payloads
        end = self.streams.ends.get(port) or Watcher(self.streams, dut, port, payloads)
        self._watched = end.watchers
        self._watched.append(self._transfer)

    def _transfer(self, payload: int) -> None:
        self.cycles.append(self.now)
        if self._keep_payloads:
            self.payloads.append(payload)

    def stop(self) -> None:
        if self._transfer in self._watched:
            self._watched.remove(self._transfer)


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
        self.streams.on_reset.append(self.forget)

    def forget(self) -> None:
        """A reset empties the port: the offer it cut short is owed to nobody."""
        self.waiting = None

    def sample(self) -> None:
        valid = bits(self.valid) == "1"
        payload = int(bits(self.payload), 2) if valid else None
        if self.waiting is not None and (not valid or payload != self.waiting):
            self.broken.append(f"{self.port} at cycle {self.now}: offered {self.waiting:#x}, then "
                               + (f"changed it to {payload:#x}" if valid else "withdrew it"))
        self.waiting = payload if valid and bits(self.ready) != "1" else None


def cycles_simulated() -> int:
    return round(get_sim_time("ns") / config()["clock_period_ns"])


def record(**figures) -> None:
    """Merge measured figures into the file the host reads after the run."""
    path = config()["figures"]
    current = json.loads(open(path).read()) if os.path.exists(path) else {}
    current.update(figures, cycles_simulated=cycles_simulated())
    with open(path, "w") as f:
        json.dump(current, f, indent=2)
