"""cocotb tests of the bench parts themselves (sampling, probes, the scoreboard), run on the smallest registered
unit (fp_to_fp32, int4).

They pin the sampling semantics that `HandshakeProbe` and every monitor rely on (docs/guides/toolchain.md):
right after `RisingEdge` a read returns the value from before the edge, after `ReadOnly` the value after it;
that the scoreboard names the first wrong beat with its cycle and inputs, and rejects a beat nobody expected;
and, under Icarus, that a sink rejects a payload holding X.
"""
import cocotb
import pytest
from cocotb.triggers import ReadOnly, RisingEdge
from cocotb.types import LogicArray

from . import bench
from .scoreboard import Scoreboard


@cocotb.test()
async def reads_after_rising_edge_see_the_pre_edge_value(dut):
    await bench.start(dut)
    dut.o__ready.value = 1
    dut.i__payload.value = 1
    dut.i__valid.value = 1
    await RisingEdge(dut.clk)  # the beat enters the one-stage pipeline at this edge
    dut.i__valid.value = 0
    assert dut.o__valid.value == 0, "a read right after RisingEdge already saw the post-edge register"
    await ReadOnly()
    assert dut.o__valid.value == 1, "after ReadOnly the register should hold the beat"
    assert int(dut.o__payload.value) == 0x3F800000  # int4 1 → FP32 1.0


@cocotb.test()
async def handshake_probe_counts_one_transfer_per_cycle(dut):
    await bench.start(dut)
    src, snk = bench.source(dut, "i"), bench.sink(dut, "o")
    accepted, delivered = bench.HandshakeProbe(dut, "i"), bench.HandshakeProbe(dut, "o")
    await bench.send_all(src, range(10))
    assert await bench.receive(snk, 10) == [0x0, 0x3F800000, 0x40000000, 0x40400000, 0x40800000,
                                           0x40A00000, 0x40C00000, 0x40E00000, 0xC1000000, 0xC0E00000]
    await RisingEdge(dut.clk)
    assert len(accepted.cycles) == len(delivered.cycles) == 10
    assert [b - a for a, b in zip(accepted.cycles, delivered.cycles)] == [1] * 10


async def _scoreboarded(dut, expected: list[int]) -> tuple[Scoreboard, bench.HandshakeProbe]:
    """int4 codes 0, 1, … sent to the unit, each output checked against `expected` (the inputs named)."""
    await bench.start(dut)
    src, snk = bench.source(dut, "i"), bench.sink(dut, "o")
    clock = bench.CycleCounter(dut.clk)
    delivered = bench.HandshakeProbe(dut, "o")
    board = Scoreboard(clock)
    board.add_port("o", snk)
    board.expect("o", expected, [f"int4 {k}" for k in range(len(expected))])
    cocotb.start_soon(bench.send_all(src, range(5)))
    return board, delivered


@cocotb.test()
async def scoreboard_reports_the_first_mismatch_with_its_cycle_and_inputs(dut):
    # int4 3 → FP32 3.0 = 0x40400000; beats 3 and 4 are planted wrong, only the first is reported.
    board, delivered = await _scoreboarded(dut, [0x0, 0x3F800000, 0x40000000, 0xDEAD, 0xBEEF])
    with pytest.raises(AssertionError) as failure:
        await board.drained()
    cycle = delivered.cycles[3]  # the scoreboard numbers cycles as the probes do
    assert str(failure.value) == (f"o: beat 3 at cycle {cycle}: got 0x40400000, expected 0xdead; "
                                  "inputs: int4 3"), str(failure.value)


@cocotb.test()
async def scoreboard_rejects_an_unexpected_beat(dut):
    board, _ = await _scoreboarded(dut, [0x0, 0x3F800000, 0x40000000])
    await board.drained()
    with pytest.raises(AssertionError, match=r"o: beat 3 at cycle \d+ \(0x40400000\) was not expected"):
        await board.idle(dut.o__valid)


# Verilator is two-state: an X driven from Python becomes 0, so only a four-state simulator can run this.
@cocotb.test(skip="icarus" not in (cocotb.SIM_NAME or "").lower())
async def a_sink_rejects_a_payload_holding_x(dut):
    """Under a four-state simulator an X driven into the unit comes out as X with `valid` high: the sink fails."""
    await bench.start(dut)
    snk = bench.sink(dut, "o")
    dut.i__payload.value = LogicArray("X" * len(dut.i__payload))
    dut.i__valid.value = 1
    await RisingEdge(dut.clk)
    dut.i__valid.value = 0
    with pytest.raises(AssertionError, match="o__payload holds X/Z while valid"):
        await snk.recv()
