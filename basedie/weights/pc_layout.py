"""StreamDQ's pseudo-channel-aware layout (§3.3): each PC holds its interleaved weights and their S/Z.

The global weight array of a layer is row-major `[N, K]` (a group of G consecutive k is `G*bits/8` contiguous
bytes; global group `n*(K/G) + k/G`). Global byte `a` lives in PC `(a // IG) % P` at local address
`(a // (IG*P))*IG + a % IG`. In each PC the S/Z arrays are indexed by the PC-local group index with stride
`group_width = min(G*bits/8, IG)`: a group wider than IG is cut into IG-byte pieces and every piece gets its own
copy of the group's S/Z (replication, Table 2). Everything is offline numpy; the DQB only sees the result.
"""
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tb.models import fp
from tb.models.dqb import INTERFACE_BITS, LayerEntry, beats_to_halfwords

SCALE_BYTES = 2
"""S is 16-bit (FP16 or BF16, the output format); Z has the weight's precision (Tables 2 and 3)."""

PAPER_TABLE_2 = {  # StreamDQ Table 2, S/Z replication overhead in %: (weight bits, G, IG) -> printed value
    (4, 64, 64): 0, (4, 64, 128): 0, (4, 64, 256): 0, (8, 64, 64): 0, (8, 64, 128): 0, (8, 64, 256): 0,
    (4, 128, 64): 0, (4, 128, 128): 0, (4, 128, 256): 0, (8, 128, 64): 2.29, (8, 128, 128): 0, (8, 128, 256): 0,
    (4, 256, 64): 1.92, (4, 256, 128): 0, (4, 256, 256): 0, (8, 256, 64): 3.47, (8, 256, 128): 1.16,
    (8, 256, 256): 0,
}
PAPER_TABLE_3 = {  # StreamDQ Table 3, S/Z read requests among all read requests in %: (weight bits, G) -> value
    (4, 64): 7.25, (8, 64): 4.48, (4, 128): 3.76, (8, 128): 2.29, (4, 256): 1.92, (8, 256): 1.16,
}


def sz_bytes(bits: int) -> float:
    """Bytes of one group's S/Z: a 16-bit scale and a zero point of the weight's precision."""
    return SCALE_BYTES + bits / 8


def replication_overhead(bits: int, group_size: int, ig: int) -> float:
    """Table 2 as a fraction: extra S/Z copies over the weights plus one S/Z per group.

    A group of `G*bits/8` bytes wider than IG is split over `G*bits/8 / IG` interleaving chunks (hence PCs),
    each holding its own S/Z copy.
    """
    group_bytes = group_size * bits / 8
    copies = max(1.0, group_bytes / ig)
    return (copies - 1) * sz_bytes(bits) / (group_bytes + sz_bytes(bits))


def sz_read_fraction(bits: int, group_size: int) -> float:
    """Table 3 as a fraction: with full-beat requests and S/Z fetched as contiguous beats, S/Z requests are
    S/Z bytes over all bytes read, whatever the beat size."""
    return sz_bytes(bits) / (group_size * bits / 8 + sz_bytes(bits))


