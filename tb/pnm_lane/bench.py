"""cocotb bench of the PNM lane and array: stated latency and II, bit-exact results in both modes with mode
switches, specials, long accumulations, random back-pressure, reset mid-stream, and (array) utilization.

The host runner names the block and its parameters; results come from `tb.models.pnm_lane`.
"""
import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from rtl.pnm_lane.simd import SIMDPipeline, latency_of
from rtl.registry import BLOCKS

from .. import bench
from ..models import fp, pnm_lane
from ..scoreboard import StreamHarness
from .stimulus import Beats, Layout, directed

TIMING_BEATS = 512  # an uninterrupted stream for the II and the sustained operand rate
RANDOM_BEATS = 600
LONG_ACCUMULATION = 300  # beats of one MLP sum, emitted every 50 beats
BACK_PRESSURE_BEATS = 400
UTILIZATION_BEATS = 256  # beats per pass of each utilization workload
TIMEOUT_US = 100  # simulated time (1 ns cycles) after which a test that waits for beats fails as hung


def _setup() -> tuple[int, Layout]:
    """The latency the block states for its parameters, and its payload layout."""
    cfg = bench.config()
    params = BLOCKS[cfg["block"]].params(**cfg["params"])
    return latency_of(params), Layout(cfg["block"], params)


def _harness(dut, layout: Layout) -> StreamHarness:
    """The test's only driver of `i` and only receiver of `o`; every output beat checked on arrival."""
    def matches(got: tuple, want: pnm_lane.Output) -> bool:
        mode, accumulator, sums = got
        return mode == want.mode and not len(fp.mismatches(accumulator, want.accumulator, "fp32")) \
            and not len(fp.mismatches(sums.ravel(), want.sublane_sums.ravel(), "fp32"))

    def describe(beat) -> str:
        mode, accumulator, sums = (beat.mode, beat.accumulator, beat.sublane_sums) if isinstance(beat, pnm_lane.Output) \
            else beat
        return (f"mode {mode}, accumulators {[hex(v) for v in np.ravel(accumulator)]}, "
                f"sublane sums {[hex(v) for v in np.ravel(sums)]}")
    return StreamHarness(dut, decode=layout.unpack, compare=matches, describe=describe)


def _sources(beats: Beats) -> list[str]:
    """For each output beat, the input beats that produced it: one attention beat, or an MLP sum."""
    sources, start = [], 0
    for k in range(len(beats)):
        if beats.mode[k] == pnm_lane.ATTENTION:
            sources.append(f"input beat {k} (attention)")
            continue
        start = k if beats.clear[k] else start
        if beats.emit[k]:
            sources.append(f"MLP sum of input beats {start} to {k}")
    return sources


async def _run(h: StreamHarness, layout: Layout, beats: Beats) -> None:
    """Drive the beats; every output beat the golden model expects is checked as it arrives."""
    await h.run(layout.pack(beats), layout.expected(beats), _sources(beats))


