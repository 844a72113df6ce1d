"""The benches' scoreboard: an expected queue per output port, compared beat by beat as the beats arrive
(at the edge that completes it), so a failure names the FIRST wrong beat, its cycle and the inputs that produced it.

A beat that arrives with nothing expected is a duplicated or invented one; `drained` fails if an expected
beat never comes (lost), and order is checked by construction (each beat against the head of its queue). A
port whose beats may legally come out of order (an out-of-order MMU's responses) is `ordered=False`: each beat
takes the oldest expected one it matches."""
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from cocotb.triggers import Event, First

from . import bench

log = logging.getLogger(__name__)

ANY = object()
"""An expectation that accepts any beat: the caller checks the logged beats itself (e.g. after reassembly)."""


def show(value: Any) -> str:
    return hex(value) if isinstance(value, int) else repr(value)


class Scoreboard:
    """Expected beats per output port, each compared on arrival; `clock` numbers the cycles it reports."""

    def __init__(self, clock: bench.CycleCounter) -> None:
        self.clock = clock
        self.expected: dict[str, deque] = {}
        self.log: dict[str, list[tuple[int, Any]]] = {}
        """Every beat each port delivered, with its cycle."""
        self.failure: str | None = None
        self.last_beat = 0
        """The cycle (`clock`'s numbering) of the latest beat: `drained`'s hang check."""
        self._settled = Event()
        """Set when nothing more is expected, or on the first failure."""

    def add_port(self, port: str, sink: bench.StreamSink, decode: Callable[[int], Any] = int,
                 compare: Callable[[Any, Any], bool] = lambda got, expected: got == expected,
                 describe: Callable[[Any], str] = show, ordered: bool = True,
                 observe: Callable[[Any], None] | None = None) -> None:
        """Watch `sink`: each beat is decoded from its payload integer and compared with the head of the
        port's queue (`ordered`) or with each expected beat, oldest first; then handed to `observe`, if given
        (a bench that plays the unit behind the port answers it there)."""
        self.expected[port], self.log[port] = deque(), []
        sink.on_beat = self._monitor(port, decode, compare, describe, ordered, observe)

    def expect(self, port: str, beats, inputs) -> None:
        """Queue expected beats, each with a description of the inputs that produced it (one per beat, or
        one object for all)."""
        beats = list(beats)
        inputs = list(inputs) if isinstance(inputs, list | tuple) else [inputs] * len(beats)
        assert len(inputs) == len(beats), f"{len(beats)} expected beats, {len(inputs)} inputs"
        self.expected[port].extend(zip(beats, inputs, strict=True))
        if beats:
            self._settled.clear()

    def clear(self) -> None:
        """Forget what was expected and seen (the DUT was reset)."""
        for queue in (*self.expected.values(), *self.log.values()):
            queue.clear()
        self._settled.set()

    def _fail(self, message: str) -> None:
        if self.failure is None:
            self.failure = message
            log.error(message)
        self._settled.set()

    def _monitor(self, port, decode, compare, describe, ordered, observe) -> Callable[[int], None]:
        """The sink's `on_beat`: called at the edge that completes each transfer, with its payload."""
        queue, seen = self.expected[port], self.log[port]

        def on_beat(payload: int) -> None:
            beat = decode(payload)
            self.last_beat = self.clock.now
            seen.append((self.last_beat, beat))
            if not queue:
                self._fail(f"{at(port, seen)} ({describe(beat)}) was not expected: a duplicated or invented beat")
            elif ordered:
                expected, inputs = queue.popleft()
                if expected is not ANY and not compare(beat, expected):
                    self._fail(f"{at(port, seen)}: got {describe(beat)}, expected {describe(expected)}; "
                               f"inputs: {inputs}")
            else:
                match = next((k for k, (expected, _) in enumerate(queue)
                              if expected is ANY or compare(beat, expected)), None)
                if match is None:
                    expected, inputs = queue[0]
                    self._fail(f"{at(port, seen)}: got {describe(beat)}, which matches none of the {len(queue)} "
                               f"expected; oldest: {describe(expected)}; inputs: {inputs}")
                else:
                    del queue[match]
            if observe is not None:
                observe(beat)
            if not queue and not any(self.expected.values()):
                self._settled.set()

        return on_beat

    async def drained(self, patience_cycles: int = 2_000) -> None:
        """Wait until every expected beat has arrived; raise the first mismatch, or a hang once no beat has
        come for `patience_cycles`."""
        started = self.clock.now
        while self.failure is None and any(self.expected.values()):
            await First(self._settled.wait(), self.clock.streams.after(patience_cycles).wait())
            if self.failure is None and any(self.expected.values()) and \
                    self.clock.now - max(self.last_beat, started) >= patience_cycles:
                missing = {port: len(queue) for port, queue in self.expected.items() if queue}
                self._fail(f"no beat for {patience_cycles} cycles from cycle {self.clock.now}; still expected: "
                           f"{missing}; next: " + "; ".join(f"{port}: {describe_head(q)}"
                                                           for port, q in self.expected.items() if q))
        if self.failure is not None:
            raise AssertionError(self.failure)

    async def idle(self, *valids, cycles: int = 20) -> None:
        """After `drained`: nothing more comes out for `cycles` (no duplicated or invented beat, whether or
        not the sinks are paused: each port's `valid` is low at the end)."""
        await self.clock.streams.after(cycles).wait()
        if self.failure is not None:
            raise AssertionError(self.failure)
        for valid in valids:
            assert valid.value == 0, f"{valid._name} still high after the last expected beat: a duplicated beat"


def at(port: str, seen: list) -> str:
    """Where the latest beat of `seen` is: port, index and cycle (made only when a failure names it)."""
    return f"{port}: beat {len(seen) - 1} at cycle {seen[-1][0]}"


def describe_head(queue: deque) -> str:
    expected, inputs = queue[0]
    return f"{show(expected)} from inputs {inputs}"


class StreamHarness:
    """A one-input, one-output unit (`i` → `o`) between a stream source and a sink the scoreboard watches."""

    def __init__(self, dut, **port_options) -> None:
        self.dut = dut
        self.src, self.snk = bench.source(dut, "i"), bench.sink(dut, "o")
        self.board = Scoreboard(bench.CycleCounter(dut.clk))
        self.board.add_port("o", self.snk, **port_options)

    async def run(self, payloads, expected, inputs) -> None:
        """Send `payloads`, and wait until every expected output has arrived, each checked as it came."""
        self.board.expect("o", expected, inputs)
        for payload in payloads:
            self.src.send_nowait(int(payload))
        await self.board.drained()
