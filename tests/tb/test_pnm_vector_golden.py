"""The vector unit's golden model against float64: the error bounds `docs/design/pnm-vector.md` states, over dense
sweeps of the input range, and the documented response to every special value."""
import numpy as np
import pytest

from rtl.pnm_vector.ports import Op, Reduce
from tb.models import fp
from tb.models import pnm_vector as v
from tb.pnm_vector import stimulus

INF, NAN = 0x7F800000, 0x7FC00000
SMALLEST_NORMAL = 2.0 ** -126


def _bits(values) -> np.ndarray:
    return np.asarray(values, np.float32).view(np.uint32)


def _values(bits) -> np.ndarray:
    return np.asarray(bits, np.uint32).view(np.float32).astype(np.float64)


def _ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got − exact| in units of the last place of `exact` (a normal float32 magnitude)."""
    return np.abs(_values(got) - exact) / 2.0 ** (np.floor(np.log2(np.abs(exact))) - 23)


def _sweep(stride: int = 2053) -> tuple[np.ndarray, np.ndarray]:
    """Every `stride`-th finite float32 bit pattern (both signs, subnormals to the largest finite)."""
    bits = np.arange(0, 1 << 32, stride, dtype=np.uint64).astype(np.uint32)
    with np.errstate(invalid="ignore"):
        x = _values(bits)
    finite = np.isfinite(x)
    return bits[finite], x[finite]


def _mantissas(exponent_field: int, stride: int = 3) -> np.ndarray:
    return (np.arange(0, 1 << 23, stride, dtype=np.uint32) | np.uint32(exponent_field << 23))


def _exact(name: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return {
            "exp": lambda: np.exp(x),
            "silu": lambda: x / (1 + np.exp(-x)),
            # 0.5·x·(1 + tanh(u)) rewritten as x·sigmoid(2u): the same function without cancellation at x ≪ 0.
            "gelu": lambda: x / (1 + np.exp(-2 * np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
        }[name]()


# (function, input range [low, high), bound in ulps) where the exact result is a normal float32.
ULP_BOUNDS = [
    ("exp", -np.inf, np.inf, 1.0),
    ("silu", -87.0, np.inf, 3.0),
    ("gelu", 0.0, np.inf, 3.0),
    ("gelu", -3.0, 0.0, 16.0),
    ("gelu", -10.0, -3.0, 256.0),
]
# Below these inputs the result is flushed to a zero (the exact value lies below the bound).
ABSOLUTE_BOUNDS = [("exp", -87.0, 2.0 ** -126), ("silu", -87.0, 2.0 ** -119), ("gelu", -10.0, 2.0 ** -120)]


@pytest.mark.parametrize("name,low,high,bound", ULP_BOUNDS)
def test_ulp_bound_where_the_result_is_normal(name: str, low: float, high: float, bound: float) -> None:
    bits, x = _sweep()
    inside = (x >= low) & (x < high)
    bits, x = bits[inside], x[inside]
    # Plus 200,000 evenly spaced points of the range (the sweep is sparse in a short interval).
    span = np.linspace(max(low, -100.0), min(high, 100.0), 200_000).astype(np.float32)
    bits, x = np.concatenate([bits, _bits(span)]), np.concatenate([x, span.astype(np.float64)])
    exact = _exact(name, x)
    normal = np.isfinite(exact) & (np.abs(exact) >= SMALLEST_NORMAL) & (np.abs(exact) < 2.0 ** 128)
    assert normal.sum() > 10_000
    errors = _ulps(getattr(v, name)(bits[normal]), exact[normal])
    worst = int(np.argmax(errors))
    assert errors[worst] <= bound, f"{name}({x[normal][worst]!r}): {errors[worst]:.3f} ulps > {bound}"


@pytest.mark.parametrize("name,below,bound", ABSOLUTE_BOUNDS)
def test_absolute_bound_in_the_flushed_tail(name: str, below: float, bound: float) -> None:
    bits, x = _sweep()
    tail = x < below
    got, exact = _values(getattr(v, name)(bits[tail])), _exact(name, x[tail])
    assert np.abs(got - exact).max() <= bound


def test_reciprocal_within_1_15_ulps_for_every_mantissa() -> None:
    """1/(m·2^e) is 1/m scaled exactly, so the mantissas of one binade cover every input with a normal result."""
    m = _mantissas(127)
    errors = _ulps(v.recip(m), 1 / _values(m))
    assert errors.max() <= 1.15
    scaled = _mantissas(127 + 100)
    assert np.array_equal(v.recip(scaled), v.recip(m) - np.uint32(100 << 23))


@pytest.mark.parametrize("exponent_field", [127, 128])
def test_reciprocal_square_root_within_1_95_ulps_for_every_mantissa(exponent_field: int) -> None:
    """Even and odd exponents reduce to m ∈ [1, 2) and [2, 4): the two binades cover every positive normal."""
    m = _mantissas(exponent_field)
    errors = _ulps(v.rsqrt(m), 1 / np.sqrt(_values(m)))
    assert errors.max() <= 1.95


def test_the_bounds_are_not_loose() -> None:
    """The stated bounds are attained to within a tenth of an ulp: a regression would show."""
    m = _mantissas(127)
    assert _ulps(v.recip(m), 1 / _values(m)).max() > 1.1
    assert _ulps(v.rsqrt(m), 1 / np.sqrt(_values(m))).max() > 1.9


def _r(fn, x) -> list[int]:
    return [int(b) for b in fn(np.array(x, np.uint32))]


NEG_INF, NEG_ZERO, SUBNORMAL, ONE = 0xFF800000, 0x80000000, 0x00000001, 0x3F800000


def test_special_values() -> None:
    # exp: NaN → NaN, ±inf → +inf/+0, ±0 and subnormals → 1, overflow → +inf, results below 2^−126 → +0.
    assert _r(v.exp, [INF, NEG_INF, 0, NEG_ZERO, SUBNORMAL]) == [INF, 0, ONE, ONE, ONE]
    assert _r(v.exp, _bits([89.0, -88.0, 128.0, -128.0, 3e38])) == [INF, 0, INF, 0, INF]
    assert np.isnan(_values(v.exp([NAN, 0xFFC00001]))).all()
    # recip: ±0 and subnormals (read as zero) → ±inf; ±inf → ±0; |x| > 2^126 → ±0.
    assert _r(v.recip, [0, NEG_ZERO, SUBNORMAL, SUBNORMAL | NEG_ZERO, INF, NEG_INF]) == \
        [INF, NEG_INF, INF, NEG_INF, 0, NEG_ZERO]
    assert _r(v.recip, _bits([2.0 ** 127, -(2.0 ** 127), 2.0 ** 126])) == [0, NEG_ZERO, _bits(2.0 ** -126)]
    assert np.isnan(_values(v.recip([NAN]))).all()
    # rsqrt: +0/subnormal → +inf, −0/−subnormal → −inf, +inf → +0, negative → NaN.
    assert _r(v.rsqrt, [0, SUBNORMAL, NEG_ZERO, INF]) == [INF, INF, NEG_INF, 0]
    assert np.isnan(_values(v.rsqrt(_bits([-1.0, -(2.0 ** -126)]) + [0, 0]))).all()
    assert np.isnan(_values(v.rsqrt([NEG_INF, NAN]))).all()
    assert _r(v.rsqrt, _bits([4.0, 0.25])) == [int(v.rsqrt(ONE)) - (1 << 23), int(v.rsqrt(ONE)) + (1 << 23)]
    # SiLU and GELU: +inf → +inf, −inf → −0 (the limit), ±0 → ±0, NaN → NaN.
    for fn in (v.silu, v.gelu):
        assert _r(fn, [INF, NEG_INF, 0, NEG_ZERO]) == [INF, NEG_ZERO, 0, NEG_ZERO]
        assert np.isnan(_values(fn([NAN]))).all()


def test_max_orders_signed_zeros_and_propagates_nan() -> None:
    assert _r(lambda x: v.fmax(x, np.uint32(NEG_ZERO)), [0]) == [0]
    assert _r(lambda x: v.fmax(np.uint32(NEG_ZERO), x), [0]) == [0]
    assert _r(lambda x: v.fmax(x, np.uint32(NEG_INF)), [_bits(-3.0)]) == [int(_bits(-3.0))]
    assert np.isnan(_values(v.fmax(np.uint32(NAN), np.uint32(ONE))))


def test_online_softmax_over_a_score_stream_matches_float64_softmax() -> None:
    """Absorbing scores one at a time (state (m, l), score (x, 1)) gives max and Σe^(x−m) of the whole vector."""
    rng = np.random.default_rng(5)
    scores = rng.normal(0, 4, 300).astype(np.float32)
    m, l = np.uint32(NEG_INF), np.uint32(0)
    for x in _bits(scores):
        m, l, _, _ = v.softmax_update(m, l, x, np.uint32(ONE))
    assert _values(m) == scores.max()
    exact = np.exp(scores.astype(np.float64) - scores.max()).sum()
    assert abs(_values(l) - exact) / exact < 300 * 2.0 ** -23


def test_merging_two_partials_equals_the_unsplit_softmax_weighted_sum() -> None:
    """FlashDecoding: o = w1·o1 + w2·o2 from the merge's weights equals softmax(s)·V over both halves."""
    rng = np.random.default_rng(6)
    s = rng.normal(0, 3, 64)
    values = rng.normal(0, 1, (64, 8))
    halves = []
    for part in (slice(0, 40), slice(40, 64)):
        m = s[part].max()
        p = np.exp(s[part] - m)
        halves.append((np.float32(m), np.float32(p.sum()), (p @ values[part]) / p.sum()))
    (m1, l1, o1), (m2, l2, o2) = halves
    m, l, w1, w2 = v.merge(*(_bits(t) for t in (m1, l1, m2, l2)))
    merged = _values(w1) * o1 + _values(w2) * o2
    p = np.exp(s - s.max())
    assert _values(m) == np.float32(s.max())
    assert abs(_values(l) - p.sum()) / p.sum() < 4 * 2.0 ** -23
    assert np.allclose(merged, (p @ values) / p.sum(), rtol=0, atol=1e-6)


