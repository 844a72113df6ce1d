"""One GQA group's attention for a decode token, written in today's ISA as docs/pnm.md ("Not done") lays it
out, at the bench's shape (lanes of 8 FP16, 4-byte rows): the start of issue 16's decode-layer proof. The program
and its float64 reference are shared by the golden-model test and the bench."""
from dataclasses import dataclass

import numpy as np

from rtl.pnm_controller.isa import Instruction, Opcode, vop_func
from rtl.pnm_vector.ports import Op

from .rows import Rows

ROW, TILE = 4, 8                                           # bytes per row, FP16 per lane tile
HIDDEN, HEADS, HEAD_DIM, CACHED, BLOCK = 16, 2, 8, 12, 16  # the new token is token 12 of a 16-token block
BARRIER = Instruction(Opcode.BARRIER.value)


@dataclass(frozen=True)
class Attention:
    program: list[Instruction]   # the LOADs and the computation, ending in a BARRIER (no STORE, no DONE)
    out_row: int                 # the output, HEADS × HEAD_DIM FP32
    exact: np.ndarray            # float64 attention (HEADS × HEAD_DIM)


def _vop(op: Op, d: int, a: int, b: int, n: int, m: int = 1, **func) -> Instruction:
    return Instruction(Opcode.VOP.value, func=vop_func(op, **func), d=d, a=a, b=b, n=n, m=m)


@dataclass(frozen=True)
class KeyBlock:
    """One block of a GQA group's keys: the group's FP16 queries, the block's keys (token-major) and values
    (transposed) in the buffer, the −inf mask over its padding (0: none) and its length in tokens."""
    queries: int
    keys: int
    values_t: int
    mask: int
    tokens: int


@dataclass(frozen=True)
class Scratch:
    """A GQA group's rows for the attention: the online-softmax state (m, l per head), the block's scores, P
    (FP16) and α, the output accumulator o, the block's P·V before it is added (and the new token's P and P·v)."""
    state: int
    scores: int
    p16: int
    alpha: int
    out: int
    partial: int = 0
    weighted: int = 0


def block_step(block: KeyBlock, s: Scratch, heads: int, head_dim: int, first: bool) -> list[Instruction]:
    """One block of an online-softmax attention: SCORE, the −inf mask over the padding, SOFTMAX (the state
    update), then o ← P·V for the first block, o ← o·α + P·V for a later one."""
    program = [Instruction(Opcode.SCORE.value, d=s.scores, a=block.queries, b=block.keys, n=block.tokens, k=head_dim,
                           m=heads), BARRIER]
    if block.mask:
        program += [_vop(Op.ADD, s.scores, s.scores, block.mask, block.tokens, m=heads), BARRIER]
    program += [Instruction(Opcode.SOFTMAX.value, d=s.state, a=s.scores, b=s.p16, c=s.alpha, n=block.tokens,
                            m=heads), BARRIER]
    pv = Instruction(Opcode.PV.value, d=s.out if first else s.partial, a=s.p16, b=block.values_t, n=block.tokens,
                     k=head_dim, m=heads)
    if first:
        return program + [pv, BARRIER]
    return program + [_vop(Op.MUL, s.out, s.out, s.alpha, head_dim, m=heads, broadcast=True), pv, BARRIER,
                      _vop(Op.ADD, s.out, s.out, s.partial, head_dim, m=heads), BARRIER]


def new_value(score: int, stride: int, value: int, s: Scratch, heads: int, head_dim: int) -> list[Instruction]:
    """The new token's V as its own one-key block (its column of the transposed V block is zero): per head j,
    o_j += e^(s_j − m'_j) · v in FP32, where s_j is row `score` + j·`stride` (its score, already in l). Needs
    4-byte rows (one FP32 per row)."""
    program = []
    for j in range(heads):
        program += [_vop(Op.EXP, s.partial, score + j * stride, s.state + 2 * j, 1), BARRIER,
                    _vop(Op.MUL, s.weighted, value, s.partial, head_dim, broadcast=True), BARRIER,
                    _vop(Op.ADD, s.out + j * head_dim, s.out + j * head_dim, s.weighted, head_dim), BARRIER]
    return program


def divide(out: int, state: int, inverse: int, heads: int, head_dim: int) -> list[Instruction]:
    """o_j ← o_j · (1 / l_j) per head (4-byte rows: l_j is row `state` + 2j + 1)."""
    program = []
    for j in range(heads):
        program += [_vop(Op.RECIP, inverse, state + 2 * j + 1, state, 1), BARRIER,
                    _vop(Op.MUL, out + j * head_dim, out + j * head_dim, inverse, head_dim, broadcast=True), BARRIER]
    return program


