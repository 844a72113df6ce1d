"""The PNM top's golden model against hand-worked values and float64: GEMV/PV by hand, the order of its sums,
element-wise ops, LOAD/STORE byte ranges, the refusals, and a program that stops at a malformed instruction."""
import numpy as np

from rtl.pnm_controller.isa import Instruction, Opcode, act_func, vop_func
from rtl.pnm_vector.ports import Op
from tb.models import pnm_controller as control
from tb.models import pnm as model

SHAPE = model.Shape(row_bytes=4, width=2, lanes=2)
CONFIG = control.Config(depth=16, buffer_rows=64, address_bits=10, row_bytes=4, max_tensor_bytes=64, id_bits=8)


def _buffer() -> np.ndarray:
    return np.zeros(256, np.uint8)


def _put(buffer, row, values) -> None:
    raw = np.frombuffer(np.ascontiguousarray(values).tobytes(), np.uint8)
    buffer[4 * row:4 * row + raw.size] = raw


def _get32(buffer, row, count) -> np.ndarray:
    return buffer[4 * row:4 * row + 4 * count].view(np.float32)


def test_gemv_by_hand() -> None:
    """d[j][i] = Σ_t a[j][t]·b[i][t]: a = [[1, 2, 3, 4], [0.5, 0, 0, -1]], b = [[1, 1, 1, 1], [2, 0, 0, 1]], in two
    tiles of 2 (the accumulator adds the second tile's sum to the first's)."""
    buffer = _buffer()
    _put(buffer, 0, np.array([[1, 2, 3, 4], [0.5, 0, 0, -1]], np.float16))
    _put(buffer, 4, np.array([[1, 1, 1, 1], [2, 0, 0, 1]], np.float16))
    model.dot(buffer, {"kind": model.GEMV, "d": 8, "a": 0, "b": 4, "n": 2, "k": 4, "m": 2}, SHAPE)
    assert _get32(buffer, 8, 4).tolist() == [10.0, 6.0, -0.5, 0.0]


def test_pv_reads_v_transposed() -> None:
    """P·V with b = Vᵀ (k rows of n tokens): d[j][e] = Σ_t p[j][t]·Vᵀ[e][t]."""
    buffer = _buffer()
    _put(buffer, 0, np.array([[0.25, 0.75]], np.float16))               # 1 head over 2 tokens
    _put(buffer, 4, np.array([[4, 8], [1, -1], [0, 2]], np.float16))    # 3 head dims × 2 tokens
    model.dot(buffer, {"kind": model.PV, "d": 8, "a": 0, "b": 4, "n": 2, "k": 3, "m": 1}, SHAPE)
    assert _get32(buffer, 8, 3).tolist() == [7.0, -0.5, 1.5]


def test_gemv_against_float64() -> None:
    rng = np.random.default_rng(1)
    buffer = np.zeros(4096, np.uint8)
    a, b = rng.standard_normal((2, 16)).astype(np.float16), rng.standard_normal((5, 16)).astype(np.float16)
    _put(buffer, 0, a)
    _put(buffer, 16, b)
    model.dot(buffer, {"kind": model.GEMV, "d": 64, "a": 0, "b": 16, "n": 5, "k": 16, "m": 2}, SHAPE)
    exact = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.allclose(_get32(buffer, 64, 10).reshape(2, 5), exact, rtol=1e-5, atol=1e-5)


def test_attention_mode_scores_one_sublane_per_key() -> None:
    """Lanes of 4 in sublanes of 2: SCORE with k = 2 scores each query against 3 keys (one a key per sublane)."""
    shape = model.Shape(row_bytes=4, width=4, lanes=2, sublane_width=2)
    buffer = _buffer()
    _put(buffer, 0, np.array([[1, 2], [3, -1]], np.float16))           # 2 queries
    _put(buffer, 2, np.array([[1, 0], [0, 1], [2, 2]], np.float16))    # 3 keys (b on a tile: 8 B = 2 rows)
    score = {"kind": model.SCORE, "d": 8, "a": 0, "b": 2, "n": 3, "k": 2, "m": 2}
    assert shape.attention(score) and not model.dot_refused(score, shape)
    model.dot(buffer, score, shape)
    assert _get32(buffer, 8, 6).tolist() == [1, 2, 6, 3, -1, 4]
    assert model.dot_refused(score | {"b": 1}, shape)                 # b off a tile
    assert not model.dot_refused(score | {"a": 1}, shape)             # a query is one 4-byte row: any row
    assert not shape.attention(score | {"k": 4}) and not shape.attention(score | {"kind": model.GEMV})


