"""Pipelined FP32 approximations of e^x, 1/x and 1/√x, built only from `fp32_add`/`fp32_mul` steps (IEEE
round-to-nearest-even) and exact operations on bit fields, so that a numpy float32 mirror is bit-exact.
The algorithms, constants and error bounds are documented in `docs/pnm-vector.md`."""
import struct
from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Mux, Signal, Value

from ..fp.add import FP32Add, fp32_add
from ..fp.formats import FP32
from ..fp.multiply import FP32Mul, fp32_mul
from ..pipeline import SharedDatapath, Stages

# Every addition and multiplication is an instance of one of these modules, written once in the Verilog
# (`rtl.generate` writes a component's `shared_modules`): inlined, one lane's 45 units took 68 s to generate.
ADD_MODULE, MUL_MODULE = "pnm_vector_fp32_add", "pnm_vector_fp32_mul"
SHARED_MODULES = {ADD_MODULE: (fp32_add, FP32Add.latency), MUL_MODULE: (fp32_mul, FP32Mul.latency)}


def shared_modules() -> dict:
    return {name: SharedDatapath(datapath, FP32.width, FP32.width, latency)
            for name, (datapath, latency) in SHARED_MODULES.items()}

NEG_ZERO = 1 << 31


def fp32(value: float) -> Const:
    """The binary32 bits of `value` rounded to nearest."""
    return Const(struct.unpack("<I", struct.pack("<f", value))[0], 32)


ONE = fp32(1.0)
# e^x: Cody–Waite reduction by ln 2 = LN2_HI + LN2_LO, then Cephes's degree-5 polynomial for (e^r − 1 − r)/r².
LOG2E = fp32(1.44269504088896341)
ROUND_MAGIC = 0x4B400000  # 1.5 · 2^23: t + it rounds |t| < 2^22 to an integer held in the low mantissa bits
LN2_HI, LN2_LO = fp32(0.693359375), fp32(-2.12194440e-4)
EXP_POLY = tuple(fp32(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                                   1.6666665459e-1, 5.0000001201e-1))
EXP_LIMIT = 0x43000000  # 128.0: e^z for |z| ≥ 128 is +inf or +0, decided from the input alone
RECIP_SEED = (fp32(24 / 17), fp32(-8 / 17))  # 24/17 − 8/17·m, within 1/17 of 1/m on [1, 2)
RSQRT_MAGIC = 0x5F3759DF
THREE_HALVES = fp32(1.5)
NEWTON_STEPS = 3


def neg(x: Value) -> Value:
    return Cat(x[:31], ~x[31])


def is_nan(x: Value) -> Value:
    return (x[23:31] == 0xFF) & (x[:23] != 0)


def order_key(x: Value) -> Value:
    """An unsigned key ordered like the FP32 values (−0 below +0), for max and comparisons."""
    return Mux(x[31], ~x, x | NEG_ZERO)[:32]


def fmax(x: Value, y: Value) -> Value:
    """max(x, y): the canonical NaN if either is NaN; +0 above −0."""
    return Mux(is_nan(x) | is_nan(y), FP32.canonical_nan, Mux(order_key(y) > order_key(x), y, x))


def _unit(module: str, stages: Stages, x: Value | int, y: Value | int) -> Value:
    """An instance of a shared unit on `stages`' advance, moving `stages` past its latency."""
    result = Signal(FP32.width)
    stages.m.submodules += SharedDatapath.instance(module, stages.advance, Const(x, 32) if isinstance(x, int) else x,
                                                   Const(y, 32) if isinstance(y, int) else y, result)
    stages.count += SHARED_MODULES[module][1]
    return result


def add(x: Value | int, y: Value | int):
    """A `parallel` path: x + y."""
    return lambda stages: _unit(ADD_MODULE, stages, x, y)


def mul(x: Value | int, y: Value | int):
    """A `parallel` path: x · y."""
    return lambda stages: _unit(MUL_MODULE, stages, x, y)


def parallel(stages: Stages, carry: dict, **paths) -> tuple[SimpleNamespace, dict]:
    """Run datapaths side by side from `stages`' current boundary, each on a fork, padding the shorter ones so
    all end together; `carry` (values needed later) is registered alongside. Returns the paths' results and
    the carried values, and moves `stages` past the section."""
    start = stages.count
    forks = {name: Stages(stages.m, stages.advance, start) for name in paths}
    results = {name: path(forks[name]) for name, path in paths.items()}
    end = max(fork.count for fork in forks.values())
    for name, fork in forks.items():
        while fork.count < end:
            results[name] = fork(v=results[name]).v
    carrier = Stages(stages.m, stages.advance, start)
    for _ in range(end - start):
        carry = register(carrier, carry)
    stages.count = end
    return SimpleNamespace(**results), carry


def register(stages: Stages, values: dict[str, Value]) -> dict[str, Value]:
    """One stage boundary for `values`, packed into one register: Verilog emits one register per name, and
    hundreds of stages of a dozen carried values made the unit's Verilog megabytes long."""
    values = {name: Value.cast(v) for name, v in values.items()}
    packed = stages(v=Cat(*values.values())).v
    out, offset = {}, 0
    for name, value in values.items():
        width = len(value)
        field = packed[offset:offset + width]
        out[name] = field.as_signed() if value.shape().signed else field
        offset += width
    return out


def scale(stages: Stages, y: Value, shift: Value, carry: dict) -> tuple[Value, dict]:
    """One stage: positive normal `y` · 2^shift by adding to its exponent field; ≥ 255 → +inf, ≤ 0 → +0."""
    field = stages.nets(field=y[23:31] + shift).field
    scaled = Mux(field >= 255, FP32.infinity, Mux(field <= 0, 0, Cat(y[:23], field[:8])))
    out = register(stages, carry | {"result": scaled})
    return out.pop("result"), out


