"""The discrete-event engine: one heap of timed actions, and the request record every system fills in."""
import heapq
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field


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
    token_times: list[float] = field(default_factory=list)  # one per output token, the first included

    @property
    def context(self) -> int:
        """Tokens in the KV cache: the prompt and every output token but the newest."""
        return self.prefilled + max(len(self.token_times) - 1, 0)

    @property
    def done(self) -> bool:
        return len(self.token_times) >= self.output_len

    def emit(self, now: float) -> None:
        if not self.token_times:
            self.first_token = now
        self.token_times.append(now)
        if self.done:
            self.finish = now


class EventLoop:
    """Runs actions in time order; ties run in the order they were scheduled."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()  # the tie-breaker (heapq's documented idiom)

    def at(self, time: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._heap, (time, next(self._order), action))

    def run(self) -> float:
        """Run to the last event; returns its time."""
        while self._heap:
            self.now, _, action = heapq.heappop(self._heap)
            action()
        return self.now
