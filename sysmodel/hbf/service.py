"""The stateful HBF tier of one GPU package, and the servers' views of it.

`HBFTier` is what the servers on one package share: the frame cache, the MoE router and the package itself
(`package.py`: temperatures, throttle, retention and refresh). Each server reads it through its own `HBFPort`,
which is that server's executor: an iteration's weight reads go through the frame cache; misses are read from
the media (tR, then the bytes at the service rate), hidden or not by prefetch; the iteration's power heats the
package. Decode is layer-ordered: with `next-layer` prefetch, layer l+1's misses are fetched while layer l
computes (a dense model's weights are known ahead; an MoE model's experts are not: its router runs first);
with `moe-speculative`, each layer prefetches the experts it used in the server's previous iteration (recent
routing, HBFSim's D6): the whole iteration's prediction is known at its start, so the prefetches stream from
the media layer after layer from then on, and when a layer's router has run the layer waits only for the
experts it picked (the rest of its prefetch that they need, then the ones it did not predict); the predicted
experts it does not use and the media has not read yet are dropped (`HBFTier.stream`).

One timeline for all the servers of a package (DuoPD's GPU prefill and PNM decode, the two SM partitions):
- an iteration's accesses (routing, the frame cache) happen at its start, every server's iterations in the
  order of their start times;
- the package advances once through wall-clock time, driven by the sum of what each server's iteration in
  progress draws (its compute power, its HBM and HBF energy spread over its busy time);
- an iteration's media rate is the package's at its start (throttle, refresh) times the share of the tier's
  bandwidth its media load obtains, by the tier's `Sharing`, against the iterations in progress on the other
  servers; when one of them starts or stops, the iteration in progress is re-priced with its new share, as
  the servers already do for HBM (and a block ends before an iteration whose media traffic would change the
  others' shares).

The servers price a block of iterations at once and may cut it short; every start or stop of one server cuts
the others' blocks at the iteration in progress (`SharedMemory`), so only the block priced last runs ahead of
the present. The tier keeps the state from before that block and, when a server next asks (or at the end),
keeps the block's iterations that started by then: the frame cache and routing are replayed up to them and
the package is run again from the block's start through them and the other servers' iterations in progress.
"""
import math
from dataclasses import dataclass

import numpy as np

from ..engine import EventLoop
from ..errors import require
from ..execution import Cost
from ..operators import Shard, Work
from ..servers import MIN_SHARE
from .cache import LayerLRU
from .kv import COUNTS as KV_COUNTS, KVFrames, kv_block_bytes
from .layout import GIB, Layout, objects
from .media import PAGE_BYTES, HBFStack, page_reads
from .package import Package, Refresh
from .retention import Retention
from .routing import Router, RoutingModel, TraceRouter, load_trace
from .thermal import PACKAGE, STATES, PackageRC, ThrottlePolicy

PREFETCH = ("none", "next-layer", "moe-speculative")
COOL_STEP_S = 0.01          # resolution of a wait for the package to cool out of Severe/Shutdown


@dataclass(frozen=True)
class HBFOptions:
    grade: int = 1
    read_s: float | None = None          # default: the stack's tR (20 us)
    frame_cache_gib: float | None = None  # default: the layout's (applied to the layout by `simulate`)
    prefetch: str = "none"
    ambient_c: float = 45.0
    routing_skew: float = 0.0
    routing_trace: str | None = None      # a routing-trace file replayed instead of the seeded model
    seed: int = 0

    def __post_init__(self) -> None:
        require(self.read_s is None or (math.isfinite(self.read_s) and self.read_s > 0),
                f"HBF page read time must be a finite number > 0, got {self.read_s}")
        require(self.frame_cache_gib is None or (math.isfinite(self.frame_cache_gib) and self.frame_cache_gib >= 0),
                f"frame cache must be a finite number of GiB >= 0, got {self.frame_cache_gib}")
        require(self.prefetch in PREFETCH, f"unknown prefetch {self.prefetch!r}; choose one of {', '.join(PREFETCH)}")
        # At or above the Severe exit temperature an idle package could never leave Severe again.
        require(math.isfinite(self.ambient_c) and -50 <= self.ambient_c < ThrottlePolicy().leave_severe_c,
                f"ambient temperature must be in [-50, {ThrottlePolicy().leave_severe_c:g}) C, got {self.ambient_c}")

    def stack(self) -> HBFStack:
        return HBFStack(grade=self.grade) if self.read_s is None else HBFStack(grade=self.grade, read_s=self.read_s)


@dataclass(frozen=True)
class PortPower:
    """What one server's iterations draw on the package: W per die (GPU, HBM, HBF) while it computes, and J per
    byte it moves to or from HBM (per GPU)."""
    compute_w: tuple[float, float, float]
    hbm_energy_per_byte: float


# When a list, every block a port prices with prefetch is appended as (compute per iteration, the objects of
# `HBFTier.objects`, the PortBlock): what a study needs to trace one iteration layer by layer.
TRACE: list | None = None
ACCESS = ("accesses", "hits", "prefetched_in_time", "media_reads", "media_reads_waited", "media_bytes",
          "wasted_prefetch_bytes", "fill_bytes", "cooling_wait_s", "stall_s")