def global_offset(local: np.ndarray, pc: int, ig: int, num_pcs: int) -> np.ndarray:
    """Global offsets (from an IG*P-aligned base) of the bytes at PC-local offsets `local` of PC `pc`."""
    return (local // ig * num_pcs + pc) * ig + local % ig


def pc_of(address: int, ig: int, num_pcs: int) -> int:
    """The PC that holds global byte `address`."""
    return address // ig % num_pcs


def local_address(address: int, ig: int, num_pcs: int) -> int:
    """The PC-local address of global byte `address`."""
    return address // (ig * num_pcs) * ig + address % ig


@dataclass(frozen=True)
class QuantizedLayer:
    """One quantized linear layer in the DQB's formats, as bit patterns."""
    codes: np.ndarray
    """`[N, K]` weight codes: INT4/INT8 two's complement (signed values or their bit patterns), FP8 E4M3 bytes."""
    zeros: np.ndarray
    """`[N, K/G]` zero points in the weight's format."""
    scales: np.ndarray
    """`[N, K/G]` 16-bit patterns of the scales, in the output format (FP16 or BF16) the layer is read as."""
    weight_format: str
    """"int4", "int8" or "fp8_e4m3"."""
    group_size: int

    def __post_init__(self) -> None:
        if self.weight_format not in ("int4", "int8", "fp8_e4m3"):
            raise ValueError(f"weight_format={self.weight_format!r}: expected int4, int8 or fp8_e4m3")
        if self.group_size < 2 or self.group_size & (self.group_size - 1):
            raise ValueError(f"group_size={self.group_size}: expected a power of two >= 2")
        if np.ndim(self.codes) != 2 or np.shape(self.codes)[1] % self.group_size:
            raise ValueError(f"codes has shape {np.shape(self.codes)}: expected [N, K] with K a multiple of "
                             f"group_size={self.group_size}")
        groups = (np.shape(self.codes)[0], np.shape(self.codes)[1] // self.group_size)
        for name in ("zeros", "scales"):
            if np.shape(getattr(self, name)) != groups:
                raise ValueError(f"{name} has shape {np.shape(getattr(self, name))}: expected {groups}")
        for name in ("codes", "zeros", "scales"):
            if not np.issubdtype(np.asarray(getattr(self, name)).dtype, np.integer):
                raise ValueError(f"{name} holds {np.asarray(getattr(self, name)).dtype} values: expected bit "
                                 f"patterns (integers; e.g. fp.to_bits(scales))")

    @property
    def bits(self) -> int:
        return fp.width(self.weight_format)

    @property
    def group_bytes(self) -> int:
        return self.group_size * self.bits // 8

    @property
    def weight_bytes(self) -> int:
        return self.codes.size * self.bits // 8

    def packed_weights(self) -> np.ndarray:
        """The global row-major weight bytes; INT4 element 2j in the low nibble of byte j."""
        codes = np.asarray(self.codes).astype(np.int64).reshape(-1)
        if self.bits == 8:
            return (codes & 0xFF).astype(np.uint8)
        pairs = (codes & 0xF).reshape(-1, 2)
        return (pairs[:, 0] | pairs[:, 1] << 4).astype(np.uint8)

    def dequantize(self, output: str, rounding: str = "nearest_even") -> np.ndarray:
        """Direct dequantization `[N, K]` (16-bit patterns of `output`), with no layout or addresses involved."""
        x = fp.to_fp32(self.codes, self.weight_format).view(np.float32)
        # group g of a row covers columns [g*G, (g+1)*G)
        z = np.repeat(fp.to_fp32(self.zeros, self.weight_format).view(np.float32), self.group_size, axis=1)
        s = np.repeat(fp.to_fp32(self.scales, output).view(np.float32), self.group_size, axis=1)
        with np.errstate(all="ignore"):
            return fp.narrow(fp.to_bits((x - z) * s), output, rounding)


@dataclass(frozen=True)
class PlacedLayer:
    """Where one layer landed: its global weight base and each PC's layer entry."""
    layer: QuantizedLayer
    global_base: int
    entries: tuple[LayerEntry, ...]
    """One per PC, indexed by PC."""


@dataclass
class PCLayout:
    """Every PC's memory image and layer entries for a list of layers, plus the traffic to read them back."""
    ig: int
    num_pcs: int
    beat_bytes: int
    images: list[np.ndarray]
    """PC-local memory images (uint8, index = PC-local byte address)."""
    layers: list[PlacedLayer] = field(default_factory=list)

    def entries(self, pc: int) -> list[LayerEntry]:
        """The layer entries to program into PC `pc`'s DQB, in layer order."""
        return [placed.entries[pc] for placed in self.layers]

    def reads(self, pc: int, layer: int) -> list[int]:
        """PC-local beat addresses a streaming read of `layer` issues in PC `pc`, in order."""
        entry = self.layers[layer].entries[pc]
        return list(range(entry.weight_base, entry.weight_base + entry.weight_size, self.beat_bytes))

    def global_offsets(self, pc: int, layer: int) -> np.ndarray:
        """For every byte of `layer` held by PC `pc`, in PC-local order, its byte offset in the global weights."""
        return global_offset(np.arange(self.layers[layer].entries[pc].weight_size), pc, self.ig, self.num_pcs)

    def reassemble(self, layer: int, responses: Sequence[Sequence[int]],
                   interface_bits: int = INTERFACE_BITS) -> np.ndarray:
        """Global `[N, K]` outputs from each PC's response beats to its streaming read (`responses[pc]`)."""
        placed = self.layers[layer]
        bits = placed.layer.bits
        out = np.zeros(placed.layer.codes.size, dtype=np.uint16)
        for pc, beats in enumerate(responses):
            halfwords = beats_to_halfwords(beats, interface_bits)
            local_byte = np.arange(len(halfwords)) * bits // 8
            within_byte = np.arange(len(halfwords)) % (8 // bits)
            out[self.global_offsets(pc, layer)[local_byte] * 8 // bits + within_byte] = halfwords
        return out.reshape(placed.layer.codes.shape)

    def replication_overhead(self) -> float:
        """Table 2's measure on what was placed: S/Z copies beyond one per group, over weights + one S/Z each."""
        extra = unique = weights = 0.0
        for placed in self.layers:
            layer = placed.layer
            group_width = 1 << placed.entries[0].log2_group_width
            copies = sum(entry.weight_size // group_width for entry in placed.entries)
            groups = layer.zeros.size
            extra += (copies - groups) * sz_bytes(layer.bits)
            unique += groups * sz_bytes(layer.bits)
            weights += layer.weight_bytes
        return extra / (weights + unique)


def build_layout(layers: Sequence[QuantizedLayer], ig: int, num_pcs: int, global_base: int = 0,
                 beat_bytes: int = INTERFACE_BITS // 8) -> PCLayout:
    """Place `layers` one after another from `global_base`, each PC's S/Z after all weights in that PC.

    Each layer's weight bytes must fill whole interleaving rounds (a multiple of IG*P), as real layers do, so
    every PC holds the same number of bytes of it; the next layer starts on the next round.
    """
    if ig <= 0 or ig & (ig - 1) or ig % beat_bytes:
        raise ValueError(f"ig={ig}: expected a power of two and a multiple of the {beat_bytes}-byte beat")
    if num_pcs <= 0:
        raise ValueError(f"num_pcs={num_pcs}: expected at least one pseudo-channel")
    round_bytes = ig * num_pcs
    if global_base < 0 or global_base % round_bytes:
        raise ValueError(f"global_base={global_base}: expected a multiple of ig*num_pcs = {round_bytes}")
    for index, layer in enumerate(layers):
        if layer.weight_bytes % round_bytes:
            raise ValueError(f"layers[{index}] has {layer.weight_bytes} weight bytes: expected a multiple of "
                             f"ig*num_pcs = {round_bytes}")

    bases = global_base + np.cumsum([0] + [layer.weight_bytes for layer in layers])
    sz_cursor = [int(bases[-1]) // num_pcs] * num_pcs  # PC-local end of all weights
    images: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(num_pcs)]
    placed_layers = []
    for layer, base in zip(layers, bases):
        chunks = layer.packed_weights().reshape(-1, ig)
        group_width = min(layer.group_bytes, ig)
        entries = []
        for pc in range(num_pcs):
            weights = chunks[pc::num_pcs].reshape(-1)
            weight_base = int(base) // num_pcs
            scale_base = _align(sz_cursor[pc], beat_bytes)
            local_groups = len(weights) // group_width
            zero_base = _align(scale_base + SCALE_BYTES * local_groups, beat_bytes)
            sz_cursor[pc] = zero_base + (local_groups * layer.bits + 7) // 8
            entry = LayerEntry(weight_base, len(weights), scale_base, zero_base, group_width.bit_length() - 1)
            first_byte = global_offset(np.arange(0, len(weights), group_width), pc, ig, num_pcs)
            scales, zeros = _sz_of_global_groups(layer, first_byte // layer.group_bytes)
            images[pc] += [(weight_base, weights), (scale_base, scales), (zero_base, zeros)]
            entries.append(entry)
        placed_layers.append(PlacedLayer(layer, int(base), tuple(entries)))
    return PCLayout(ig, num_pcs, beat_bytes, [_image(pieces, beat_bytes) for pieces in images], placed_layers)


def _align(address: int, alignment: int) -> int:
    return -(-address // alignment) * alignment


def _sz_of_global_groups(layer: QuantizedLayer, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The scale bytes (little-endian) and zero-point bytes of these global groups, in order."""
    scales = np.asarray(layer.scales).reshape(-1)[groups].astype("<u2").view(np.uint8)
    zeros = np.asarray(layer.zeros).astype(np.int64).reshape(-1)[groups]
    if layer.bits == 8:
        return scales, (zeros & 0xFF).astype(np.uint8)
    nibbles = np.concatenate([zeros & 0xF, np.zeros(len(zeros) % 2, np.int64)]).reshape(-1, 2)
    return scales, (nibbles[:, 0] | nibbles[:, 1] << 4).astype(np.uint8)


def _image(pieces: list[tuple[int, np.ndarray]], beat_bytes: int) -> np.ndarray:
    end = max((start + len(data) for start, data in pieces), default=0)
    image = np.zeros(_align(end, beat_bytes), dtype=np.uint8)
    for start, data in pieces:
        image[start:start + len(data)] = data
    return image
