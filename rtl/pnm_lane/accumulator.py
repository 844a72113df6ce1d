"""The lane's MLP accumulator: an exact fixed-point (Kulisch) sum of the beats' dot products in carry-save form,
rounded once to FP32 after the loop.

An FP32 add inside the loop (one beat's dot product onto the previous beat's sum, every cycle) is five stages of
logic in one cycle: about 3 ns on ASAP7. Here the loop is one row of full adders: each dot product, aligned to a
fixed point, is added to a (sum, carry) pair without propagating a carry. Carry resolution, normalization and
the one round-to-nearest-even run in `ROUND_STAGES` pipeline stages after the loop, on every emitted value.

The fixed point holds every dot product exactly: FP16 values are multiples of 2^-24, so their products are
multiples of 2^-48, and so is every FP32 sum of them (a value below 2^-24 that is a multiple of 2^-48 fits in
24 bits and stays exact; above that the FP32 ulp is itself a multiple of 2^-48). A product is below 2^32
(65,504² < 2^32), a dot product of `width` products at most `width`·2^32. `HEADROOM_BITS` above that, a sum
leaves the register only after 2^64 beats (585 years at 1 GHz), and the largest sum (below 2^(96 + log2 width))
never rounds to an FP32 infinity.
"""
from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.utils import exact_log2

from ..fp.arithmetic import prefix_sum
from ..fp.bits import leading_zeros, round_nearest_even, unpack
from ..fp.formats import FP16, FP32
from ..pipeline import Stages

LSB_EXPONENT = 2 * (1 - FP16.bias - FP16.mantissa_bits)  # −48: the smallest FP16 product's exponent
PRODUCT_BITS = 2 * (FP16.bias + 1)  # 32: every FP16 product is below 2^32
HEADROOM_BITS = 64
CHUNK_BITS = 16  # carries resolve in chunks: a 16-bit Kogge-Stone sum takes 606 ps register to register, 32 bits 1,030
ROUND_STAGES = 5


def accumulator_bits(width: int) -> int:
    """Two's complement bits of the fixed point: sign, the fractional bits down to 2^-48, a dot product's
    integer bits, and the headroom for the count of beats."""
    return 1 - LSB_EXPONENT + PRODUCT_BITS + exact_log2(width) + HEADROOM_BITS


def fold(m: Module, name: str, enable: Value, clear: Value, dot: Value, width: int) -> SimpleNamespace:
    """The loop: registers holding the sum since the last `clear` (reset: +0), updated when `enable` with the FP32
    `dot`, or set to it with `clear`. The fixed point is `sum + carry`; NaN and the infinities are sticky flags,
    and `negative_zero` records that every dot product of the sum was −0 (IEEE's sign for a sum of zeros)."""
    bits = accumulator_bits(width)
    state = SimpleNamespace(sum=Signal(bits, name=f"{name}_sum"), carry=Signal(bits, name=f"{name}_carry"),
                            nan=Signal(name=f"{name}_nan"), positive_inf=Signal(name=f"{name}_positive_inf"),
                            negative_inf=Signal(name=f"{name}_negative_inf"),
                            negative_zero=Signal(name=f"{name}_negative_zero"))
    d = unpack(FP32, dot)
    finite = ~d.is_nan & ~d.is_inf
    # significand · 2^(exponent − bias − 23) in units of 2^(LSB_EXPONENT); bits below are zero (see above).
    lsb = FP32.bias + FP32.mantissa_bits + LSB_EXPONENT
    aligned = Mux(finite, (d.significand << d.exponent)[lsb:lsb + bits], 0)
    negate = finite & d.sign
    term = aligned ^ negate.replicate(bits)  # −x = ~x + 1: the 1 enters at the carry row's free bit 0
    old_sum, old_carry = Mux(clear, 0, state.sum), Mux(clear, 0, state.carry)
    majority = (old_sum & old_carry) | (old_sum & term) | (old_carry & term)
    with m.If(enable):
        m.d.sync += [
            state.sum.eq(old_sum ^ old_carry ^ term),
            state.carry.eq(Cat(negate, majority[:bits - 1])),
            state.nan.eq(d.is_nan | (state.nan & ~clear)),
            state.positive_inf.eq((d.is_inf & ~d.sign) | (state.positive_inf & ~clear)),
            state.negative_inf.eq((d.is_inf & d.sign) | (state.negative_inf & ~clear)),
            state.negative_zero.eq(d.is_zero & d.sign & (state.negative_zero | clear)),
        ]
    return state


