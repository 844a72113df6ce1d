"""Formal property of `fp32_narrow` (rtl/fp/convert.py): its output is the IEEE 754 rounding of its input, for every
FP32 input, at every (target, rounding) parameter set it has (docs/guides/formal.md).

The reference is written from the standard's definitions, not from the RTL. Every value the rounding rules compare
|x| with (a target value, the point halfway to the next one) is an exact FP32 value, and non-negative FP32 values
order as their encodings read as integers (IEEE 754-2019 §3.4: the biased exponent field above the fraction). So
the reference writes each such value k · 2^s as its FP32 encoding (`encoding`) and compares encodings. No
shift-with-sticky, no guard bit, no rounding increment: nothing the RTL computes appears here. (A first version
compared exact values as 280-bit fixed-point integers: the same verdicts, but BF16 nearest-even took 188 s.)"""
from dataclasses import dataclass

from amaranth.asserts import AnyConst
from amaranth.hdl import Assert, Assume, Cat, Const, Elaboratable, Module, Mux, Signal, Value

from rtl.fp.convert import FP32Narrow, FP32NarrowParams

from .harness import Property, clocked


@dataclass(frozen=True)
class Binary:
    """An IEEE 754 binary format by its field widths (IEEE 754-2019 §3.6, Table 3.5: binary16 is 5/10; bfloat16 is
    binary32 with the low 16 fraction bits dropped: 8/7)."""
    exponent_bits: int
    fraction_bits: int

    @property
    def bias(self) -> int:
        return 2 ** (self.exponent_bits - 1) - 1

    @property
    def magnitude_bits(self) -> int:
        return self.exponent_bits + self.fraction_bits

    @property
    def infinity(self) -> int:
        """The magnitude bits of infinity: exponent all ones, fraction zero."""
        return (2 ** self.exponent_bits - 1) << self.fraction_bits

    def exact(self, magnitude: Value) -> tuple[Value, Value]:
        """(k, s) with value = k · 2^s for a magnitude (sign dropped), §3.4: exponent field e ≥ 1 is
        (2^p + f) · 2^(e − bias − p), e = 0 is f · 2^(1 − bias − p). Infinity's encoding read this way is
        2^(emax + 1), the value one step above the largest finite one."""
        magnitude = Value.cast(magnitude)
        fraction = magnitude[:self.fraction_bits]
        exponent = magnitude[self.fraction_bits:self.magnitude_bits]
        k = Mux(exponent == 0, fraction, fraction | (1 << self.fraction_bits))
        return k, Mux(exponent == 0, 1, exponent) - self.bias - self.fraction_bits


def encoding(k: Value, s: Value) -> Value:
    """The FP32 magnitude encoding of k · 2^s, for values FP32 holds exactly (k < 2^24, a multiple of 2^-149, at
    most 2^128, which encodes as infinity): the leading one of k at bit n gives the biased exponent n + s + 127;
    from 1 up the value is normal (the bits of k after its leading one are the fraction's top bits), below it is
    subnormal (fraction = value / 2^-149)."""
    n = Const(0, range(len(k)))
    for bit in range(1, len(k)):
        n = Mux(k[bit], bit, n)
    biased = n + s + 127
    normal = Cat(((k << 23) >> n)[:23], biased[:8])
    subnormal = (k << Mux(biased <= 0, s + 149, 0).as_unsigned()[:5])[:23]
    return Mux(k == 0, 0, Mux(biased <= 0, subnormal, normal))


FP32_INFINITY = 0x7F800000
TARGETS = {"fp16": Binary(5, 10), "bf16": Binary(8, 7)}
VARIANTS = tuple(f"{target}-{rounding}" for target in TARGETS for rounding in ("nearest_even", "toward_zero_ftz"))
"""Every parameter set `FP32NarrowParams` allows: its two targets by its two roundings."""


