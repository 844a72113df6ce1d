"""Golden model of the PNM vector unit (`docs/pnm-vector.md`): numpy float32 and bit patterns only.

Written from the documented algorithms: every arithmetic step is one IEEE binary32 round-to-nearest-even
operation (numpy float32), every range reduction or scaling an exact operation on the bit fields, in the
documented order. Inputs and outputs are uint32 bit patterns. NaN results may be any NaN (`fp.mismatches`).
"""
from dataclasses import dataclass

import numpy as np

from . import fp

F32 = np.float32
INF, NEG_ZERO, CANONICAL_NAN = 0x7F800000, 0x80000000, 0x7FC00000
ONE = F32(1.0)

# exp: Cody–Waite reduction by ln 2 (C1 + C2), Cephes's degree-5 minimax polynomial for (e^r − 1 − r) / r².
LOG2E = F32(1.44269504088896341)
ROUND_MAGIC = F32(12582912.0)  # 1.5 · 2^23: adding it rounds |t| < 2^22 to an integer, nearest-even
LN2_HI, LN2_LO = F32(0.693359375), F32(-2.12194440e-4)
EXP_POLY = tuple(F32(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                                  1.6666665459e-1, 5.0000001201e-1))
EXP_LIMIT = F32(128.0)  # |z| ≥ 128 is decided before the datapath: +inf or +0
# reciprocal: linear seed 24/17 − 8/17·m on m ∈ [1, 2) (error ≤ 1/17), three Newton steps y + y·(1 − m·y).
RECIP_SEED = (F32(24 / 17), F32(-8 / 17))
NEWTON_STEPS = 3
# reciprocal square root: integer seed 0x5F3759DF − (bits(m) >> 1) on m ∈ [1, 4), three steps y·(1.5 − (m/2)·y²).
RSQRT_MAGIC = 0x5F3759DF
THREE_HALVES = F32(1.5)
# GELU (tanh form) = x · sigmoid(2·√(2/π)·(x + 0.044715·x³)) = x / (1 + exp(x · (G1 + G2·x²))).
GELU_G1 = F32(-2 * np.sqrt(2 / np.pi))
GELU_G2 = F32(-2 * np.sqrt(2 / np.pi) * 0.044715)

MAX, ADD, MUL, EXP, RECIP, RSQRT, SILU, GELU, SOFTMAX, MERGE = range(10)
OPS = ("max", "add", "mul", "exp", "recip", "rsqrt", "silu", "gelu", "softmax", "merge")
NONE, SUM, REDUCE_MAX = range(3)


