"""The servers every serving system is built from: a prefill server, a decode server with continuous
batching, a mixed (chunked-prefill) server, and the KV-cache pool they reserve memory from.

A server runs one iteration at a time; its cost comes from an executor (`sysmodel.execution`) and, when it
shares memory with another server, from the share `SharedMemory` grants it at the start of the iteration.
Decoding runs in blocks of iterations priced at once (numpy over the growing context) up to the next
request that finishes; anything that would change the next iteration (a request that could join, a
co-runner starting or stopping) cuts the block at the iteration in progress, so blocks give exactly the
iteration-by-iteration result, only faster. Each server counts what it did for utilization and energy.
"""
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .engine import EventLoop, Request
from .errors import ConfigError
from .execution import Cost
from .memory import Sharing
from .operators import Work, decode_work, prefill_work


class KVPool:
    """KV-cache capacity in tokens. A request reserves its whole final length (prompt + output) when it is
    admitted, so no running request is ever preempted."""

    def __init__(self, capacity_tokens: int, name: str) -> None:
        self.capacity = capacity_tokens
        self.used = 0
        self.name = name
        self.waiters: list[Callable[[], None]] = []

    def check_fits(self, request: Request) -> None:
        if request.input_len + request.output_len > self.capacity:
            raise ConfigError(f"request {request.id} needs {request.input_len + request.output_len} tokens of KV "
                              f"cache but {self.name} holds at most {self.capacity}")

    def reserve(self, request: Request) -> bool:
        need = request.input_len + request.output_len
        if self.used + need > self.capacity:
            return False
        self.used += need
        return True

    def release(self, request: Request) -> None:
        self.used -= request.input_len + request.output_len
        for wake in self.waiters:
            wake()


@dataclass
class Accounting:
    """What a server did, for utilization and energy."""
    name: str
    device: str                  # "gpu", "pnm" or "link"
    peak_flops: float            # FLOP/s of the compute it runs on
    bandwidth: float             # bytes/s of the memory it reads
    power_w: float               # drawn while busy
    hbm_energy_per_byte: float
    busy_s: float = 0.0
    flops: float = 0.0
    hbm_bytes: float = 0.0
    link_bytes: float = 0.0
    iterations: int = 0

    def add(self, cost: Cost, iterations: int = 1) -> None:
        """Add totals (see `_first_steps`)."""
        self.busy_s += cost.seconds
        self.flops += cost.flops
        self.hbm_bytes += cost.hbm_bytes
        self.link_bytes += cost.link_bytes
        self.iterations += iterations


class SharedMemory:
    """Servers on the same stacks: at the start of an iteration, a server's bandwidth is scaled by the share
    the tier's `Sharing` grants it against the co-runners busy at that moment (quasi-static coupling)."""

    def __init__(self, sharing: Sharing) -> None:
        self.sharing = sharing
        self.users: dict[str, Server] = {}

    def loads(self, asking: str, offered: float) -> dict[str, float]:
        loads = {name: server.offered for name, server in self.users.items() if server.busy and name != asking}
        loads[asking] = offered
        return loads

    def scale(self, asking: str, loads: dict[str, float]) -> float:
        offered = loads[asking]
        if len(loads) == 1 or offered <= 0:
            return 1.0
        return min(1.0, self.sharing.grant(loads)[asking] / offered)

    def changed(self, by: str) -> None:
        for name, server in self.users.items():
            if name != by:
                server.interrupt()


def _first(value) -> float:
    return float(np.ravel(value)[0])


def _first_steps(cost: Cost, steps: int) -> Cost:
    """The totals of the first `steps` iterations of a block (fields that do not grow with the context are
    scalars: one value for every iteration)."""
    return Cost(*(float(np.sum(field[:steps])) if np.ndim(field) else field * steps for field in cost))


class Server:
    """Runs blocks of one or more iterations; subclasses say what work comes next and what it did."""

    def __init__(self, loop: EventLoop, role: str, cost: Callable[..., Cost], accounting: Accounting,
                 memory: SharedMemory | None = None) -> None:
        self.loop, self.role, self._cost, self.accounting, self.memory = loop, role, cost, accounting, memory
        self.busy = False
        self.offered = 0.0
        self._generation = 0
        self._ends: np.ndarray = np.empty(0)
        self._block: Cost | None = None
        if memory is not None:
            memory.users[role] = self

    def price(self, work: Work) -> Cost:
        alone = self._cost(work)
        self.offered = _first(alone.offered)
        if self.memory is None:
            return alone
        loads = self.memory.loads(self.role, self.offered)
        if len(loads) == 1:
            return alone
        return self._cost(work, self.memory.scale(self.role, loads), loads)

    def start(self, work: Work) -> None:
        """Start a block of iterations (one per element of the work's arrays)."""
        cost = self.price(work)
        self._block = cost
        self._ends = self.loop.now + np.cumsum(cost.seconds) if np.ndim(cost.seconds) else \
            np.array([self.loop.now + cost.seconds])
        self.busy = True
        self._schedule(len(self._ends))
        if self.memory is not None:
            self.memory.changed(self.role)

    def _schedule(self, steps: int) -> None:
        self._generation += 1
        generation = self._generation
        self.loop.at(float(self._ends[steps - 1]), lambda: self._finish(generation, steps))

    def interrupt(self) -> None:
        """End the block with the iteration in progress (no-op when idle or already there)."""
        if not self.busy:
            return
        steps = int(np.searchsorted(self._ends, self.loop.now, side="left")) + 1
        if steps < len(self._ends):
            self._ends = self._ends[:steps]
            self._schedule(steps)

    def _finish(self, generation: int, steps: int) -> None:
        if generation != self._generation:
            return
        self.accounting.add(_first_steps(self._block, steps), steps)
        ends = self._ends[:steps]
        self.busy, self.offered, self._block = False, 0.0, None
        if self.memory is not None:
            self.memory.changed(self.role)
        self.completed(ends)

    def completed(self, ends: np.ndarray) -> None:
        raise NotImplementedError


