"""The servers every serving system is built from: a prefill server, a decode server with continuous
batching, a mixed (chunked-prefill) server, and the KV-cache pool they reserve memory from.

A server runs one iteration at a time; its cost comes from an executor (`sysmodel.execution`) and, when it
shares memory with another server, from the share `SharedMemory` grants it (re-priced for the part left
when a co-runner starts or stops). Decoding runs in blocks of iterations priced at once (numpy over the
growing context) up to the next request that finishes; anything that would change the next iteration (a
request that could join, a co-runner starting or stopping) cuts the block at the iteration in progress, so
blocks give the iteration-by-iteration result (to 1e-5: co-runners re-price at block boundaries, not as a decode
block's offered load grows), only faster. Each server counts what it did for utilization and energy.
"""
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .engine import EventLoop, Request
from .errors import ConfigError
from .execution import Cost
from .memory import MemoryTier
from .operators import Work, decode_work, prefill_work


class KVDoesNotFit(ConfigError):
    """A request longer than a KV pool can ever hold; `capacity_tokens` is what the pool holds (context × batch)."""

    def __init__(self, message: str, capacity_tokens: int) -> None:
        super().__init__(message)
        self.capacity_tokens = capacity_tokens


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
            raise KVDoesNotFit(f"request {request.id} needs {request.input_len + request.output_len} tokens of KV "
                               f"cache but {self.name} holds at most {self.capacity}", self.capacity)

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

    def add(self, cost: Cost) -> None:
        self.busy_s += cost.seconds
        self.flops += cost.flops
        self.hbm_bytes += cost.hbm_bytes
        self.link_bytes += cost.link_bytes


class SharedMemory:
    """Servers on the same memory tier: an iteration's bandwidth is scaled by the share the tier's `sharing`
    grants it against the co-runners busy at that moment; when a co-runner starts or stops, the iteration in
    progress is re-priced for the work it has left."""

    def __init__(self, tier: MemoryTier) -> None:
        sharing = tier.sharing
        # An arbiter may answer for one user alone (`MMUArbitration.granted`), faster than `grant` for all.
        self._granted = getattr(sharing, "granted", None) or (lambda user, loads: sharing.grant(loads)[user])
        self.users: dict[str, Server] = {}

    def loads(self, asking: str, offered: float | np.ndarray) -> dict[str, float | np.ndarray]:
        loads = {name: server.offered for name, server in self.users.items() if server.busy and name != asking}
        loads[asking] = offered
        return loads

    def scale(self, asking: str, loads: dict[str, float | np.ndarray]) -> float | np.ndarray:
        """Granted / offered for `asking` (1 alone), never below `MIN_SHARE`."""
        offered, granted = loads[asking], self._granted(asking, loads)
        if not isinstance(offered, np.ndarray):
            return min(max(float(granted) / offered, MIN_SHARE), 1.0) if offered > 0 else 1.0
        positive = offered > 0
        return np.clip(np.where(positive, granted / np.where(positive, offered, 1.0), 1.0), MIN_SHARE, 1.0)

    def changed(self, by: str) -> None:
        for name, server in self.users.items():
            if name != by:
                server.reprice()


# A source granted no bandwidth stalls; this floor keeps its iteration's time finite until a co-runner
# changes and the iteration is re-priced (it never decides a result: 1e-9 of a stack is 2 kB/s).
MIN_SHARE = 1e-9


def _at(value, index: int):
    return value[index] if isinstance(value, np.ndarray) else value


def _per_iteration(value, count: int) -> np.ndarray | list[float]:
    """One writable value per iteration of a block (a scalar holds for every iteration; kept as a list, which
    is much cheaper than an array for the one-iteration blocks of prefill)."""
    return np.array(value, dtype=float) if isinstance(value, np.ndarray) else [float(value)] * count


def _total(values: np.ndarray | list[float], steps: int) -> float:
    return float(values[:steps].sum()) if isinstance(values, np.ndarray) else sum(values[:steps])


