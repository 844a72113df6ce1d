"""Quantized checkpoints of a layer's FP16 weights (GPTQ v1 and AWQ INT4, INT8 with zero points) by round-to-nearest
per group, their single-pseudo-channel layout in the DQB's format, and the FP16 each weight's view reads as."""
from dataclasses import dataclass

import numpy as np

from basedie.weights import checkpoints
from ..models import fp
from ..models import dqb as dqb_model
from ..models.base_die import view_bytes
from basedie.weights.pc_layout import QuantizedLayer, build_layout

CHECKPOINTS = ("gptq", "awq", "int8")
GROUP_SIZE = 32
"""Weights per group (along the input dimension): two groups per row of the bench layer's 64-wide weights."""
TAGS = {"int4": dqb_model.tag_of("int4", "fp16"), "int8": dqb_model.tag_of("int8", "fp16")}


def _groups(w: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group of `GROUP_SIZE` along K of `w` `[N, K]`: the FP16 scale spanning its range in `levels` steps and
    the unsigned zero point that puts its minimum at 0."""
    groups = w.astype(np.float32).reshape(w.shape[0], -1, GROUP_SIZE)
    low, high = groups.min(-1), groups.max(-1)
    scale = np.maximum((high - low) / levels, 2.0 ** -14).astype(np.float16)
    zero = np.clip(np.rint(-low / scale.astype(np.float32)), 0, levels)
    return scale, zero.astype(np.int64)


def _codes(w: np.ndarray, scale: np.ndarray, zero: np.ndarray, levels: int) -> np.ndarray:
    per = np.repeat(scale.astype(np.float32), GROUP_SIZE, axis=1)
    return np.clip(np.rint(w.astype(np.float32) / per) + np.repeat(zero, GROUP_SIZE, axis=1), 0, levels).astype(np.int64)


@dataclass(frozen=True)
class Quantized:
    layer: QuantizedLayer
    reference: np.ndarray
    """`[N, K]` FP16 by the format's own dequantization (GPTQ's, AWQ's, or (q − z)·s for INT8)."""


def quantize(w: np.ndarray, kind: str) -> Quantized:
    """`w` `[N, K]` FP16 as a `kind` checkpoint in the DQB's format."""
    if kind not in CHECKPOINTS:
        raise ValueError(f"checkpoint {kind!r} is not one of {', '.join(CHECKPOINTS)}")
    if kind == "int8":
        scale, zero = _groups(w, 255)
        q = _codes(w, scale, zero, 255)
        layer = QuantizedLayer(q - 128, zero - 128, fp.to_bits(scale), "int8", GROUP_SIZE)
        return Quantized(layer, fp.from_bits(layer.dequantize("fp16"), "fp16"))
    scale, zero = _groups(w, 15)
    if kind == "gptq":
        zero = np.maximum(zero, 1)      # GPTQ v1 stores z − 1 in a nibble: z = 0 has no v1 form
    q = _codes(w, scale, zero, 15)
    k = w.shape[1]
    if kind == "gptq":
        ckpt = checkpoints.pack_gptq(q.T, zero.T, scale.T, np.arange(k) // GROUP_SIZE, version=1)
        layer, perm = checkpoints.gptq_to_dqb(ckpt)
        assert (perm == np.arange(k)).all()
        return Quantized(layer, checkpoints.dequantize_gptq(ckpt).T)
    ckpt = checkpoints.pack_awq(q.T, zero.T, scale.T, GROUP_SIZE)
    return Quantized(checkpoints.awq_to_dqb(ckpt), checkpoints.dequantize_awq(ckpt).T)


@dataclass(frozen=True)
class Stored:
    """Quantized weights laid out from `base` in one pseudo channel: the memory image (`image[base:]` is theirs),
    each weight's DQB table entry and tag, and the bytes its view reads as (by the golden model)."""
    image: np.ndarray
    entries: tuple
    tags: tuple
    views: tuple


def store(weights: list[np.ndarray], kind: str, base: int, beat_bytes: int, rounding: str) -> Stored:
    """Quantize and place `weights`; each view is checked against the format's own dequantization."""
    quantized = [quantize(w, kind) for w in weights]
    layout = build_layout([q.layer for q in quantized], ig=64, num_pcs=1, global_base=base, beat_bytes=beat_bytes)
    entries = tuple(layout.entries(0))
    tags = tuple(TAGS[q.layer.weight_format] for q in quantized)
    views = tuple(view_bytes(layout.images[0], entries, e, t, rounding, beat_bytes)
                  for e, t in zip(entries, tags))
    for q, view in zip(quantized, views):
        if rounding == "nearest_even":
            assert (view.view(np.float16).reshape(q.reference.shape).view(np.uint16)
                    == q.reference.view(np.uint16)).all(), "the DQB golden disagrees with the format's dequantization"
    return Stored(layout.images[0], entries, tags, views)
