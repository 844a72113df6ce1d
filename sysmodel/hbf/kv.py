"""The KV cache and a shared KV prefix in HBF, read and written through an HBM frame region.

KV is kept in blocks of `BLOCK_TOKENS` tokens of one sequence (vLLM's default block size, 16 tokens:
docs.vllm.ai engine arguments `--block-size`); within a block each layer's slice starts on a 4 KiB page, so
a block of t tokens spans `layers x ceil(t x bytes per token and layer / 4 KiB)` pages (counted, never
enumerated). The frame region is an LRU over blocks (an `OrderedDict`, least recent first). Each iteration
reads every block of every sequence's context (a miss reads the block's filled pages from the media) and
writes the new tokens' KV into their blocks (allocated on a miss without a read: nothing older is in them,
or marked dirty on a hit). A dirty block that is evicted is programmed: the pages from the first dirty token
to the last written one, whole 4 KiB pages, aligned (a partly filled page is programmed whole and programmed
again when it fills: the write amplification of appending to flash). A finished sequence's blocks are
dropped without a write. Blocks of the shared prefix (the first `prefix_tokens` of every sequence) are one
set shared by all sequences; they are never written (the prefix is present from the start).
"""
from collections import OrderedDict

from ..errors import require
from .media import PAGE_BYTES

BLOCK_TOKENS = 16
PREFIX = -1                  # the sequence id of the shared prefix's blocks


class KVFrames:
    """One GPU's KV blocks through a frame region of `capacity` blocks. `in_hbf`: whether a sequence's own
    KV / the shared prefix lives in HBF (what lives in HBM is read from HBM and never enters the region)."""

    def __init__(self, layers: int, layer_token_bytes: float, capacity: int, prefix_tokens: int,
                 own_in_hbf: bool, prefix_in_hbf: bool) -> None:
        require(capacity >= 0, f"KV frame region must hold >= 0 blocks, got {capacity}")
        self.layers, self.layer_token_bytes, self.capacity = layers, layer_token_bytes, capacity
        self.prefix_tokens, self.own_in_hbf, self.prefix_in_hbf = prefix_tokens, own_in_hbf, prefix_in_hbf
        # (sequence, block) -> (tokens filled, first dirty token or None); least recently used first
        self.frames: OrderedDict[tuple[int, int], tuple] = OrderedDict()
        self.counts = dict.fromkeys(COUNTS, 0)
        self.live: set[int] = set()

    def pages(self, first: int, last: int) -> int:
        """Pages holding tokens [first, last) of a block, over all layers (whole pages, page-aligned per layer)."""
        if last <= first:
            return 0
        per_layer = -(-int(last * self.layer_token_bytes) // PAGE_BYTES) - int(first * self.layer_token_bytes) \
            // PAGE_BYTES
        return self.layers * per_layer

    def iteration(self, sequences: list[tuple[int, int, int]], live: set[int]) -> None:
        """One iteration of `sequences` (id, tokens already in the KV cache, new tokens written): every one
        reads its whole context and the new tokens' KV, and writes the new tokens. `live`: the sequences
        whose KV is kept (the others have finished: their blocks are dropped unwritten)."""
        for gone in self.live - live:
            self._drop(gone)
        self.live = set(live)
        for sequence, past, new in sequences:
            end = past + new
            shared = min(self.prefix_tokens, end)
            if shared:
                self._read(PREFIX, shared, self.prefix_in_hbf)
            if end > shared:
                self._own(sequence, shared, past, end)

    def _drop(self, sequence: int) -> None:
        for key in [k for k in self.frames if k[0] == sequence]:
            del self.frames[key]

    def _read(self, sequence: int, end: int, in_hbf: bool, start: int = 0) -> None:
        """Read tokens [start, end) of a sequence (or the prefix: tokens [0, end)), block by block."""
        c = self.counts
        for block in range(start // BLOCK_TOKENS, -(-end // BLOCK_TOKENS)):
            filled = min(end - block * BLOCK_TOKENS, BLOCK_TOKENS)
            if not in_hbf:
                c["hbm_read_bytes"] += self._bytes(filled)
                continue
            frame = self._touch((sequence, block))
            if frame is None:
                c["misses"] += 1
                c["media_read_pages"] += self.pages(0, filled)
                self._insert((sequence, block), (filled, None))
            else:
                c["hits"] += 1

    def _own(self, sequence: int, shared: int, past: int, end: int) -> None:
        """A sequence's own tokens [shared, end): the ones before `past` are read, the rest written (and read)."""
        if past > shared:
            self._read(sequence, past, self.own_in_hbf, shared)
        c = self.counts
        start = max(past, shared)
        if not self.own_in_hbf:
            c["hbm_write_bytes"] += self._bytes(end - start)
            return
        for block in range(start // BLOCK_TOKENS, -(-end // BLOCK_TOKENS)):
            base = block * BLOCK_TOKENS
            first, last = max(start - base, 0), min(end - base, BLOCK_TOKENS)
            c["written_tokens"] += last - first
            frame = self._touch((sequence, block))
            if frame is None:
                c["misses"] += 1
                if first > 0:        # the block's older tokens are in HBF: read them before appending
                    c["media_read_pages"] += self.pages(0, first)
                self._insert((sequence, block), (last, first))
            else:
                c["hits"] += 1
                self.frames[(sequence, block)] = (max(frame[0], last), first if frame[1] is None
                                                  else min(frame[1], first))

    def _touch(self, key):
        frame = self.frames.get(key)
        if frame is not None:
            self.frames.move_to_end(key)
        return frame

    def _insert(self, key, frame: tuple) -> None:
        if self.capacity == 0:            # no region: written straight through, read straight from the media
            if frame[1] is not None:
                self._program(*frame)
            return
        self.frames[key] = frame
        while len(self.frames) > self.capacity:
            _, (filled, dirty) = self.frames.popitem(last=False)
            if dirty is not None:
                self._program(filled, dirty)

    def _program(self, filled: int, dirty: int) -> None:
        pages = self.pages(dirty, filled)
        self.counts["programmed_pages"] += pages
        self.counts["write_backs"] += 1

    def _bytes(self, tokens: int) -> float:
        return tokens * self.layers * self.layer_token_bytes

    def snapshot(self) -> tuple:
        return self.frames.copy(), dict(self.counts), self.live

    def restore(self, state: tuple) -> None:
        self.frames, self.counts, self.live = state


def kv_block_bytes(shard) -> float:
    """One block's bytes on one GPU: all layers, each layer's slice in whole pages."""
    per_layer = shard.kv_bytes_per_token / shard.model.layers * BLOCK_TOKENS
    return shard.model.layers * -(-per_layer // PAGE_BYTES) * PAGE_BYTES


COUNTS = ("hits", "misses", "media_read_pages", "programmed_pages", "write_backs", "written_tokens",
          "hbm_read_bytes", "hbm_write_bytes")