class Server:
    """Runs blocks of one or more iterations; subclasses say what work comes next and what it did."""

    def __init__(self, loop: EventLoop, role: str, cost: Callable[..., Cost], accounting: Accounting,
                 memory: SharedMemory | None = None) -> None:
        self.loop, self.role, self._cost, self.accounting, self.memory = loop, role, cost, accounting, memory
        self.busy = False
        self._work: Work | None = None
        self._offered: np.ndarray | list[float] = []   # what each iteration of the block asks for, alone
        self._pricing: tuple = ({}, 1.0)   # the co-runners' loads and the share the block was last priced at
        self._block: list[np.ndarray | list[float]] = []   # Cost fields, one value per iteration
        self._ends: np.ndarray = np.zeros(0)
        self._start = 0.0
        self._priced: tuple[int, float, float] | None = None   # (iteration, time of its last pricing, work left)
        self._generation = 0
        if memory is not None:
            memory.users[role] = self

    @property
    def ends(self) -> np.ndarray:
        """When each iteration of the current (or last) block ends: as priced, the one in progress as re-priced
        when a co-runner started or stopped (the later ones are cut then)."""
        return self._ends

    def _current(self) -> int:
        """Index of the iteration in progress."""
        return int(np.searchsorted(self._ends, self.loop.now, side="left"))

    @property
    def offered(self) -> float:
        """The bandwidth fraction the iteration in progress asks for (0 when idle): what co-runners see."""
        return float(self._offered[min(self._current(), len(self._offered) - 1)]) if self.busy else 0.0

    def _situation(self, offered) -> tuple[dict[str, float | np.ndarray], tuple]:
        """All loads on the memory now, and what pricing depends on: the co-runners' loads and the share."""
        loads = self.memory.loads(self.role, offered) if self.memory is not None else {}
        corunners = {name: load for name, load in loads.items() if name != self.role}
        return loads, (corunners, self.memory.scale(self.role, loads) if corunners else 1.0)

    def _shared(self, work: Work, situation: tuple[dict, tuple], alone: Cost | None) -> tuple[Cost, tuple]:
        """The work's cost next to the co-runners busy now (`situation`, from `_situation`), each operator at the
        share its own offered load obtains against their iteration loads; and what it was priced at."""
        loads, pricing = situation
        if not pricing[0]:
            return alone or self._cost(work), pricing
        memory, role, trial, seen = self.memory, self.role, dict(loads), {}

        def share(load):
            # The co-runners' loads stay; only this operator's own load changes, and operators of one iteration
            # often offer the same load (1.0 when memory-bound): a scalar load already asked for is answered again.
            if isinstance(load, np.ndarray):
                trial[role] = load
                return memory.scale(role, trial)
            try:
                return seen[load]
            except KeyError:
                trial[role] = load
                value = seen[load] = memory.scale(role, trial)
                return value
        return self._cost(work, pricing[1], loads, share), pricing

    def start(self, work: Work) -> None:
        """Start a block of iterations (one per element of the work's arrays); with co-runners each iteration
        gets the share its own offered load obtains, as if priced one at a time."""
        alone = self._cost(work)
        cost, self._pricing = self._shared(work, self._situation(alone.offered), alone)
        count = np.size(cost.seconds)
        self._work = work
        self._offered = _per_iteration(alone.offered, count)
        self._block = [_per_iteration(field, count) for field in cost]
        self._start = self.loop.now
        self._priced = None
        self._ends = self.loop.now + np.cumsum(self._block[0])
        self.busy = True
        self._schedule(count)
        if self.memory is not None:
            self.memory.changed(self.role)

    def _schedule(self, steps: int) -> None:
        self._generation += 1
        generation = self._generation
        self.loop.at(float(self._ends[steps - 1]), lambda: self._finish(generation, steps))

    def interrupt(self) -> None:
        """End the block with the iteration in progress (no-op when idle or already there)."""
        if self.busy and self._current() + 1 < len(self._ends):
            self._ends = self._ends[:self._current() + 1]
            self._schedule(len(self._ends))

    def reprice(self) -> None:
        """A co-runner started or stopped: finish the iteration in progress at the new share, then end the block
        there. Progress is work done, not elapsed time: since its last pricing the iteration ran at one rate,
        so the work it has left shrank by the fraction of that priced span which has elapsed."""
        if not self.busy:
            return
        now, index = self.loop.now, self._current()
        end = self._ends[index]
        if end <= now:      # it ends right now: only the rest of the block changes
            self.interrupt()
            return
        offered = float(self._offered[index])
        situation = self._situation(offered)
        corunners, scale = situation[1]
        if corunners == self._pricing[0] and scale == _at(self._pricing[1], index):
            self.interrupt()      # the same co-runners and share: the iteration in progress keeps its time
            return
        if self._priced is not None and self._priced[0] == index:
            since, left = self._priced[1:]
        else:
            since, left = (self._ends[index - 1] if index else self._start), 1.0
        left *= (end - now) / (end - since) if np.isfinite(end) else 1.0
        cost, self._pricing = self._shared(Work(*(_at(field, index) for field in self._work)), situation, None)
        self._priced = (index, now, left)
        self._ends = self._ends[:index + 1]
        self._ends[index] = now + left * cost.seconds
        self._block[0][index] = self._ends[index] - (self._ends[index - 1] if index else self._start)
        self._schedule(index + 1)

    def _finish(self, generation: int, steps: int) -> None:
        if generation != self._generation:
            return
        self.accounting.add(Cost(*(_total(field, steps) for field in self._block)))
        ends = self._ends[:steps]
        self.busy = False
        if self.memory is not None:
            self.memory.changed(self.role)
        self.completed(ends)

    def completed(self, ends: np.ndarray) -> None:
        raise NotImplementedError


