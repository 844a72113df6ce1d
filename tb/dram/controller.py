"""The pseudo-channel model (`tb.dram.channel`) behind a block's `mc_req`/`mc_resp` ports in a cocotb bench.

The block and the DRAM run on their own clocks: the block at its design clock, the DRAM at 1/tCK (HBM3: 1.6 GHz
against the MMU's 1 GHz). A request the block hands over at an edge joins the queue at the first tCK cycle from
that edge on; a response is driven at the first edge of the block's clock after its data is done. While the queue
is full the model takes no request: `mc_req`'s ready drops once the port's two-entry skid buffer (the bench
sink's) has filled too.

A request moves whole bursts (HBM3 and HBM4: 32 bits x BL8 = 32 bytes, the MMU's 256-bit requests): one narrower
than a burst (the small DQB's 4-byte beats) still takes one burst of the data bus, one wider (the full DQB's
64-byte beats) takes consecutive bursts and is answered when the last is done. `address_bytes` is the unit of the
block's request addresses (the MMU's are request indices, the DQB's bytes); the low bits of an address inside a
burst do not change which burst is read. Reads and writes reach the memory contents in the order they were
accepted, whatever order the channel serves them in: it never lets a request pass an older one to the same
address when either writes, so the timing agrees with that order.
"""
import math
from fractions import Fraction

from .. import bench
from ..memory import Contents, MemoryPort
from .channel import DRAMControllerParams, PseudoChannel, DRAMRequest
from .timing import DramTiming

SKID_ENTRIES = 2
"""Requests the sink holds beyond the queue: with one, `ready` would drop every other cycle (the sink checks its
occupancy before the model has taken the beat it just received)."""


class DramController(MemoryPort):
    def __init__(self, dut, component, clock: bench.CycleCounter, contents: Contents, *, timing: DramTiming,
                 params: DRAMControllerParams, clock_hz: float, answer_writes: bool = False,
                 address_bytes: int | None = None) -> None:
        super().__init__(dut, component, clock, contents, answer_writes=answer_writes)
        self.address_bytes = address_bytes or contents.word_bytes
        self.bursts = -(-contents.word_bytes // timing.burst_bytes)
        """Bursts one request moves."""
        if timing.burst_bytes % contents.word_bytes and contents.word_bytes % timing.burst_bytes:
            raise ValueError(f"{contents.word_bytes}-byte requests on a {timing.name} pseudo channel of "
                             f"{timing.burst_bytes}-byte bursts: one must divide the other")
        if self.bursts > params.queue_depth:
            raise ValueError(f"a request of {self.bursts} bursts does not fit a queue of {params.queue_depth}")
        self.timing, self.params = timing, params
        self.tck_per_cycle = Fraction(round(1e12 / clock_hz), timing.tck_ps)
        self.sink.queue_occupancy_limit = SKID_ENTRIES
        self.cycle = 0
        """The block's clock edges seen by this controller since it was made or last cleared."""
        self.channel = PseudoChannel(timing, params)
        self.latencies: list[tuple[dict, int]] = []
        """(request, cycles from its acceptance to its response) for every answered request, in answer order."""
        bench.every_edge(dut.clk, self._edge)

    @property
    def peak_requests_per_cycle(self) -> float:
        """The data bus's limit in the block's cycles: one burst per `bl` tCK, `bursts` per request."""
        return float(self.tck_per_cycle / (self.timing.bl * self.bursts))

    @property
    def in_order(self) -> bool:
        return self.params.in_order

    def clear(self) -> None:
        """Forget everything in flight and start a fresh, idle channel (all banks closed, refresh due one tREFI
        from now): the block was reset, or a new measurement begins."""
        self.cycle = 0
        self.channel = PseudoChannel(self.timing, self.params)
        self.latencies.clear()
        super().clear()

    def _edge(self) -> None:
        """At each edge (after the sink's: every beat it took at this edge is in its queue): the requests the sink
        took join the queue at the current tCK cycle (the first one from this edge on), then the channel runs every
        tCK cycle that starts before the next edge; what finished there is driven at the next edge, the first one
        after its data was done."""
        self.cycle += 1
        self._run_until(self.cycle)  # (only just after a clear has it not got here yet)
        while not self.sink.empty() and self.channel.can_accept(self.bursts):
            request, answer = self.take(self.sink.recv_nowait())
            first = request["address"] * self.address_bytes // self.timing.burst_bytes
            left = [self.bursts]  # the request's bursts not yet done, shared by all of them
            for burst in range(first, first + self.bursts):
                self.channel.accept(DRAMRequest(burst, bool(request["is_write"]),
                                            payload=(request, answer, self.cycle, left)))
        self._run_until(self.cycle + 1)

    def _run_until(self, edge: int) -> None:
        """Run the channel through every tCK cycle that starts before `edge`; answer what finished (the answers are
        driven at the next edge)."""
        while self.channel.now < math.ceil(edge * self.tck_per_cycle):
            for done in self.channel.step():
                request, answer, accepted, left = done.payload
                left[0] -= 1
                if answer is not None and not left[0]:
                    self.latencies.append((request, self.cycle + 1 - accepted))
                    self.answer(*answer)