PER_ITERATION = ("starts", "ends", "waits", "busy", "stall", "power", "counts", "fill", "programmed", "media_load",
                 "rate", "ahead", "demand", "overlap", "unused")


@dataclass
class PortBlock:
    """A port's block of iterations as priced (one entry per iteration), and the tier's state before it."""
    port: "HBFPort"
    starts: np.ndarray           # s, as the server counts them
    ends: np.ndarray             # as priced (the server may re-price the last one kept)
    waits: np.ndarray            # s waited for the package to cool before it could be served
    busy: np.ndarray             # s computing and stalled on the media
    stall: np.ndarray
    power: np.ndarray            # W per die while busy
    counts: np.ndarray           # ACCESS counts
    fill: np.ndarray             # bytes read from the media into HBM frames
    programmed: np.ndarray       # KV bytes programmed
    media_load: np.ndarray       # fraction of the tier's bandwidth it asks for alone (with several ports)
    rate: np.ndarray             # the package's service rate at its start
    ahead: np.ndarray | None     # per layer: bytes prefetched (None: no prefetch), bytes waited for, the compute
    demand: np.ndarray           # the prefetch overlaps (`HBFTier.media_times`; moe-speculative: the layer's
    overlap: np.ndarray | None   # own compute), the bytes prefetched and not used (None: not moe-speculative)
    unused: np.ndarray | None
    before: tuple = ()           # frame cache, router, the port's previous demand, KV frames (to roll back)
    snapshot: tuple | None = None    # the package before it, when it was run through it as priced
    replay: tuple = ()           # tokens, touched and demanded objects, KV frames after each iteration; the
    #                              objects and KV bytes it priced (`HBFTier.objects`, `HBFPort._kv_iteration`)

    def keep(self, count: int) -> None:
        for name in PER_ITERATION:
            if (value := getattr(self, name)) is not None:
                setattr(self, name, value[:count])