@cocotb.test(timeout_time=TIMEOUT_US, timeout_unit="us")
async def latency_and_initiation_interval(dut):
    """One beat of each mode through an idle pipeline gives its latency; a long uninterrupted MLP stream
    (an emit every 8 beats) gives the II and the sustained operand-pair rate."""
    latency_stated, layout = _setup()
    await bench.start(dut)
    rng = np.random.default_rng(1)
    h = _harness(dut, layout)
    accepted, delivered = bench.HandshakeProbe(dut, "i", payloads=True), bench.HandshakeProbe(dut, "o")
    latency = {}
    for name, mode in (("mlp", pnm_lane.MLP), ("attention", pnm_lane.ATTENTION)):
        one = layout.random(rng, 1, attention_share=float(mode))
        await _run(h, layout, one)
        latency[name] = delivered.cycles[-1] - accepted.cycles[-1]

    stream = layout.random(rng, TIMING_BEATS, attention_share=0.0)
    stream.clear[:] = np.arange(TIMING_BEATS) % 8 == 0
    stream.emit[:] = np.arange(TIMING_BEATS) % 8 == 7
    first = len(accepted.cycles)
    await _run(h, layout, stream)
    await RisingEdge(dut.clk)
    accepted.stop()
    delivered.stop()
    cycles = accepted.cycles[first:]
    interval = int(np.diff(cycles).max())
    span = cycles[-1] - cycles[0]
    pairs_per_cycle = (len(cycles) - 1) / span
    # MACs from what the datapath consumed: the operands of every beat it accepted (each beat after the first
    # is one the span paid for), counted by the golden model's work. They must be the beats sent, in order.
    consumed = layout.unpack_input(accepted.payloads[first:])
    assert all(np.array_equal(getattr(consumed, f), getattr(stream, f))
               for f in ("x", "y", "mode", "clear", "emit")), "the beats the lane accepted are not the beats sent"
    macs = layout.macs(consumed)
    # Recorded before the checks below, so that a slower datapath shows in the figures as well as failing them.
    bench.record(latency_cycles=latency_stated, latency_cycles_mlp=latency["mlp"],
                 latency_cycles_attention=latency["attention"], initiation_interval=interval,
                 operand_pairs_per_cycle=round(pairs_per_cycle, 4), macs_per_cycle=round(macs[1:].sum() / span, 2))
    assert latency == {"mlp": latency_stated, "attention": latency_stated}, \
        f"measured latency {latency}, stated {latency_stated}"
    assert interval == SIMDPipeline.initiation_interval, \
        f"measured II {interval}, stated {SIMDPipeline.initiation_interval}"


@cocotb.test(timeout_time=TIMEOUT_US, timeout_unit="us")
async def bit_exact(dut):
    """Directed specials, random beats with mode switches inside MLP sums, and one long accumulation."""
    _, layout = _setup()
    await bench.start(dut)
    rng = np.random.default_rng(2)
    long = layout.random(rng, LONG_ACCUMULATION, attention_share=0.1)
    mlp = long.mode == pnm_lane.MLP
    long.clear[:] = 0
    long.clear[np.flatnonzero(mlp)[0]] = 1
    long.emit[:] = mlp & (np.arange(LONG_ACCUMULATION) % 50 == 49)
    long.emit[np.flatnonzero(mlp)[-1]] = 1
    beats = directed(layout, rng) + layout.random(rng, RANDOM_BEATS) + long
    await _run(_harness(dut, layout), layout, beats)
    bench.record(vectors_checked=len(beats))


@cocotb.test(timeout_time=TIMEOUT_US, timeout_unit="us")
async def random_back_pressure(dut):
    """Random input gaps and output stalls: nothing lost, duplicated or reordered."""
    _, layout = _setup()
    await bench.start(dut)
    beats = layout.random(np.random.default_rng(3), BACK_PRESSURE_BEATS)
    h = _harness(dut, layout)
    rng = random.Random(3)
    h.src.set_pause_generator(bench.random_pauses(rng, 0.3))
    h.snk.set_pause_generator(bench.random_pauses(rng, 0.5))
    await _run(h, layout, beats)
    await h.board.idle(dut.o__valid, cycles=2 * layout.params.width)
    bench.record(back_pressure_vectors=len(beats))


@cocotb.test(timeout_time=TIMEOUT_US, timeout_unit="us")
async def reset_mid_stream(dut):
    """A reset with beats in flight and a half-built sum empties the pipeline and clears the accumulators
    to +0: an MLP beat without `clear` after it sums onto +0."""
    _, layout = _setup()
    await bench.start(dut)
    rng = np.random.default_rng(4)
    h = _harness(dut, layout)
    h.snk.pause = True
    await bench.send_all(h.src, layout.pack(layout.random(rng, 12)))
    await ClockCycles(dut.clk, 4)
    h.src.clear()
    await bench.reset(dut)
    assert dut.o__valid.value == 0, "output valid right after reset"
    h.snk.clear()
    h.snk.pause = False
    after = layout.random(rng, 100)
    after.clear[np.flatnonzero(after.mode == pnm_lane.MLP)[0]] = 0
    await _run(h, layout, after)
    bench.record()  # cycles_simulated then covers every test