def test_elementwise_ops() -> None:
    buffer = _buffer()
    _put(buffer, 0, np.array([1.5, -2, 3], np.float32))
    _put(buffer, 4, np.array([0.5, 4, -1], np.float32))
    model.elementwise(buffer, {"kind": model.VOP, "op": Op.ADD.value, "d": 8, "a": 0, "b": 4, "n": 3, "m": 1,
                                "reduce": 0, "broadcast": 0, "narrow": 0}, SHAPE)
    assert _get32(buffer, 8, 3).tolist() == [2.0, 2.0, 2.0]
    model.elementwise(buffer, {"kind": model.ACT, "op": Op.SILU.value, "d": 12, "a": 0, "b": 4, "n": 3, "m": 1},
                      SHAPE)
    exact = [x / (1 + np.exp(-x)) for x in (1.5, -2, 3)]
    assert np.allclose(_get32(buffer, 12, 3), exact, rtol=1e-6)


def test_narrow_writes_fp16_nearest_even() -> None:
    """VOP MAX(x, x) with `narrow`: 1.5 exact; 1 + 2⁻¹¹ halfway between FP16 1 and 1 + 2⁻¹⁰ → 1 (even); 1 + 3·2⁻¹¹
    halfway → 1 + 2⁻⁹ (even); 65,520 (halfway above the largest FP16) → inf; 2⁻²⁵ + 2⁻³⁰ → the smallest subnormal.
    The FP16 results are packed from byte 0 of d: 5 × 2 bytes, the rest of the last row untouched."""
    buffer = _buffer()
    values = np.array([1.5, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 65520, 2 ** -25 + 2 ** -30], np.float32)
    _put(buffer, 0, values)
    buffer[32:44] = 0xEE
    model.elementwise(buffer, {"kind": model.VOP, "op": Op.MAX.value, "d": 8, "a": 0, "b": 0, "n": 5, "m": 1,
                               "reduce": 0, "broadcast": 0, "narrow": 1}, SHAPE)
    assert buffer[32:42].view(np.float16).tolist() == [1.5, 1, 1 + 2 ** -9, np.inf, 2 ** -24]
    assert (buffer[42:44] == 0xEE).all()


def test_broadcast_and_reductions() -> None:
    """A 2-lane vector unit (8-byte rows): d[j] = Σ_i a[j][i]·b[j] folded per beat (tree), then beat after beat."""
    two = model.Shape(row_bytes=8, width=2, lanes=2)
    buffer = np.zeros(256, np.uint8)
    buffer[0:32] = np.frombuffer(np.array([1, 2, 3, 4, 5, 6, 7, 8], np.float32).tobytes(), np.uint8)
    buffer[32:40] = np.frombuffer(np.array([2, -1], np.float32).tobytes(), np.uint8)
    vop = {"kind": model.VOP, "op": Op.MUL.value, "d": 8, "a": 0, "b": 4, "n": 4, "m": 2, "broadcast": 1,
           "narrow": 0}
    model.elementwise(buffer, vop | {"reduce": 0}, two)
    assert buffer[64:96].view(np.float32).tolist() == [2, 4, 6, 8, -5, -6, -7, -8]
    model.elementwise(buffer, vop | {"reduce": 1, "d": 12}, two)
    assert buffer[96:104].view(np.float32).tolist() == [20, -26]
    model.elementwise(buffer, vop | {"reduce": 2, "d": 12}, two)
    assert buffer[96:104].view(np.float32).tolist() == [8, -5]


def test_softmax_by_hand() -> None:
    """Two heads over two scores. Head 0 starts empty (−inf, 0) with scores [1, 1]: m' = 1, P = [1, 1], α = e^−inf
    = 0, l' = 0·0 + 2 = 2. Head 1 has state (2, 3) and scores [2, 0]: m' = 2, P = [1, e^−2], α = 1,
    l' = 3 + 1 + e^−2."""
    buffer = _buffer()
    _put(buffer, 0, np.array([1, 1, 2, 0], np.float32))             # a: 2 heads × 2 scores
    _put(buffer, 8, np.array([-np.inf, 0, 2, 3], np.float32))       # d: the states
    model.softmax(buffer, {"d": 8, "a": 0, "b": 16, "c": 20, "n": 2, "m": 2}, SHAPE)
    assert _get32(buffer, 8, 4)[[0, 1, 2]].tolist() == [1, 2, 2]
    assert np.isclose(_get32(buffer, 8, 4)[3], 4 + np.exp(-2), rtol=2 ** -22)
    p = buffer[64:72].view(np.float16)
    assert p[:3].tolist() == [1, 1, 1] and p[3] == np.float16(np.exp(-2))    # rounded to FP16, nearest even
    assert _get32(buffer, 20, 2).tolist() == [0, 1]                             # α


