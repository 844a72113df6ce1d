"""Golden model of the base die's reads of a quantized tensor's view: the DQB's dequantization golden model
(`tb.models.dqb`) applied to every weight beat the view expands, in order. What the PNM computes on those FP16
values is the decode-layer golden model's (`tb.models.pnm`), run on a memory image that holds this view."""
from collections.abc import Sequence

import numpy as np

from tb.models import dqb


def view_bytes(image: np.ndarray, entries: Sequence[dqb.LayerEntry], entry: dqb.LayerEntry, tag: int,
               rounding: str, beat_bytes: int) -> np.ndarray:
    """The bytes a read of `entry`'s whole view returns, row after row: every weight beat dequantized under
    `tag` against the DQB table `entries`, its output beats in order."""
    addresses = range(entry.weight_base, entry.weight_base + entry.weight_size, beat_bytes)
    responses = dqb.dequantize_reads(image, entries, list(addresses), [tag] * len(addresses), rounding,
                                     8 * beat_bytes)
    bad = [a for a, r in zip(addresses, responses) if r.error]
    if bad:
        raise ValueError(f"the view of the weights at {entry.weight_base:#x} has DQB errors from {bad[0]:#x} on")
    return np.frombuffer(b"".join(beat.to_bytes(beat_bytes, "little") for r in responses for beat in r.beats),
                         np.uint8).copy()
