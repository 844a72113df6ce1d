"""The start of issue 16's decode-layer proof, on the golden model only: one GQA group's attention for a decode
token, written in today's ISA as docs/pnm-top.md ("Not done") lays it out, at the bench's shape (lanes of 8 FP16,
4-byte rows). It checks that every command runs (none refused) and that the result is attention in float64 within
the FP16 roundings' bound. The RTL run of the same program (bit-exact against this model) is the next step."""
import numpy as np

from rtl.pnm_controller.isa import Instruction, Opcode, vop_func
from rtl.pnm_vector.ports import Op
from tb.models import pnm_controller as control
from tb.models import pnm_top as model

ROW, TILE, MAX_TENSOR = 4, 8, 128                      # bytes per row, FP16 per lane tile, bytes per LOAD
SHAPE = model.Shape(row_bytes=ROW, width=TILE, lanes=2, sublane_width=4)
CONFIG = control.Config(depth=256, buffer_rows=4096, address_bits=16, row_bytes=ROW, max_tensor_bytes=MAX_TENSOR,
                        id_bits=8)
HIDDEN, HEADS, HEAD_DIM, CACHED, BLOCK = 16, 2, 8, 12, 16  # the new token is token 12 of a 16-token block


class Layout:
    """Buffer rows on tile boundaries, memory beside them, and the LOADs that bring each input in."""

    def __init__(self) -> None:
        self.row, self.address, self.memory, self.loads = 0, 0, np.zeros(1 << 16, np.uint8), []

    def take(self, nbytes: int) -> int:
        row = self.row
        self.row += -(-nbytes // (2 * TILE)) * (2 * TILE) // ROW
        return row

    def input(self, values: np.ndarray) -> int:
        raw = np.frombuffer(values.tobytes(), np.uint8)
        row, address = self.take(raw.size), self.address
        self.memory[address:address + raw.size] = raw
        self.address += -(-raw.size // 64) * 64
        self.loads += [Instruction(Opcode.LOAD.value, n=min(MAX_TENSOR, raw.size - o), d=row + o // ROW,
                                   address=address + o) for o in range(0, raw.size, MAX_TENSOR)]
        return row


def _vop(op: Op, d: int, a: int, b: int, n: int, m: int = 1, **func) -> Instruction:
    return Instruction(Opcode.VOP.value, func=vop_func(op, **func), d=d, a=a, b=b, n=n, m=m)


def test_a_decode_tokens_attention_runs_in_the_isa() -> None:
    rng = np.random.default_rng(16)
    x = rng.standard_normal(HIDDEN).astype(np.float32)
    gains = (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32)
    wq, wk, wv = (rng.standard_normal((rows, HIDDEN)).astype(np.float16) / 4
                  for rows in (HEADS * HEAD_DIM, HEAD_DIM, HEAD_DIM))
    keys = rng.standard_normal((BLOCK, HEAD_DIM)).astype(np.float16)
    values = rng.standard_normal((BLOCK, HEAD_DIM)).astype(np.float16)
    keys[CACHED:] = values[CACHED:] = 0          # the new token's row (written below) and the padding
    scale = np.float32(1 / np.sqrt(HEAD_DIM))
    mask = np.where(np.arange(BLOCK) <= CACHED, 0, -np.inf).astype(np.float32)

    lay = Layout()
    x_row, g_row = lay.input(x), lay.input(gains)
    c_row = lay.input(np.array([1 / HIDDEN, 1e-5], np.float32))
    wq_row, wk_row, wv_row = lay.input(wq), lay.input(wk), lay.input(wv)
    k_row, vt_row = lay.input(keys), lay.input(np.ascontiguousarray(values.T))   # K token-major, V transposed
    scale_row = lay.input(np.full(HEADS, scale, np.float32))
    mask_row = lay.input(np.tile(mask, HEADS))
    state_row = lay.input(np.tile(np.array([-np.inf, 0], np.float32), HEADS))
    normed, normed16 = lay.take(4 * HIDDEN), lay.take(2 * HIDDEN)
    q, q16, k_new, v_new = (lay.take(4 * HEADS * HEAD_DIM) for _ in range(4))
    scores, p16, alpha, out = (lay.take(4 * HEADS * BLOCK) for _ in range(4))
    p_new, weighted, inverse = (lay.take(4 * HEAD_DIM) for _ in range(3))
    new_key_row = k_row + CACHED * HEAD_DIM * 2 // ROW
    B = Instruction(Opcode.BARRIER.value)
    program = [*lay.loads, B,
               Instruction(Opcode.NORM.value, d=normed, a=x_row, b=g_row, c=c_row, n=HIDDEN, m=1), B,
               _vop(Op.MAX, normed16, normed, normed, HIDDEN, narrow=True), B,
               Instruction(Opcode.GEMV.value, d=q, a=normed16, b=wq_row, n=HEADS * HEAD_DIM, k=HIDDEN, m=1),
               Instruction(Opcode.GEMV.value, d=k_new, a=normed16, b=wk_row, n=HEAD_DIM, k=HIDDEN, m=1),
               Instruction(Opcode.GEMV.value, d=v_new, a=normed16, b=wv_row, n=HEAD_DIM, k=HIDDEN, m=1), B,
               _vop(Op.MUL, q16, q, scale_row, HEAD_DIM, m=HEADS, broadcast=True, narrow=True),
               _vop(Op.MAX, new_key_row, k_new, k_new, HEAD_DIM, narrow=True), B,      # K appended in place
               Instruction(Opcode.SCORE.value, d=scores, a=q16, b=k_row, n=BLOCK, k=HEAD_DIM, m=HEADS), B,
               _vop(Op.ADD, scores, scores, mask_row, BLOCK, m=HEADS), B,                # padding → −inf
               Instruction(Opcode.SOFTMAX.value, d=state_row, a=scores, b=p16, c=alpha, n=BLOCK, m=HEADS), B,
               Instruction(Opcode.PV.value, d=out, a=p16, b=vt_row, n=BLOCK, k=HEAD_DIM, m=HEADS), B]
    for j in range(HEADS):   # the new token's V as its own one-key block: o_j += e^(s − m') · v, then o_j /= l_j
        program += [_vop(Op.EXP, p_new, scores + j * BLOCK + CACHED, state_row + 2 * j, 1), B,
                    _vop(Op.MUL, weighted, v_new, p_new, HEAD_DIM, broadcast=True),
                    _vop(Op.RECIP, inverse, state_row + 2 * j + 1, state_row, 1), B,
                    _vop(Op.ADD, out + j * HEAD_DIM, out + j * HEAD_DIM, weighted, HEAD_DIM), B,
                    _vop(Op.MUL, out + j * HEAD_DIM, out + j * HEAD_DIM, inverse, HEAD_DIM, broadcast=True), B]
    program.append(Instruction(Opcode.DONE.value))
    assert len(program) <= CONFIG.depth
    words = [0] * CONFIG.depth
    words[:len(program)] = [i.encode() for i in program]
    buffer = np.zeros(CONFIG.buffer_rows * ROW, np.uint8)
    result = model.run(words, 0, CONFIG, SHAPE, lay.memory, buffer)
    assert (result.outcome.state, result.outcome.error, result.unit_error) == ("done", control.NONE, model.UNIT_NONE)

    # float64: RMSNorm, projections, softmax over the 12 cached keys and the new one, weights times values.
    h = x.astype(np.float64) / np.sqrt(np.mean(x.astype(np.float64) ** 2) + 1e-5) * gains
    qs = (wq.astype(np.float64) @ h).reshape(HEADS, HEAD_DIM) * float(scale)
    all_keys = np.vstack([keys[:CACHED], wk.astype(np.float64) @ h])
    all_values = np.vstack([values[:CACHED], wv.astype(np.float64) @ h])
    logits = qs @ all_keys.T
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    exact = (weights / weights.sum(axis=1, keepdims=True)) @ all_values
    got = buffer[out * ROW:out * ROW + 4 * HEADS * HEAD_DIM].view(np.float32).reshape(HEADS, HEAD_DIM)
    # Activations, q, the new key and P are rounded to FP16 (2^-11 relative each) on the way, with values of
    # magnitude about 1: a bound of 4 · 2^-11 (seen: 1.1e-4). Leaving out the new token's V (weight about 1/13)
    # would be off by about 0.1.
    assert np.abs(got - exact).max() < 4 * 2 ** -11, np.abs(got - exact).max()
