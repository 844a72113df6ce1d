"""GPTQ (v1, v2, act-order) and AWQ GEMM INT4 checkpoints: packers, independent unpackers, each format's own
reference dequantization, and the exact mapping onto the DQB's signed INT4 + zero point (docs/formats.md).

The packers exist to generate fixtures (no real checkpoint is reachable here); the unpackers are written
separately from them and are checked against hand-worked words. `to_dqb` turns a checkpoint into a
`QuantizedLayer` (row-major `[out_features, in_features]`, INT4 codes and zeros minus 8, FP16 scales) and
the input permutation the deployment applies.

Act-order (`g_idx` not monotonic): the layout needs each group's G input rows contiguous, so the deployment
stores the weight columns in the order `perm = argsort(g_idx, stable)`: stored column i is input row
`perm[i]`, and stored group g is exactly checkpoint group g. The GPU then multiplies the stored weights by
`x[perm]` (the activations gathered with the same permutation, or the previous layer's output channels
stored in that order): `W @ x == W[:, perm] @ x[perm]` term by term, so the products are unchanged.
"""
from dataclasses import dataclass

import numpy as np

from tb.models import fp
from basedie.weights.pc_layout import QuantizedLayer

NIBBLES_PER_WORD = 8
AWQ_COLUMN_OF_NIBBLE = (0, 2, 4, 6, 1, 3, 5, 7)
"""AutoAWQ GEMM: nibble i of a packed word holds output column 8c + AWQ_COLUMN_OF_NIBBLE[i]."""
AWQ_NIBBLE_OF_COLUMN = (0, 4, 1, 5, 2, 6, 3, 7)
"""The same interleave seen from the column: output column 8c + j sits in nibble AWQ_NIBBLE_OF_COLUMN[j]."""
SIGNED_INT4_OFFSET = 8
"""Unsigned q, z in 0..15 become two's-complement INT4 q - 8, z - 8: (q - z) is unchanged."""


@dataclass(frozen=True)
class GPTQCheckpoint:
    """AutoGPTQ INT4 tensors of one linear layer (in_features K, out_features N)."""
    qweight: np.ndarray
    """int32 `[K/8, N]`: nibble j (bits 4j..4j+3) of word row r holds input row 8r + j."""
    qzeros: np.ndarray
    """int32 `[groups, N/8]`: nibble j of word c holds column 8c + j; v1 stores z - 1, v2 stores z."""
    scales: np.ndarray
    """float16 `[groups, N]`."""
    g_idx: np.ndarray
    """int32 `[K]`: the group of each input row (not monotonic with act-order)."""
    version: int
    """1 ("gptq", zeros stored minus one) or 2 ("gptq_v2", zeros stored as they are)."""


@dataclass(frozen=True)
class AWQCheckpoint:
    """AutoAWQ GEMM INT4 tensors of one linear layer (in_features K, out_features N)."""
    qweight: np.ndarray
    """int32 `[K, N/8]`, packed along the output dimension with the AWQ interleave."""
    qzeros: np.ndarray
    """int32 `[K/G, N/8]`, same interleave, zeros stored as they are."""
    scales: np.ndarray
    """float16 `[K/G, N]`."""
    group_size: int


def _pack_nibbles(values: np.ndarray, nibble_of_position: tuple[int, ...], axis: int) -> np.ndarray:
    """Pack unsigned nibbles along `axis` into int32 words: position p of each 8-run goes to nibble[p]."""
    values = np.moveaxis(np.asarray(values, dtype=np.uint32) & 0xF, axis, -1)
    runs = values.reshape(*values.shape[:-1], -1, NIBBLES_PER_WORD)
    words = np.zeros(runs.shape[:-1], dtype=np.uint32)
    for position, nibble in enumerate(nibble_of_position):
        words |= runs[..., position] << np.uint32(4 * nibble)
    return np.moveaxis(words.view(np.int32), -1, axis)


def pack_gptq(q: np.ndarray, z: np.ndarray, scales: np.ndarray, g_idx: np.ndarray,
              version: int = 1) -> GPTQCheckpoint:
    """The AutoGPTQ packer: `q` `[K, N]` and `z` `[groups, N]` unsigned 0..15; v1 stores `(z - 1) & 0xF`."""
    if version not in (1, 2):
        raise ValueError(f"version={version}: GPTQ checkpoints are v1 or v2")
    stored_zeros = np.asarray(z, dtype=np.int64) - (1 if version == 1 else 0)
    return GPTQCheckpoint(_pack_nibbles(q, tuple(range(8)), axis=0),
                          _pack_nibbles(stored_zeros, tuple(range(8)), axis=1),
                          np.asarray(scales, dtype=np.float16), np.asarray(g_idx, dtype=np.int32), version)


def pack_awq(q: np.ndarray, z: np.ndarray, scales: np.ndarray, group_size: int) -> AWQCheckpoint:
    """The AutoAWQ GEMM packer: `q` `[K, N]` and `z` `[K/G, N]` unsigned 0..15, interleaved along N."""
    return AWQCheckpoint(_pack_nibbles(q, AWQ_NIBBLE_OF_COLUMN, axis=1),
                         _pack_nibbles(z, AWQ_NIBBLE_OF_COLUMN, axis=1),
                         np.asarray(scales, dtype=np.float16), group_size)


