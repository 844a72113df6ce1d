"""Stimulus for the DQB bench: PC-local memory images with quantized layers, GPU traffic, and the responses
the golden model (`tb.models.dqb`) expects for it, stores applied in order."""
from dataclasses import dataclass

import numpy as np

from ..models import dqb as golden
from ..models.dqb import LayerEntry, Response

SCRATCH_BEATS = 32  # a region outside every layer: table misses, untagged reads and stores


@dataclass(frozen=True)
class Operation:
    """One GPU request: a read (tag) or a store (data, and `mask`: one bit per byte to write; None: every byte)."""
    address: int
    tag: int = golden.BYPASS_TAG
    store: int | None = None
    mask: int | None = None

    def byte_mask(self, beat_bytes: int) -> int:
        return (1 << beat_bytes) - 1 if self.mask is None else self.mask


@dataclass
class Scenario:
    image: np.ndarray
    entries: list[LayerEntry]
    """The layers as the golden model sees them: the enabled table entries, lowest index (highest priority) first."""
    scratch: int
    """Byte address of the scratch region."""
    table: list[LayerEntry] | None = None
    """What is written to table indices 0, 1, ... (default: `entries`)."""
    enabled: list[bool] | None = None
    """Each table entry's enable bit (default: all set)."""

    def __post_init__(self) -> None:
        self.table = self.entries if self.table is None else self.table
        self.enabled = [True] * len(self.table) if self.enabled is None else self.enabled
        assert [e for e, on in zip(self.table, self.enabled, strict=True) if on] == self.entries


