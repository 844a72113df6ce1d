"""The HBM frame cache: a bounded HBM region holding HBF data, least recently used out first.

`FrameCache` is the reference: page by page, writes allocate and mark a frame dirty, a dirty frame is
written back to HBF when evicted. `LayerLRU` is the same LRU over equal-size objects that are touched layer
by layer (weights and experts during decode), computed for a whole iteration at once with numpy so that a
1,000-request run stays fast; the tests check it against `FrameCache` access for access.
"""
from collections import OrderedDict

import numpy as np

from ..errors import require


class FrameCache:
    """LRU over `capacity` frames with write-back; counts hits, misses and written-back frames."""

    def __init__(self, capacity: int) -> None:
        require(capacity >= 0, f"frame cache capacity must be >= 0 frames, got {capacity}")
        self.capacity = capacity
        self.frames: OrderedDict[int, bool] = OrderedDict()     # frame -> dirty, least recent first
        self.hits = self.misses = 0
        self.written_back: list[int] = []

    def contains(self, frame: int) -> bool:
        return frame in self.frames

    def read(self, frame: int) -> bool:
        return self._touch(frame, dirty=False)

    def write(self, frame: int) -> bool:
        return self._touch(frame, dirty=True)

    def _touch(self, frame: int, dirty: bool) -> bool:
        hit = frame in self.frames
        self.hits += hit
        self.misses += not hit
        if self.capacity == 0:
            if dirty:
                self.written_back.append(frame)     # write-through when there is no cache
            return hit
        self.frames[frame] = self.frames.pop(frame, False) or dirty
        while len(self.frames) > self.capacity:
            victim, was_dirty = self.frames.popitem(last=False)
            if was_dirty:
                self.written_back.append(victim)
        return hit


