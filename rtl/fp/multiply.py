"""Floating-point multipliers: FP32 × FP32 (rounded) and FP16 × FP16 → FP32 (exact)."""
from amaranth.hdl import Cat, Const, Mux, Value

from ..pipeline import Stages
from .arithmetic import carry_save_product, carry_select_sum, prefix_sum
from .binary import BinaryUnit
from .bits import leading_zeros, round_nearest_even, unpack
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
    rows = carry_save_product(stages, s1.a, s1.b)
    s2 = stages(rows=Cat(*rows), exponent=s1.exponent,
                sign=s1.sign, is_nan=s1.is_nan, is_inf=s1.is_inf, is_zero=s1.is_zero)
    s3 = stages(product=carry_select_sum(stages, s2.rows[:48], s2.rows[48:]), exponent=s2.exponent,
                sign=s2.sign, is_nan=s2.is_nan, is_inf=s2.is_inf, is_zero=s2.is_zero)

    top = s3.product[47]
    exponent = stages.nets(exponent=s3.exponent + top).exponent
    subnormal = exponent < 1
    shift = stages.nets(shift=Mux(subnormal, 1 - exponent, 0)[:10]).shift
    s4 = stages(normalized=Mux(top, s3.product, s3.product << 1)[:48],  # leading one at bit 47
                exponent=Mux(subnormal, 0, exponent)[:8], shift=shift, overflow=exponent >= FP32.exponent_max,
                # The bits a subnormal result shifts out, decoded a stage ahead of the shift (they feed its sticky bit).
                lost=~(Const(-1, 48) << shift)[:48],
                sign=s3.sign, is_nan=s3.is_nan, is_inf=s3.is_inf, is_zero=s3.is_zero)

    shifted = s4.normalized >> s4.shift
    s5 = stages(packed=Cat(shifted[24:47], s4.exponent), guard=shifted[23],
                sticky=(shifted[:23] != 0) | (s4.normalized & s4.lost).any(),
                overflow=s4.overflow, sign=s4.sign, is_nan=s4.is_nan, is_inf=s4.is_inf, is_zero=s4.is_zero)
    rounded = round_nearest_even(s5.packed, s5.guard, s5.sticky)
    magnitude = Mux(s5.overflow, FP32.infinity, rounded)
    return stages(result=_finish(magnitude, s5)).result


def fp16_mul_fp32(stages: Stages, a_bits: Value, b_bits: Value) -> Value:
    """The exact-product datapath over two `stages`; the PNM lane's multiplier."""
    a_significand, a_exponent = _normalized(stages, FP16, a_bits)
    b_significand, b_exponent = _normalized(stages, FP16, b_bits)
    s1 = stages(
        a=a_significand, b=b_significand,
        # FP32 biased exponent of the product while its leading one sits at bit 20 of the 22-bit product.
        exponent=a_exponent + b_exponent - 2 * FP16.bias + FP32.bias,
        **_special_cases(unpack(FP16, a_bits), unpack(FP16, b_bits)),
    )
    s2 = stages(product=prefix_sum(stages, *carry_save_product(stages, s1.a, s1.b))[:22], exponent=s1.exponent,
                sign=s1.sign, is_nan=s1.is_nan, is_inf=s1.is_inf, is_zero=s1.is_zero)
    top = s2.product[21]
    fraction = Mux(top, s2.product[:21] << 2, s2.product[:20] << 3)[:FP32.mantissa_bits]
    return stages(result=_finish(Cat(fraction, (s2.exponent + top)[:8]), s2)).result


class FP32Mul(BinaryUnit):
    """a × b in FP32, round-to-nearest-even, subnormals in and out, overflow to inf.

    Stages: (1) unpack and normalize subnormal operands, (2) multiply significands, (3) normalize, round, pack.
    """

    latency = 6
    operand_format = FP32
    function = staticmethod(fp32_mul)


class FP16MulFP32(BinaryUnit):
    """a × b for FP16 inputs, exact in FP32: the 22-bit product never rounds, overflows or underflows.

    Stages: (1) unpack, normalize and multiply the 11-bit significands, (2) normalize and pack.
    """

    latency = 3
    operand_format = FP16
    function = staticmethod(fp16_mul_fp32)
