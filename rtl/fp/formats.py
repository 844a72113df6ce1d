"""Number formats the base-die datapaths read and write, as plain descriptors.

NaN outputs: every unit in `rtl.fp` that produces a NaN produces the canonical quiet NaN of its output
format (sign 0, exponent all ones, only the top mantissa bit set), whatever the NaN inputs were.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format: sign, biased exponent, mantissa without the implicit bit.

    `has_infinity=False` is the OCP "fn" convention (FP8 E4M3): the all-ones exponent holds normal
    values and only the all-ones pattern is NaN.
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    has_infinity: bool = True

    @property
    def width(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def exponent_max(self) -> int:
        """The all-ones exponent field."""
        return (1 << self.exponent_bits) - 1

    @property
    def infinity(self) -> int:
        """Bits of +infinity (IEEE formats only)."""
        assert self.has_infinity, f"{self.name} has no infinity"
        return self.exponent_max << self.mantissa_bits

    @property
    def max_finite(self) -> int:
        """Bits of the largest finite positive value."""
        if self.has_infinity:
            return self.infinity - 1
        return (self.exponent_max << self.mantissa_bits) | ((1 << self.mantissa_bits) - 2)

    @property
    def canonical_nan(self) -> int:
        """The quiet NaN every unit emits for this format."""
        if self.has_infinity:
            return self.infinity | (1 << (self.mantissa_bits - 1))
        return (1 << (self.width - 1)) - 1


@dataclass(frozen=True)
class IntFormat:
    """A two's-complement integer format."""

    name: str
    bits: int

    @property
    def width(self) -> int:
        return self.bits


FP32 = FloatFormat("fp32", 8, 23)
FP16 = FloatFormat("fp16", 5, 10)
BF16 = FloatFormat("bf16", 8, 7)
FP8_E4M3 = FloatFormat("fp8_e4m3", 4, 3, has_infinity=False)
INT4 = IntFormat("int4", 4)
INT8 = IntFormat("int8", 8)

FORMATS: dict[str, FloatFormat | IntFormat] = {
    f.name: f for f in (FP32, FP16, BF16, FP8_E4M3, INT4, INT8)
}
