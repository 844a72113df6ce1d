"""What one decode iteration asks of DuoPD's vector unit (paper §4.2): per layer and PNM, the passes of RMSNorm,
the residual adds, the online softmax, the MLP's activation and the FlashDecoding merge, as the PNM's instruction
set (docs/reference/pnm-isa.md) runs them on the unit's ops (docs/design/pnm-vector.md). Pricing them is
`sysmodel.execution.VectorFigures`; the choices (which PNM does what, what overlaps the array) are in
docs/design/pnm-vector.md, "In the system model".

A `Pass` streams `elements` FP32 elements (one per lane and cycle slot) through one op. A `Step` is passes that
need none of each other's results: they stream back to back and pay the unit's latency once. A chain of steps
pays it per step, because each step needs the results of the one before (a reduction's scalar, say).
"""
from typing import Any, NamedTuple

from .operators import Shard, Work


class Pass(NamedTuple):
    op: str              # the unit's op as its figures name it: "mul", "exp", ...
    elements: Any        # FP32 elements through the unit (numpy arrays for a block of iterations)
    reduce: str = ""     # "sum" or "max": the results folded over each vector, one value per vector


Step = tuple[Pass, ...]


class VectorWork(NamedTuple):
    """One layer's vector work on one PNM. `serial` runs while the array waits for it (and it for the array);
    `overlapped[name]` streams beside the array operator `name` and is exposed only by its last step's chain."""
    serial: list[Step]
    overlapped: dict[str, list[Step]]


def rms_norm(vectors: Any, length: int) -> list[Step]:
    """RMSNorm (the NORM instruction) of `vectors` vectors: Σa² (MUL, SUM-reduced) beside a·gain; ·1/n; +ε; 1/√;
    then (a·gain)·r. Each scalar step needs the one before."""
    elements = vectors * length
    return [(Pass("mul", elements, "sum"), Pass("mul", elements)), (Pass("mul", vectors),), (Pass("add", vectors),),
            (Pass("rsqrt", vectors),), (Pass("mul", elements),)]


def residual_add(vectors: Any, length: int) -> list[Step]:
    return [(Pass("add", vectors * length),)]


def online_softmax(heads: Any, scores: Any, head_dim: int) -> list[Step]:
    """Softmax of `heads` (head, sequence) pairs over `scores` scores in all, each pair's scores one block (they
    fit in the buffer, see docs/design/pnm-vector.md): the max (MAX-reduced); e^(s − m), the P the array's P·V reads,
    beside its sum l (EXP SUM-reduced); 1/l; the P·V output o·(1/l), the normalised partial MERGE takes."""
    return [(Pass("max", scores, "max"),), (Pass("exp", scores), Pass("exp", scores, "sum")),
            (Pass("recip", heads),), (Pass("mul", heads * head_dim),)]


def merge_tree(heads: Any, head_dim: int, partials: int) -> list[Step]:
    """FlashDecoding merge of `partials` partials (one per PNM) of `heads` (head, sequence) pairs, pairwise in a
    tree (MERGE instructions of one level are independent): per level MERGE gives (m, l, w₁, w₂) per pair; w₁·o₁
    beside w₂·o₂; their sum."""
    steps, left = [], partials
    while left > 1:
        pairs = left // 2
        steps += [(Pass("merge", pairs * heads),), (Pass("mul", 2 * pairs * heads * head_dim),),
                  (Pass("add", pairs * heads * head_dim),)]
        left -= pairs
    return steps


def activation(elements: Any, gated: bool) -> list[Step]:
    """SiLU and the gate product (SwiGLU), or GELU."""
    return [(Pass("silu", elements),), (Pass("mul", elements),)] if gated else [(Pass("gelu", elements),)]


def decode_layer(shard: Shard, work: Work, stacks: int) -> VectorWork:
    """One decode layer on each of the `stacks` PNMs of a GPU. Norms and residual adds cover every sequence's
    whole hidden vector on every PNM, as tensor-parallel ranks replicate them (each PNM's share of a weight matrix
    reads the whole input); the softmax covers the PNM's share of the context (sequence parallelism, §5.2) and the
    activation its share of the MLP rows (weights split over the stacks); the merge is the reduction of the
    inter-PNM all-reduce: each PNM merges the `stacks` partials of its 1/`stacks` of the (head, sequence) pairs."""
    m, t = shard.model, work.tokens
    heads = shard.heads * t                   # (head, sequence) pairs: one query token per sequence
    mlp = "experts" if m.moe else "mlp"
    width = t * (m.experts_per_token if m.moe else 1) * m.ffn / shard.tp / stacks
    norm, residual = rms_norm(t, m.hidden), residual_add(t, m.hidden)
    return VectorWork(serial=norm + merge_tree(heads / stacks, m.head_dim, stacks) + residual + norm + residual,
                      overlapped={"attention": online_softmax(heads, shard.heads * work.kv_read / stacks,
                                                              m.head_dim),
                                  mlp: activation(width, m.gated_mlp)})


def decode_head(shard: Shard, work: Work) -> list[Step]:
    """The final norm of the sequences that emit a token (before the LM head)."""
    return rms_norm(work.logits, shard.model.hidden)
