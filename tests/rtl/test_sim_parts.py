"""Sub-blocks under Amaranth's own simulator: the FP bit helpers and the stall behaviour of `PipelinedUnit`, each
against hand-worked values, in well under a second (no Verilator build)."""
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from rtl.fp.bits import leading_zeros, round_nearest_even, shift_right_sticky, unpack
from rtl.fp.formats import FP8_E4M3, FP16
from rtl.pipeline import PipelinedUnit


def evaluate(inputs: dict[str, Signal], outputs: dict[str, object], cases: list[dict[str, int]]) -> list[dict]:
    """The settled `outputs` of a combinational circuit for each assignment of its `inputs`."""
    m = Module()
    probes = {name: Signal(value.shape(), name=name) for name, value in outputs.items()}
    m.d.comb += [probes[name].eq(value) for name, value in outputs.items()]
    results = []

    async def bench(ctx):
        for case in cases:
            for name, value in case.items():
                ctx.set(inputs[name], value)
            results.append({name: ctx.get(probe) for name, probe in probes.items()})

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return results


def test_leading_zeros_of_every_5_bit_value() -> None:
    value = Signal(5)
    counts = evaluate({"v": value}, {"n": leading_zeros(value)}, [{"v": v} for v in range(32)])
    # 0 → 5 (all zeros), 1 → 4, 2..3 → 3, 4..7 → 2, 8..15 → 1, 16..31 → 0
    assert [c["n"] for c in counts] == [5, 4, 3, 3] + [2] * 4 + [1] * 8 + [0] * 16


def test_shift_right_sticky_by_hand() -> None:
    value, amount = Signal(8), Signal(4)
    shifted, sticky = shift_right_sticky(value, amount)
    cases = [{"v": 0b1011_0000, "a": 4}, {"v": 0b1011_0000, "a": 5}, {"v": 0b1011_0000, "a": 9},
             {"v": 0, "a": 9}, {"v": 0b1, "a": 0}]
    got = evaluate({"v": value, "a": amount}, {"q": shifted, "s": sticky}, cases)
    # Only ones shifted out set sticky; an amount beyond the width shifts everything out.
    assert [(g["q"], g["s"]) for g in got] == [(0b1011, 0), (0b101, 1), (0, 1), (0, 0), (1, 0)]


def test_round_nearest_even_by_hand() -> None:
    packed, guard, sticky = Signal(4), Signal(), Signal()
    cases = [{"p": 0b0110, "g": 1, "s": 0},   # a tie to an even value stays
             {"p": 0b0111, "g": 1, "s": 0},   # a tie to an odd value rounds up, carrying into the exponent
             {"p": 0b0110, "g": 1, "s": 1},   # above the midpoint rounds up
             {"p": 0b0111, "g": 0, "s": 1},   # below the midpoint truncates
             {"p": 0b1111, "g": 1, "s": 1}]   # the carry out of the field is dropped
    got = evaluate({"p": packed, "g": guard, "s": sticky}, {"r": round_nearest_even(packed, guard, sticky)}, cases)
    assert [g["r"] for g in got] == [0b0110, 0b1000, 0b0111, 0b0111, 0b0000]


def test_unpack_fp16_and_e4m3_by_hand() -> None:
    bits16, bits8 = Signal(16), Signal(8)
    fields = ("sign", "exponent", "significand", "is_zero", "is_inf", "is_nan")
    outputs = {f"h_{name}": value for name, value in zip(fields, unpack(FP16, bits16))}
    outputs |= {f"e_{name}": value for name, value in zip(fields, unpack(FP8_E4M3, bits8))}
    cases = [{"h": 0x3C00, "e": 0x38},   # 1.0: FP16 exponent 15, E4M3 exponent 7, implicit bit set
             {"h": 0x8001, "e": 0x01},   # smallest subnormals: effective exponent 1, no implicit bit
             {"h": 0x7C00, "e": 0x7E},   # FP16 inf; E4M3 0x7E is 448, finite (no infinities)
             {"h": 0x7E00, "e": 0x7F}]   # NaNs
    got = evaluate({"h": bits16, "e": bits8}, outputs, cases)
    half = [tuple(g[f"h_{name}"] for name in fields) for g in got]
    e4m3 = [tuple(g[f"e_{name}"] for name in fields) for g in got]
    assert half == [(0, 15, 0x400, 0, 0, 0), (1, 1, 0x001, 0, 0, 0), (0, 31, 0x400, 0, 1, 0), (0, 31, 0x600, 0, 0, 1)]
    assert e4m3 == [(0, 7, 0x8, 0, 0, 0), (0, 1, 0x1, 0, 0, 0), (0, 15, 0xE, 0, 0, 0), (0, 15, 0xF, 0, 0, 1)]


class _Delay(PipelinedUnit):
    """Two stage registers and an increment: what comes out is what went in, plus one, two beats later."""
    latency = 2

    def __init__(self) -> None:
        super().__init__(8, 8)

    def datapath(self, stages, x):
        first = stages(x=x)
        return stages(y=first.x + 1).y


def test_a_stalled_output_holds_every_stage() -> None:
    """Feed 10, 20, 30, 40 back to back while the output is refused for cycles 2–5: every beat comes out once,
    in order, plus one; `i.ready` is low exactly while a full pipeline is held."""
    dut = _Delay()
    out_ready = [1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
    seen, in_ready = [], []

    async def bench(ctx):
        pending = [10, 20, 30, 40]
        for ready in out_ready:
            ctx.set(dut.o.ready, ready)
            ctx.set(dut.i.valid, bool(pending))
            ctx.set(dut.i.payload, pending[0] if pending else 0)
            in_ready.append(ctx.get(dut.i.ready))
            if ctx.get(dut.o.valid) and ready:
                seen.append(ctx.get(dut.o.payload))
            if pending and ctx.get(dut.i.ready):
                pending.pop(0)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == [11, 21, 31, 41]
    # From cycle 2 the output register holds 11 and is refused, so no stage advances until cycle 6.
    assert in_ready == [1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