def attention(rng: np.random.Generator, put, address: int, max_tensor: int) -> Attention:
    """RMSNorm of x, `narrow`, the Q/K/V GEMVs, the queries scaled and narrowed, the new key narrowed into its
    row of the K block, SCORE, a −inf mask over the padding, SOFTMAX, PV over Vᵀ, the new token's V as its own
    one-key block (its P in FP32 as e^(s − m')), and the division by l."""
    x = rng.standard_normal(HIDDEN).astype(np.float32)
    gains = (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32)
    wq, wk, wv = (rng.standard_normal((rows, HIDDEN)).astype(np.float16) / 4
                  for rows in (HEADS * HEAD_DIM, HEAD_DIM, HEAD_DIM))
    keys = rng.standard_normal((BLOCK, HEAD_DIM)).astype(np.float16)
    values = rng.standard_normal((BLOCK, HEAD_DIM)).astype(np.float16)
    keys[CACHED:] = values[CACHED:] = 0          # the new token's row (written by the program) and the padding
    scale = np.float32(1 / np.sqrt(HEAD_DIM))
    mask = np.where(np.arange(BLOCK) <= CACHED, 0, -np.inf).astype(np.float32)

    lay, inputs = Rows(put, ROW, 2 * TILE, max_tensor, address), []

    def input(values: np.ndarray) -> int:
        row, loads = lay.operand(values)
        inputs.extend(loads)
        return row

    x_row, g_row = input(x), input(gains)
    c_row = input(np.array([1 / HIDDEN, 1e-5], np.float32))
    wq_row, wk_row, wv_row = input(wq), input(wk), input(wv)
    k_row, vt_row = input(keys), input(np.ascontiguousarray(values.T))   # K token-major, V transposed
    scale_row = input(np.full(HEADS, scale, np.float32))
    mask_row = input(np.tile(mask, HEADS))
    state_row = input(np.tile(np.array([-np.inf, 0], np.float32), HEADS))
    normed, normed16 = lay.take(4 * HIDDEN), lay.take(2 * HIDDEN)
    q, q16, k_new, v_new = (lay.take(4 * HEADS * HEAD_DIM) for _ in range(4))
    scores, p16, alpha, out = (lay.take(4 * HEADS * BLOCK) for _ in range(4))
    p_new, weighted, inverse = (lay.take(4 * HEAD_DIM) for _ in range(3))
    new_key_row = k_row + CACHED * HEAD_DIM * 2 // ROW
    program = [*inputs, BARRIER,
               Instruction(Opcode.NORM.value, d=normed, a=x_row, b=g_row, c=c_row, n=HIDDEN, m=1), BARRIER,
               _vop(Op.MAX, normed16, normed, normed, HIDDEN, narrow=True), BARRIER,
               Instruction(Opcode.GEMV.value, d=q, a=normed16, b=wq_row, n=HEADS * HEAD_DIM, k=HIDDEN, m=1),
               Instruction(Opcode.GEMV.value, d=k_new, a=normed16, b=wk_row, n=HEAD_DIM, k=HIDDEN, m=1),
               Instruction(Opcode.GEMV.value, d=v_new, a=normed16, b=wv_row, n=HEAD_DIM, k=HIDDEN, m=1), BARRIER,
               _vop(Op.MUL, q16, q, scale_row, HEAD_DIM, m=HEADS, broadcast=True, narrow=True),
               _vop(Op.MAX, new_key_row, k_new, k_new, HEAD_DIM, narrow=True), BARRIER,   # K appended in place
               *block_step(KeyBlock(q16, k_row, vt_row, mask_row, BLOCK), Scratch(state_row, scores, p16, alpha, out),
                           HEADS, HEAD_DIM, first=True),
               *new_value(scores + CACHED, BLOCK, v_new, Scratch(state_row, scores, p16, alpha, out, p_new, weighted),
                          HEADS, HEAD_DIM),
               *divide(out, state_row, inverse, HEADS, HEAD_DIM)]

    # float64: RMSNorm, projections, softmax over the 12 cached keys and the new one, weights times values.
    h = x.astype(np.float64) / np.sqrt(np.mean(x.astype(np.float64) ** 2) + 1e-5) * gains
    qs = (wq.astype(np.float64) @ h).reshape(HEADS, HEAD_DIM) * float(scale)
    all_keys = np.vstack([keys[:CACHED], wk.astype(np.float64) @ h])
    all_values = np.vstack([values[:CACHED], wv.astype(np.float64) @ h])
    logits = qs @ all_keys.T
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    return Attention(program, out, (weights / weights.sum(axis=1, keepdims=True)) @ all_values)