class LayerLRU:
    """LRU over `layers` x `slots` equal-size objects holding at most `capacity` of them. Each iteration
    touches some objects of every layer in layer order; the objects of one layer are looked up together and
    then touched in slot order (as `FrameCache` would: check the layer, then read its frames).

    An object hits when fewer than `capacity` other objects were touched since its last use (its stack
    distance): those touched earlier this iteration, plus those touched between its last use and this
    iteration, counted once."""

    def __init__(self, layers: int, slots: int, capacity: int) -> None:
        require(capacity >= 0, f"frame cache capacity must be >= 0 objects, got {capacity}")
        self.layers, self.slots, self.capacity = layers, slots, capacity
        self._last = np.full(layers * slots, -1)                  # sequence number of the last touch
        self._unapplied: tuple = ()      # (first iteration, iterations x objects touched) not yet in _last
        self.iteration = 0
        self.previous = np.zeros(layers * slots, dtype=bool)      # what the last iteration touched
        self.previous_layers = np.zeros(layers, dtype=np.int64)   # ... how many objects of each layer
        self.previous_count = 0
        self.seen = np.zeros(layers * slots, dtype=bool)          # touched at least once
        self.touched_per_layer = np.zeros((0, layers), dtype=np.int64)

        self._order: np.ndarray | None = np.arange(layers * slots)

    @property
    def last(self) -> np.ndarray:
        """Each object's last touch, (iteration, layer, slot) as one increasing number; -1: never."""
        self._fold()
        return self._last

    def _fold(self) -> None:
        if self._unapplied:
            first = self._unapplied[0][0]
            flat = np.concatenate([touched for _, touched in self._unapplied])
            latest = len(flat) - 1 - np.argmax(flat[::-1], axis=0)
            size = self._last.size
            self._last = np.where(flat.any(axis=0), (first + latest) * size + np.arange(size), self._last)
            self._unapplied = ()

    @property
    def order(self) -> np.ndarray:
        """Objects, least recently touched first (never-touched ones first, in index order): kept by `access`,
        rebuilt from `last` after a block."""
        if self._order is None:
            self._order = np.argsort(self.last, kind="stable")
        return self._order

    def state(self) -> tuple:
        return (self._last, self._unapplied, self.iteration, self.previous, self.previous_layers,  # never modified
                self.previous_count, self.seen)

    def restore(self, state: tuple) -> None:
        (self._last, self._unapplied, self.iteration, self.previous, self.previous_layers,
         self.previous_count, self.seen) = state
        self._order = None

    def access_block(self, masks: np.ndarray) -> np.ndarray:
        """Touch the objects of several consecutive iterations (iterations x layers x slots); returns which
        hit. Two cases are computed for the whole block at once: a cache that holds every object (nothing is
        evicted: an object hits when it was touched before), and a block whose every iteration follows one that
        touched at least `capacity` objects (`_after_full`). Otherwise iteration by iteration."""
        count = len(masks)
        per_layer = np.count_nonzero(masks, axis=2)
        self.touched_per_layer = per_layer        # (iterations x layers) for the caller's counts
        if count == 0:
            return masks.copy()
        flat = masks.reshape(count, -1)
        touched = per_layer.sum(axis=1)
        before = np.concatenate(([self.previous_count], touched[:-1]))
        if self.capacity >= flat.shape[1]:
            earlier = np.concatenate((self.seen[None], np.logical_or.accumulate(flat[:-1], axis=0) | self.seen))
            hits = (flat & earlier).reshape(masks.shape)
        elif (before >= self.capacity).all():
            hits = self._after_full(masks, flat, per_layer, before)
        else:
            return np.stack([self.access(mask) for mask in masks])
        # The last touches are folded in when asked for (a run of such blocks never needs them).
        self._unapplied = (*self._unapplied, (self.iteration, flat))
        if len(self._unapplied) >= 64:
            self._fold()
        self.iteration += count
        self.previous, self.previous_layers, self.previous_count = flat[-1], per_layer[-1], int(touched[-1])
        self.seen = self.seen | flat.any(axis=0)
        self._order = None
        return hits

    def _after_full(self, masks: np.ndarray, flat: np.ndarray, per_layer: np.ndarray, before: np.ndarray) -> np.ndarray:
        """Every iteration follows one that touched at least `capacity` objects: only objects the previous
        iteration touched can hit (anything older has all of that iteration's objects above it), and their
        stack distance is what the previous iteration touched after them plus what this one touched in
        earlier layers."""
        earlier = np.cumsum(per_layer, axis=1) - per_layer                 # touched in earlier layers of this one
        previous_layers = np.concatenate((self.previous_layers[None], per_layer[:-1]))
        # At least what the previous iteration touched in later layers is above any object of a layer: when
        # that plus this iteration's earlier layers reaches the capacity everywhere, nothing hits.
        later_layers = before[:, None] - np.cumsum(previous_layers, axis=1)
        if (later_layers + earlier >= self.capacity).all():
            return np.zeros_like(masks)
        previous = np.concatenate((self.previous[None], flat[:-1]))
        after = before[:, None] - np.cumsum(previous, axis=1, dtype=np.int32)   # touched later in the previous
        hits = masks & previous.reshape(masks.shape)
        hits &= after.reshape(masks.shape) + earlier[:, :, None].astype(np.int32) < self.capacity
        return hits

    def access(self, mask: np.ndarray) -> np.ndarray:
        """Touch the objects in `mask` (layers x slots); returns which of them hit."""
        flat = np.flatnonzero(mask.ravel())
        layer = flat // self.slots
        old = self.last[flat]
        seen = old >= 0
        # An object's place from the top of the recency order counts the objects touched since (never-touched
        # objects sit at the bottom and are never asked about).
        rank = np.empty_like(self.order)
        rank[self.order] = np.arange(self.last.size)
        newer = self.last.size - 1 - rank[flat]
        earlier = np.searchsorted(layer, layer, side="left")          # touched in earlier layers this iteration
        candidates = np.flatnonzero(seen & (newer < self.capacity))
        overlap = np.zeros_like(flat)
        if candidates.size:
            # Objects touched in earlier layers this iteration whose previous touch was also newer than this
            # object's are counted twice above; with earlier layers, "newer" means a later iteration.
            when = old[candidates] // (self.layers * self.slots)
            values, rank = np.unique(when, return_inverse=True)
            width = values.size + 1
            table = np.bincount((layer[candidates] + 1) * width + rank,
                                minlength=(self.layers + 1) * width).reshape(self.layers + 1, width)
            before = np.cumsum(table, axis=0)                          # row l: layers < l
            later = np.cumsum(before[:, ::-1], axis=1)[:, ::-1]        # column u: iterations with rank >= u
            overlap[candidates] = later[layer[candidates], rank + 1]
        distance = newer + earlier - overlap
        hits = seen & (distance < self.capacity)
        self._order = np.concatenate((self.order[~mask.ravel()[self.order]], flat))
        self._last = self.last.copy()
        self._last[flat] = self.iteration * self._last.size + flat   # (iteration, layer, slot) in order
        self.iteration += 1
        self.previous, self.previous_count = mask.ravel().copy(), flat.size
        self.seen = self.seen | mask.ravel()
        self.previous_layers = np.count_nonzero(mask, axis=1)
        out = np.zeros(mask.shape, dtype=bool)
        out.ravel()[flat] = hits
        return out
