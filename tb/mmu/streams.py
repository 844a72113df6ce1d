"""The address streams of GPU prefill and PNM decode that the MMU's arbitration grid offers (docs/dram.md,
"Address streams"): plain Python, no simulator, so the tests read them directly.

One pseudo channel's own (local) addresses. DuoPD's simulator runs DRAMSim3 (§6.1), whose HBM mapping puts the
column bits lowest and the channel bits right above them (`rorabgbachco`, `Config::SetAddressMapping`): a tensor
stored contiguously reaches every pseudo channel as whole DRAM rows (1 KiB) at consecutive local rows. So a
sequential read of a tensor is, in one channel, a run of `run_bursts` consecutive bursts per row, and the next
row of the tensor is the next local row.

- **GPU prefill**: reads the layer's weights in address order and appends the prompt's K and V to its KV cache
  (DuoPD §5.3: the GPU writes the KV cache that decode reads after the handoff). `gpu_streams` runs are in flight
  at once (the GEMM's thread blocks each stream their own part of the weights), their requests interleaved one
  by one; each new weight run takes the next row of the tensor, each new KV run the next row of the KV cache.
- **PNM decode**: loads tensors of one row (`run_bursts` requests, at most the MMU's `max_sub_requests`: its
  buffer's 32 entries per pseudo channel, §4.2): the same weights the GPU reads (§5.3: parameters are shared),
  in address order from its own position (decode is at another layer than prefill), and the KV cache of its
  batch, one row of one request's cache at a time, the requests' caches scattered by a paged allocator.
- **Mix**: the fraction of KV bytes in each source's traffic, from LLaMA2-70B (80 layers, hidden 8,192, MLP
  28,672, 8 KV heads of 128: Hugging Face `meta-llama/Llama-2-70b-hf` config.json) in FP16 per layer: weights
  4 × 8,192² − 2 × 8,192 × 7,168 (GQA's smaller K and V) + 3 × 8,192 × 28,672 = 855.6 M parameters = 1.711 GB;
  KV 2 × 8 × 128 × 2 B = 4,096 B per token. A 16,384-token prompt (`basedie simulate`'s default input length)
  writes 67.1 MB per layer: 3.77 % of the GPU's bytes. Decode of a batch of 16 (its default batch) at a context
  of 16,384 + 64 tokens reads 16 × 16,448 × 4,096 B = 1.078 GB of KV per layer: 38.6 % of the PNM's bytes.
  Prefill's activations (FlashAttention's Q/K/V reads, the MLP's intermediate) are left out.
"""
import random
from collections import deque
from dataclasses import dataclass

from rtl.params import Params, require_at_least


def _fraction(params: Params, name: str) -> None:
    if not 0.0 <= getattr(params, name) <= 1.0:
        raise ValueError(f"{name}={getattr(params, name)} must be in [0, 1]")


@dataclass(frozen=True)
class StreamModel(Params):
    run_bursts: int = 32
    """Bursts of one sequential run: a 1 KiB DRAM row (HBM3/HBM4 32 columns of 32 B) reaches a pseudo channel
    whole under DRAMSim3's column-lowest mapping."""
    gpu_streams: int = 4
    """GPU runs in flight at once, requests interleaved (our assumption: no public measurement of how many
    thread blocks' streams one pseudo channel sees at a time)."""
    gpu_kv_write_fraction: float = 0.0377
    """KV writes among the GPU's requests: 67.1 MB / (1,711 + 67.1) MB per layer (module docstring)."""
    pnm_kv_fraction: float = 0.386
    """KV reads among the PNM's requests: 1,078 MB / (1,711 + 1,078) MB per layer (module docstring)."""

    def validate(self) -> None:
        require_at_least(self, "run_bursts", 1)
        require_at_least(self, "gpu_streams", 1)
        _fraction(self, "gpu_kv_write_fraction")
        _fraction(self, "pnm_kv_fraction")


@dataclass(frozen=True)
class Region:
    """Burst addresses [first, end); a whole number of runs."""
    first: int
    end: int

    def rows(self, run: int) -> int:
        return (self.end - self.first) // run


class Cursor:
    """Walks a region's rows in order, from a given row, wrapping at its end."""

    def __init__(self, region: Region, run: int, row: int = 0) -> None:
        self.region, self.run, self.row = region, run, row % region.rows(run)

    def next(self) -> int:
        """The first burst of the next row."""
        first = self.region.first + self.row * self.run
        self.row = (self.row + 1) % self.region.rows(self.run)
        return first


class GpuPrefill:
    """The GPU's requests, one per `next()`: (burst address, is a write)."""

    def __init__(self, model: StreamModel, rng: random.Random, weights: Region, kv: Region) -> None:
        self.model, self.rng = model, rng
        self.weights = Cursor(weights, model.run_bursts, rng.randrange(weights.rows(model.run_bursts)))
        self.kv = Cursor(kv, model.run_bursts)
        self.runs: list[deque[tuple[int, bool]]] = [deque() for _ in range(model.gpu_streams)]
        self.turn = 0

    def next(self) -> tuple[int, bool]:
        run = self.runs[self.turn]
        self.turn = (self.turn + 1) % len(self.runs)
        if not run:
            write = self.rng.random() < self.model.gpu_kv_write_fraction
            first = (self.kv if write else self.weights).next()
            run.extend((first + k, write) for k in range(self.model.run_bursts))
        return run.popleft()


class PnmDecode:
    """The PNM's tensor loads, one per `next()`: (first burst address, bursts)."""

    def __init__(self, model: StreamModel, rng: random.Random, weights: Region, kv: Region,
                 max_sub_requests: int) -> None:
        self.model, self.rng, self.kv_region = model, rng, kv
        self.bursts = min(model.run_bursts, max_sub_requests)
        self.weights = Cursor(weights, model.run_bursts, rng.randrange(weights.rows(model.run_bursts)))

    def next(self) -> tuple[int, int]:
        if self.rng.random() < self.model.pnm_kv_fraction:
            first = self.kv_region.first + self.rng.randrange(self.kv_region.rows(self.model.run_bursts)) \
                * self.model.run_bursts
        else:
            first = self.weights.next()
        return first, self.bursts


def unmerge(seen: list[tuple], first: list, second: list) -> list[bool]:
    """For each item of `seen`, a merge of the sequences `first` and `second` (each kept in its order), whether
    it came from `first`. Each item is a pair: how it reads as an item of `first`, and as one of `second`. Two
    sources may send identical items (both read the same address), so every split consistent so far is followed
    (they rejoin within a few items) and one that accounts for every item of both is traced back. Raises
    AssertionError naming the first item no consistent split explains."""
    frontier: dict[tuple[int, int], tuple[int, int] | None] = {(0, 0): None}
    steps = []
    for k, (as_first, as_second) in enumerate(seen):
        step: dict[tuple[int, int], tuple[int, int]] = {}
        for i, j in frontier:
            if i < len(first) and first[i] == as_first:
                step.setdefault((i + 1, j), (i, j))
            if j < len(second) and second[j] == as_second:
                step.setdefault((i, j + 1), (i, j))
        assert step, f"item {k} ({as_first}) is the next of neither sequence in any split of the items before it"
        steps.append(step)
        frontier = step
    end = (len(first), len(second))
    assert end in frontier, (f"{len(seen)} items seen for {len(first)} + {len(second)} expected; the splits end "
                             f"at {sorted(frontier)[:4]}")
    out = []
    for step in reversed(steps):
        previous = step[end]
        out.append(previous[0] != end[0])
        end = previous
    return out[::-1]