def _nibble(words: np.ndarray, index: int) -> np.ndarray:
    """Nibble `index` of int32 words; `& 0xF` after the arithmetic shift also clears nibble 7's sign bits."""
    return (np.asarray(words, dtype=np.int32) >> (4 * index)) & 0xF


def unpack_gptq(checkpoint: GPTQCheckpoint) -> tuple[np.ndarray, np.ndarray]:
    """Unsigned `q` `[K, N]` and the zero points `z` `[groups, N]` as the format means them (v1: stored + 1)."""
    words, out_features = checkpoint.qweight.shape
    q = np.empty((words * NIBBLES_PER_WORD, out_features), dtype=np.int64)
    for j in range(NIBBLES_PER_WORD):
        q[j::NIBBLES_PER_WORD] = _nibble(checkpoint.qweight, j)
    groups, zero_words = checkpoint.qzeros.shape
    z = np.empty((groups, zero_words * NIBBLES_PER_WORD), dtype=np.int64)
    for j in range(NIBBLES_PER_WORD):
        z[:, j::NIBBLES_PER_WORD] = _nibble(checkpoint.qzeros, j)
    return q, z + (1 if checkpoint.version == 1 else 0)


def unpack_awq(checkpoint: AWQCheckpoint) -> tuple[np.ndarray, np.ndarray]:
    """Unsigned `q` `[K, N]` and `z` `[K/G, N]`, undoing the interleave nibble by nibble."""
    def unpack(words: np.ndarray) -> np.ndarray:
        out = np.empty((words.shape[0], words.shape[1] * NIBBLES_PER_WORD), dtype=np.int64)
        for nibble, column in enumerate(AWQ_COLUMN_OF_NIBBLE):
            out[:, column::NIBBLES_PER_WORD] = _nibble(words, nibble)
        return out
    return unpack(checkpoint.qweight), unpack(checkpoint.qzeros)


def _reference(q: np.ndarray, z: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """`(q - z) * s` in float32, then to float16 (docs/formats.md), all operands already per element."""
    with np.errstate(over="ignore"):  # beyond 65504 the FP16 result is inf, as the DQB returns too
        return ((q.astype(np.float32) - z.astype(np.float32)) * scales.astype(np.float32)).astype(np.float16)


def dequantize_gptq(checkpoint: GPTQCheckpoint) -> np.ndarray:
    """GPTQ's own dequantization `[K, N]` float16: `W = s * (q - z)` with row k in group `g_idx[k]`."""
    q, z = unpack_gptq(checkpoint)
    return _reference(q, z[checkpoint.g_idx], checkpoint.scales[checkpoint.g_idx])


def dequantize_awq(checkpoint: AWQCheckpoint) -> np.ndarray:
    """AWQ's own dequantization `[K, N]` float16: `W = (q - z) * s` with row k in group k // G."""
    q, z = unpack_awq(checkpoint)
    rows = np.arange(q.shape[0]) // checkpoint.group_size
    return _reference(q, z[rows], checkpoint.scales[rows])


def act_order_permutation(g_idx: np.ndarray, group_size: int) -> np.ndarray:
    """The input-row order that makes every group contiguous: stored column i is input row `perm[i]`."""
    g_idx = np.asarray(g_idx)
    counts = np.bincount(g_idx, minlength=len(g_idx) // group_size)
    if len(g_idx) % group_size or (counts != group_size).any():
        raise ValueError(f"g_idx must put exactly group_size={group_size} input rows in each group")
    return np.argsort(g_idx, kind="stable")


def _signed(unsigned: np.ndarray, what: str) -> np.ndarray:
    unsigned = np.asarray(unsigned, dtype=np.int64)
    if ((unsigned < 0) | (unsigned > 15)).any():
        raise ValueError(f"{what} outside 0..15 (a GPTQ v1 zero point stored as 0xF means 16) has no signed INT4 "
                         f"form")
    return unsigned - SIGNED_INT4_OFFSET


def gptq_to_dqb(checkpoint: GPTQCheckpoint) -> tuple[QuantizedLayer, np.ndarray]:
    """The DQB layer (INT4 -> FP16) of a GPTQ checkpoint and the input permutation the deployment applies."""
    q, z = unpack_gptq(checkpoint)
    group_size = q.shape[0] // z.shape[0]
    perm = act_order_permutation(checkpoint.g_idx, group_size)
    layer = QuantizedLayer(_signed(q[perm].T, "q"), _signed(z.T, "z"), fp.to_bits(checkpoint.scales.T),
                           "int4", group_size)
    return layer, perm


def awq_to_dqb(checkpoint: AWQCheckpoint) -> QuantizedLayer:
    """The DQB layer (INT4 -> FP16) of an AWQ checkpoint; its groups are contiguous already."""
    q, z = unpack_awq(checkpoint)
    return QuantizedLayer(_signed(q.T, "q"), _signed(z.T, "z"), fp.to_bits(checkpoint.scales.T), "int4",
                          checkpoint.group_size)