def round_to_fp32(stages: Stages, state: SimpleNamespace) -> Value:
    """The FP32 value of a `fold` state, rounded to nearest even, over `ROUND_STAGES` stages: (1, 2) resolve the
    carries, of the sum and of the sum less one (−x = ~(x − 1), so the magnitude needs no second carry chain);
    (3) take the magnitude, count its leading zeros; (4) normalize; (5) round and pack.
    NaN, or both infinities, give the canonical NaN; one infinity gives itself; an exact zero is +0 unless every
    term was −0."""
    bits = len(state.sum)
    flags = {"nan": state.nan | (state.positive_inf & state.negative_inf),
             "inf": state.positive_inf | state.negative_inf, "inf_sign": state.negative_inf,
             "negative_zero": state.negative_zero}
    # x − 1 in carry-save form: a row of full adders with all ones as the third row.
    rows = {"total": (state.sum, state.carry),
            "less_one": (~(state.sum ^ state.carry), ((state.sum | state.carry) << 1)[:bits])}
    chunks = range(0, bits, CHUNK_BITS)
    s1 = vars(stages(**{f"{row}{k}": _chunk(stages, a[k:k + CHUNK_BITS], b[k:k + CHUNK_BITS])
                        for row, (a, b) in rows.items() for k in chunks}, **flags))
    s2 = stages(**{row: _resolve(stages, [s1[f"{row}{k}"] for k in chunks], bits) for row in rows},
                **{name: s1[name] for name in flags})

    sign = s2.total[bits - 1]
    magnitude = stages.nets(magnitude=Mux(sign, ~s2.less_one, s2.total)).magnitude
    s3 = stages(magnitude=magnitude, zeros=leading_zeros(magnitude), sign=sign,
                **{name: getattr(s2, name) for name in flags})

    # The leading one at bit `bits − 1 − zeros` has the value 2^(bits − 1 − zeros + LSB_EXPONENT).
    normalized = stages.nets(normalized=(s3.magnitude << s3.zeros)[:bits]).normalized
    below = bits - 1 - FP32.mantissa_bits  # the fraction's lowest bit
    s4 = stages(fraction=normalized[below:bits - 1], guard=normalized[below - 1], sticky=normalized[:below - 1].any(),
                zero=s3.magnitude == 0, exponent=bits - 1 + LSB_EXPONENT + FP32.bias - s3.zeros, sign=s3.sign,
                **{name: getattr(s3, name) for name in flags})

    rounded = round_nearest_even(Cat(s4.fraction, s4.exponent[:FP32.exponent_bits]), s4.guard, s4.sticky)
    result = Mux(s4.zero, Cat(Const(0, 31), s4.negative_zero), Cat(rounded, s4.sign))
    result = Mux(s4.inf, Cat(Const(FP32.infinity, 31), s4.inf_sign), result)
    return stages(result=Mux(s4.nan, FP32.canonical_nan, result)).result


def _chunk(stages: Stages, a: Value, b: Value) -> Value:
    """One chunk of a + b for a carry in of 0, with its carry out above it, and on top whether a carry in would
    pass through it (every bit propagates)."""
    return Cat(prefix_sum(stages, a, b), (a ^ b).all())


def _resolve(stages: Stages, chunks: list[Value], bits: int) -> Value:
    """The whole sum from its `_chunk`s: the carries into the chunks follow c' = g | p·c (g: the chunk's carry out,
    p: g or passing through; g ≤ p), the carries of a binary addition of g and p, which are its sum bits less
    g ^ p; each chunk then adds its carry in."""
    generate = Cat(chunk[-2] for chunk in chunks)
    propagate = Cat(chunk[-2] | chunk[-1] for chunk in chunks)
    carries = stages.nets(carries=prefix_sum(stages, generate, propagate)[:len(chunks)] ^ generate ^ propagate).carries
    return Cat(Mux(carries[i], prefix_sum(stages, chunk[:-2], Const(0, len(chunk) - 2), 1)[:-1], chunk[:-2])
               for i, chunk in enumerate(chunks))[:bits]
