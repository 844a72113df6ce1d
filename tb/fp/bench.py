"""cocotb bench for every `rtl.fp` unit: stated latency and II, bit-exact results, random back-pressure.

The host runner names the block and its parameters; the stimulus and golden results come from
`tb.fp.vectors`, the stated timing from the component itself.
"""
import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from rtl.registry import BLOCKS

from .. import bench
from ..models.fp import mismatches
from .vectors import Case, case

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


def _check(got: list[int], inputs: np.ndarray, expected: np.ndarray, fmt: str) -> None:
    assert len(got) == len(expected), f"{len(got)} results for {len(expected)} inputs"
    bad = mismatches(np.array(got, dtype=np.uint64), expected, fmt)
    if len(bad):
        examples = ", ".join(f"in {int(inputs[k]):#x}: got {got[k]:#x}, expected {int(expected[k]):#x}"
                             for k in bad[:8])
        raise AssertionError(f"{len(bad)} of {len(got)} results differ ({examples})")


@cocotb.test()
async def latency_and_initiation_interval(dut):
    """One beat through an idle pipeline gives the latency; a long uninterrupted stream gives the II."""
    unit = BLOCKS[bench.config()["block"]].component  # the stated timing is a class attribute
    await bench.start(dut)
    inputs = np.resize(_case(seed=1).inputs, STREAM_BEATS)
    src, snk = bench.source(dut, "i"), bench.sink(dut, "o")
    accepted, delivered = bench.HandshakeProbe(dut, "i"), bench.HandshakeProbe(dut, "o")

    await bench.send_all(src, inputs[:1])
    await bench.receive(snk, 1)
    latency = delivered.cycles[0] - accepted.cycles[0]

    await bench.send_all(src, inputs)
    await bench.receive(snk, len(inputs))
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
    src, snk = bench.source(dut, "i"), bench.sink(dut, "o")
    cocotb.start_soon(bench.send_all(src, c.inputs))
    got = await bench.receive(snk, len(c.inputs))
    _check(got, c.inputs, c.expected, c.output_format)
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
    src, snk = bench.source(dut, "i"), bench.sink(dut, "o")
    src.set_pause_generator(bench.random_pauses(rng, 0.3))
    snk.set_pause_generator(bench.random_pauses(rng, 0.5))
    cocotb.start_soon(bench.send_all(src, inputs))
    got = await bench.receive(snk, len(inputs))
    await ClockCycles(dut.clk, 20)
    assert dut.o__valid.value == 0, "output still valid after the last expected beat: a duplicated beat"
    _check(got, inputs, expected, c.output_format)
    bench.record(back_pressure_vectors=len(inputs))


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset while beats are in flight empties the pipeline; the stream after it is exact."""
    await bench.start(dut)
    c = _case(seed=4)
    src, snk = bench.source(dut, "i"), bench.sink(dut, "o")
    snk.pause = True
    await bench.send_all(src, c.inputs[:8])
    await ClockCycles(dut.clk, 8)
    src.clear()  # the producer drops what it had not sent yet; the DUT must drop what it held
    await bench.reset(dut)
    assert dut.o__valid.value == 0, "output valid right after reset"
    snk.clear()
    snk.pause = False
    inputs, expected = c.inputs[8:200], c.expected[8:200]
    cocotb.start_soon(bench.send_all(src, inputs))
    got = await bench.receive(snk, len(inputs))
    _check(got, inputs, expected, c.output_format)
