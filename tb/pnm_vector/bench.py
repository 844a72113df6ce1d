"""cocotb bench of the PNM vector unit: per-op latency, II and elements per cycle; every op and both reductions
bit-exact against `tb.models.pnm_vector`, at full rate and under random back-pressure; reset mid-stream.

The scoreboard compares each output beat with the next expected one as it arrives, so the first failure names
its beat, cycle, op and operands.
"""
import random
from dataclasses import dataclass

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from rtl.pnm_vector.ports import Op, Reduce
from rtl.registry import BLOCKS

from .. import bench
from ..models import fp
from ..models import pnm_vector as model
from ..scoreboard import StreamHarness
from . import stimulus

STREAM_BEATS = 48  # beats of an uninterrupted stream per op when measuring the II
CHECK_BEATS = 400  # beats per op of the bit-exact test
# Under Icarus (the four-state check for X, not the proof of the numerics) a tenth of them: the 124-stage unit
# simulates at about 20 beats a second there, so 400 per op took 220 s of CPU. Verilator checks all 400.
ICARUS_CHECK_BEATS = 40
REDUCTIONS = ((Op.ADD, Reduce.SUM), (Op.EXP, Reduce.SUM), (Op.MAX, Reduce.MAX), (Op.SOFTMAX, Reduce.MAX))


def _width() -> int:
    return bench.config()["params"]["width"]


def _unit():
    cfg = bench.config()
    block = BLOCKS[cfg["block"]]
    return block.component(block.params(**cfg["params"]))


@dataclass(frozen=True)
class Source:
    """The input beats that produced one output beat, described only when a failure names them."""
    beats: list[model.Beat]

    def __str__(self) -> str:
        last = self.beats[-1]
        return (f"{Op(last.op).name}, reduce {Reduce(last.reduce).name}, {len(self.beats)} input beats; last "
                f"operands a,b,c,d per lane {[[hex(v) for v in lane] for lane in last.operands.T]}")


def _expected(beats: list[model.Beat], width: int) -> tuple[list[int], list[Source]]:
    """The golden model's output payloads, each with the input beats that produced it."""
    sources, pending = [], []
    for beat in beats:
        pending.append(beat)
        if beat.reduce == Reduce.NONE.value or beat.last:
            sources.append(Source(pending))
            pending = []
    return [stimulus.pack_results(results, width) for results in model.run(beats)], sources


def _harness(dut, rng: random.Random | None = None, source_pause: float = 0.0,
             sink_pause: float = 0.0) -> StreamHarness:
    """Every output beat checked on arrival: bit-exact, any NaN matching a NaN reference; random pauses on the
    input and stalls on the output if `rng` is given."""
    width = _width()
    h = StreamHarness(dut, compare=lambda got, expected: got == expected or not len(fp.mismatches(
        stimulus.unpack(got, width).ravel(), stimulus.unpack(expected, width).ravel(), "fp32")),
        describe=lambda bits: str([[hex(v) for v in lane] for lane in stimulus.unpack(bits, width).T]))
    if rng is not None:
        h.src.set_pause_generator(bench.random_pauses(rng, source_pause))
        h.snk.set_pause_generator(bench.random_pauses(rng, sink_pause))
    return h


async def _run(h: StreamHarness, beats: list[model.Beat]) -> int:
    """Send the beats and wait for every output beat, each checked as it arrives; the number of output beats."""
    width = _width()
    expected, sources = _expected(beats, width)
    await h.run([stimulus.pack(b, width) for b in beats], expected, sources)
    return len(expected)


@cocotb.test()
async def latency_and_throughput_per_op(dut):
    """For every op: one beat through the idle unit gives the latency, an uninterrupted stream the II and
    the elements per cycle; for each reduction, the latency from a vector's last beat to its result."""
    unit = _unit()
    width = _width()
    await bench.start(dut)
    rng = np.random.default_rng(1)
    h = _harness(dut)
    accepted, delivered = bench.HandshakeProbe(dut, "i"), bench.HandshakeProbe(dut, "o")
    figures = {}
    for op in Op:
        for beats in (stimulus.elementwise_beats(rng, op, 1, width),
                      stimulus.elementwise_beats(rng, op, STREAM_BEATS, width)):
            first_in, first_out = len(accepted.cycles), len(delivered.cycles)
            await _run(h, beats)
            inputs, outputs = accepted.cycles[first_in:], delivered.cycles[first_out:]
            if len(beats) == 1:
                latency = outputs[0] - inputs[0]
                continue
            interval = int(np.diff(inputs).max())
            rate = width * (len(outputs) - 1) / (outputs[-1] - outputs[0])
        assert latency == unit.latency, f"{op.name}: measured latency {latency}, stated {unit.latency}"
        assert interval == unit.initiation_interval, f"{op.name}: measured II {interval}, stated 1"
        figures[f"latency_cycles_{op.name.lower()}"] = latency
        figures[f"elements_per_cycle_{op.name.lower()}"] = round(rate, 4)
    for op, reduce in REDUCTIONS:
        length = 8
        first_in, first_out = len(accepted.cycles), len(delivered.cycles)
        await _run(h, stimulus.reduction_beats(rng, op, reduce, [length] * 4, width))
        inputs, outputs = accepted.cycles[first_in:], delivered.cycles[first_out:]
        assert len(outputs) == 4
        latency = outputs[0] - inputs[length - 1]
        assert latency == unit.latency, f"{reduce.name} of {op.name}: latency {latency}, stated {unit.latency}"
        rate = width * len(inputs) / (inputs[-1] - inputs[0] + 1)
        figures[f"elements_per_cycle_reduce_{reduce.name.lower()}_{op.name.lower()}"] = round(rate, 4)
    await RisingEdge(dut.clk)
    accepted.stop()
    delivered.stop()
    bench.record(latency_cycles=unit.latency, initiation_interval=unit.initiation_interval, width=width,
                 **figures)


