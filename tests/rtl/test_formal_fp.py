"""The formal reference of `fp32_narrow` (tb/formal/fp.py) says what IEEE 754 says, and the proof against it can
fail: the reference accepts hand-computed and ml_dtypes results and rejects their neighbours; the block is proved
to match it at every parameter set; a block that truncates where it should round is refuted."""
import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from rtl.fp import convert
from basedie.flow import sby
from tb.formal import fp
from tb.models import fp as model

PROPERTIES = {p.name: p for p in fp.PROPERTIES}

# (FP32 bits, target, rounding, expected bits), worked by hand from the formats' definitions.
HAND = [
    (0x3F800000, "fp16", "nearest_even", 0x3C00),    # 1.0
    (0x477FF000, "fp16", "nearest_even", 0x7C00),    # 65520 = halfway between 65504 and 2^16: rounds to inf
    (0x477FEFFF, "fp16", "nearest_even", 0x7BFF),    # just below that halfway point: 65504
    (0x477FF000, "fp16", "toward_zero_ftz", 0x7BFF),  # toward zero: the largest finite value
    (0x7F7FFFFF, "fp16", "toward_zero_ftz", 0x7BFF),  # FP32's largest finite saturates, no infinity
    (0x33000000, "fp16", "nearest_even", 0x0000),    # 2^-25: halfway between 0 and 2^-24, ties to the even 0
    (0x33000001, "fp16", "nearest_even", 0x0001),    # just above it: the smallest subnormal
    (0xB8800000, "fp16", "nearest_even", 0x8400),    # -2^-14: the smallest normal, negative
    (0x387FFFFF, "fp16", "toward_zero_ftz", 0x0000),  # just below 2^-14: flushed to zero
    (0xB87FFFFF, "fp16", "toward_zero_ftz", 0x8000),  # ... keeping its sign
    (0x3F808000, "bf16", "nearest_even", 0x3F80),    # 1 + 2^-8: halfway, ties to the even 1.0
    (0x3F818000, "bf16", "nearest_even", 0x3F82),    # 1 + 3·2^-8: halfway, ties to the even 1 + 2^-6
    (0x3F81FFFF, "bf16", "toward_zero_ftz", 0x3F81),
    (0x7F7FFFFF, "bf16", "nearest_even", 0x7F80),    # above BF16's largest finite + half an ulp: inf
    (0x7F7FFFFF, "bf16", "toward_zero_ftz", 0x7F7F),
    (0x00400000, "bf16", "nearest_even", 0x0040),    # an FP32 subnormal is a BF16 subnormal
    (0x00400000, "bf16", "toward_zero_ftz", 0x0000),  # ... flushed toward zero
    (0xFF800000, "bf16", "toward_zero_ftz", 0xFF80),  # -inf stays -inf
    (0x7FC00001, "fp16", "toward_zero_ftz", 0x7E00),  # NaN → the canonical quiet NaN
]


def verdicts(cases: list[tuple[int, int]], target: str, rounding: str) -> list[bool]:
    """The reference's verdict on each (FP32 input, output) pair, from Amaranth's simulator."""
    m = Module()
    x, out = Signal(32), Signal(16)
    ok = Signal()
    m.d.comb += ok.eq(fp.rounded(x, out, fp.TARGETS[target], rounding))
    seen = []

    async def bench(ctx):
        for a, b in cases:
            ctx.set(x, a)
            ctx.set(out, b)
            seen.append(bool(ctx.get(ok)))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return seen


def with_neighbours(pairs) -> tuple[list[tuple[int, int]], list[bool]]:
    """Each right answer, and the encodings one below and above it, which the reference must refuse."""
    cases, expected = [], []
    for a, b in pairs:
        cases += [(a, b), (a, (b - 1) % 2 ** 16), (a, (b + 1) % 2 ** 16)]
        expected += [True, False, False]
    return cases, expected


@pytest.mark.parametrize("target, rounding", [v.split("-") for v in fp.VARIANTS])
def test_the_reference_accepts_the_ieee_result_and_refuses_its_neighbours(target, rounding) -> None:
    rng = np.random.default_rng(17)
    # Random bit patterns (every binade, NaNs included) and values near the target's range edges.
    xs = np.concatenate([rng.integers(0, 2 ** 32, 300, dtype=np.uint64),
                         model.to_bits(rng.uniform(-7e4, 7e4, 100).astype(np.float32)),
                         model.to_bits((rng.uniform(-1, 1, 100) * 2.0 ** -14).astype(np.float32))]).astype(np.uint32)
    expected_bits = model.narrow(xs, target, rounding)
    hand = [(a, b) for a, t, r, b in HAND if (t, r) == (target, rounding)]
    cases, expected = with_neighbours([*hand, *zip(xs.tolist(), expected_bits.tolist())])
    assert verdicts(cases, target, rounding) == expected


@pytest.mark.slow   # SymbiYosys (the slow marker's definition): 1.4 to 1.8 s of CPU each, 14.8 s for the nine
@pytest.mark.parametrize("name", PROPERTIES)
@pytest.mark.parametrize("variant", fp.VARIANTS)
def test_fp32_narrow_is_ieee_for_every_input(name, variant) -> None:
    outcome = sby.run(PROPERTIES[name].harness(variant), "bmc", PROPERTIES[name].depth)
    assert outcome.status == "PASS", outcome.log[-2000:]


@pytest.mark.slow
def test_a_narrowing_that_truncates_instead_of_rounding_is_refuted(monkeypatch) -> None:
    monkeypatch.setattr(convert, "round_nearest_even", lambda packed, guard, sticky: packed)
    outcome = sby.run(PROPERTIES["ieee_rounded"].harness("fp16-nearest_even"), "bmc", fp.FP32Narrow.latency + 1)
    assert outcome.status == "FAIL" and outcome.failed_step == fp.FP32Narrow.latency, outcome.log[-2000:]
