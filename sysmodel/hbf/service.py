"""The stateful HBF service behind a GPU executor: each iteration's weight reads go through the frame cache;
misses are read from the media (tR, then the bytes at the service rate), hidden or not by prefetch; the
package heats and throttles; retention deadlines cause refresh traffic that competes with foreground reads.

Service rate = stacks x min(grade bandwidth, outstanding reads x page / tR) x throttle factor x (1 - the
share refresh took in the previous iteration). Decode is layer-ordered: with `next-layer` prefetch, layer
l+1's misses are fetched while layer l computes (a dense model's weights are known ahead; an MoE model's
experts are not: its router runs first); with `moe-speculative`, each layer prefetches the experts it used
in the previous iteration (recent routing, HBFSim's D6) and waits only for the ones it did not predict.

The servers price a block of iterations at once and may cut it short. Routing and the frame caches do not
depend on timing: they are computed for the whole block at once (numpy) and, when the block is cut, replayed
up to the iterations that really ran; the package state (temperatures, throttle, retention, counters) is kept
after each priced iteration and rolled back to the last one that ran when the service is next asked (or at
the end).
"""
import math
from dataclasses import dataclass

import numpy as np

from ..engine import EventLoop
from ..errors import require
from ..execution import Cost, GPUExecution
from ..operators import Work
from .cache import LayerLRU
from .kv import COUNTS as KV_COUNTS, KVFrames, kv_block_bytes
from .layout import GIB, Layout, objects
from .media import PAGE_BYTES, HBFStack, page_reads
from .retention import Retention
from .routing import Router, RoutingModel, TraceRouter, load_trace
from .thermal import PACKAGE, STATES, PackageRC, Thermal, Throttle, ThrottlePolicy

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


COUNTERS = ("accesses", "hits", "prefetched_in_time", "media_reads", "media_reads_waited", "media_bytes",
            "wasted_prefetch_bytes", "fill_bytes", "refresh_read_bytes", "programmed_bytes", "pe_block_cycles",
            "refreshed_zones", "cooling_wait_s", "stall_s")