def rounded(x: Value, out: Value, target: Binary, rounding: str) -> Value:
    """High if `out` is what IEEE 754 gives for the FP32 `x` narrowed to `target` with `rounding`, as the block
    states its contract (rtl/fp/convert.py): NaN → the canonical quiet NaN (sign 0, exponent all ones, fraction's
    top bit alone); ±infinity → ±infinity; otherwise the sign is kept and the magnitude is
    - nearest_even (§4.3.1 roundTiesToEven): the target value nearest to |x|, the one with an even encoding on a
      tie; magnitudes from halfway between the largest finite value and 2^(emax+1) up round to infinity (§7.4);
    - toward_zero_ftz (§4.3.2 roundTowardZero, then flush to zero): the largest target value not above |x|, capped
      at the largest finite value (no infinity from a finite input); one below the smallest normal is zero."""
    t = target
    x_magnitude, t_magnitude = x[:31], out[:t.magnitude_bits]
    x_is_nan = x_magnitude > FP32_INFINITY
    canonical_nan = t.infinity | (1 << (t.fraction_bits - 1))

    def value(magnitude: Value) -> Value:
        return encoding(*t.exact(magnitude))

    def halfway_up(magnitude: Value) -> Value:
        """The point halfway from a value to the next: (2k + 1) · 2^(s − 1), the next being (k + 1) · 2^s."""
        k, s = t.exact(magnitude)
        return encoding(Cat(1, k), s - 1)

    if rounding == "nearest_even":
        # |x| lies between the halfway points to out's neighbours; a halfway point itself goes to the even one.
        even = ~t_magnitude[0]
        below, above = halfway_up((t_magnitude - 1)[:t.magnitude_bits]), halfway_up(t_magnitude)
        lower = (t_magnitude == 0) | (x_magnitude > below) | ((x_magnitude == below) & even)
        upper = (t_magnitude == t.infinity) | (x_magnitude < above) | ((x_magnitude == above) & even)
        magnitude_ok = (t_magnitude <= t.infinity) & lower & upper
    else:
        k, s = t.exact(t_magnitude)
        largest_finite = t.infinity - 1
        truncated = (value(t_magnitude) <= x_magnitude) & (t_magnitude <= largest_finite) & \
            ((x_magnitude < encoding(k + 1, s)) | (t_magnitude == largest_finite))
        magnitude_ok = Mux(x_magnitude < value(1 << t.fraction_bits), t_magnitude == 0, truncated)
    return Mux(x_is_nan, out == canonical_nan,
               Mux(x_magnitude == FP32_INFINITY, out == (x[31] << t.magnitude_bits | t.infinity),
                   (out[-1] == x[31]) & magnitude_ok))


class Harness(Elaboratable):
    """The block with one FP32 value the solver picks (any of the 2^32) held at its input and its output always
    taken: the first result is valid `latency` cycles after reset, and every valid result must be the IEEE one."""

    def __init__(self, variant: str, check) -> None:
        self.target, self.rounding = variant.split("-")
        self.check = check

    def elaborate(self, platform) -> Module:
        m = Module()
        clocked(m)
        self.dut = dut = FP32Narrow(FP32NarrowParams(self.target, self.rounding))
        m.submodules.dut = dut
        self.x = Signal(32, name="x")
        m.d.comb += [self.x.eq(AnyConst(32)), dut.i.payload.eq(self.x), dut.i.valid.eq(1), dut.o.ready.eq(1)]
        self.check(m, self)
        return m


def ieee_rounded(m: Module, h: Harness) -> None:
    """Every result the block delivers is the IEEE 754 narrowing of its input with its rounding (`rounded`)."""
    m.d.comb += Assert(~h.dut.o.valid | rounded(h.x, h.dut.o.payload, TARGETS[h.target], h.rounding))


def unique(m: Module, h: Harness) -> None:
    """The reference is a function: any output it accepts for the input is the block's output. With `ieee_rounded`
    this makes the block's output equal to the one IEEE 754 result."""
    other = Signal(16, name="other")
    m.d.comb += [other.eq(AnyConst(16)), Assume(rounded(h.x, other, TARGETS[h.target], h.rounding))]
    m.d.comb += Assert(~h.dut.o.valid | (other == h.dut.o.payload))


PROPERTIES = tuple(Property(check.__name__, check, Harness, VARIANTS, FP32Narrow.latency + 1)
                   for check in (ieee_rounded, unique))
"""Depth latency + 1: steps 0 to latency, the first of which with a valid output is step `latency`."""
