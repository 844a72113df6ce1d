"""Stream ends (sources, sinks, handshake watchers) all stepped by ONE coroutine per rising clock edge.

A bench's per-cycle cost is Python's, not the simulator's: one coroutine and several awaits per port per cycle
(a driver, a monitor, a pause generator, an X/Z watcher and a cycle counter each) cost more than the
compiled model. Here one task (`Streams`) wakes at each rising edge, reads each port's handshake as it was
before the edge (the values the DUT's flops sample), moves the beats, advances the pause generators and then
writes only what changed. Ports do work only when they have some: an idle source reads nothing, a paused
sink reads nothing unless the X/Z check needs it, and a payload is read only on a transfer.

The X/Z check (`x_checks`: under a four-state simulator) fails the test when a handshake bit the DUT drives (a
sink's `valid`, a source's `ready`) is not 0/1 at an edge, or a sink receives a payload that is not all 0/1;
a source drives X on its payload until its first beat, so a DUT that uses a payload without `valid` shows X.
A two-state simulator (Verilator) cannot hold X, so there the check reads nothing."""
import heapq
from collections import deque
from collections.abc import Callable, Iterator

import cocotb
from cocotb.simtime import get_sim_time
from cocotb.triggers import Event, RisingEdge
from cocotb.types import LogicArray


def bits(handle) -> str:
    """A signal's value as cocotb's binary string ('0', '1', 'x', 'z' per bit), without building a `LogicArray`."""
    return handle._handle.get_signal_val_binstr()


class Streams:
    """The one per-edge task of a test: its stream ends, watchers and cycle timers. `Streams.of(dut)` gives the
    running one, starting it if this test has none yet (cocotb ends a test's tasks when the test ends)."""

    _current: "Streams | None" = None

    def __init__(self, clk, x_checks: bool) -> None:
        self.clk, self.x_checks = clk, x_checks
        self.now = 0
        """Rising edges since this task started; a transfer seen at an edge completes at that edge."""
        self.steps: list[Callable[[], None]] = []
        """Called in order at every edge: the ends, then what was added after them."""
        self.ends: dict[str, "StreamSource | StreamSink"] = {}
        self.on_reset: list[Callable[[], None]] = []
        """Called when the DUT's reset is asserted: each end withdraws its beat, each checker forgets the cycle."""
        self.in_reset = False
        self._timers: list[tuple[int, int, Event]] = []
        self._task = cocotb.start_soon(self._run())

    @classmethod
    def of(cls, clk, x_checks: bool) -> "Streams":
        if cls._current is None or cls._current._task.done():
            cls._current = cls(clk, x_checks)
        return cls._current

    def hold_reset(self) -> None:
        """The DUT's reset is asserted: every end withdraws its beat and nothing steps until `in_reset` is cleared."""
        self.in_reset = True
        for forget in self.on_reset:
            forget()

    def after(self, cycles: int) -> Event:
        """An event set at the `cycles`-th rising edge from now."""
        event = Event()
        heapq.heappush(self._timers, (self.now + cycles, id(event), event))
        return event

    async def _run(self) -> None:
        edge = RisingEdge(self.clk)
        while True:
            await edge
            self.now += 1
            if not self.in_reset:
                for step in tuple(self.steps):
                    step()
            while self._timers and self._timers[0][0] <= self.now:
                heapq.heappop(self._timers)[2].set()

    def fail_unless_two_state(self, value: str, name: str) -> None:
        if value not in ("0", "1"):
            raise AssertionError(f"{name} is {value} at {get_sim_time('ns')} ns")


class _End:
    """What sources and sinks share: the port's signals, a queue, a pause generator and transfer watchers."""

    def __init__(self, streams: Streams, dut, port: str) -> None:
        self.streams, self.name = streams, port
        self.valid, self.ready = getattr(dut, f"{port}__valid"), getattr(dut, f"{port}__ready")
        self.payload = getattr(dut, f"{port}__payload")
        self.queue: deque[int] = deque()
        self.queue_occupancy_limit = 0
        """At most this many beats queued (0: no limit)."""
        self.pause = False
        self._pauses: Iterator[bool] | None = None
        self.watchers: list[Callable[[int], None]] = []
        """Called with the payload of every transfer on this port, at the edge that completes it."""
        streams.steps.append(self.step)
        streams.ends[port] = self
        streams.on_reset.append(self.reset)

    def set_pause_generator(self, generator: Iterator[bool] | None) -> None:
        """Each rising edge takes the next value as `pause` for the cycle after it."""
        self._pauses = generator

    def count(self) -> int:
        return len(self.queue)

    def empty(self) -> bool:
        return not self.queue

    def full(self) -> bool:
        return 0 < self.queue_occupancy_limit <= len(self.queue)

    def _transferred(self, payload: int) -> None:
        for watch in self.watchers:
            watch(payload)

    def _next_pause(self) -> None:
        if self._pauses is not None:
            self.pause = next(self._pauses)

    def step(self) -> None:
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError


class StreamSource(_End):
    """Drives beats (payload integers) into a DUT's input port, holding each until the DUT takes it; while
    `pause` is set it offers no new beat."""

    def __init__(self, streams: Streams, dut, port: str) -> None:
        super().__init__(streams, dut, port)
        self.active = False
        """A beat is offered (valid high) and not yet taken."""
        self._current = 0
        self._dequeued, self._idle = Event(), Event()
        self._idle.set()
        self.valid.value = 0
        self.payload.value = LogicArray("X" * len(self.payload))

    async def send(self, payload: int) -> None:
        """Queue a beat, waiting while the queue is full."""
        while self.full():
            self._dequeued.clear()
            await self._dequeued.wait()
        self.send_nowait(payload)

    def send_nowait(self, payload: int) -> None:
        if self.full():
            raise OverflowError(f"{self.name}: the source's queue of {self.queue_occupancy_limit} beats is full")
        self.queue.append(int(payload))
        self._idle.clear()

    def idle(self) -> bool:
        """Nothing queued and nothing offered."""
        return not self.queue and not self.active

    async def wait(self) -> None:
        """Until every queued beat has been taken."""
        await self._idle.wait()

    def clear(self) -> None:
        """Drop the beats not yet offered (the beat on the port, if any, stays until taken or reset)."""
        self.queue.clear()
        self._dequeued.set()
        if not self.active:
            self._idle.set()

    def reset(self) -> None:
        """The DUT's reset: withdraw the beat offered."""
        self.valid.value = 0
        self.active = False
        if not self.queue:
            self._idle.set()

    def step(self) -> None:
        if self.active:
            ready = bits(self.ready)
            if ready != "1":
                if self.streams.x_checks:
                    self.streams.fail_unless_two_state(ready, f"{self.name}__ready")
                self._next_pause()
                return
            if self.watchers:
                self._transferred(self._current)
        elif self.streams.x_checks:
            self.streams.fail_unless_two_state(bits(self.ready), f"{self.name}__ready")
        if self.queue and not self.pause:
            self._current = self.queue.popleft()
            self.payload.value = self._current
            if not self.active:
                self.valid.value = 1
                self.active = True
            if self.queue_occupancy_limit:
                self._dequeued.set()
        elif self.active:
            self.valid.value = 0
            self.active = False
            if not self.queue:
                self._idle.set()
        self._next_pause()


class StreamSink(_End):
    """Takes beats from a DUT's output port (ready low while `pause` or a full queue), as payload integers:
    queued for `recv`, or handed to `on_beat` when a consumer set it (then nothing is queued)."""

    def __init__(self, streams: Streams, dut, port: str) -> None:
        super().__init__(streams, dut, port)
        self.on_beat: Callable[[int], None] | None = None
        self.error: AssertionError | None = None
        """A received payload that held X/Z: raised by `recv` (or at once, to a sink with `on_beat`)."""
        self._ready = False
        self._arrived = Event()
        self.ready.value = 0

    async def recv(self) -> int:
        while not self.queue and self.error is None:
            self._arrived.clear()
            await self._arrived.wait()
        return self.recv_nowait()

    def recv_nowait(self) -> int:
        if self.error is not None:
            raise self.error
        return self.queue.popleft()

    def clear(self) -> None:
        self.queue.clear()

    def reset(self) -> None:
        """The DUT's reset: take nothing until the next edge after it."""
        self.ready.value = 0
        self._ready = False

    def step(self) -> None:
        if self._ready or self.streams.x_checks:
            valid = bits(self.valid)
            if valid == "1":
                if self._ready:
                    self._receive()
            elif self.streams.x_checks:
                self.streams.fail_unless_two_state(valid, f"{self.name}__valid")
        ready = not (self.pause or self.full())
        if ready != self._ready:
            self.ready.value = int(ready)
            self._ready = ready
        self._next_pause()

    def _receive(self) -> None:
        value = bits(self.payload)
        try:
            payload = int(value, 2)
        except ValueError:
            self.error = AssertionError(f"{self.name}__payload holds X/Z while valid: {value} (bit 0 rightmost)")
            if self.on_beat is not None:
                raise self.error from None
            self._arrived.set()
            return
        if self.watchers:
            self._transferred(payload)
        if self.on_beat is not None:
            self.on_beat(payload)
        else:
            self.queue.append(payload)
            self._arrived.set()


class Watcher:
    """Transfers on a port without a stream end of this bench (valid and ready both driven by the DUT, or
    ends made later): reads the handshake at every edge."""

    def __init__(self, streams: Streams, dut, port: str, payloads: bool) -> None:
        self.valid, self.ready = getattr(dut, f"{port}__valid"), getattr(dut, f"{port}__ready")
        self.payload = getattr(dut, f"{port}__payload") if payloads else None
        self.watchers: list[Callable[[int], None]] = []
        streams.steps.append(self.step)

    def step(self) -> None:
        if bits(self.valid) == "1" and bits(self.ready) == "1":
            payload = int(bits(self.payload), 2) if self.payload is not None else 0
            for watch in self.watchers:
                watch(payload)