def random_scenario(rng: np.random.Generator, beat_bytes: int, layers: int = 4, decoys: bool = True) -> Scenario:
    """`layers` layers with group widths from 2 bytes to 4 beats, random weights (FP8 NaN and subnormals
    included) and scales that mix moderate values with random bit patterns (inf, NaN, subnormal). With `decoys`
    the table also holds two entries that must not be used, each pointing at another layer's S/Z: a disabled copy
    of the first layer at index 0, and after the layers one overlapping the last layer's second half (the lower
    index wins)."""
    pieces: list[tuple[int, np.ndarray]] = []
    entries = []
    cursor = 0
    for _ in range(layers):
        log2_width = int(rng.integers(1, (4 * beat_bytes).bit_length()))
        beats = int(rng.integers(4, 24)) * max(1, (1 << log2_width) // beat_bytes)
        weight_base, size = cursor, beats * beat_bytes
        groups = size >> log2_width
        scale_base = _align(weight_base + size, beat_bytes)
        zero_base = _align(scale_base + 2 * groups, beat_bytes)
        cursor = _align(zero_base + groups, beat_bytes)
        scales = _scales(rng, groups)
        pieces += [(weight_base, rng.integers(0, 256, size, dtype=np.uint8)),
                   (scale_base, scales.astype("<u2").view(np.uint8)),
                   (zero_base, rng.integers(0, 256, groups, dtype=np.uint8))]
        entries.append(LayerEntry(weight_base, size, scale_base, zero_base, log2_width))
    scratch = cursor
    image = np.zeros(scratch + SCRATCH_BEATS * beat_bytes, dtype=np.uint8)
    for start, data in pieces:
        image[start:start + len(data)] = data
    image[scratch:] = rng.integers(0, 256, SCRATCH_BEATS * beat_bytes, dtype=np.uint8)
    if not decoys:
        return Scenario(image, entries, scratch)
    first, last = entries[0], entries[-1]
    other = entries[1 % len(entries)]
    disabled = LayerEntry(first.weight_base, first.weight_size, other.scale_base, other.zero_base,
                          first.log2_group_width)
    half = last.weight_size // beat_bytes // 2 * beat_bytes
    overlapping = LayerEntry(last.weight_base + half, last.weight_size - half, first.scale_base, first.zero_base,
                             first.log2_group_width)
    return Scenario(image, [*entries, overlapping], scratch, [disabled, *entries, overlapping],
                    [False, *[True] * (len(entries) + 1)])


def _scales(rng: np.random.Generator, groups: int) -> np.ndarray:
    """16-bit scale patterns, valid as FP16 and as BF16: most moderate, some arbitrary."""
    moderate = (rng.uniform(-2, 2, groups).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    moderate = np.where(rng.random(groups) < 0.5, moderate,
                        rng.uniform(-2, 2, groups).astype(np.float16).view(np.uint16))
    arbitrary = rng.integers(0, 1 << 16, groups).astype(np.uint16)
    return np.where(rng.random(groups) < 0.8, moderate, arbitrary)


def _align(address: int, alignment: int) -> int:
    return -(-address // alignment) * alignment


def _random_mask(rng: np.random.Generator, beat_bytes: int) -> int:
    """A store's byte mask: the whole beat half the time, else any pattern (none and single bytes included)."""
    if rng.random() < 0.5:
        return (1 << beat_bytes) - 1
    # Bit by bit: numpy draws integers of at most 63 bits, and the 512-bit DQB's beat has 64 bytes.
    return sum(int(bit) << byte for byte, bit in enumerate(rng.integers(0, 2, beat_bytes)))


def random_operations(rng: np.random.Generator, scenario: Scenario, beat_bytes: int, count: int,
                      store_probability: float = 0.1, unaligned: float = 0.1) -> list[Operation]:
    """Reads in runs along a layer (S/Z hits), jumps between layers (switches), reads outside every layer
    (table misses when tagged), untagged and reserved-tag reads, byte-masked stores (random masks) to the scratch
    region and to scale and zero-point lines; a fraction `unaligned` of the addresses point inside their beat
    rather than at its start."""
    ops: list[Operation] = []

    def inside(address: int) -> int:
        return address + (int(rng.integers(1, beat_bytes)) if rng.random() < unaligned else 0)

    while len(ops) < count:
        if rng.random() < store_probability:
            if rng.random() < 0.5:
                address = scenario.scratch + beat_bytes * int(rng.integers(SCRATCH_BEATS))
            else:
                entry = scenario.entries[int(rng.integers(len(scenario.entries)))]
                address = entry.scale_base if rng.random() < 0.5 else entry.zero_base
            data = int.from_bytes(rng.integers(0, 256, beat_bytes, dtype=np.uint8).tobytes(), "little")
            ops.append(Operation(inside(address), store=data, mask=_random_mask(rng, beat_bytes)))
            continue
        tag = int(rng.integers(0, 8))
        if rng.random() < 0.15:
            ops.append(Operation(inside(scenario.scratch + beat_bytes * int(rng.integers(SCRATCH_BEATS))), tag))
            continue
        entry = scenario.entries[int(rng.integers(len(scenario.entries)))]
        beats = entry.weight_size // beat_bytes
        start = int(rng.integers(beats))
        for beat in range(start, min(beats, start + int(rng.integers(1, 12)))):
            ops.append(Operation(inside(entry.weight_base + beat * beat_bytes), tag))
    return ops[:count]


def response_beats(op: Operation) -> int:
    """Beats the DQB returns for `op`: 16/bits for a dequantizing read (a table miss too), else one."""
    mode = golden.MODES.get(op.tag)
    return mode.expansion if op.store is None and mode is not None else 1


def expected_responses(scenario: Scenario, ops: list[Operation], rounding: str, interface_bits: int,
                       tables: list[list[LayerEntry]] | None = None,
                       versions: list[int] | None = None) -> tuple[list[Response], np.ndarray]:
    """The golden response to each of `ops`, in order (a store's is its acknowledgement), and the image after
    every store. Reads and stores are of whole beats: an address's bits below the beat are ignored (README, the
    DQB's ports); a store writes the bytes its mask selects. Op i reads through the layer entries
    `tables[versions[i]]` (default: `scenario.entries` for all)."""
    image = scenario.image.copy()
    tables = [scenario.entries] if tables is None else tables
    versions = [0] * len(ops) if versions is None else versions
    responses: list[Response] = []
    reads: list[Operation] = []
    beat_bytes = interface_bits // 8

    def flush(version: int) -> None:
        if reads:
            responses.extend(golden.dequantize_reads(image, tables[version], [r.address & -beat_bytes for r in reads],
                                                     [r.tag for r in reads], rounding, interface_bits))
            reads.clear()

    for index, (op, version) in enumerate(zip(ops, versions, strict=True)):
        if op.store is None:
            reads.append(op)
            if index + 1 == len(ops) or versions[index + 1] != version:
                flush(version)
        else:
            flush(version)
            responses.append(golden.store(image, op.address, op.store, op.byte_mask(beat_bytes), interface_bits))
    return responses, image
