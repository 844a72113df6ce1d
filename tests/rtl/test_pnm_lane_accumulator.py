"""The lane's exact accumulator under Amaranth's simulator against `tb.models.pnm_lane.exact_sum`: the sum of every
dot product since `clear`, rounded once, checked after every beat (no Verilator build)."""
import numpy as np
from amaranth.hdl import Const, Module, Signal
from amaranth.sim import Simulator

from rtl.pipeline import Stages
from rtl.pnm_lane.accumulator import ROUND_STAGES, fold, round_to_fp32
from tb.models import fp, pnm_lane

WIDTH = 2


def f32(*values: float) -> list[int]:
    return [int(v) for v in np.array(values, np.float32).view(np.uint32)]


def accumulate(dots: list[int], clears: list[int]) -> list[int]:
    """The rounded sum after each beat, one beat per cycle."""
    m = Module()
    dot, clear = Signal(32), Signal()
    result = round_to_fp32(Stages(m, Const(1)), fold(m, "acc", Const(1), clear, dot, WIDTH))
    results = []

    async def bench(ctx):
        for k in range(len(dots) + ROUND_STAGES):
            ctx.set(dot, dots[k] if k < len(dots) else 0)
            ctx.set(clear, clears[k] if k < len(dots) else 0)
            await ctx.tick()
            if k >= ROUND_STAGES:
                results.append(ctx.get(result))

    sim = Simulator(m)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()
    return results


def expected(dots: list[int], clears: list[int]) -> list[int]:
    terms, sums = [0], []  # from reset the sum starts at +0
    for dot, clear in zip(dots, clears):
        terms = [dot] if clear else terms + [dot]
        sums.append(int(pnm_lane.exact_sum(np.array(terms, np.uint32))))
    return sums


def check(dots: list[int], clears: list[int]) -> None:
    got, want = np.array(accumulate(dots, clears), np.uint32), np.array(expected(dots, clears), np.uint32)
    bad = fp.mismatches(got, want, "fp32")
    assert not len(bad), [(k, hex(got[k]), hex(want[k])) for k in bad[:5]]


def test_sums_are_exact_and_rounded_once() -> None:
    dots = f32(2.0**32, 1, -2.0**32,            # FP32 additions in turn would lose the 1
               1, 2**-24, 2**-24,               # two ties: in turn both round to 1; exactly 1 + 2^-23
               1 + 2**-23, 2**-24,              # a tie rounds to the even neighbour, up
               -3, 2**-48, -(2**-48),           # the smallest term, negative sums
               -0.0, -0.0, 0.0, 5, -5)
    clears = [1, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 0, 1, 0]
    check(dots, clears)


def test_specials_are_sticky_until_clear() -> None:
    inf = np.inf
    dots = f32(1, inf, -2, -inf, 3, 7, -inf, 2, np.nan, 1, 4)
    clears = [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    check(dots, clears)


def test_random_lane_dot_products_with_cancellation() -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(0, 0x7C00, (600, 1, WIDTH), dtype=np.uint16) | (rng.integers(0, 2, (600, 1, WIDTH)) << 15)
    b = rng.integers(0, 0x7C00, (600, 1, WIDTH), dtype=np.uint16)
    dots = [int(d) for d in pnm_lane.lane_sums(a, b.astype(np.uint16), WIDTH)[:, 0]]
    dots[100:200] = [d ^ 0x80000000 for d in dots[:100]]  # the first sum's terms again, negated: it cancels
    clears = [int(k % 200 == 0 or rng.random() < 0.02) for k in range(600)]
    check(dots, clears)