def test_two_softmax_steps_are_one_softmax() -> None:
    """Scores in two blocks, one SOFTMAX each (the accumulator rescaled by α between): the final l is the softmax
    denominator of all scores, and P of the first block times α is that block's share, against float64."""
    rng = np.random.default_rng(3)
    scores = rng.standard_normal(8).astype(np.float32) * 3
    buffer = _buffer()
    _put(buffer, 0, scores)
    _put(buffer, 8, np.array([-np.inf, 0], np.float32))
    model.softmax(buffer, {"d": 8, "a": 0, "b": 12, "c": 16, "n": 4, "m": 1}, SHAPE)
    first = buffer[48:56].view(np.float16).astype(np.float64)
    model.softmax(buffer, {"d": 8, "a": 4, "b": 12, "c": 16, "n": 4, "m": 1}, SHAPE)
    alpha = float(_get32(buffer, 16, 1)[0])
    m_final, l_final = _get32(buffer, 8, 2).astype(np.float64)
    exact = np.exp(scores.astype(np.float64) - scores.max())
    assert m_final == scores.max() and np.isclose(l_final, exact.sum(), rtol=1e-6)
    assert np.allclose(first * alpha, exact[:4], rtol=2e-3, atol=1e-4)   # P was rounded to FP16


def test_norm_by_hand() -> None:
    """RMSNorm of [3, 4] and [1, −1] with c₀ = 1/2, c₁ = 0 and gains [1, 2]: r = 1/√12.5 and 1/√1."""
    buffer = _buffer()
    _put(buffer, 0, np.array([3, 4, 1, -1], np.float32))
    _put(buffer, 4, np.array([1, 2], np.float32))
    _put(buffer, 6, np.array([0.5, 0], np.float32))
    model.norm(buffer, {"d": 8, "a": 0, "b": 4, "c": 6, "n": 2, "m": 2}, SHAPE)
    r = 1 / np.sqrt(12.5)
    assert np.allclose(_get32(buffer, 8, 4), [3 * r, 8 * r, 1, -2], rtol=3 * 2 ** -23)


def test_merge_by_hand() -> None:
    """Partials (m, l, o) = (0, 1, [1, 2]) and (0, 3, [5, 6]): equal maxima, l = 4, w = (1/4, 3/4), o = [4, 5]; and
    (1, 2, [8, 8]) with (−inf, 0, [7, 7]) (an empty partial): weight 0 for it, o unchanged."""
    buffer = _buffer()
    _put(buffer, 0, np.array([0, 1, 1, 2], np.float32))              # a: states of partial 1
    _put(buffer, 4, np.array([0, 3, -np.inf, 0], np.float32))        # b: states of partial 2
    _put(buffer, 8, np.array([1, 2, 8, 8], np.float32))              # d: o1 of 2 heads × k = 2
    _put(buffer, 12, np.array([5, 6, 7, 7], np.float32))             # c: o2
    model.merge(buffer, {"d": 8, "a": 0, "b": 4, "c": 12, "k": 2, "m": 2}, SHAPE)
    assert np.allclose(_get32(buffer, 0, 4), [0, 4, 1, 2], rtol=2 ** -22)
    assert np.allclose(_get32(buffer, 8, 4), [4, 5, 8, 8], rtol=2 ** -21)
    assert np.allclose(_get32(buffer, 12, 2), [3.75, 4.5], rtol=2 ** -21)   # c holds w2·o2 (the scratch)


