"""Bit-level building blocks shared by the floating-point units: unpacking, counting, shifting, rounding."""
from typing import NamedTuple

from amaranth.hdl import Cat, Const, Mux, Value
from amaranth.utils import bits_for, ceil_log2

from .formats import FloatFormat


class Unpacked(NamedTuple):
    """A float's fields with the implicit bit made explicit.

    `exponent` is the effective biased exponent (1 for subnormals, so value = significand ·
    2^(exponent − bias − mantissa_bits) for every finite input) and `significand` carries the implicit bit.
    """

    sign: Value
    exponent: Value
    significand: Value
    is_zero: Value
    is_inf: Value
    is_nan: Value


def unpack(fmt: FloatFormat, bits: Value) -> Unpacked:
    mantissa = bits[:fmt.mantissa_bits]
    exponent = bits[fmt.mantissa_bits:fmt.mantissa_bits + fmt.exponent_bits]
    sign = bits[fmt.width - 1]
    normal = exponent != 0
    exponent_all_ones = exponent == fmt.exponent_max
    if fmt.has_infinity:
        is_inf = exponent_all_ones & (mantissa == 0)
        is_nan = exponent_all_ones & (mantissa != 0)
    else:
        is_inf = Const(0)
        is_nan = exponent_all_ones & (mantissa == (1 << fmt.mantissa_bits) - 1)
    return Unpacked(
        sign=sign,
        exponent=Mux(normal, exponent, 1),
        significand=Cat(mantissa, normal),
        is_zero=~normal & (mantissa == 0),
        is_inf=is_inf,
        is_nan=is_nan,
    )


def leading_zeros(value: Value) -> Value:
    """Number of zero bits above the most significant one; `len(value)` when `value` is zero."""
    width = len(value)
    padded_width = 1 << ceil_log2(max(width, 1))
    # Ones appended below the LSB do not change the count of a nonzero value and stop a zero one at `width`.
    padded = Cat(Const(-1, padded_width - width), value) if padded_width > width else value
    return _leading_zeros_tree(padded)


def _leading_zeros_tree(value: Value) -> Value:
    # Each node tests its upper half for zero afresh instead of reusing the child's flag: Amaranth emits a
    # Value object once per use, so a flag shared by two parents would double at every level of the tree.
    if len(value) == 1:
        return ~value[0]
    half = len(value) // 2
    count = Mux(value[half:].any(), _leading_zeros_tree(value[half:]), half + _leading_zeros_tree(value[:half]))
    return count[:bits_for(2 * half)]


def shift_right_sticky(value: Value, amount: Value) -> tuple[Value, Value]:
    """`value >> amount` and whether any one bit was shifted out (the sticky bit of rounding)."""
    width = len(value)
    amount = Mux(amount > width, width, amount)[:bits_for(width)]
    shifted = value >> amount
    sticky = (shifted << amount)[:width] != value
    return shifted, sticky


def round_nearest_even(packed: Value, guard: Value, sticky: Value) -> Value:
    """Round a packed {exponent, fraction} up by one ulp when guard & (sticky | lsb).

    Packing the exponent above the fraction lets the carry of a rounded-up all-ones fraction move into
    the next binade, from subnormal to normal and from the largest finite value to infinity.
    """
    return (packed + (guard & (sticky | packed[0])))[:len(packed)]

