"""Golden model of the StreamDQ DeQuantization Block (DQB) on one HBM pseudo-channel, numpy/ml_dtypes only.

It answers a GPU read of one interface beat the way the DQB memory contract (README, "StreamDQ offline layout
and checkpoints") says the block must: bypass, dequantize with the S/Z found through the layer entries in the
PC-local memory image, or a defined error response; a byte-masked store, with its acknowledgement; and which
version of the layer table a request sees while the table is rewritten under traffic.
Arithmetic is `tb.models.fp` (numpy float32, never the RTL): `narrow((f32(x) - f32(z)) * f32(s))`, each FP32
step round-to-nearest-even.
"""
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from tb.models import fp

INTERFACE_BITS = 512
"""The external interface of Table 5: one beat is 64 bytes."""

BYPASS_TAG = 0b000
RESERVED_TAG = 0b111
TAG_BITS = 3
ROUNDINGS = ("nearest_even", "toward_zero_ftz")
CANONICAL_NAN = {"fp16": 0x7E00, "bf16": 0x7FC0}
"""Every NaN the DQB produces is the canonical quiet NaN of its output format, as every `rtl.fp` unit's is."""


@dataclass(frozen=True)
class Mode:
    """A dequantization mode: the weight format read from memory and the 16-bit format returned to the GPU."""
    weight: str
    """"int4", "int8" (two's complement) or "fp8_e4m3" (OCP E4M3 "fn")."""
    output: str
    """"fp16" or "bf16"; the scale of every group is stored in this format too."""

    @property
    def bits(self) -> int:
        return fp.width(self.weight)

    @property
    def expansion(self) -> int:
        """Output beats per input beat: 16-bit outputs from `bits`-bit weights."""
        return 16 // self.bits


MODES: dict[int, Mode] = {
    # StreamDQ Table 5, "Tag bit information"; 000 is bypass and 111 is reserved.
    0b001: Mode("int4", "bf16"),
    0b010: Mode("int8", "bf16"),
    0b011: Mode("fp8_e4m3", "bf16"),
    0b100: Mode("int4", "fp16"),
    0b101: Mode("int8", "fp16"),
    0b110: Mode("fp8_e4m3", "fp16"),
}
TAGS: dict[Mode, int] = {mode: tag for tag, mode in MODES.items()}


def tag_of(weight: str, output: str) -> int:
    """The sideband tag that selects dequantization of `weight` into `output`."""
    return TAGS[Mode(weight, output)]


@dataclass(frozen=True)
class LayerEntry:
    """One quantized layer as the DQB's request table holds it; every address is a PC-local byte address."""
    weight_base: int
    """Beat-aligned start of the layer's weights in this PC."""
    weight_size: int
    """Bytes of weights in this PC, a multiple of the beat."""
    scale_base: int
    """Scale of PC-local group g: 16 bits, little-endian, at scale_base + 2g."""
    zero_base: int
    """Zero point of group g: INT4 nibble g mod 2 (low first) of byte zero_base + g // 2; else byte zero_base + g."""
    log2_group_width: int
    """log2 of the PC-local byte stride of one group: group_index = byte offset into the weights >> this."""

    def __post_init__(self) -> None:
        for name, value in self.__dict__.items():
            if not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"{name}={value!r}: expected a non-negative integer")

    def contains(self, address: np.ndarray) -> np.ndarray:
        return (self.weight_base <= address) & (address < self.weight_base + self.weight_size)


class Response(NamedTuple):
    """The GPU response to one request: `beats` as ints of `interface_bits`, the error bit every beat carries, and
    `is_write` for a store's acknowledgement (one beat of 0)."""
    beats: tuple[int, ...]
    error: bool
    is_write: bool = False


ACKNOWLEDGEMENT = Response((0,), False, True)
"""The one beat a store returns, once the memory holds it."""


