"""FP32 adder: IEEE 754 binary32 addition, round-to-nearest-even, subnormals in and out."""
from amaranth.hdl import Cat, Const, Mux, Value

from ..pipeline import Stages
from .binary import BinaryUnit
from .bits import leading_zeros, round_nearest_even, shift_right_sticky, unpack
from .formats import FP32

# The significand travels with two guard bits and a sticky bit below it, enough for a correctly rounded
# sum: a difference that cancels more than one bit comes from operands at most one binade apart, exactly.
_EXTRA = 3


def fp32_add(stages: Stages, a_bits: Value, b_bits: Value) -> Value:
    """The adder's datapath over five `stages`; reusable inside wider pipelines."""
    a, b = unpack(FP32, a_bits), unpack(FP32, b_bits)
    swap = b_bits[:31] > a_bits[:31]
    large = [Mux(swap, y, x) for x, y in zip(a, b)]
    small = [Mux(swap, x, y) for x, y in zip(a, b)]
    large, small = type(a)(*large), type(a)(*small)
    s1 = stages(
        sign=large.sign,
        exponent=large.exponent,
        large=large.significand,
        small=small.significand,
        distance=large.exponent - small.exponent,
        subtract=a.sign ^ b.sign,
        is_nan=a.is_nan | b.is_nan | (a.is_inf & b.is_inf & (a.sign != b.sign)),
        is_inf=a.is_inf | b.is_inf,
        both_negative=a.sign & b.sign,
    )

    shifted, sticky = shift_right_sticky(Cat(Const(0, _EXTRA), s1.small), s1.distance[:8])
    s2 = stages(
        sign=s1.sign, exponent=s1.exponent, large=s1.large, subtract=s1.subtract, is_nan=s1.is_nan,
        is_inf=s1.is_inf, both_negative=s1.both_negative,
        aligned=shifted | sticky,  # the sticky bit joins the LSB
    )

    large_extended = Cat(Const(0, _EXTRA), s2.large)
    s3 = stages(
        sign=s2.sign, exponent=s2.exponent, is_nan=s2.is_nan, is_inf=s2.is_inf, both_negative=s2.both_negative,
        # |large| ≥ |small|, so the difference is never negative.
        total=Mux(s2.subtract, large_extended - s2.aligned, large_extended + s2.aligned)[:28],
        # A one at bit 27 − exponent: counted among the sum's leading zeros, it stops the normalizing shift at
        # the smallest exponent (then the result is subnormal), so no clamp follows the count.
        floor=Const(1 << 26, 27) >> (s2.exponent - 1)[:8],
    )

    total = s3.total
    carried = total[27]
    zeros = stages.nets(zeros=leading_zeros(total[:27] | s3.floor)).zeros
    n = stages(
        sign=s3.sign, is_nan=s3.is_nan, is_inf=s3.is_inf, both_negative=s3.both_negative, zero=total == 0,
        normalized=Mux(carried, Cat(total[0] | total[1], total[2:28]), (total[:27] << zeros)[:27]),
        exponent=Mux(carried, s3.exponent + 1, s3.exponent - zeros),
    )

    packed = Cat(n.normalized[_EXTRA:26], Mux(n.normalized[26], n.exponent, 0)[:8])
    rounded = round_nearest_even(packed, n.normalized[2], n.normalized[1] | n.normalized[0])
    exponent = n.exponent
    magnitude = Mux(n.is_inf | (exponent >= FP32.exponent_max), FP32.infinity, rounded)
    result = Mux(n.zero, Cat(Const(0, 31), n.both_negative), Cat(magnitude, n.sign))
    result = Mux(n.is_inf, Cat(Const(FP32.infinity, 31), n.sign), result)
    return stages(result=Mux(n.is_nan, FP32.canonical_nan, result)).result


class FP32Add(BinaryUnit):
    """a + b in FP32. −0 + −0 = −0, x − x = +0, inf − inf and NaN inputs → canonical NaN.

    Stages: (1) unpack and order the operands by magnitude, (2) align the smaller, (3) add, (4) count leading
    zeros and normalize, (5) round and pack. Each cut splits a shifter from an adder, so no stage holds two
    carry or shift chains in a row (ASAP7 at 1 GHz; docs/design/fp.md).
    """

    latency = 5
    operand_format = FP32
    function = staticmethod(fp32_add)
