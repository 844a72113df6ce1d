"""Floating-point multipliers: FP32 × FP32 (rounded) and FP16 × FP16 → FP32 (exact)."""
from amaranth.hdl import Cat, Mux, Value

from ..pipeline import Stages
from .binary import BinaryUnit
from .bits import leading_zeros, round_nearest_even, shift_right_sticky, unpack
from .formats import FP16, FP32, FloatFormat


def _special_cases(a, b) -> dict[str, Value]:
    """IEEE products of specials: NaN in, or inf × 0 → NaN; inf × finite → inf; else 0 × x → 0."""
    return {
        "sign": a.sign ^ b.sign,
        "is_nan": a.is_nan | b.is_nan | (a.is_inf & b.is_zero) | (b.is_inf & a.is_zero),
        "is_inf": a.is_inf | b.is_inf,
        "is_zero": a.is_zero | b.is_zero,
    }


def _normalized(stages: Stages, fmt: FloatFormat, bits: Value) -> tuple[Value, Value]:
    """Significand with its leading one at the top, and the (possibly negative) exponent that goes with it."""
    f = unpack(fmt, bits)
    shift = stages.nets(shift=leading_zeros(f.significand)).shift
    return (f.significand << shift)[:fmt.mantissa_bits + 1], f.exponent - shift


def _finish(result_magnitude: Value, s) -> Value:
    magnitude = Mux(s.is_zero, 0, result_magnitude)
    magnitude = Mux(s.is_inf, FP32.infinity, magnitude)
    return Mux(s.is_nan, FP32.canonical_nan, Cat(magnitude[:31], s.sign))


def fp32_mul(stages: Stages, a_bits: Value, b_bits: Value) -> Value:
    """The multiplier's datapath over three `stages`; reusable inside wider pipelines."""
    a_significand, a_exponent = _normalized(stages, FP32, a_bits)
    b_significand, b_exponent = _normalized(stages, FP32, b_bits)
    s1 = stages(
        a=a_significand, b=b_significand,
        # Biased exponent of the product while its leading one sits at bit 46 of the 48-bit product.
        exponent=a_exponent + b_exponent - FP32.bias,
        **_special_cases(unpack(FP32, a_bits), unpack(FP32, b_bits)),
    )
    s2 = stages(product=s1.a * s1.b, exponent=s1.exponent,
                sign=s1.sign, is_nan=s1.is_nan, is_inf=s1.is_inf, is_zero=s1.is_zero)

    top = s2.product[47]
    n = stages.nets(normalized=Mux(top, s2.product, s2.product << 1)[:48],  # leading one at bit 47
                    exponent=s2.exponent + top)
    exponent = n.exponent
    subnormal = exponent < 1
    aligned = stages.nets(aligned=Cat(*shift_right_sticky(n.normalized, Mux(subnormal, 1 - exponent, 0)[:10]))).aligned
    packed = Cat(aligned[24:47], Mux(subnormal, 0, exponent)[:8])
    rounded = round_nearest_even(packed, aligned[23], (aligned[:23] != 0) | aligned[48])
    magnitude = Mux(exponent >= FP32.exponent_max, FP32.infinity, rounded)
    return stages(result=_finish(magnitude, s2)).result


def fp16_mul_fp32(stages: Stages, a_bits: Value, b_bits: Value) -> Value:
    """The exact-product datapath over two `stages`; the PNM lane's multiplier."""
    a_significand, a_exponent = _normalized(stages, FP16, a_bits)
    b_significand, b_exponent = _normalized(stages, FP16, b_bits)
    s1 = stages(
        product=a_significand * b_significand,
        # FP32 biased exponent of the product while its leading one sits at bit 20 of the 22-bit product.
        exponent=a_exponent + b_exponent - 2 * FP16.bias + FP32.bias,
        **_special_cases(unpack(FP16, a_bits), unpack(FP16, b_bits)),
    )
    top = s1.product[21]
    fraction = Mux(top, s1.product[:21] << 2, s1.product[:20] << 3)[:FP32.mantissa_bits]
    return stages(result=_finish(Cat(fraction, (s1.exponent + top)[:8]), s1)).result


class FP32Mul(BinaryUnit):
    """a × b in FP32, round-to-nearest-even, subnormals in and out, overflow to inf.

    Stages: (1) unpack and normalize subnormal operands, (2) multiply significands, (3) normalize, round, pack.
    """

    latency = 3
    operand_format = FP32
    function = staticmethod(fp32_mul)


class FP16MulFP32(BinaryUnit):
    """a × b for FP16 inputs, exact in FP32: the 22-bit product never rounds, overflows or underflows.

    Stages: (1) unpack, normalize and multiply the 11-bit significands, (2) normalize and pack.
    """

    latency = 2
    operand_format = FP16
    function = staticmethod(fp16_mul_fp32)
