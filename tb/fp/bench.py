"""cocotb bench for every `rtl.fp` unit: stated latency and II, bit-exact results, random back-pressure.

The host runner names the block and its parameters; the stimulus and golden results come from
`tb.fp.stimulus`, the stated timing from the component itself.
"""
import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from rtl.registry import BLOCKS

from .. import bench
from ..models.fp import mismatches
from ..scoreboard import StreamHarness
from .stimulus import Case, case

STREAM_BEATS = 256  # beats of an uninterrupted stream when measuring the initiation interval
BACK_PRESSURE_VECTORS = 5_000
# Under Icarus (the four-state check for X, not the proof of the numerics) every test draws at most this many
# vectors at random from its set: 10^5 vectors take minutes there. Verilator runs every vector.
ICARUS_VECTORS = 2_000


def _case(seed: int) -> Case:
    cfg = bench.config()
    c = case(cfg["block"], cfg["params"], np.random.default_rng(seed))
    if bench.under_icarus() and len(c.inputs) > ICARUS_VECTORS:
        pick = np.sort(np.random.default_rng(seed).choice(len(c.inputs), ICARUS_VECTORS, replace=False))
        c = Case(c.inputs[pick], c.expected[pick], c.output_format)
    return c


def _harness(dut, output_format: str) -> StreamHarness:
    """Every result checked on arrival: bit-exact, any NaN matching a NaN reference."""
    return StreamHarness(dut, compare=lambda got, expected: got == expected or not len(
        mismatches(np.array([got]), np.array([expected]), output_format)))


async def _run(h: StreamHarness, inputs: np.ndarray, expected: np.ndarray) -> None:
    await h.run(inputs, expected.tolist(), inputs.tolist())


@cocotb.test()
async def latency_and_initiation_interval(dut):
    """One beat through an idle pipeline gives the latency; a long uninterrupted stream gives the II."""
    unit = BLOCKS[bench.config()["block"]].component  # the stated timing is a class attribute
    await bench.start(dut)
    c = _case(seed=1)
    inputs, expected = np.resize(c.inputs, STREAM_BEATS), np.resize(c.expected, STREAM_BEATS)
    h = _harness(dut, c.output_format)
    accepted, delivered = bench.HandshakeProbe(dut, "i"), bench.HandshakeProbe(dut, "o")

    await _run(h, inputs[:1], expected[:1])
    latency = delivered.cycles[0] - accepted.cycles[0]

    await _run(h, inputs, expected)
    await RisingEdge(dut.clk)
    accepted.stop()
    delivered.stop()
    gaps = np.diff(accepted.cycles[1:])
    out_gaps = np.diff(delivered.cycles[1:])
    interval = int(gaps.max())
    throughput = (len(inputs) - 1) / (delivered.cycles[-1] - delivered.cycles[1])

    assert latency == unit.latency, f"measured latency {latency}, stated {unit.latency}"
    assert interval == unit.initiation_interval and int(out_gaps.max()) == 1, \
        f"measured II {interval} (output gaps up to {out_gaps.max()}), stated {unit.initiation_interval}"
    bench.record(latency_cycles=latency, initiation_interval=interval, beats_per_cycle=round(throughput, 4))


@cocotb.test()
async def bit_exact(dut):
    """Every vector at full rate, compared bit for bit with the golden model."""
    await bench.start(dut)
    c = _case(seed=2)
    await _run(_harness(dut, c.output_format), c.inputs, c.expected)
    bench.record(vectors_checked=len(c.inputs))


@cocotb.test()
async def random_back_pressure(dut):
    """Random gaps on the input and random stalls on the output: nothing lost, duplicated or reordered."""
    await bench.start(dut)
    rng = random.Random(3)
    c = _case(seed=3)
    pick = np.random.default_rng(3).choice(len(c.inputs), min(BACK_PRESSURE_VECTORS, len(c.inputs)),
                                           replace=False)
    inputs, expected = c.inputs[pick], c.expected[pick]
    h = _harness(dut, c.output_format)
    h.src.set_pause_generator(bench.random_pauses(rng, 0.3))
    h.snk.set_pause_generator(bench.random_pauses(rng, 0.5))
    await _run(h, inputs, expected)
    await h.board.idle(dut.o__valid)
    bench.record(back_pressure_vectors=len(inputs))


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset while beats are in flight empties the pipeline; the stream after it is exact."""
    await bench.start(dut)
    c = _case(seed=4)
    h = _harness(dut, c.output_format)
    h.snk.pause = True
    await bench.send_all(h.src, c.inputs[:8])
    await ClockCycles(dut.clk, 8)
    h.src.clear()  # the producer drops what it had not sent yet; the DUT must drop what it held
    await bench.reset(dut)
    assert dut.o__valid.value == 0, "output valid right after reset"
    h.snk.clear()
    h.snk.pause = False
    await _run(h, c.inputs[8:200], c.expected[8:200])


@cocotb.test(skip=not bench.soak_beats())
async def soak(dut):
    """`basedie verify BLOCK --soak N`: N vectors (drawn from the bit-exact set) under random gaps on the input and
    random stalls on the output, every result checked on arrival: nothing lost, duplicated or reordered."""
    await bench.start(dut)
    rng, picks = random.Random(5), np.random.default_rng(5)
    c = _case(seed=5)
    h = _harness(dut, c.output_format)
    h.src.set_pause_generator(bench.random_pauses(rng, 0.3))
    h.snk.set_pause_generator(bench.random_pauses(rng, 0.5))
    start = bench.cycles_simulated()
    for size in bench.soak_chunks(bench.soak_beats()):
        pick = picks.integers(0, len(c.inputs), size)
        await _run(h, c.inputs[pick], c.expected[pick])
        h.board.clear()
    await h.board.idle(dut.o__valid)
    bench.record_soak({"i": bench.soak_beats(), "o": bench.soak_beats()}, bench.cycles_simulated() - start)