def _workload(layout: Layout, rng: np.random.Generator, kind: str, group: int) -> tuple[Beats, int]:
    """A GEMV with batch `group` (MLP) or one KV head's attention scores for a GQA group of `group` query
    heads, as array beats; returns them and the useful MACs they hold. Requests (heads) beyond the lanes
    run in further passes over the same weights (keys), as the memory operand is read once per beat."""
    lanes, width, sublanes = layout.lanes, layout.width, layout.sublanes
    passes = -(-group // lanes)
    beats = None
    for p in range(passes):
        active = min(lanes, group - p * lanes)
        memory = layout.random(rng, UTILIZATION_BEATS).x
        buffer = np.zeros((UTILIZATION_BEATS, lanes, width), np.uint16)
        buffer[:, :active] = layout.random(rng, UTILIZATION_BEATS).y[:, :active]
        if kind == "gemv":  # rows of 4 chunks: clear on the first chunk, emit on the last
            chunk = np.arange(UTILIZATION_BEATS) % 4
            part = Beats(memory, buffer, np.zeros(UTILIZATION_BEATS, np.uint8),
                         (chunk == 0).astype(np.uint8), (chunk == 3).astype(np.uint8))
        else:  # each beat: `sublanes` keys against every active lane's query (one query per lane)
            buffer[:, :, :] = buffer[:1]
            part = Beats(memory, buffer, np.ones(UTILIZATION_BEATS, np.uint8),
                         np.zeros(UTILIZATION_BEATS, np.uint8), np.zeros(UTILIZATION_BEATS, np.uint8))
        beats = part if beats is None else beats + part
    useful = group * UTILIZATION_BEATS * width if kind == "gemv" else \
        group * UTILIZATION_BEATS * sublanes * layout.params.sublane_width
    return beats, useful


@cocotb.test(timeout_time=TIMEOUT_US, timeout_unit="us", skip=bench.config()["block"] != "pnm_array")
async def utilization(dut):
    """Useful MACs / (MAC units × cycles) from the first operand beat accepted to the last result delivered
    (both included), for a batch-16 GEMV and for attention with GQA groups of 1 and 8."""
    _, layout = _setup()
    await bench.start(dut)
    rng = np.random.default_rng(5)
    h = _harness(dut, layout)
    figures = {}
    for name, kind, group in (("utilization_gemv_batch16", "gemv", 16),
                              ("utilization_attention_gqa1", "attention", 1),
                              ("utilization_attention_gqa8", "attention", 8)):
        beats, useful = _workload(layout, rng, kind, group)
        accepted, delivered = bench.HandshakeProbe(dut, "i"), bench.HandshakeProbe(dut, "o")
        await _run(h, layout, beats)
        await RisingEdge(dut.clk)
        accepted.stop()
        delivered.stop()
        cycles = delivered.cycles[-1] - accepted.cycles[0] + 1
        figures[name] = round(useful / (layout.lanes * layout.width * cycles), 4)
    bench.record(**figures, utilization_beats_per_pass=UTILIZATION_BEATS)


@cocotb.test(skip=not bench.soak_beats())
async def soak(dut):
    """`basedie verify BLOCK --soak N`: N random beats (MLP sums of random length with attention beats inside them)
    under random input gaps and output stalls, every output checked on arrival, a chunk at a time (each chunk's
    sums start and end in it)."""
    _, layout = _setup()
    await bench.start(dut)
    h = _harness(dut, layout)
    rng, stimulus_rng = random.Random(6), np.random.default_rng(6)
    h.src.set_pause_generator(bench.random_pauses(rng, 0.3))
    h.snk.set_pause_generator(bench.random_pauses(rng, 0.5))
    start, outputs = bench.cycles_simulated(), 0
    for size in bench.soak_chunks(bench.soak_beats()):
        beats = layout.random(stimulus_rng, size)
        await _run(h, layout, beats)
        outputs += len(h.board.log["o"])
        h.board.clear()
    await h.board.idle(dut.o__valid, cycles=2 * layout.params.width)
    bench.record_soak({"i": bench.soak_beats(), "o": outputs}, bench.cycles_simulated() - start)