def exp(stages: Stages, z: Value) -> Value:
    """e^z: n = round(z·log2 e), r = (z − n·LN2_HI) − n·LN2_LO, e^r = 1 + r + r²·P(r), result e^r · 2^n."""
    carry = {"z": z, "negative": z[31], "nan": is_nan(z), "huge": ~is_nan(z) & (z[:31] >= EXP_LIMIT)}
    t, carry = parallel(stages, carry, v=mul(z, LOG2E))
    k, carry = parallel(stages, carry, v=add(t.v, ROUND_MAGIC))
    carry["n"] = (k.v - ROUND_MAGIC)[:9].as_signed()  # exact while |t| < 2^22, i.e. |z| < 128
    n, carry = parallel(stages, carry, v=add(k.v, ROUND_MAGIC | NEG_ZERO))
    nl, carry = parallel(stages, carry, hi=mul(n.v, LN2_HI), lo=mul(n.v, LN2_LO))
    carry["lo"] = nl.lo
    r, carry = parallel(stages, carry, v=add(carry.pop("z"), neg(nl.hi)))
    r, carry = parallel(stages, carry, v=add(r.v, neg(carry.pop("lo"))))
    carry["r"] = r.v
    p, carry = parallel(stages, carry, v=mul(EXP_POLY[0], r.v), rr=mul(r.v, r.v))
    carry["rr"] = p.rr
    p, carry = parallel(stages, carry, v=add(p.v, EXP_POLY[1]))
    for c in EXP_POLY[2:]:
        p, carry = parallel(stages, carry, v=mul(p.v, carry["r"]))
        p, carry = parallel(stages, carry, v=add(p.v, c))
    y, carry = parallel(stages, carry, v=mul(p.v, carry.pop("rr")))
    y, carry = parallel(stages, carry, v=add(y.v, carry.pop("r")))
    y, carry = parallel(stages, carry, v=add(y.v, ONE))
    y, carry = scale(stages, y.v, Mux(carry["huge"], 0, carry["n"]), carry)
    y = Mux(carry["huge"], Mux(carry["negative"], 0, FP32.infinity), y)
    return Mux(carry["nan"], FP32.canonical_nan, y)


def recip(stages: Stages, x: Value) -> Value:
    """1/x: x = ±m·2^e with m ∈ [1, 2); y ≈ 1/m from a linear seed and three Newton steps y + y·(1 − m·y);
    result ±y·2^−e. Subnormal inputs count as zero (→ ±inf); results below 2^−126 flush to ±0."""
    carry = {"sign": x[31], "field": x[23:31], "nan": is_nan(x), "inf": (x[23:31] == 0xFF) & (x[:23] == 0),
             "m": Cat(x[:23], Const(127, 8), Const(0, 1))}
    y, carry = parallel(stages, carry, v=mul(carry["m"], RECIP_SEED[1]))
    y, carry = parallel(stages, carry, v=add(y.v, RECIP_SEED[0]))
    for _ in range(NEWTON_STEPS):
        carry["y"] = y.v
        t, carry = parallel(stages, carry, v=mul(carry["m"], y.v))
        u, carry = parallel(stages, carry, v=add(ONE, neg(t.v)))
        v, carry = parallel(stages, carry, v=mul(carry["y"], u.v))
        y, carry = parallel(stages, carry, v=add(carry.pop("y"), v.v))
    y, carry = scale(stages, y.v, 127 - carry["field"], carry)
    y = Mux(carry["field"] == 0, FP32.infinity, Mux(carry["inf"], 0, y))
    return Mux(carry["nan"], FP32.canonical_nan, Cat(y[:31], carry["sign"]))


def rsqrt(stages: Stages, x: Value) -> Value:
    """1/√x: x = m·2^(2j) with m ∈ [1, 4); y ≈ 1/√m from the integer seed 0x5F3759DF − (bits(m) >> 1) and
    three Newton steps y·(1.5 − (m/2)·y²); result y·2^−j. Subnormals count as zero (±0 → ±inf), negative
    nonzero inputs give NaN, +inf gives +0."""
    field = x[23:31]
    odd = ~field[0]  # the unbiased exponent field − 127 is odd
    carry = {"sign": x[31], "field": field, "odd": odd, "nan": is_nan(x),
             "inf": (field == 0xFF) & (x[:23] == 0),
             "half": Cat(x[:23], Mux(odd, Const(127, 8), Const(126, 8)), Const(0, 1))}
    m = Cat(x[:23], Mux(odd, Const(128, 8), Const(127, 8)), Const(0, 1))
    carry = register(stages, carry | {"y": (RSQRT_MAGIC - (m >> 1))[:32]})
    y = carry.pop("y")
    for _ in range(NEWTON_STEPS):
        carry["y"] = y
        q, carry = parallel(stages, carry, v=mul(y, y))
        q, carry = parallel(stages, carry, v=mul(carry["half"], q.v))
        g, carry = parallel(stages, carry, v=add(THREE_HALVES, neg(q.v)))
        y, carry = parallel(stages, carry, v=mul(carry.pop("y"), g.v))
        y = y.v
    j = (carry["field"] - 127 - carry["odd"]).as_signed() >> 1
    y, carry = scale(stages, y, -j, carry)
    y = Mux(carry["inf"], 0, y)
    y = Mux(carry["sign"], FP32.canonical_nan, y)
    y = Mux(carry["field"] == 0, Cat(Const(FP32.infinity, 31), carry["sign"]), y)
    return Mux(carry["nan"], FP32.canonical_nan, y)