class HBFService:
    """One GPU instance's HBF tiers (its `tp` GPUs are alike: one package is modelled, traffic x tp)."""

    def __init__(self, loop: EventLoop, base: GPUExecution, layout: Layout, options: HBFOptions,
                 prefix_tokens: int = 0, rc: PackageRC = PACKAGE) -> None:
        self.loop, self.base, self.layout, self.options = loop, base, layout, options
        self.weights_in_hbf = layout.weights == "hbf"
        self.server = None          # the server whose sequences' KV goes through `kv` (set by the system)
        self.stack = options.stack()
        # Reads see the stacks through the memory-tier interface: tR as latency, bandwidth, energy per byte.
        self.tier = self.stack.tier().scaled(layout.hbf_stacks)
        shard = base.shard
        self.layers, self.slots, self.object_bytes = objects(shard)
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
        self.thermal = Thermal(rc, options.ambient_c)
        self.throttle = Throttle()
        # KV blocks and the shared prefix through their own frame region (sysmodel/hbf/kv.py).
        self.kv = KVFrames(self.layers, shard.kv_bytes_per_token / self.layers,
                           int(layout.kv_frame_cache_gib * GIB // kv_block_bytes(shard)), prefix_tokens,
                           layout.kv == "hbf", layout.prefix == "hbf") \
            if layout.kv == "hbf" or (layout.prefix == "hbf" and prefix_tokens) else None
        zones = self.layers * self.slots if self.weights_in_hbf else 0     # retention of weights (KV is short-lived)
        # Zones were written at evenly spread times (a device in steady use), so deadlines arrive evenly.
        self.retention = Retention(zones, (np.arange(zones) + 0.5) / zones)
        self.blocks_per_object = -(-self.object_pages // self.stack.pages_per_block)
        self.counters = dict.fromkeys(COUNTERS, 0.0)
        self.residency = [0.0] * len(STATES)
        self.trace: list[tuple[float, float, float, float, int]] = []
        self.previous = np.zeros((self.layers, self.slots), dtype=bool)
        self.refresh_share = 0.0
        self.refresh_heat_j = 0.0
        self.clock = 0.0
        self._after_first = np.concatenate(([0.0], np.ones(self.layers - 1)))
        self._pending: tuple[list, np.ndarray] | None = None

    # ----- the executor interface -------------------------------------------------------------------------
    def cost(self, work: Work, bandwidth_scale: float = 1.0, loads=None) -> Cost:
        self.settle(self.loop.now)
        if self.loop.now > self.clock:
            self._advance(self.loop.now - self.clock, np.zeros(3))
        base = self.base.cost(work, bandwidth_scale, loads)
        count = np.size(base.seconds)
        fields = [np.broadcast_to(np.asarray(f, dtype=float), (count,)) for f in base]
        tokens = np.broadcast_to(np.asarray(work.tokens), (count,)).astype(np.int64)
        start = (self.lru.state(), self.router.state() if self.router else None, self.previous)
        touched, demand, objects = self._objects(tokens)
        kv_states = [self.kv.snapshot()] if self.kv else None
        kv = np.zeros((count, 2))
        if self.kv is not None:
            for i in range(count):
                kv[i] = self._kv_iteration(i)
                kv_states.append(self.kv.snapshot())
        seconds, fill, states = self._iterations(fields[0], fields[2], objects, kv)
        self._pending = (states, self.loop.now + np.cumsum(seconds), start, tokens, (touched, demand), kv_states)
        tp = self.base.shard.tp
        hbm = fields[2] + fill * tp
        offered = hbm / tp / (seconds * self.base.hardware.gpu.memory.bandwidth)
        if count == 1 and not isinstance(base.seconds, np.ndarray):
            return Cost(float(seconds[0]), float(fields[1][0]), float(hbm[0]), float(fields[3][0]), float(offered[0]))
        return Cost(seconds, fields[1].copy(), hbm, fields[3].copy(), offered)

    def settle(self, now: float) -> None:
        """Keep the state of the iterations of the last priced block that ended by `now`: the per-iteration
        state as it was after them, the frame cache and the routing replayed up to them."""
        if self._pending is None:
            return
        states, ends, (lru, router, previous), tokens, (touched, demand), kv_states = self._pending
        done = int(np.searchsorted(ends, now * (1 + 1e-12) + 1e-15, side="right"))
        self._restore(states[done])
        if self.kv is not None:
            self.kv.restore(kv_states[done])
        if done < len(ends):
            self.lru.restore(lru)
            self.lru.access_block(touched[:done])
            if self.router is not None:
                self.router.restore(router)
                self.router.touched_block(tokens[:done], slice(0, self.slots))
            self.previous = demand[done - 1] if done else previous
        self._pending = None

    # ----- one block of iterations ------------------------------------------------------------------------
    def _objects(self, tokens: np.ndarray) -> tuple:
        """What each iteration of a block does with the HBF-resident objects, all at once (routing and the
        frame cache do not depend on timing): the touched and demanded masks, then per iteration and layer the
        objects prefetched, fetched on demand and prefetched-and-used, and per iteration the objects fetched,
        demanded and hit."""
        count, shape = len(tokens), (len(tokens), self.layers, self.slots)
        moe = self.router is not None
        demand = (np.zeros(shape, dtype=bool) if not self.weights_in_hbf
                  else self.router.touched_block(tokens, slice(0, self.slots)) if moe
                  else np.ones(shape, dtype=bool))
        speculative = self.options.prefetch == "moe-speculative" and moe
        predicted = np.concatenate((self.previous[None], demand[:-1])) if speculative else None
        touched = demand | predicted if speculative else demand
        hits = self.lru.access_block(touched)
        any_hit = hits.any()
        miss = touched & ~hits if any_hit else touched
        if count:
            self.previous = demand[-1]

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

    def _iterations(self, compute_s: np.ndarray, hbm_bytes: np.ndarray, objects: tuple,
                    kv: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
        """Seconds of each iteration of a block whose compute alone (weights at HBM speed) takes `compute_s`,
        the bytes written into the frame caches, and the state before each iteration (and after the last).
        `objects`: per iteration and layer the objects prefetched, fetched on demand, prefetched and used, and
        per iteration the objects fetched, demanded and hit; `kv`: per iteration the KV bytes read from the
        media and programmed. The media times are computed for the rest of the block at once and again
        only when the service rate changes (throttle state, refresh); the package then advances iteration by
        iteration."""
        n_ahead, n_demand, useful, fetched, accesses, hits = objects
        count, o, c = len(compute_s), self.options, self.counters
        kv_read, kv_programmed = kv[:, 0], kv[:, 1]
        # A layer's KV blocks are known before it runs: prefetched like dense weights when prefetch is on.
        kv_ahead = o.prefetch != "none"
        kv_layer = (kv_read / self.layers)[:, None]
        ahead_bytes = n_ahead * self.object_bytes + (kv_layer if kv_ahead else 0.0)
        demand_bytes = n_demand * self.object_bytes + (0.0 if kv_ahead else kv_layer)
        # Layer l's prefetch is issued as layer l-1 starts computing (layer 0's at the start of the iteration).
        overlap = self._after_first * (compute_s / self.layers)[:, None]
        fetched_bytes = fetched * self.object_bytes + kv_read
        reads = (fetched_bytes + kv_programmed).tolist()
        compute, hbm, fill = compute_s.tolist(), hbm_bytes.tolist(), fetched_bytes.tolist()
        fetched, accesses, hits = fetched.tolist(), accesses.tolist(), hits.tolist()
        kv_read, kv_programmed = kv_read.tolist(), kv_programmed.tolist()
        gpu_w, hbm_energy = self.base.hardware.gpu.power_w, self.base.hardware.gpu.stack.energy_per_byte / \
            self.base.shard.tp
        seconds, states, rate_used, first = np.empty(count), [], None, 0
        for i in range(count):
            states.append(self._state())
            wait_s = self._wait_for_service() if reads[i] else 0.0
            rate = self._rate() or math.inf        # zero only when nothing is read: no media time then
            if rate != rate_used:
                rate_used, first = rate, i
                timing = self._media_times(rate, ahead_bytes[i:], demand_bytes[i:], overlap[i:], n_ahead[i:],
                                           n_demand[i:], useful[i:], np.asarray(kv_programmed[i:]))
            stall, in_time, waited, wasted = (t[i - first] for t in timing)
            seconds[i] = total = compute[i] + stall + wait_s
            c["accesses"] += accesses[i]
            c["hits"] += hits[i]
            c["prefetched_in_time"] += in_time
            c["media_reads"] += fetched[i] * self.object_pages
            c["media_reads_waited"] += waited * self.object_pages
            c["media_bytes"] += fetched[i] * self.object_bytes
            c["wasted_prefetch_bytes"] += wasted * self.object_bytes
            c["fill_bytes"] += fill[i]
            c["stall_s"] += stall
            hbf_w = (fill[i] * self.tier.energy_per_byte + kv_programmed[i] * self.stack.program_energy_per_byte)
            self._advance(total - wait_s, (gpu_w * compute[i] / total, hbm[i] * hbm_energy / total, hbf_w / total))
        states.append(self._state())
        return seconds, np.asarray(fill), states

    def _media_times(self, rate: float, ahead_bytes, demand_bytes, overlap, n_ahead, n_demand, useful,
                     programmed) -> tuple:
        """At service `rate`, per iteration: the stall (media time not hidden by compute), the prefetched
        objects used in time, the objects waited for, the prefetched objects not used (lists)."""
        ahead_s = np.where(ahead_bytes > 0, self.tier.latency_s + ahead_bytes / rate, 0.0)
        demand_s = np.where(demand_bytes > 0, self.tier.latency_s + demand_bytes / rate, 0.0)
        late = ahead_s > overlap
        # Write-backs take channel time (bytes at the service rate, tPROG over the outstanding operations),
        # not overlapped with the iteration's reads: an upper bound.
        program_s = programmed / rate + programmed / PAGE_BYTES * self.stack.program_s / (
            self.layout.hbf_stacks * self.stack.outstanding_reads)
        stall = np.maximum(ahead_s - overlap, 0.0).sum(axis=1) + demand_s.sum(axis=1) + program_s
        return (stall.tolist(), (useful * ~late).sum(axis=1).tolist(),
                (n_demand.sum(axis=1) + (n_ahead * late).sum(axis=1)).tolist(),
                (n_ahead.sum(axis=1) - useful.sum(axis=1)).tolist())

    def _kv_iteration(self, iteration: int) -> tuple[float, float]:
        """Iteration `iteration` of the block being priced through the KV frames: bytes read from the media
        and bytes programmed (write-backs), both whole pages."""
        if self.kv is None:
            return 0.0, 0.0
        s = self.server
        sequences = [(r.id, r.prefilled, tokens) for r, tokens in s.chunks]
        if s.running and s._decoding:
            sequences += [(r.id, r.context + iteration, 1) for r in s.running]
        counts = self.kv.counts
        read, programmed = counts["media_read_pages"], counts["programmed_pages"]
        self.kv.iteration(sequences, {r.id for r in s.running} | {r.id for r in s.prefilling})
        return ((counts["media_read_pages"] - read) * PAGE_BYTES,
                (counts["programmed_pages"] - programmed) * PAGE_BYTES)

    def _rate(self) -> float:
        return (self.tier.bandwidth * self.throttle.service
                * (1.0 - self.refresh_share))

    def _wait_for_service(self) -> float:
        """Severe and Shutdown serve nothing: the reads wait, the package idles and cools."""
        waited = 0.0
        while self.throttle.service == 0.0:
            self._advance(COOL_STEP_S, np.zeros(3))
            waited += COOL_STEP_S
        self.counters["cooling_wait_s"] += waited
        return waited

    def _advance(self, dt: float, power) -> None:
        """Hold `power` (W: GPU, HBM, HBF) for dt: heat, throttle, age, refresh. The previous step's refresh
        (read + program energy) heats the HBF dies during this one."""
        if self.refresh_heat_j and dt > 0:
            power = (power[0], power[1], power[2] + self.refresh_heat_j / dt)
            self.refresh_heat_j = 0.0
        state = self.throttle.state
        temps = self.thermal.step(dt, power)
        self.residency[state] += dt
        self.throttle.update(float(temps[2]))
        self.clock += dt
        refreshed = self.retention.advance(dt, float(temps[2]))
        if refreshed:
            nbytes = refreshed * self.object_bytes
            self.counters["refresh_read_bytes"] += nbytes
            self.counters["programmed_bytes"] += nbytes
            self.counters["pe_block_cycles"] += refreshed * self.blocks_per_object
            self.counters["refreshed_zones"] += refreshed
            pages = refreshed * self.object_pages
            busy = (nbytes / self.tier.bandwidth
                    + pages * self.stack.program_s / (self.layout.hbf_stacks * self.stack.outstanding_reads))
            self.refresh_share = min(0.99, busy / dt) if dt > 0 else 0.0
            self.refresh_heat_j = nbytes * (self.tier.energy_per_byte + self.stack.program_energy_per_byte)
        else:
            self.refresh_share = 0.0
        self.trace.append((self.clock, *map(float, temps), self.throttle.state))

    # ----- snapshots --------------------------------------------------------------------------------------
    def _state(self) -> tuple:
        """What one iteration changes besides the frame cache and routing (those are replayed on a rollback)."""
        return (self.thermal.temps.copy(), self.throttle.state, self.retention.aging,
                self.retention.refreshed, dict(self.counters), list(self.residency), len(self.trace),
                self.refresh_share, self.refresh_heat_j, self.clock)

    def _restore(self, state: tuple) -> None:
        (temps, throttle, aging, refreshed, counters, residency, trace, refresh_share, refresh_heat, clock) = state
        self.thermal.temps, self.throttle.state = temps, throttle
        self.retention.restore(aging, refreshed)
        self.counters, self.residency = counters, residency
        self.refresh_share, self.refresh_heat_j, self.clock = refresh_share, refresh_heat, clock
        del self.trace[trace:]

    # ----- results ----------------------------------------------------------------------------------------
    def summary(self) -> dict:
        """Per-GPU package figures (traffic x tp for the instance)."""
        c, tp = self.counters, self.base.shard.tp
        hbf_blocks = self.layers * self.slots * self.blocks_per_object
        kv = self.kv.counts if self.kv else dict.fromkeys(KV_COUNTS, 0)
        # The KV region: the HBF beyond the weights, in erase blocks (writes spread evenly over it).
        kv_blocks = (self.layout.hbf_bytes - self.layout.hbf_weight_bytes(self.base.shard)) / (
            self.stack.pages_per_block * PAGE_BYTES) if self.layout.kv == "hbf" else 0.0
        return {
            "gpus": tp,
            "frame_cache_objects": self.lru.capacity,
            "object_bytes": self.object_bytes,
            "accesses": c["accesses"] * tp,
            "frame_cache_hits": c["hits"] * tp,
            "served_without_media_read": (c["hits"] + c["prefetched_in_time"]) * tp,
            "media_page_reads": c["media_reads"] * tp,
            "media_page_reads_waited": c["media_reads_waited"] * tp,
            "hbf_media_read_bytes": c["media_bytes"] * tp,
            "hbf_wasted_prefetch_bytes": c["wasted_prefetch_bytes"] * tp,
            "hbm_frame_fill_bytes": c["fill_bytes"] * tp,
            "hbf_refresh_read_bytes": c["refresh_read_bytes"] * tp,
            "hbf_programmed_bytes": (c["programmed_bytes"] + kv["programmed_pages"] * PAGE_BYTES) * tp,
            "refreshed_zones": c["refreshed_zones"] * tp,
            "pe_cycles_per_block": c["pe_block_cycles"] / hbf_blocks if self.layout.weights == "hbf" else 0.0,
            **{f"kv_{key}": float(value * tp) for key, value in kv.items()},
            "kv_pe_cycles_per_block": kv["programmed_pages"] / self.stack.pages_per_block / kv_blocks if kv_blocks
            else 0.0,
            "stall_s": c["stall_s"],
            "cooling_wait_s": c["cooling_wait_s"],
            "throttle_residency_s": dict(zip(STATES, self.residency)),
            "max_temperature_c": dict(zip(("gpu", "hbm", "hbf"),
                                          np.max([t[1:4] for t in self.trace], axis=0).tolist()))
            if self.trace else {},
        }