def test_merge_weights_of_empty_and_equal_partials() -> None:
    """A partial that saw no score (m = −inf, l = 0) gets weight exp(−inf) = 0; equal maxima weigh 1 each."""
    m, l, alpha, beta = v.softmax_update(np.uint32(NEG_INF), np.uint32(0), _bits(2.0), np.uint32(ONE))
    assert (int(m), int(l), int(alpha), int(beta)) == (int(_bits(2.0)), ONE, 0, ONE)
    m, l, alpha, beta = v.softmax_update(_bits(2.0), _bits(3.0), _bits(2.0), _bits(5.0))
    assert (int(l), int(alpha), int(beta)) == (int(_bits(8.0)), ONE, ONE)


def test_reductions_fold_a_tree_per_beat_then_beat_after_beat() -> None:
    one, two, three = (int(_bits(x)) for x in (1.0, 2.0, 3.0))
    lanes = np.zeros((4, 2), np.uint32)
    beats = []
    for k, (x, y) in enumerate([(one, two), (three, one)]):
        operands = lanes.copy()
        operands[0] = [x, y]
        operands[1] = NEG_ZERO  # a + (−0) = a: ADD with b = −0 passes a on
        beats.append(v.Beat(v.ADD, v.SUM, int(k == 1), operands))
    out = v.run(beats)
    assert len(out) == 1 and out[0][0, 0] == _bits(7.0) and not out[0][1:].any() and out[0][0, 1] == 0
    out = v.run([v.Beat(v.MAX, v.REDUCE_MAX, 1, np.array([[one, three], [NEG_INF] * 2, [0, 0], [0, 0]],
                                                           np.uint32))])
    assert out[0][0, 0] == three


def test_a_stream_gives_what_its_ops_and_vectors_give_one_at_a_time() -> None:
    """`run` computes each op over all of its beats at once: the same results (any NaN for a NaN) as each
    elementwise beat and each reduced vector alone, in stream order."""
    rng = np.random.default_rng(9)
    pieces = []
    for k in range(200):
        op = Op(k % len(Op))
        if k % 3 == 0:
            reduce = Reduce.SUM if k % 2 else Reduce.MAX
            pieces.append(stimulus.reduction_beats(rng, op, reduce, [int(rng.integers(1, 6))], 4))
        else:
            pieces += [[beat] for beat in stimulus.elementwise_beats(rng, op, int(rng.integers(1, 4)), 4)]
    alone = [out for piece in pieces for out in v.run(piece)]
    together = v.run([beat for piece in pieces for beat in piece])
    assert len(together) == len(alone) == len(pieces)  # each piece gives one output beat
    for got, want in zip(together, alone, strict=True):
        assert got.dtype == np.uint32 and got.shape == (4, 4) and not fp.mismatches(got.ravel(), want.ravel(), "fp32").size
