"""The discrete-event engine: one heap of timed actions, and the request record every system fills in."""
import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(slots=True)
class Request:
    """One request and what happened to it (times in seconds from the start of the run)."""
    id: int
    arrival: float
    input_len: int
    output_len: int
    prefill_start: float = math.nan
    first_token: float = math.nan
    finish: float = math.nan
    decode_ready: float = math.nan           # reached the server that decodes it (after any KV transfer)
    decode_start: float = math.nan           # joined a decode batch
    prefilled: int = 0                       # prompt tokens whose KV is written
    tokens: int = 0                          # output tokens emitted, the first included
    # When they were emitted: a float per single token, and each decode block's array of iteration ends,
    # shared by every request of the batch rather than copied into a list of floats per request.
    _emitted: list = field(default_factory=list, init=False, repr=False)

    @property
    def token_times(self) -> list[float]:
        """One time per output token, the first included."""
        times: list[float] = []
        for part in self._emitted:
            if isinstance(part, float):
                times.append(part)
            else:
                times.extend(part.tolist())
        return times

    def token_time_array(self) -> np.ndarray:
        """`token_times` as an array, without a Python float per token."""
        parts = [np.array([part]) if isinstance(part, float) else part for part in self._emitted]
        return np.concatenate(parts) if parts else np.zeros(0)

    @property
    def context(self) -> int:
        """Tokens in the KV cache: the prompt and every output token but the newest."""
        return self.prefilled + max(self.tokens - 1, 0)

    @property
    def done(self) -> bool:
        return self.tokens >= self.output_len

    def emit(self, now: float) -> None:
        if not self.tokens:
            self.first_token = now
        self._emitted.append(now)
        self.tokens += 1
        if self.done:
            self.finish = now

    def emit_block(self, ends: np.ndarray) -> None:
        """One token at each of `ends` (a decode block's iteration ends, after the first token; not copied)."""
        self._emitted.append(ends)
        self.tokens += len(ends)
        if self.done:
            self.finish = float(ends[-1])


class EventLoop:
    """Runs actions in time order; ties run in the order they were scheduled."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()  # the tie-breaker (heapq's documented idiom)

    def at(self, time: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._heap, (time, next(self._order), action))

    def arrivals(self, requests: Sequence[Request], submit: Callable[[Request], None]) -> None:
        """`submit` each request at its arrival, holding one pending event instead of one per request: the events
        run in exactly the order they would if every arrival were scheduled with `at` now."""
        order = sorted(range(len(requests)), key=lambda k: requests[k].arrival)
        # The tie-breakers scheduling them all now would have taken: after the events already scheduled, before
        # any scheduled later, in the order the requests were given.
        first = next(self._order)
        self._order = itertools.count(first + len(requests))

        def arrive(position: int) -> None:
            request = requests[order[position]]
            if position + 1 < len(order):
                following = order[position + 1]
                heapq.heappush(self._heap, (requests[following].arrival, first + following,
                                            lambda: arrive(position + 1)))
            submit(request)

        if order:
            heapq.heappush(self._heap, (requests[order[0]].arrival, first + order[0], lambda: arrive(0)))

    def run(self) -> float:
        """Run to the last event; returns its time."""
        while self._heap:
            self.now, _, action = heapq.heappop(self._heap)
            action()
        return self.now
