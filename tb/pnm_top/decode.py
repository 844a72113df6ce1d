"""One GQA group's attention for a decode token, written in today's ISA as docs/pnm-top.md ("Not done") lays it
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
               Instruction(Opcode.SCORE.value, d=scores, a=q16, b=k_row, n=BLOCK, k=HEAD_DIM, m=HEADS), BARRIER,
               _vop(Op.ADD, scores, scores, mask_row, BLOCK, m=HEADS), BARRIER,            # padding → −inf
               Instruction(Opcode.SOFTMAX.value, d=state_row, a=scores, b=p16, c=alpha, n=BLOCK, m=HEADS), BARRIER,
               Instruction(Opcode.PV.value, d=out, a=p16, b=vt_row, n=BLOCK, k=HEAD_DIM, m=HEADS), BARRIER]
    for j in range(HEADS):   # the new token's V as its own one-key block: o_j += e^(s − m') · v, then o_j /= l_j
        program += [_vop(Op.EXP, p_new, scores + j * BLOCK + CACHED, state_row + 2 * j, 1), BARRIER,
                    _vop(Op.MUL, weighted, v_new, p_new, HEAD_DIM, broadcast=True),
                    _vop(Op.RECIP, inverse, state_row + 2 * j + 1, state_row, 1), BARRIER,
                    _vop(Op.ADD, out + j * HEAD_DIM, out + j * HEAD_DIM, weighted, HEAD_DIM), BARRIER,
                    _vop(Op.MUL, out + j * HEAD_DIM, out + j * HEAD_DIM, inverse, HEAD_DIM, broadcast=True), BARRIER]

    # float64: RMSNorm, projections, softmax over the 12 cached keys and the new one, weights times values.
    h = x.astype(np.float64) / np.sqrt(np.mean(x.astype(np.float64) ** 2) + 1e-5) * gains
    qs = (wq.astype(np.float64) @ h).reshape(HEADS, HEAD_DIM) * float(scale)
    all_keys = np.vstack([keys[:CACHED], wk.astype(np.float64) @ h])
    all_values = np.vstack([values[:CACHED], wv.astype(np.float64) @ h])
    logits = qs @ all_keys.T
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    return Attention(program, out, (weights / weights.sum(axis=1, keepdims=True)) @ all_values)