def test_refusals() -> None:
    ok = {"kind": model.GEMV, "a": 0, "b": 4, "n": 3, "k": 4, "m": 2}
    assert not model.dot_refused(ok, SHAPE)
    assert model.dot_refused(ok | {"k": 3}, SHAPE)       # not whole tiles
    assert not model.dot_refused(ok | {"a": 1}, SHAPE)   # a tile is one 4-byte row: every row starts one
    wide = model.Shape(row_bytes=4, width=4, lanes=2)     # a tile is 2 rows
    assert model.dot_refused(ok | {"a": 1}, wide) and model.dot_refused(ok | {"b": 3}, wide)
    assert not model.dot_refused(ok | {"a": 2}, wide)
    assert model.dot_refused(ok | {"m": 3}, SHAPE)       # more vectors than lanes
    assert not model.dot_refused(ok | {"kind": model.PV, "n": 4, "k": 3}, SHAPE)
    assert model.dot_refused(ok | {"kind": model.PV, "n": 3, "k": 4}, SHAPE)   # PV's dot length is n
    vop = {"kind": model.VOP, "reduce": 0, "broadcast": 0, "n": 6}
    four = model.Shape(row_bytes=16, width=2, lanes=2)          # a 4-lane vector unit
    assert not model.elementwise_refused(vop | {"kind": model.SOFTMAX}, SHAPE)   # 1 lane: every n
    assert model.elementwise_refused(vop | {"kind": model.SOFTMAX}, four)        # 6 scores: not whole rows of 4
    assert model.elementwise_refused(vop | {"kind": model.NORM}, four)
    assert not model.elementwise_refused(vop | {"kind": model.NORM, "n": 8}, four)
    assert model.elementwise_refused({"kind": model.MERGE, "n": 0, "k": 6}, four)  # MERGE's vectors are k long
    assert not model.elementwise_refused({"kind": model.MERGE, "n": 0, "k": 8}, four)
    assert not model.elementwise_refused(vop, four)             # element-wise: any n
    assert model.elementwise_refused(vop | {"reduce": 1}, four)  # 6 elements are not whole beats of 4
    assert model.elementwise_refused(vop | {"broadcast": 1}, four)
    assert not model.elementwise_refused(vop | {"reduce": 1, "n": 8}, four)
    assert not model.elementwise_refused(vop | {"reduce": 2, "broadcast": 1}, SHAPE)  # 1 lane: every n
    assert not model.elementwise_refused(vop | {"kind": model.ACT}, four)


def _words(instructions) -> list[int]:
    words = [0] * CONFIG.depth
    words[:len(instructions)] = [i.encode() for i in instructions]
    return words


def test_a_program_loads_computes_and_stores_exactly_its_bytes() -> None:
    memory, buffer = np.zeros(1024, np.uint8), _buffer()
    memory[64:76] = np.frombuffer(np.array([1, -1, 2], np.float32).tobytes(), np.uint8)
    memory[200:212] = 0xEE
    program = [Instruction(Opcode.LOAD.value, n=12, d=0, address=64), Instruction(Opcode.BARRIER.value),
               Instruction(Opcode.ACT.value, func=act_func(Op.SILU), d=4, a=0, n=3, m=1),
               Instruction(Opcode.BARRIER.value),
               Instruction(Opcode.VOP.value, func=vop_func(Op.MUL), d=8, a=4, b=0, n=3, m=1),
               Instruction(Opcode.BARRIER.value),
               Instruction(Opcode.STORE.value, n=10, d=8, address=200), Instruction(Opcode.DONE.value)]
    result = model.run(_words(program), 0, CONFIG, SHAPE, memory, buffer)
    assert (result.outcome.state, result.unit_error) == ("done", model.UNIT_NONE)
    silu = np.array([x / (1 + np.exp(-x)) for x in (1, -1, 2)])
    stored = memory[200:212].copy()
    assert (stored[10:] == 0xEE).all()             # n = 10 bytes: the third FP32's last two bytes untouched
    got = np.frombuffer(stored[:8].tobytes(), np.float32)
    assert np.allclose(got, silu[:2] * np.array([1, -1]), rtol=1e-6)


def test_a_malformed_instruction_stops_after_what_came_before() -> None:
    memory, buffer = np.zeros(1024, np.uint8), _buffer()
    memory[0:4] = 7
    program = [Instruction(Opcode.LOAD.value, n=4, d=1, address=0), Instruction(Opcode.BARRIER.value),
               Instruction(Opcode.STORE.value, n=4, d=1, address=512), Instruction(Opcode.BARRIER.value, reserved=1),
               Instruction(Opcode.STORE.value, n=4, d=1, address=600), Instruction(Opcode.DONE.value)]
    result = model.run(_words(program), 0, CONFIG, SHAPE, memory, buffer)
    assert (result.outcome.state, result.outcome.error, result.outcome.pc) == ("error", control.RESERVED, 3)
    assert (memory[512:516] == 7).all() and (memory[600:604] == 0).all()


def test_refused_commands_are_reported_first_come() -> None:
    memory, buffer = np.zeros(1024, np.uint8), _buffer()
    program = [Instruction(Opcode.GEMV.value, d=8, a=0, b=4, n=1, k=3, m=1),
               Instruction(Opcode.VOP.value, func=vop_func(Op.ADD), d=8, a=0, b=4, n=1, m=1),
               Instruction(Opcode.DONE.value)]
    result = model.run(_words(program), 0, CONFIG, SHAPE, memory, buffer)
    assert (result.outcome.state, result.unit_error, result.unit_id) == ("done", model.UNIT_ARRAY, 0)