def beat_to_int(data: np.ndarray) -> int:
    """Bytes of one beat (byte 0 = bits [7:0]) as an int."""
    return int.from_bytes(np.ascontiguousarray(data, dtype=np.uint8).tobytes(), "little")


def int_to_beat(value: int, interface_bits: int = INTERFACE_BITS) -> np.ndarray:
    return np.frombuffer(value.to_bytes(interface_bits // 8, "little"), dtype=np.uint8).copy()


def beats_to_halfwords(beats: Sequence[int], interface_bits: int = INTERFACE_BITS) -> np.ndarray:
    """The 16-bit outputs held by response beats, in order (element k of a beat at bits [16k+15:16k])."""
    raw = b"".join(beat.to_bytes(interface_bits // 8, "little") for beat in beats)
    return np.frombuffer(raw, dtype="<u2").astype(np.uint16)


def weight_codes(data: np.ndarray, bits: int) -> np.ndarray:
    """Split beats `[R, bytes]` into weight codes `[R, elements]`: INT4 element i at bits [4i+3:4i]."""
    if bits == 8:
        return data.astype(np.int64)
    return np.stack([data & 0xF, data >> 4], axis=-1).reshape(data.shape[0], -1).astype(np.int64)


def store(memory: np.ndarray, address: int, data: int, mask: int,
          interface_bits: int = INTERFACE_BITS) -> Response:
    """Apply a GPU store to the PC-local image in place: byte k of the beat holding `address` (its low bits are
    ignored) becomes byte k of `data` where bit k of `mask` is set. Returns its acknowledgement."""
    beat_bytes = interface_bits // 8
    start = address & -beat_bytes
    if not 0 <= start <= len(memory) - beat_bytes:
        raise ValueError(f"a store at {address:#x} lies outside the {len(memory)}-byte memory image")
    written = np.array([mask >> k & 1 for k in range(beat_bytes)], dtype=bool)
    beat = memory[start:start + beat_bytes]
    beat[written] = int_to_beat(data, interface_bits)[written]
    return ACKNOWLEDGEMENT


def table_versions(accepted: Sequence[int], updated: Sequence[int]) -> list[int]:
    """Which table each GPU request looks up: the number of table updates whose last `config` beat was taken in a
    cycle before the request's (`accepted`, `updated`: cycles). A request taken in the same cycle as an update's
    beat looks the table up before it, and the DQB takes none while an update is half written, so every request
    sees one whole version: 0 the table before the first update, v the one after update v."""
    return [int(v) for v in np.searchsorted(np.sort(np.asarray(updated, dtype=np.int64)), accepted, side="left")]


def dequantize_read(memory: np.ndarray, entries: Sequence[LayerEntry], address: int, tag: int,
                    rounding: str = "nearest_even", interface_bits: int = INTERFACE_BITS) -> Response:
    """The DQB's response to one GPU read of the beat at PC-local `address` with sideband `tag`."""
    return dequantize_reads(memory, entries, [address], [tag], rounding, interface_bits)[0]


def dequantize_reads(memory: np.ndarray, entries: Sequence[LayerEntry], addresses: Sequence[int],
                     tags: Sequence[int], rounding: str = "nearest_even",
                     interface_bits: int = INTERFACE_BITS) -> list[Response]:
    """The responses to many reads at once, vectorised per mode (what a bench calls for thousands of beats).

    `memory` is the PC-local image (uint8, index = byte address). Reads are whole beat-aligned beats; an
    address or S/Z location outside the image is a bench error (ValueError), not a DQB response.
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding={rounding!r}: expected one of {ROUNDINGS}")
    if interface_bits % 16 or interface_bits <= 0:
        raise ValueError(f"interface_bits={interface_bits}: expected a positive multiple of 16")
    memory = np.asarray(memory, dtype=np.uint8)
    beat_bytes = interface_bits // 8
    addresses = np.asarray(addresses, dtype=np.int64).reshape(-1)
    tags = np.asarray(tags, dtype=np.int64).reshape(-1)
    if addresses.shape != tags.shape:
        raise ValueError(f"{len(addresses)} addresses but {len(tags)} tags")
    if ((tags < 0) | (tags >= 1 << TAG_BITS)).any():
        raise ValueError(f"tags must be {TAG_BITS}-bit, got {sorted(set(tags[(tags < 0) | (tags > 7)].tolist()))}")
    if (addresses % beat_bytes).any() or (addresses < 0).any() or (addresses + beat_bytes > len(memory)).any():
        raise ValueError(f"every address must be a {beat_bytes}-byte-aligned beat inside the "
                         f"{len(memory)}-byte memory image")
    data = memory[addresses[:, None] + np.arange(beat_bytes)]

    entry_index = np.full(len(addresses), -1)
    for index, entry in reversed(list(enumerate(entries))):  # the lowest matching index wins
        entry_index[entry.contains(addresses)] = index

    responses: list[Response | None] = [None] * len(addresses)
    for read in np.flatnonzero((tags == BYPASS_TAG) | (tags == RESERVED_TAG)):
        responses[read] = Response((beat_to_int(data[read]),), bool(tags[read] == RESERVED_TAG))
    for tag, mode in MODES.items():
        unmatched = np.flatnonzero((tags == tag) & (entry_index < 0))
        for read in unmatched:
            responses[read] = Response((0,) * mode.expansion, True)
        reads = np.flatnonzero((tags == tag) & (entry_index >= 0))
        if len(reads):
            halfwords = _dequantize(memory, [entries[i] for i in entry_index[reads]], addresses[reads],
                                    data[reads], mode, rounding)
            per_beat = halfwords.reshape(len(reads), mode.expansion, interface_bits // 16)
            for read, beats in zip(reads, per_beat):
                responses[read] = Response(tuple(beat_to_int(beat.view(np.uint8)) for beat in beats), False)
    return responses


def _gather(memory: np.ndarray, addresses: np.ndarray, what: str) -> np.ndarray:
    if (addresses < 0).any() or (addresses >= len(memory)).any():
        raise ValueError(f"{what} at byte {int(addresses.max())} lies outside the {len(memory)}-byte memory image")
    return memory[addresses].astype(np.int64)


def _dequantize(memory: np.ndarray, entries: list[LayerEntry], addresses: np.ndarray, data: np.ndarray,
                mode: Mode, rounding: str) -> np.ndarray:
    """Outputs `[R, elements]` (little-endian uint16) of the reads `data` `[R, bytes]` at `addresses`."""
    def column(field: str) -> np.ndarray:
        return np.array([getattr(entry, field) for entry in entries], dtype=np.int64)[:, None]

    codes = weight_codes(data, mode.bits)
    byte_in_beat = np.arange(codes.shape[1]) * mode.bits // 8
    group = (addresses[:, None] - column("weight_base") + byte_in_beat) >> column("log2_group_width")
    scale_at = column("scale_base") + 2 * group
    scales = _gather(memory, scale_at, "a scale") | _gather(memory, scale_at + 1, "a scale") << 8
    if mode.bits == 4:
        zeros = _gather(memory, column("zero_base") + group // 2, "a zero point") >> (4 * (group % 2)) & 0xF
    else:
        zeros = _gather(memory, column("zero_base") + group, "a zero point")

    x = fp.to_fp32(codes, mode.weight)
    z = fp.to_fp32(zeros, mode.weight)
    s = fp.to_fp32(scales, mode.output)
    difference = fp.fp32_add(x, z ^ np.uint32(0x80000000))  # x - z, exactly as FP32 subtraction rounds
    out = fp.narrow(fp.fp32_mul(difference, s), mode.output, rounding)
    out = np.where(fp.is_nan(out, mode.output), CANONICAL_NAN[mode.output], out)
    return np.ascontiguousarray(out, dtype="<u2")