@cocotb.test()
async def bit_exact(dut):
    """Every op on its working range, special values and arbitrary bit patterns, then reductions over vectors
    of 1 to 9 beats, at full rate."""
    width = _width()
    await bench.start(dut)
    rng = np.random.default_rng(2)
    per_op = ICARUS_CHECK_BEATS if bench.under_icarus() else CHECK_BEATS
    beats = [b for op in Op for b in stimulus.elementwise_beats(rng, op, per_op, width)]
    for op, reduce in REDUCTIONS:
        beats += stimulus.reduction_beats(rng, op, reduce, list(rng.integers(1, 10, 12)), width)
    outputs = await _run(_harness(dut), beats)
    bench.record(beats_checked=len(beats), output_beats_checked=outputs)


def _random_op(rng: np.random.Generator, width: int) -> list[model.Beat]:
    """The beats of one random op: a reduction (three times in ten) of 1 to 5 beats, else 1 to 11 elementwise."""
    op = Op(int(rng.integers(0, len(Op))))
    if rng.random() < 0.3:
        reduce = Reduce.SUM if rng.random() < 0.5 else Reduce.MAX
        return stimulus.reduction_beats(rng, op, reduce, [int(rng.integers(1, 6))], width)
    return stimulus.elementwise_beats(rng, op, int(rng.integers(1, 12)), width)


@cocotb.test()
async def random_back_pressure(dut):
    """Ops and reductions interleaved, random gaps on the input and random stalls on the output: nothing lost,
    duplicated, reordered or folded twice."""
    width = _width()
    await bench.start(dut)
    rng = np.random.default_rng(3)
    beats = [beat for _ in range(40) for beat in _random_op(rng, width)]
    h = _harness(dut, random.Random(3), 0.3, 0.5)
    outputs = await _run(h, beats)
    await h.board.idle(dut.o__valid)
    bench.record(back_pressure_beats=len(beats), back_pressure_outputs=outputs)


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset while beats (and a half-folded reduction) are in flight empties the unit; what follows is exact."""
    width = _width()
    await bench.start(dut)
    rng = np.random.default_rng(4)
    h = _harness(dut)
    h.snk.pause = True
    first = stimulus.reduction_beats(rng, Op.ADD, Reduce.SUM, [6], width)[:4]  # no `last`: left half-folded
    await bench.send_all(h.src, [stimulus.pack(b, width) for b in first])
    await ClockCycles(dut.clk, 8)
    h.src.clear()
    await bench.reset(dut)
    assert dut.o__valid.value == 0, "output valid right after reset"
    h.snk.clear()
    h.snk.pause = False
    beats = stimulus.reduction_beats(rng, Op.ADD, Reduce.SUM, [3, 2], width)
    await _run(h, beats + stimulus.elementwise_beats(rng, Op.GELU, 20, width))


@cocotb.test(skip=not bench.soak_beats())
async def soak(dut):
    """`basedie verify pnm_vector --soak N`: at least N beats of ops and reductions interleaved (as in
    `random_back_pressure`) under random input gaps and output stalls, every output checked on arrival, a chunk
    at a time (each chunk's reductions end in it)."""
    width = _width()
    await bench.start(dut)
    rng = np.random.default_rng(7)
    h = _harness(dut, random.Random(7), 0.3, 0.5)
    start, sent, outputs = bench.cycles_simulated(), 0, 0
    while sent < bench.soak_beats():
        beats = []
        while len(beats) < min(bench.SOAK_CHUNK, bench.soak_beats()):
            beats += _random_op(rng, width)
        outputs += await _run(h, beats)
        sent += len(beats)
        h.board.clear()
    await h.board.idle(dut.o__valid)
    bench.record_soak({"i": sent, "o": outputs}, bench.cycles_simulated() - start)