class PrefillServer(Server):
    """Whole prompts, first come first served, one request per iteration (prompts here are 8K–32K tokens,
    compute-bound on their own). `kv` is the pool the prompt's KV is written to; several servers may share
    one `queue`."""

    def __init__(self, *args, kv: KVPool, handoff: Callable[[Request], None], queue: deque | None = None,
                 **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.kv, self.handoff = kv, handoff
        self.queue: deque[Request] = deque() if queue is None else queue
        self.current: Request | None = None
        kv.waiters.append(self.try_start)

    def submit(self, request: Request) -> None:
        self.kv.check_fits(request)
        self.queue.append(request)
        self.try_start()

    def try_start(self) -> None:
        if self.busy or not self.queue or not self.kv.reserve(self.queue[0]):
            return
        self.current = request = self.queue.popleft()
        request.prefill_start = self.loop.now
        self.start(prefill_work(request.input_len))

    def completed(self, ends: np.ndarray) -> None:
        request, self.current = self.current, None
        request.prefilled = request.input_len
        request.emit(self.loop.now)
        self.handoff(request)
        self.try_start()


class DecodeServer(Server):
    """Continuous batching: requests join at iteration boundaries while the batch has room (`max_batch`)
    and their KV fits; every iteration gives each running request one token. With `kv_reserved` the KV was
    reserved by a prefill server on the same memory and is only released here."""

    def __init__(self, *args, kv: KVPool, max_batch: int, finished: Callable[[Request], None],
                 kv_reserved: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.kv, self.max_batch, self.finished, self.kv_reserved = kv, max_batch, finished, kv_reserved
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.context = 0              # KV tokens the next iteration reads, over the running requests

    def submit(self, request: Request) -> None:
        if not self.kv_reserved:
            self.kv.check_fits(request)
        if request.done:
            self._retire(request)
            return
        self.waiting.append(request)
        if not self.busy:
            self.step()
        elif len(self.running) < self.max_batch:
            self.interrupt()

    def _retire(self, request: Request) -> None:
        if self.kv_reserved or request in self.running:
            self.kv.release(request)
        self.finished(request)

    def _admit(self) -> None:
        while self.waiting and len(self.running) < self.max_batch and (self.kv_reserved or
                                                                       self.kv.reserve(self.waiting[0])):
            request = self.waiting.popleft()
            self.running.append(request)
            self.context += request.context + 1

    def step(self) -> None:
        self._admit()
        if not self.running:
            return
        batch = len(self.running)
        steps = min(r.output_len - len(r.token_times) for r in self.running)
        self.start(decode_work(batch, self.context + batch * np.arange(steps)))

    def completed(self, ends: np.ndarray) -> None:
        self._emit_tokens(ends)
        self.step()

    def _emit_tokens(self, ends: np.ndarray) -> None:
        times, still = ends.tolist(), []
        for request in self.running:
            share = request.context + 1          # what the request adds to `self.context` before this block
            request.token_times.extend(times)
            if request.done:
                request.finish = times[-1]
                self.context -= share
                self._retire(request)
            else:
                self.context += len(times)
                still.append(request)
        self.running = still


class MixedServer(DecodeServer):
    """Chunked prefill (Sarathi-style) on one instance: an iteration runs one token for every decoding
    request plus up to `chunk_tokens` prompt tokens, first come first served; with no prompt waiting it
    decodes like a `DecodeServer`."""

    def __init__(self, *args, chunk_tokens: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.chunk_tokens = chunk_tokens
        self.queue: deque[Request] = deque()
        self.prefilling: list[Request] = []
        self.chunks: list[tuple[Request, int]] = []

    def submit(self, request: Request) -> None:
        self.kv.check_fits(request)
        self.queue.append(request)
        if not self.busy:
            self.step()
        else:
            self.interrupt()

    def step(self) -> None:
        while (self.queue and len(self.prefilling) + len(self.running) < self.max_batch
               and self.kv.reserve(self.queue[0])):
            request = self.queue.popleft()
            request.prefill_start = self.loop.now
            self.prefilling.append(request)
        budget, self.chunks = self.chunk_tokens, []
        for request in self.prefilling:
            if budget == 0:
                break
            tokens = min(budget, request.input_len - request.prefilled)
            self.chunks.append((request, tokens))
            budget -= tokens
        if not self.chunks:
            super().step()
            return
        work = decode_work(len(self.running), self.context) if self.running else Work(0, 0, 0, 0)
        for request, tokens in self.chunks:
            part = prefill_work(tokens, request.prefilled, request.prefilled + tokens == request.input_len)
            work = Work(*(a + b for a, b in zip(work, part)))
        self.start(work)

    def completed(self, ends: np.ndarray) -> None:
        self._emit_tokens(ends)
        now = self.loop.now
        for request, tokens in self.chunks:
            request.prefilled += tokens
            if request.prefilled == request.input_len:
                self.prefilling.remove(request)
                request.emit(now)
                if request.done:
                    self.kv.release(request)
                    self.finished(request)
                else:
                    self.running.append(request)
                    self.context += request.context + 1
        self.chunks = []
        self.step()