def steps(start: float, waits: np.ndarray, busy: np.ndarray, power: np.ndarray, others: list[tuple],
          until: float = math.inf) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The package's steps from `start` through a port's iterations (each a wait drawing nothing of its own, then
    `busy` s at its `power`), cut at `until` (no iteration: one step to `until`, split where another port's
    iteration starts or ends): (duration, power, iteration) per step. The other ports' iterations in progress
    (`others`: (from, to, power) each) add their power over the part of each step they overlap: their energy is
    exact, and within a step (an iteration: milliseconds, against the package's time constants of seconds)
    where it falls does not matter."""
    count = len(busy)
    if not count:
        points = np.unique([start, until, *(t for o in others for t in o[:2] if start < t < until)])
        dt, drawn, iteration = np.diff(points), np.zeros((len(points) - 1, 3)), np.zeros(len(points) - 1, dtype=int)
    elif waits.any():
        dt = np.stack((waits, busy), axis=1).ravel()
        drawn = np.zeros((2 * count, 3))
        drawn[1::2] = power
        iteration = np.repeat(np.arange(count), 2)
    else:
        dt, drawn, iteration = busy, power, np.arange(count)
    ends = start + np.cumsum(dt)
    if until < ends[-1] * (1 - 1e-12):
        last = int(np.searchsorted(ends, until, side="left"))
        dt, drawn, iteration = dt[:last + 1].copy(), drawn[:last + 1], iteration[:last + 1]
        dt[last] = until - (ends[last - 1] if last else start)
        ends = np.append(ends[:last], until)
    inside = [o for o in others if o[0] < ends[-1] and o[1] > start] if others else []
    if inside:
        begins = ends - dt
        drawn = drawn.copy()
        for low, high, watts in inside:
            overlap = np.clip(np.minimum(high, ends) - np.maximum(low, begins), 0.0, None)
            drawn += np.outer(np.divide(overlap, dt, out=np.zeros(len(dt)), where=dt > 0), watts)
    if count and waits.any():
        keep = dt > 0
        dt, drawn, iteration = dt[keep], drawn[keep], iteration[keep]
    return dt, drawn, iteration


class HBFTier:
    """One package's HBF tier (its GPU instance's `tp` GPUs are alike: one package is modelled, traffic x tp),
    shared by the ports of the servers on it."""

    def __init__(self, loop: EventLoop, shard: Shard, layout: Layout, options: HBFOptions,
                 prefix_tokens: int = 0, rc: PackageRC = PACKAGE, weight_bytes: float | None = None) -> None:
        """`weight_bytes`: one GPU's weights as stored (quantized pages hold fewer bytes; default FP16)."""
        self.loop, self.shard, self.layout, self.options = loop, shard, layout, options
        self.weight_bytes = weight_bytes
        self.prefix_tokens = prefix_tokens
        self.weights_in_hbf = layout.weights == "hbf"
        self.stack = options.stack()
        # Reads see the stacks through the memory-tier interface: tR as latency, bandwidth, energy per byte, and
        # the `Sharing` that divides the bandwidth among the ports reading at the same time.
        self.tier = self.stack.tier().scaled(layout.hbf_stacks)
        self.layers, self.slots, self.object_bytes = objects(shard, weight_bytes)
        self.object_pages = len(page_reads(0, int(self.object_bytes)))
        self.lru = LayerLRU(self.layers, self.slots, int(layout.frame_cache_gib * GIB // self.object_bytes))
        model = shard.model
        require(options.routing_trace is None or model.moe,
                f"a routing trace needs an MoE model; {model.name} is dense")
        if not model.moe:
            self.router = None
        elif options.routing_trace is not None:
            self.router = TraceRouter(load_trace(options.routing_trace, model.layers, model.experts,
                                                 model.experts_per_token))
        else:
            self.router = Router(RoutingModel(model.experts, model.experts_per_token, options.routing_skew,
                                              options.seed), self.layers)
        zones = self.layers * self.slots if self.weights_in_hbf else 0     # retention of weights (KV is short-lived)
        self.blocks_per_object = -(-self.object_pages // self.stack.pages_per_block)
        # Zones were written at evenly spread times (a device in steady use), so deadlines arrive evenly.
        self.package = Package(rc, options.ambient_c, Retention(zones, (np.arange(zones) + 0.5) / zones), Refresh(
            self.object_bytes, self.blocks_per_object,
            self.object_pages * self.stack.program_s / (layout.hbf_stacks * self.stack.outstanding_reads),
            self.tier.energy_per_byte + self.stack.program_energy_per_byte), self.tier.bandwidth)
        # KV blocks and the shared prefix through the package's frame region (sysmodel/hbf/kv.py), one for all
        # its servers: a block one server wrote is in the region (or the media) for the other.
        self.kv = KVFrames(self.layers, shard.kv_bytes_per_token / self.layers,
                           int(layout.kv_frame_cache_gib * GIB // kv_block_bytes(shard)), prefix_tokens,
                           layout.kv == "hbf", layout.prefix == "hbf") \
            if layout.kv == "hbf" or (layout.prefix == "hbf" and prefix_tokens) else None
        self.ports: list[HBFPort] = []
        self.pending: PortBlock | None = None

    def port(self, base, role: str, power: PortPower) -> "HBFPort":
        """The executor of one server on this package (`base` prices its iterations with the weights in HBM)."""
        port = HBFPort(self, base, role, power)
        self.ports.append(port)
        return port

    @property
    def trace(self) -> list[tuple]:
        return self.package.trace

    # ----- the timeline -----------------------------------------------------------------------------------
    def others(self, port: "HBFPort | None", now: float) -> list[tuple[float, float, np.ndarray]]:
        """The other ports' iterations in progress at `now`: (busy from, to, W) each."""
        found = []
        for other in self.ports:
            if other is not port and (segment := other.segment(now)) is not None:
                found.append(segment)
        return found

    def advance(self, now: float) -> None:
        """Run the package to `now` through the iterations in progress (none of the asking port's)."""
        package = self.package
        if now > package.clock:
            dt, power, _ = steps(package.clock, np.zeros(0), np.zeros(0), np.zeros((0, 3)),
                                 self.others(None, package.clock), now)
            package.run(dt, power)

    def cool(self, port: "HBFPort") -> float:
        """Severe and Shutdown serve nothing: a port with media reads waits while the package cools."""
        package, waited = self.package, 0.0
        while package.rate == 0.0:
            drawn = sum((o[2] for o in self.others(port, package.clock) if o[0] <= package.clock), np.zeros(3))
            package.step(COOL_STEP_S, drawn)
            waited += COOL_STEP_S
        return waited

    def settle(self, now: float, asking: "HBFPort | None" = None) -> None:
        """Keep the iterations of the block priced last that started before `now` (all of them for `now` =
        inf), and its first if another port asks at the instant it was priced (its server runs it, and
        iterations that start together are taken in the order they were priced): the frame cache and routing
        replayed up to them, the package run through them and the other ports' iterations in progress to `now`
        (to the end of everything for inf), their counts added."""
        block, self.pending = self.pending, None
        if block is None:
            return
        port, count = block.port, len(block.starts)
        # (never more than its server ran: it may have cut the block when a request arrived)
        done = min(int(np.searchsorted(block.starts, now, side="left")), len(port._ends()))
        if not done and count and asking is not port and block.starts[0] == now:
            done = 1
        tokens, touched, demand, kv_states = block.replay[:4]
        priced = len(tokens)        # the server may have cut the block since (`_reprice`)
        if touched is None and done:       # priced while resident: every access hits, drawn for what ran
            demand = self.demand(tokens[:done])
            block.counts[:done, ACCESS.index("accesses")] = block.counts[:done, ACCESS.index("hits")] = \
                np.count_nonzero(demand.reshape(done, -1), axis=1)
        elif touched is not None and done < priced:
            lru, router, previous, _ = block.before
            self.lru.restore(lru)
            if self.router is not None:
                self.router.restore(router)
            port.previous = demand[done - 1] if done else previous
            if done:
                self.lru.access_block(touched[:done])
                if self.router is not None:
                    self.router.touched_block(tokens[:done], slice(0, self.slots))
        if self.kv is not None:
            self.kv.restore(kv_states[done])
        last = port.end(done - 1) if done else 0.0
        if done < count:
            block.keep(done)
        ran = block.snapshot is not None
        if len(self.ports) > 1 or done < priced or not ran:     # alone and whole, it ran as priced
            if ran:                 # (otherwise the package is as it was before the block)
                self.package.restore(block.snapshot)
            if done:
                others = self.others(port, float(block.starts[0]))
                busy = block.busy
                if last != block.ends[-1]:             # re-priced by its server
                    busy = busy.copy()
                    busy[-1] = last - block.starts[-1] - block.waits[-1]
                dt, power, _ = steps(float(block.starts[0]), block.waits, busy, block.power, others, now)
                self.package.run(dt, power)
                if now == math.inf:     # the other ports' iterations still in progress, to their ends
                    self.advance(max([last, *(o[1] for o in others)]))
        if now == math.inf:
            self.package.flush()
        port.counts += block.counts.sum(axis=0)
        if done < count and port.server is not None:
            port.server.interrupt()      # its server must not run iterations the tier dropped

    # ----- one block's objects ----------------------------------------------------------------------------
    @property
    def resident(self) -> bool:
        """Whether every HBF-resident object sits in the frame cache for good (it holds them all and each has
        been read): then every access hits."""
        return not self.weights_in_hbf or (self.lru.capacity >= self.layers * self.slots and bool(self.lru.seen.all()))

    def demand(self, tokens: np.ndarray) -> np.ndarray:
        """Which HBF-resident objects each of consecutive batches of `tokens` needs (iterations x layers x
        slots): the experts its tokens are routed to, or every layer of a dense model."""
        shape = (len(tokens), self.layers, self.slots)
        if not self.weights_in_hbf:
            return np.zeros(shape, dtype=bool)
        return self.router.touched_block(tokens, slice(0, self.slots)) if self.router else np.ones(shape, dtype=bool)

    def objects(self, port: "HBFPort", tokens: np.ndarray) -> tuple:
        """What each iteration of a block does with the HBF-resident objects, all at once (routing and the
        frame cache do not depend on timing): the touched and demanded masks, then per iteration and layer the
        objects prefetched, fetched on demand and prefetched-and-used, and per iteration the objects fetched,
        demanded and hit."""
        count, moe = len(tokens), self.router is not None
        demand = self.demand(tokens)
        speculative = self.options.prefetch == "moe-speculative" and moe
        predicted = np.concatenate((port.previous[None], demand[:-1])) if speculative else None
        touched = demand | predicted if speculative else demand
        hits = self.lru.access_block(touched)
        any_hit = hits.any()
        miss = touched & ~hits if any_hit else touched
        if count:
            port.previous = demand[-1]

        def per_layer(mask):
            return np.count_nonzero(mask, axis=2)
        if speculative:
            ahead = miss & predicted
            n_ahead, n_demand = per_layer(ahead), per_layer(miss & demand & ~predicted)
            useful = per_layer(ahead & demand)
        else:       # next-layer prefetches every miss of a dense model (all used); otherwise each is waited for
            misses = per_layer(miss) if any_hit else self.lru.touched_per_layer      # no hit: every touch
            none = np.zeros_like(misses)
            n_ahead, n_demand = (misses, none) if self.options.prefetch == "next-layer" and not moe else (none, misses)
            useful = n_ahead
        # Every miss is either prefetched or fetched on demand.
        return touched, demand, (n_ahead, n_demand, useful, (n_ahead + n_demand).sum(axis=1),
                                 (per_layer(demand) if speculative else self.lru.touched_per_layer).sum(axis=1),
                                 per_layer(demand & hits).sum(axis=1) if any_hit else np.zeros(count, dtype=np.int64))

    def media_times(self, rate, ahead: np.ndarray | None, demand: np.ndarray, overlap: np.ndarray | None,
                    programmed: np.ndarray, unused: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """At service `rate` (one per iteration), per iteration: the stall (media time not hidden by compute)
        and the fraction of each layer's prefetch that arrived before the layer ran, from the bytes per layer
        prefetched (`ahead`; None: no prefetch) and waited for (`demand`), the compute each layer's prefetch
        overlaps, the KV bytes `programmed`. A layer's prefetch (next-layer) is issued as the previous layer
        starts computing and streams in after the media latency: the part read by the time the layer starts is
        in time, the rest is waited for (the layer waits for its last). With `unused` (moe-speculative), the
        prefetches stream from the iteration's start (`stream`; `overlap` is then each layer's compute)."""
        rate = np.asarray(rate, dtype=float)[:, None]
        if unused is not None:
            stall, arrived, _, _ = self.stream(rate[:, 0], ahead - unused, unused, demand, overlap)
            return self._programmed(stall, rate[:, 0], programmed), arrived
        latency = self.tier.latency_s
        stall = np.where(demand > 0, latency + demand / rate, 0.0).sum(axis=1)
        arrived = None
        if ahead is not None:
            ahead_s = np.where(ahead > 0, latency + ahead / rate, 0.0)
            read = np.maximum(overlap - latency, 0.0) * rate
            arrived = np.clip(np.divide(read, ahead, out=np.ones_like(ahead_s), where=ahead > 0), 0.0, 1.0)
            stall = np.maximum(ahead_s - overlap, 0.0).sum(axis=1) + stall
        return self._programmed(stall, rate[:, 0], programmed), arrived

    def _programmed(self, stall: np.ndarray, rate: np.ndarray, programmed: np.ndarray) -> np.ndarray:
        """Write-backs take channel time (bytes at the service rate, tPROG over the outstanding operations), not
        overlapped with the iteration's reads: an upper bound."""
        if not programmed.any():
            return stall
        return stall + programmed / rate + programmed / PAGE_BYTES * self.stack.program_s / (
            self.layout.hbf_stacks * self.stack.outstanding_reads)

    def stream(self, rate: np.ndarray, used: np.ndarray, unused: np.ndarray, demand: np.ndarray,
               compute: np.ndarray) -> tuple[np.ndarray, ...]:
        """Speculative prefetch through one iteration (per iteration at `rate`; bytes per layer prefetched and
        used, prefetched and not used, fetched on demand; each layer's compute): the stall, the fraction of each
        layer's prefetch read before the layer starts, and per layer its start and when the stream reached it.

        Every layer's prediction is known at the iteration's start: the media reads the prefetches in layer
        order from then on (after the latency), pausing only while a layer waits. When a layer starts, its
        router has picked its experts; the prefetched objects arrive in no particular order, so the fraction
        `arrived` of them read by then is in time (used and unused alike). The layer then waits for the rest of
        its used prefetch and for the experts it did not predict (their reads issued now: latency, then their
        bytes after the used ones); the rest of its unused prefetch is dropped, never read (a prediction the
        router has proved wrong: the reads already issued to the dies, at most the outstanding reads, are
        dropped with it), and the stream goes on with the next layer's."""
        latency = self.tier.latency_s
        count, layers = used.shape
        stall = np.zeros(count)
        arrived, starts, heads = np.empty((count, layers)), np.empty((count, layers)), np.empty((count, layers))
        # Plain floats, iteration by iteration and layer by layer: most blocks hold one iteration, where numpy's
        # per-call cost dominates.
        for i, (r, rows) in enumerate(zip(rate.tolist(), zip(*(a.tolist() for a in (used, unused, demand, compute))))):
            r = r if r > 0 else math.inf        # served at rate 0 (Severe, Shutdown): the wait was for cooling
            start, head = 0.0, latency
            for layer, (u, x, d, c) in enumerate(zip(*rows)):
                size = u + x
                read = min((start - head) * r, size) if start > head else 0.0
                done = read / size if size > 0 else 1.0
                rest = u * (1 - done)
                end = max(start, head) + rest / r if rest > 0 else start
                if d > 0:
                    end = max(end, start + latency) + d / r
                arrived[i, layer], starts[i, layer], heads[i, layer] = done, start, head
                stall[i] += end - start
                # The stream resumes after the layer's own reads: with the next layer's prefetch when it was cut,
                # or where it had got to (shifted by the pause) when it had read the whole prefetch.
                head = max(end, head) if read < size else head + size / r + (end - start)
                start = end + c
        return stall, arrived, starts, heads

    # ----- results ----------------------------------------------------------------------------------------
    def summary(self) -> dict:
        """Per-GPU package figures (traffic x tp for the instance); with several servers, theirs apart too."""
        tp, package = self.shard.tp, self.package
        package.flush()
        c = dict(zip(ACCESS, sum(port.counts for port in self.ports).tolist()))
        hbf_blocks = self.layers * self.slots * self.blocks_per_object
        kv = dict(self.kv.counts) if self.kv is not None else dict.fromkeys(KV_COUNTS, 0)
        refresh = package.counters
        # The KV region: the HBF beyond the weights, in erase blocks (writes spread evenly over it).
        kv_blocks = (self.layout.hbf_bytes - self.layout.hbf_weight_bytes(self.shard, self.weight_bytes)) / (
            self.stack.pages_per_block * PAGE_BYTES) if self.layout.kv == "hbf" else 0.0
        summary = {
            "gpus": tp,
            "frame_cache_objects": self.lru.capacity,
            "object_bytes": self.object_bytes,
            **self._traffic(c),
            "hbm_frame_fill_bytes": c["fill_bytes"] * tp,
            "hbf_refresh_read_bytes": refresh["refresh_read_bytes"] * tp,
            "hbf_programmed_bytes": (refresh["programmed_bytes"] + kv["programmed_pages"] * PAGE_BYTES) * tp,
            "refreshed_zones": refresh["refreshed_zones"] * tp,
            "pe_cycles_per_block": refresh["pe_block_cycles"] / hbf_blocks if self.layout.weights == "hbf" else 0.0,
            **{f"kv_{key}": float(value * tp) for key, value in kv.items()},
            "kv_pe_cycles_per_block": kv["programmed_pages"] / self.stack.pages_per_block / kv_blocks if kv_blocks
            else 0.0,
            "stall_s": c["stall_s"],
            "cooling_wait_s": c["cooling_wait_s"],
            "throttle_residency_s": dict(zip(STATES, package.residency)),
            "max_temperature_c": dict(zip(("gpu", "hbm", "hbf"),
                                          np.max([t[1:4] for t in package.trace], axis=0).tolist()))
            if package.trace else {},
        }
        if len(self.ports) > 1:
            summary["servers"] = {port.role: {**self._traffic(counts), "stall_s": counts["stall_s"]}
                                  for port in self.ports for counts in [dict(zip(ACCESS, port.counts.tolist()))]}
        return summary

    def _traffic(self, c: dict) -> dict:
        tp = self.shard.tp
        return {"accesses": c["accesses"] * tp, "frame_cache_hits": c["hits"] * tp,
                "served_without_media_read": (c["hits"] + c["prefetched_in_time"]) * tp,
                "media_page_reads": c["media_reads"] * tp, "media_page_reads_waited": c["media_reads_waited"] * tp,
                "hbf_media_read_bytes": c["media_bytes"] * tp,
                "hbf_wasted_prefetch_bytes": c["wasted_prefetch_bytes"] * tp}


class HBFPort:
    """One server's executor on an `HBFTier`: `cost` prices its iterations with the weights read through the
    tier, `base` (a GPU or PNM executor) giving their cost with the weights in HBM (hits and filled frames are)."""

    def __init__(self, tier: HBFTier, base, role: str, power: PortPower) -> None:
        self.tier, self.base, self.role, self.power = tier, base, role, power
        self.server = None          # set by the system: whose iterations these are (and whose KV, if any)
        self.previous = np.zeros((tier.layers, tier.slots), dtype=bool)   # the last iteration's demand
        self.block: PortBlock | None = None
        self.counts = np.zeros(len(ACCESS))         # ACCESS, over the iterations kept
        self._after_first = np.concatenate(([0.0], np.ones(tier.layers - 1)))

    # ----- where this port is on the timeline -------------------------------------------------------------
    def _ends(self) -> np.ndarray:
        """When the iterations of the port's block end, as its server runs them (it may have re-priced the one
        in progress, and cut the block short when a request arrived)."""
        return self.server.ends if self.server is not None else self.block.ends

    def end(self, index: int) -> float:
        return float(self._ends()[index])

    def current(self, now: float) -> int | None:
        """The iteration of the port's block in progress at `now`, if any."""
        if self.block is None or not len(self.block.starts):
            return None
        index = int(np.searchsorted(self.block.starts, now, side="right")) - 1
        ends = self._ends()
        return index if 0 <= index < len(ends) and ends[index] > now else None

    def segment(self, now: float) -> tuple[float, float, np.ndarray] | None:
        index = self.current(now)
        if index is None:
            return None
        block = self.block
        return float(block.starts[index] + block.waits[index]), self.end(index), block.power[index]

    def media_load(self, now: float) -> float:
        index = self.current(now)
        return 0.0 if index is None else float(self.block.media_load[index])

    # ----- the executor interface -------------------------------------------------------------------------
    def cost(self, work: Work, bandwidth_scale: float = 1.0, loads=None, share=None) -> Cost:
        if self.server is not None and self.server.busy:
            return self._reprice(work, bandwidth_scale, loads, share)
        tier, now = self.tier, self.tier.loop.now
        base = self.base.cost(work, bandwidth_scale, loads, share)
        count = np.size(base.seconds)
        compute, hbm = (np.broadcast_to(np.asarray(f, dtype=float), (count,)) for f in (base.seconds, base.hbm_bytes))
        tokens = np.broadcast_to(np.asarray(work.tokens), (count,)).astype(np.int64)
        again = tier.pending
        if again is not None and again.port is self and again.starts[0] == now and np.array_equal(again.replay[0],
                                                                                                   tokens):
            # The same block again at another HBM share (alone, then beside a co-runner): its accesses stand.
            tier.pending = None
            if again.snapshot is not None:
                tier.package.restore(again.snapshot)
            before, replay = again.before, again.replay
        else:
            tier.settle(now, self)
            tier.advance(now)
            kv = np.zeros((count, 2))
            if tier.kv is None and tier.resident:
                # Every access will hit whatever the routing: the block's timing does not depend on it, so its
                # accesses are drawn when it is settled, for the iterations that ran (nothing to roll back).
                before, replay = (), (tokens, None, None, None, None, kv)
            else:
                before = (tier.lru.state(), tier.router.state() if tier.router else None, self.previous,
                          tier.kv.snapshot() if tier.kv else None)
                touched, demand, objects = tier.objects(self, tokens)
                kv_states = [before[3]] if tier.kv else None
                if tier.kv is not None:
                    for i in range(count):
                        kv[i] = self._kv_iteration(i)
                        kv_states.append(tier.kv.snapshot())
                replay = (tokens, touched, demand, kv_states, objects, kv)
        block = self._price(now, compute, hbm, *replay[4:])
        block.before, block.replay = before, replay
        self.block = tier.pending = block
        seconds = block.waits + block.busy
        block.ends = now + np.cumsum(seconds)          # as the server counts them
        block.starts = np.concatenate(([now], block.ends[:-1]))
        self._cut_where_traffic_changes(block)
        if block.snapshot is None:  # nothing through the media: the base cost itself
            return base
        return self._cost(base, seconds, block.fill, count == 1 and not isinstance(base.seconds, np.ndarray))

    def _cost(self, base: Cost, seconds, fill, scalar: bool) -> Cost:
        """`base` taking `seconds`, with the frame fills' HBM traffic added."""
        tp, bandwidth = self.tier.shard.tp, self.base.hardware.gpu.memory.bandwidth
        hbm = base.hbm_bytes + fill * tp
        offered = base.offered * (base.seconds / seconds) + fill / (seconds * bandwidth)
        if scalar:
            return Cost(float(seconds[0]), float(base.flops), float(hbm[0]), float(base.link_bytes), float(offered[0]))
        count = len(seconds)
        return Cost(seconds, np.broadcast_to(np.asarray(base.flops, dtype=float), (count,)).copy(), hbm,
                    np.broadcast_to(np.asarray(base.link_bytes, dtype=float), (count,)).copy(), offered)

    def _reprice(self, work: Work, bandwidth_scale: float, loads, share) -> Cost:
        """A co-runner started or stopped during the iteration in progress: its compute at the new HBM share and
        its media stall at the new HBF share (its accesses stand). The server ends the block with it."""
        block, now = self.block, self.tier.loop.now
        index = int(np.searchsorted(block.starts, now, side="right")) - 1
        if index + 1 < len(block.starts):
            block.keep(index + 1)
        base = self.base.cost(work, bandwidth_scale, loads, share)
        if block.snapshot is None:  # nothing through the media: the base cost itself
            return base
        stall = float(block.stall[index])
        load = float(block.media_load[index])
        if load > 0:
            scale = self._media_share(np.array([load]), self._media_loads(now))[0]
            one = slice(index, index + 1)
            stall = float(self.tier.media_times(block.rate[one] * scale, *(None if a is None else a[one] for a in (
                block.ahead, block.demand, block.overlap)), block.programmed[one],
                None if block.unused is None else block.unused[one])[0][0])
        seconds = np.array([base.seconds + stall + float(block.waits[index])])
        return self._cost(base, seconds, block.fill[index:index + 1], True)

    def _cut_where_traffic_changes(self, block: PortBlock) -> None:
        """The other servers' iterations in progress are re-priced, for their HBM and HBF shares, against this
        block's first iteration (their servers do it when this one starts). A later iteration whose media
        traffic differs (other bytes through the media and HBM frames, or another load on the media) would
        change those shares: the block ends before it, so that they are re-priced there, as with one iteration
        per block. (Without media traffic a block's iterations differ as without HBF, and the servers' own
        block rule holds.)"""
        if len(block.starts) < 2 or self.server is None or not any(
                port.server is not None and port.server.busy for port in self.tier.ports if port is not self):
            return
        moved = block.fill + block.programmed
        changes = (moved[1:] != moved[0]) | (block.media_load[1:] != block.media_load[0])
        if changes.any():
            self.tier.loop.at(float(block.starts[1 + int(np.argmax(changes))]), lambda: self._cut(block))

    def _cut(self, block: PortBlock) -> None:
        if self.block is block and self.server.busy:
            self.server.interrupt()

    def _media_loads(self, now: float) -> dict[str, float]:
        """The other ports' media loads now (those reading the media)."""
        loads = {port.role: port.media_load(now) for port in self.tier.ports if port is not self}
        return {role: value for role, value in loads.items() if value > 0}

    def _media_share(self, load: np.ndarray, others: dict[str, float]) -> np.ndarray:
        """The fraction of its media `load` each iteration obtains against the other ports' loads."""
        if not others or not load.any():
            return np.ones(len(load))
        granted = self.tier.tier.sharing.grant({**others, self.role: load})[self.role]
        positive = load > 0
        return np.clip(np.where(positive, granted / np.where(positive, load, 1.0), 1.0), MIN_SHARE, 1.0)

    def _price(self, now: float, compute: np.ndarray, hbm: np.ndarray, objects: tuple, kv: np.ndarray) -> PortBlock:
        """A block of iterations whose compute alone (weights at HBM speed) takes `compute`, HBM bytes `hbm`:
        its waits, stalls and power, the package run through it (speculatively: `settle` keeps what ran).
        `objects`: per iteration and layer the objects prefetched, fetched on demand, prefetched and used, and
        per iteration the objects fetched, demanded and hit; `kv`: per iteration the KV bytes read from the
        media and programmed. Media times are computed for the rest of the block at once, and again only when
        the package's service rate changes (throttle state, refresh)."""
        tier, package = self.tier, self.tier.package
        count, layers = len(compute), tier.layers
        kv_read, kv_programmed = kv[:, 0], kv[:, 1]
        fetched = objects[3] if objects is not None else 0
        fill = fetched * tier.object_bytes + kv_read
        moved = fill + kv_programmed
        energy = np.outer(compute, self.power.compute_w)
        energy[:, 1] += hbm * (self.power.hbm_energy_per_byte / tier.shard.tp)
        waits, power = np.zeros(count), np.zeros((count, 3))
        if not moved.any():
            # Every access hits: nothing waits for the media, and the package is first run when the block is
            # settled (`HBFTier.settle`). Objects not given: resident, counted when settled.
            np.divide(energy, compute[:, None], out=power, where=compute[:, None] > 0)
            counts = np.zeros((count, len(ACCESS)))
            if objects is not None:
                counts[:, 0], counts[:, 1] = objects[4], objects[5]
            return PortBlock(self, waits, waits, waits, compute, waits, power, counts, fill, kv_programmed, waits,
                         waits, None, np.broadcast_to(0.0, (count, layers)), None, None)
        n_ahead, n_demand, useful, fetched, accesses, hits = objects
        snapshot = package.snapshot()
        energy[:, 2] += fill * tier.tier.energy_per_byte + kv_programmed * tier.stack.program_energy_per_byte
        busy, stall, rate = np.empty(count), np.empty(count), np.empty(count)
        # A layer's KV blocks are known before it runs: prefetched like dense weights when prefetch is on.
        kv_ahead = tier.options.prefetch != "none"
        kv_layer = (kv_read / layers)[:, None]
        demand = n_demand * tier.object_bytes + (0.0 if kv_ahead else kv_layer)
        ahead = overlap = arrived = unused = None
        if kv_ahead and (n_ahead.any() or kv_read.any()):     # (only a prefetch reads objects ahead)
            ahead = n_ahead * tier.object_bytes + kv_layer
            if tier.options.prefetch == "moe-speculative" and tier.router is not None:
                # The prefetches stream from the iteration's start (`HBFTier.stream`): each layer's compute.
                unused = (n_ahead - useful) * tier.object_bytes
                overlap = np.broadcast_to((compute / layers)[:, None], (count, layers))
            else:
                # Layer l's prefetch is issued as layer l-1 starts computing (layer 0's at the start).
                overlap = self._after_first * (compute / layers)[:, None]
            arrived = np.empty((count, layers))
        # What each iteration asks of the tier's bandwidth alone (what the other ports' iterations see), and the
        # share it obtains against theirs in progress now.
        load, share = np.zeros(count), np.ones(count)
        if len(tier.ports) > 1:
            stall_alone, arrived_alone = tier.media_times(np.full(count, tier.tier.bandwidth), ahead, demand, overlap,
                                                          kv_programmed, unused)
            alone = compute + stall_alone
            read = moved if unused is None else moved - (
                (n_ahead - useful) * (1 - arrived_alone)).sum(axis=1) * tier.object_bytes
            np.divide(read, alone * tier.tier.bandwidth, out=load, where=alone > 0)
            share = self._media_share(load, self._media_loads(now))
        others = tier.others(self, now)
        reads = np.flatnonzero(moved)
        # moe-speculative: the objects of each iteration's unused prefetch dropped unread (`HBFTier.stream`),
        # which the media neither reads nor spends energy on.
        dropped, hbf_energy = np.zeros(count), energy[:, 2].copy()
        i, used = 0, None
        while i < count:
            waits[i] = tier.cool(self) if moved[i] else 0.0
            rate[i:] = package.rate
            if rate[i] != used:
                used, first = rate[i], i
                timing = tier.media_times((rate[i] or math.inf) * share[i:], *(
                    None if a is None else a[i:] for a in (ahead, demand, overlap)), kv_programmed[i:],
                    None if unused is None else unused[i:])
            stall[i:] = timing[0][i - first:]
            if arrived is not None:
                arrived[i:] = timing[1][i - first:]
            if unused is not None:
                dropped[i:] = ((n_ahead[i:] - useful[i:]) * (1 - arrived[i:])).sum(axis=1)
                energy[i:, 2] = hbf_energy[i:] - dropped[i:] * tier.object_bytes * tier.tier.energy_per_byte
            busy[i:] = compute[i:] + stall[i:]
            np.divide(energy[i:], busy[i:, None], out=power[i:], where=busy[i:, None] > 0)
            # Served at rate 0 (Severe or Shutdown: iteration i reads nothing), the package runs only up to the
            # next iteration that reads, which waits for it to cool.
            end = count
            if not rate[i] and (later := int(np.searchsorted(reads, i))) < len(reads):
                end = int(reads[later])
            dt, drawn, _ = steps(package.clock, np.zeros(end - i), busy[i:end], power[i:end], others)
            i += package.run(dt, drawn, stop=True)      # (one step per iteration: the waits are behind)
        waited = n_demand.sum(axis=1)
        in_time = wasted = np.zeros(count)
        if arrived is not None:     # (the prefetched objects arrive in no particular order: the used ones alike)
            # An access waits for the late part of its own prefetch; a late prefetch no access uses is wasted,
            # not waited for.
            in_time = (useful * arrived).sum(axis=1)
            waited = waited + (useful * (1 - arrived)).sum(axis=1)
            wasted = n_ahead.sum(axis=1) - useful.sum(axis=1) - dropped
            fetched, fill = fetched - dropped, fill - dropped * tier.object_bytes
        counts = np.stack((accesses, hits, in_time, fetched * tier.object_pages, waited * tier.object_pages,
                           fetched * tier.object_bytes, wasted * tier.object_bytes, fill, waits, stall), axis=1)
        block = PortBlock(self, np.zeros(count), np.zeros(count), waits, busy, stall, power, counts.astype(float), fill,
                      kv_programmed, load, rate, ahead, demand, overlap, unused, snapshot=snapshot)
        if TRACE is not None and ahead is not None:
            TRACE.append((compute, objects, block))
        return block

    def _kv_iteration(self, iteration: int) -> tuple[float, float]:
        """Iteration `iteration` of the block being priced through the KV frames: bytes read from the media
        and bytes programmed (write-backs), both whole pages."""
        kv = self.tier.kv
        counts = kv.counts
        read, programmed = counts["media_read_pages"], counts["programmed_pages"]
        # The KV kept is every server's on the package: one's iteration never drops what the other holds.
        live = set().union(*(port.server.kv_live() for port in self.tier.ports if port.server is not None))
        kv.iteration(self.server.kv_sequences(iteration), live)
        return ((counts["media_read_pages"] - read) * PAGE_BYTES,
                (counts["programmed_pages"] - programmed) * PAGE_BYTES)