def _left(request: Request) -> int:
    """The prompt tokens a prefill still computes."""
    return request.input_len - request.prefilled


class PrefillServer(Server):
    """Whole prompts, first come first served: an iteration runs the first prompt waiting and, with a
    `token_budget`, the prompts after it while their tokens together stay within the budget (a prompt longer than
    the budget runs alone; None: one prompt per iteration). A prompt whose first tokens' KV is already there (a
    shared prefix: `Request.prefilled`) computes only the rest, attending to them as cached context. `kv` is the
    pool the prompts' KV is written to; several servers may share one `queue`."""

    def __init__(self, *args, kv: KVPool, handoff: Callable[[Request], None], queue: deque | None = None,
                 token_budget: int | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.kv, self.handoff, self.token_budget = kv, handoff, token_budget
        self.queue: deque[Request] = deque() if queue is None else queue
        self.batch: list[Request] = []
        self._kicked = False
        kv.waiters.append(self.try_start)

    def submit(self, request: Request) -> None:
        self.kv.check_fits(request)
        self.queue.append(request)
        self.try_start()

    def _fits(self, tokens: int) -> bool:
        """Whether the next prompt in the queue joins a batch already holding `tokens` prompt tokens."""
        if not self.queue or (self.batch and (self.token_budget is None
                                              or tokens + _left(self.queue[0]) > self.token_budget)):
            return False
        return self.kv.reserve(self.queue[0])

    def try_start(self) -> None:
        """Start the next prompt now, or with a budget, a batch once everything due at this instant has run, so
        that prompts arriving together are batched together."""
        if self.token_budget is None:
            self._start_batch()
        elif not self.busy and not self._kicked:
            self._kicked = True
            self.loop.at(self.loop.now, self._start_batch)

    def _start_batch(self) -> None:
        self._kicked = False
        if self.busy:
            return
        tokens = 0
        while self._fits(tokens):
            request = self.queue.popleft()
            request.prefill_start = self.loop.now
            self.batch.append(request)
            tokens += _left(request)
        if self.batch:
            parts = [prefill_work(_left(request), request.prefilled) for request in self.batch]
            self.start(Work(*(sum(counts) for counts in zip(*parts))))

    def kv_sequences(self, iteration: int) -> list[tuple[int, int, int]]:
        """What iteration `iteration` of the block does with the KV cache (`sysmodel.hbf.kv`): per prompt (id,
        tokens already in the KV cache, tokens written)."""
        return [(request.id, request.prefilled, _left(request)) for request in self.batch]

    def kv_live(self) -> set[int]:
        """The requests whose KV this server keeps."""
        return {request.id for request in self.batch}

    def completed(self, ends: np.ndarray) -> None:
        batch, self.batch = self.batch, []
        for request in batch:
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
        self._admitted: dict[int, Callable[[], None]] = {}
        self._kicked = False

    def submit(self, request: Request, admitted: Callable[[], None] | None = None) -> None:
        """Queue a prefilled request; `admitted` runs when it joins the batch (its KV then lives here)."""
        if not self.kv_reserved:
            self.kv.check_fits(request)
        if admitted is not None:
            self._admitted[request.id] = admitted
        if request.done:
            self._admitted.pop(request.id, lambda: None)()
            self._retire(request)
            return
        request.decode_ready = self.loop.now
        self.waiting.append(request)
        self.wake()

    def wake(self) -> None:
        """Start (once everything due at this instant has run, so that requests arriving together are batched
        together) or cut the block so that new work joins at the next iteration."""
        if self.busy:
            if len(self.running) < self.max_batch:
                self.interrupt()
        elif not self._kicked:
            self._kicked = True
            self.loop.at(self.loop.now, self._kick)

    def _kick(self) -> None:
        self._kicked = False
        if not self.busy:
            self.step()

    def _retire(self, request: Request) -> None:
        if self.kv_reserved or request in self.running:
            self.kv.release(request)
        self.finished(request)

    def _admit(self) -> None:
        while self.waiting and len(self.running) < self.max_batch and (self.kv_reserved or
                                                                       self.kv.reserve(self.waiting[0])):
            request = self.waiting.popleft()
            request.decode_start = self.loop.now
            self.running.append(request)
            self.context += request.context + 1
            self._admitted.pop(request.id, lambda: None)()

    def step(self) -> None:
        self._admit()
        if not self.running:
            return
        batch = len(self.running)
        steps = min(r.output_len - r.tokens for r in self.running)
        self.start(decode_work(batch, self.context + batch * np.arange(steps)))

    def kv_sequences(self, iteration: int) -> list[tuple[int, int, int]]:
        """Each running request reads its context and writes one token; a request whose KV was moved here from
        another instance (PD: not reserved by a prefill server on this memory) has it land on its first
        iteration, written as if computed here."""
        landing = not self.kv_reserved and iteration == 0
        return [(r.id, 0, r.context + 1) if landing and r.tokens == 1 else (r.id, r.context + iteration, 1)
                for r in self.running]

    def kv_live(self) -> set[int]:
        return {request.id for request in self.running} | {request.id for request in self.waiting}

    def completed(self, ends: np.ndarray) -> None:
        self._emit_tokens(ends)
        self.step()

    def _emit_tokens(self, ends: np.ndarray) -> None:
        ends, count, still = ends.copy(), len(ends), []     # one copy for the whole batch
        for request in self.running:
            share = request.context + 1          # what the request adds to `self.context` before this block
            request.emit_block(ends)
            if request.done:
                self.context -= share
                self._retire(request)
            else:
                self.context += count
                still.append(request)
        self.running = still


class MixedServer(DecodeServer):
    """Prefill and decode on one instance: an iteration runs one token for every decoding request plus up to
    `chunk_tokens` prompt tokens, first come first served (Sarathi-style chunked prefill); with no prompt
    waiting it decodes like a `DecodeServer`. `whole_prompts`: prompts are never split (a prompt longer than
    the budget runs alone); `mixed=False`: an iteration with prompts decodes nothing (vLLM's default
    scheduler: prefill first, no mixed batches). Orca is whole prompts, mixed."""

    def __init__(self, *args, chunk_tokens: int, whole_prompts: bool = False, mixed: bool = True,
                 **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.chunk_tokens, self.whole_prompts, self.mixed = chunk_tokens, whole_prompts, mixed
        self._decoding = True
        self.queue: deque[Request] = deque()
        self.prefilling: list[Request] = []
        self.chunks: list[tuple[Request, int]] = []

    def submit(self, request: Request, admitted: Callable[[], None] | None = None) -> None:
        self.kv.check_fits(request)
        self.queue.append(request)
        self.wake()

    def step(self) -> None:
        while (self.queue and len(self.prefilling) + len(self.running) < self.max_batch
               and self.kv.reserve(self.queue[0])):
            request = self.queue.popleft()
            request.prefill_start = self.loop.now
            self.prefilling.append(request)
        budget, self.chunks = self.chunk_tokens, []
        for request in self.prefilling:
            left = _left(request)
            if budget == 0 or (self.whole_prompts and left > budget and self.chunks):
                break
            tokens = left if self.whole_prompts else min(budget, left)
            self.chunks.append((request, tokens))
            budget = max(budget - tokens, 0)
        self._decoding = not self.chunks or self.mixed
        if not self.chunks:
            super().step()
            return
        decoding = self.running and self._decoding
        work = decode_work(len(self.running), self.context) if decoding else Work(0, 0, 0, 0)
        for request, tokens in self.chunks:
            part = prefill_work(tokens, request.prefilled, request.prefilled + tokens == request.input_len)
            work = Work(*(a + b for a, b in zip(work, part)))
        self.start(work)

    def kv_sequences(self, iteration: int) -> list[tuple[int, int, int]]:
        """The prompt chunks, then, while it decodes, one token of each running request (its KV written here)."""
        sequences = [(request.id, request.prefilled, tokens) for request, tokens in self.chunks]
        if self._decoding:
            sequences += [(request.id, request.context + iteration, 1) for request in self.running]
        return sequences

    def kv_live(self) -> set[int]:
        return {request.id for request in self.running} | {request.id for request in self.prefilling}

    def completed(self, ends: np.ndarray) -> None:
        if self._decoding:
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
                    request.decode_ready = request.decode_start = now
                    self.running.append(request)
                    self.context += request.context + 1
        self.chunks = []
        self.step()