def _f(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(F32)


def _b(values) -> np.ndarray:
    return np.asarray(values, dtype=F32).view(np.uint32)


def _fields(x: np.ndarray):
    x = np.asarray(x, dtype=np.uint32)
    return x >> 31, (x >> 23) & 0xFF, x & 0x7FFFFF


def _is_nan(x: np.ndarray) -> np.ndarray:
    _, e, m = _fields(x)
    return (e == 0xFF) & (m != 0)


def _scale(y: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """Positive normal `y` times 2^shift by adding to its exponent field: ≥ 255 → +inf, ≤ 0 → +0 (flush)."""
    field = ((y >> 23) & 0xFF).astype(np.int64) + shift
    scaled = (y & 0x807FFFFF) | (np.clip(field, 0, 255).astype(np.uint32) << 23)
    return np.where(field >= 255, (y & NEG_ZERO) | INF, np.where(field <= 0, y & NEG_ZERO, scaled)).astype(np.uint32)


def fmax(a, b) -> np.ndarray:
    """max(a, b): NaN if either is NaN; +0 above −0."""
    a, b = np.asarray(a, np.uint32), np.asarray(b, np.uint32)
    larger = np.where(_key(b) > _key(a), b, a)
    return np.where(_is_nan(a) | _is_nan(b), CANONICAL_NAN, larger).astype(np.uint32)


def exp(z) -> np.ndarray:
    z = np.asarray(z, np.uint32)
    with np.errstate(all="ignore"):
        x = _f(z)
        k = x * LOG2E + ROUND_MAGIC
        n = k - ROUND_MAGIC
        n_int = k.view(np.uint32).astype(np.int64) - int(_b(ROUND_MAGIC))
        r = (x - n * LN2_HI) - n * LN2_LO
        p = EXP_POLY[0] * r + EXP_POLY[1]
        for c in EXP_POLY[2:]:
            p = p * r + c
        y = (p * (r * r) + r) + ONE
        result = _scale(_b(y), np.where(np.abs(x) < EXP_LIMIT, n_int, 0))
    sign, _, _ = _fields(z)
    huge = ~_is_nan(z) & (np.abs(x) >= EXP_LIMIT)
    result = np.where(huge, np.where(sign == 1, 0, INF), result)
    return np.where(_is_nan(z), CANONICAL_NAN, result).astype(np.uint32)


def recip(x) -> np.ndarray:
    """1/x. Subnormal inputs count as zero (→ ±inf); results below 2^−126 flush to ±0."""
    sign, e, mant = _fields(x)
    with np.errstate(all="ignore"):
        m = _f(mant | (127 << 23))
        y = m * RECIP_SEED[1] + RECIP_SEED[0]
        for _ in range(NEWTON_STEPS):
            y = y + y * (ONE - m * y)
    result = _scale(_b(y), 127 - e.astype(np.int64)) | (sign << 31)
    result = np.where(e == 0, (sign << 31) | INF, result)
    result = np.where((e == 0xFF) & (mant == 0), sign << 31, result)
    return np.where(_is_nan(x), CANONICAL_NAN, result).astype(np.uint32)


def rsqrt(x) -> np.ndarray:
    """1/√x. Subnormals count as zero (±0 → ±inf); negative nonzero inputs → NaN; +inf → +0."""
    sign, e, mant = _fields(x)
    odd = (e & 1) == 0  # the unbiased exponent e − 127 is odd
    with np.errstate(all="ignore"):
        m_bits = mant | np.where(odd, 128, 127).astype(np.uint32) << 23
        half = _f(mant | np.where(odd, 127, 126).astype(np.uint32) << 23)
        y = _f(np.uint32(RSQRT_MAGIC) - (m_bits >> 1))
        for _ in range(NEWTON_STEPS):
            y = y * (THREE_HALVES - half * (y * y))
    j = (e.astype(np.int64) - 127 - odd) >> 1
    result = _scale(_b(y), -j)
    result = np.where((e == 0xFF) & (mant == 0), 0, result)
    result = np.where((sign == 1) & (e != 0), CANONICAL_NAN, result)
    result = np.where(e == 0, (sign << 31) | INF, result)
    return np.where(_is_nan(x), CANONICAL_NAN, result).astype(np.uint32)


def _times_recip_one_plus_exp(x, z) -> np.ndarray:
    """x / (1 + e^z) with the unit's exp and reciprocal; −inf → −0 (the limit, not −inf · 0)."""
    with np.errstate(all="ignore"):
        den = _b(ONE + _f(exp(z)))
        out = _b(_f(x) * _f(recip(den)))
    return np.where(np.asarray(x, np.uint32) == (NEG_ZERO | INF), NEG_ZERO, out).astype(np.uint32)


def silu(x) -> np.ndarray:
    x = np.asarray(x, np.uint32)
    return _times_recip_one_plus_exp(x, x ^ np.uint32(NEG_ZERO))


def gelu(x) -> np.ndarray:
    x = np.asarray(x, np.uint32)
    with np.errstate(all="ignore"):
        xf = _f(x)
        z = _b(xf * ((xf * xf) * GELU_G2 + GELU_G1))
    return _times_recip_one_plus_exp(x, z)


def online_weights(m1, m2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(m, α, β): m = max(m1, m2); the smaller side's weight is exp(−|m1 − m2|), the larger's exactly 1
    (both 1 when m1 = m2, infinities included)."""
    m1, m2 = np.asarray(m1, np.uint32), np.asarray(m2, np.uint32)
    with np.errstate(all="ignore"):
        s = _b(_f(m1) - _f(m2))
    e = exp(s | np.uint32(NEG_ZERO))
    _, e1, f1 = _fields(m1)
    both_inf = (m1 == m2) & (e1 == 0xFF) & (f1 == 0)
    e = np.where(both_inf, _b(ONE), e)
    first = _key(m1) >= _key(m2)
    one = _b(ONE)
    return fmax(m1, m2), np.where(first, one, e).astype(np.uint32), np.where(first, e, one).astype(np.uint32)


def _key(v: np.ndarray) -> np.ndarray:
    """An unsigned key ordered like the values (−0 below +0): the order `fmax` and the merge decide by."""
    return np.where(v >> 31, ~v, v | NEG_ZERO).astype(np.uint32)


def softmax_update(m1, l1, m2, l2):
    """Online-softmax state (m1, l1) absorbing (m2, l2) (a score x is (x, 1)): m, l = l1·α + l2·β, α, β."""
    m, alpha, beta = online_weights(m1, m2)
    with np.errstate(all="ignore"):
        l = _b(_f(l1) * _f(alpha) + _f(l2) * _f(beta))
    return m, l, alpha, beta


def merge(m1, l1, m2, l2):
    """FlashDecoding merge of two normalised partials: m, l, and the weights w_i = l_i·(α|β) / l of o_1, o_2."""
    m, alpha, beta = online_weights(m1, m2)
    with np.errstate(all="ignore"):
        p1, p2 = _f(l1) * _f(alpha), _f(l2) * _f(beta)
        l = _b(p1 + p2)
        r = _f(recip(l))
        return m, l, _b(p1 * r), _b(p2 * r)


def elementwise(op: int, a, b, c, d) -> np.ndarray:
    """The four results (r0..r3) of one op on lanes of operands; unused results are +0. Shape (4, ...)."""
    zero = np.zeros_like(np.asarray(a, np.uint32))
    with np.errstate(all="ignore"):
        one = {
            MAX: lambda: fmax(a, b),
            ADD: lambda: fp.fp32_add(a, b),
            MUL: lambda: fp.fp32_mul(a, b),
            EXP: lambda: exp(fp.fp32_add(a, np.asarray(b, np.uint32) ^ np.uint32(NEG_ZERO))),
            RECIP: lambda: recip(a),
            RSQRT: lambda: rsqrt(a),
            SILU: lambda: silu(a),
            GELU: lambda: gelu(a),
        }
    if op in one:
        return np.stack([one[op](), zero, zero, zero]).astype(np.uint32)
    return np.stack((softmax_update if op == SOFTMAX else merge)(a, b, c, d)).astype(np.uint32)


def tree(values: np.ndarray, reduce: int) -> np.ndarray:
    """Reduce the last axis (a power of two) with a balanced tree of adjacent pairs."""
    while values.shape[-1] > 1:
        x, y = values[..., 0::2], values[..., 1::2]
        values = fp.fp32_add(x, y) if reduce == SUM else fmax(x, y)
    return values[..., 0]


@dataclass(frozen=True)
class Beat:
    op: int
    reduce: int
    last: int
    operands: np.ndarray  # (4, width) uint32: a, b, c, d of every lane


def run(beats: list[Beat]) -> list[np.ndarray]:
    """The output beats, each (4, width) uint32. An elementwise beat gives its results; a reduction folds lane
    r0s (tree per beat, then beat after beat from the first beat after reset or after a `last`) and gives one
    beat, on `last`, with the reduction in lane 0's r0 and zeros elsewhere. Each op runs once over all of its
    beats and each reduction's trees at once (the model is elementwise); only the fold goes beat by beat."""
    if not beats:
        return []
    results = np.zeros((len(beats), *beats[0].operands.shape), np.uint32)
    ops = np.array([beat.op for beat in beats])
    for op in np.unique(ops):
        chosen = np.flatnonzero(ops == op)
        operands = np.stack([beats[k].operands for k in chosen], axis=1)  # (4, beats, width)
        results[chosen] = elementwise(int(op), *operands).transpose(1, 0, 2)
    reduces = np.array([beat.reduce for beat in beats])
    trees = np.zeros(len(beats), np.uint32)
    for reduce in (SUM, REDUCE_MAX):
        chosen = np.flatnonzero(reduces == reduce)
        if chosen.size:
            trees[chosen] = tree(results[chosen, 0], reduce)
    outputs, accumulator, fresh = [], None, True
    for k, beat in enumerate(beats):
        if beat.reduce == NONE:
            outputs.append(results[k])
            continue
        value = trees[k]
        if not fresh:
            value = fp.fp32_add(accumulator, value) if beat.reduce == SUM else fmax(accumulator, value)
        accumulator, fresh = value, bool(beat.last)
        if beat.last:
            out = np.zeros_like(results[k])
            out[0, 0] = value
            outputs.append(out)
    return outputs
