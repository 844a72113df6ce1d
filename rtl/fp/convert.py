"""Format conversions into and out of FP32, the datapath format of the DQB and the PNM lane."""
from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Mux, Value

from ..params import Params, require_choice
from ..pipeline import PipelinedUnit, Stages
from .bits import leading_zeros, round_nearest_even, shift_right_sticky, unpack
from .formats import BF16, FORMATS, FP8_E4M3, FP16, FP32, INT4, INT8, FloatFormat, IntFormat

ROUNDINGS = ("nearest_even", "toward_zero_ftz")


@dataclass(frozen=True)
class ToFP32Params(Params):
    """`source`: the format converted (exactly) to FP32."""

    source: str = "fp16"

    def validate(self) -> None:
        require_choice(self, "source", tuple(f.name for f in (INT4, INT8, FP8_E4M3, FP16, BF16)))


class ToFP32(PipelinedUnit):
    """INT4/INT8/FP8 E4M3/FP16/BF16 → FP32, exact for every input (NaN → canonical NaN)."""

    latency = 1

    def __init__(self, params: ToFP32Params = ToFP32Params()) -> None:
        self.params = params
        self.source = FORMATS[params.source]
        super().__init__(self.source.width, FP32.width)

    def datapath(self, stages: Stages, x: Value) -> Value:
        return stages(result=to_fp32(self.source, x)).result


def to_fp32(fmt: FloatFormat | IntFormat, x: Value) -> Value:
    """The exact conversion as combinational logic; reusable inside wider pipelines."""
    return _int_to_fp32(fmt, x) if isinstance(fmt, IntFormat) else _float_to_fp32(fmt, x)


def _int_to_fp32(fmt: IntFormat, x: Value) -> Value:
    negative = x[-1]
    magnitude = Mux(negative, -x.as_signed(), x)[:fmt.bits]  # -2^(bits-1) stays exact as unsigned
    shift = leading_zeros(magnitude)
    normalized = (magnitude << shift)[:fmt.bits]  # leading one at bit bits-1
    exponent = FP32.bias + fmt.bits - 1 - shift
    fraction = Cat(Const(0, FP32.mantissa_bits - (fmt.bits - 1)), normalized[:fmt.bits - 1])
    return Mux(magnitude == 0, 0, Cat(fraction, exponent[:FP32.exponent_bits], negative))


def _float_to_fp32(fmt: FloatFormat, x: Value) -> Value:
    f = unpack(fmt, x)
    widen = FP32.mantissa_bits - fmt.mantissa_bits
    if fmt.bias == FP32.bias:
        # Same exponent range (BF16): subnormals stay subnormal, so the fields map across unchanged.
        fraction = Cat(Const(0, widen), f.significand[:fmt.mantissa_bits])
        exponent = Mux(f.significand[-1], f.exponent, 0)
    elif FP32.bias - fmt.bias - fmt.mantissa_bits >= 0:
        # Every value of the narrower range, subnormals included, is an FP32 normal: normalize.
        shift = leading_zeros(f.significand)
        normalized = (f.significand << shift)[:len(f.significand)]
        fraction = Cat(Const(0, widen), normalized[:fmt.mantissa_bits])
        exponent = f.exponent + (FP32.bias - fmt.bias) - shift
    else:
        raise ValueError(f"no exact FP32 mapping for {fmt.name}")
    magnitude = Mux(f.is_zero, 0, Cat(fraction, exponent[:FP32.exponent_bits]))
    magnitude = Mux(f.is_inf, FP32.infinity, magnitude)
    return Mux(f.is_nan, FP32.canonical_nan, Cat(magnitude, f.sign))


@dataclass(frozen=True)
class FP32NarrowParams(Params):
    """`target`: FP16 or BF16. `rounding`: IEEE round-to-nearest-even, or round-toward-zero with
    flush-to-zero (StreamDQ §3.6's wire-mapped conversion: results below the target's smallest
    normal become signed zero, overflow saturates to the largest finite value)."""

    target: str = "fp16"
    rounding: str = "nearest_even"

    def validate(self) -> None:
        require_choice(self, "target", (FP16.name, BF16.name))
        require_choice(self, "rounding", ROUNDINGS)


class FP32Narrow(PipelinedUnit):
    """FP32 → FP16 or BF16 with the selected rounding; ±inf stays ±inf, NaN → canonical NaN."""

    latency = 2

    def __init__(self, params: FP32NarrowParams = FP32NarrowParams()) -> None:
        self.params = params
        self.target = FORMATS[params.target]
        super().__init__(FP32.width, self.target.width)

    def datapath(self, stages: Stages, x: Value) -> Value:
        return fp32_narrow(stages, x, self.target, self.params.rounding)


def fp32_narrow(stages: Stages, x: Value, target: FloatFormat, rounding: str) -> Value:
    """The narrowing datapath over two `stages`; reusable inside wider pipelines."""
    t = target
    f = unpack(FP32, x)
    # Value = significand · 2^(exponent − 150); in the target, the exponent field would be:
    exponent = f.exponent - FP32.bias + t.bias
    below_normal = exponent < 1
    aligned, shifted_out = shift_right_sticky(f.significand, Mux(below_normal, 1 - exponent, 0)[:8])
    dropped = FP32.mantissa_bits - t.mantissa_bits
    s = stages(
        sign=f.sign, is_nan=f.is_nan, is_inf=f.is_inf,
        overflow=~f.is_inf & ~f.is_nan & (exponent >= t.exponent_max),
        packed=Cat(aligned[dropped:FP32.mantissa_bits],
                   Mux(below_normal | ~aligned[-1], 0, exponent)[:t.exponent_bits]),
        guard=aligned[dropped - 1],
        sticky=(aligned[:dropped - 1] != 0) | shifted_out,
    )
    if rounding == "nearest_even":
        magnitude = Mux(s.overflow, t.infinity, round_nearest_even(s.packed, s.guard, s.sticky))
    else:
        subnormal = s.packed[t.mantissa_bits:] == 0
        magnitude = Mux(s.overflow, t.max_finite, Mux(subnormal, 0, s.packed))
    magnitude = Mux(s.is_inf, t.infinity, magnitude)
    return stages(result=Mux(s.is_nan, t.canonical_nan, Cat(magnitude, s.sign))).result
