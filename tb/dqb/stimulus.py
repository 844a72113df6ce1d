"""Stimulus for the DQB bench: PC-local memory images with quantized layers, GPU traffic, and the responses
the golden model (`tb.models.dqb`) expects for it, stores applied in order."""
from dataclasses import dataclass

import numpy as np

from ..models import dqb as golden
from ..models.dqb import LayerEntry, Response

SCRATCH_BEATS = 32  # a region outside every layer: table misses, untagged reads and stores


@dataclass(frozen=True)
class Operation:
    """One GPU request: a read (tag) or a store (data)."""
    address: int
    tag: int = golden.BYPASS_TAG
    store: int | None = None


@dataclass
class Scenario:
    image: np.ndarray
    entries: list[LayerEntry]
    scratch: int
    """Byte address of the scratch region."""


def random_scenario(rng: np.random.Generator, beat_bytes: int, layers: int = 4) -> Scenario:
    """`layers` layers with group widths from 2 bytes to 4 beats, random weights (FP8 NaN and subnormals
    included) and scales that mix moderate values with random bit patterns (inf, NaN, subnormal)."""
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
    return Scenario(image, entries, scratch)


def _scales(rng: np.random.Generator, groups: int) -> np.ndarray:
    """16-bit scale patterns, valid as FP16 and as BF16: most moderate, some arbitrary."""
    moderate = (rng.uniform(-2, 2, groups).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    moderate = np.where(rng.random(groups) < 0.5, moderate,
                        rng.uniform(-2, 2, groups).astype(np.float16).view(np.uint16))
    arbitrary = rng.integers(0, 1 << 16, groups).astype(np.uint16)
    return np.where(rng.random(groups) < 0.8, moderate, arbitrary)


def _align(address: int, alignment: int) -> int:
    return -(-address // alignment) * alignment


def random_operations(rng: np.random.Generator, scenario: Scenario, beat_bytes: int, count: int,
                      store_probability: float = 0.1) -> list[Operation]:
    """Reads in runs along a layer (S/Z hits), jumps between layers (switches), reads outside every layer
    (table misses when tagged), untagged and reserved-tag reads, stores to the scratch region and to S/Z."""
    ops: list[Operation] = []
    while len(ops) < count:
        if rng.random() < store_probability:
            if rng.random() < 0.5:
                address = scenario.scratch + beat_bytes * int(rng.integers(SCRATCH_BEATS))
            else:
                entry = scenario.entries[int(rng.integers(len(scenario.entries)))]
                address = entry.scale_base
            data = int.from_bytes(rng.integers(0, 256, beat_bytes, dtype=np.uint8).tobytes(), "little")
            ops.append(Operation(address, store=data))
            continue
        tag = int(rng.integers(0, 8))
        if rng.random() < 0.15:
            ops.append(Operation(scenario.scratch + beat_bytes * int(rng.integers(SCRATCH_BEATS)), tag))
            continue
        entry = scenario.entries[int(rng.integers(len(scenario.entries)))]
        beats = entry.weight_size // beat_bytes
        start = int(rng.integers(beats))
        for beat in range(start, min(beats, start + int(rng.integers(1, 12)))):
            ops.append(Operation(entry.weight_base + beat * beat_bytes, tag))
    return ops[:count]


def expected_responses(scenario: Scenario, ops: list[Operation], rounding: str,
                       interface_bits: int) -> tuple[list[Response], np.ndarray]:
    """The golden responses to the reads among `ops`, in order, and the image after every store."""
    image = scenario.image.copy()
    responses: list[Response] = []
    reads: list[Operation] = []

    def flush() -> None:
        if reads:
            responses.extend(golden.dequantize_reads(image, scenario.entries, [r.address for r in reads],
                                                     [r.tag for r in reads], rounding, interface_bits))
            reads.clear()

    for op in ops:
        if op.store is None:
            reads.append(op)
        else:
            flush()
            image[op.address:op.address + interface_bits // 8] = golden.int_to_beat(op.store, interface_bits)
    flush()
    return responses, image
