"""cocotb bench of the PNM buffer: latency, II and bytes per cycle of every port alone; every port at once on
disjoint banks (no conflicts), all on one bank (every request conflicts) and all on uniformly random rows;
random traffic on all ports with random gaps and random back-pressure on every response port; reset
mid-traffic.

Every read's data is checked as it arrives against the golden model fed with the requests in the order the
buffer accepted them (`harness.py`), so a dropped write, a stale or misrouted read, a lost, duplicated or
reordered response, or two accesses of one bank in one cycle fails the test that saw it.

Figures (docs/pnm-buffer.md): `latency_cycles`, `initiation_interval`; per port (`buf_wr`, `buf_rd`,
`array0_rd`, …) `bytes_per_cycle_alone_*`, `bytes_per_cycle_disjoint_*`, `bytes_per_cycle_one_bank_*` and
`bytes_per_cycle_uniform_*`; `bytes_per_cycle_disjoint_total`; `max_wait_cycles_one_bank`,
`max_wait_cycles_uniform` (longest interval between two grants of a port); `random_traffic_cycles`;
`vectors_checked` (read responses compared in the random-traffic test and its read-back).
"""
import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, ReadOnly

from .. import bench
from .harness import Harness

STREAM = 32            # requests per port when measuring a rate
RANDOM_REQUESTS = 300  # per port in the random-traffic test
WINDOW_LINES = 4       # random traffic stays in this many lines (one word of every bank each): reads meet writes


async def started(dut, seed: int = 0) -> Harness:
    """Clock, reset, then the harness on the idle buffer."""
    await bench.start(dut)
    return Harness(dut, seed)


def rate(cycles: list[int], nbytes: int) -> float:
    """Bytes per cycle of a stream of accepted requests: the steady interval between the first and the last."""
    return round(nbytes * (len(cycles) - 1) / (cycles[-1] - cycles[0]), 4)


def last(cycles: list[int], count: int) -> list[int]:
    return cycles[len(cycles) - count:]


def contended_rates(h: Harness, name: str) -> dict:
    """Each port's bytes per cycle and longest interval between grants while every port still had requests
    (all of them were offered at once, so until the first port ran out all of them contended)."""
    accepted = {port.request: h.watcher.accepted[port.request] for port in h.ports}
    contended = min(cycles[-1] for cycles in accepted.values())
    figures, waits = {}, []
    for port in h.ports:
        cycles = [c for c in accepted[port.request] if c <= contended]
        figures[f"bytes_per_cycle_{name}_{port.request}"] = rate(cycles, port.bytes)
        waits.append(int(np.diff(cycles).max()))
    return figures | {f"max_wait_cycles_{name}": max(waits)}


async def read_back(h: Harness, lines: int) -> int:
    """Every read port reads the first `lines` lines whole, with no pauses; each response is checked."""
    h.pause(0, 0)
    count = 0
    for port in h.reads:
        for row in range(lines * h.params.line_bytes // port.bytes):
            h.offer(port, row)
            count += 1
    await h.drain()
    return count


@cocotb.test()
async def each_port_alone(dut):
    """One read through the idle buffer gives the latency; a stream of requests on one port at a time, every
    response taken at once, the II and the port's bytes per cycle: one request every cycle."""
    h = await started(dut)
    figures, latencies, intervals = {}, set(), set()
    for port in h.ports:
        accepted = h.watcher.accepted[port.request]
        if not port.write:
            h.offer(port, h.rng.randrange(h.rows(port)))
            await h.drain()
            latencies.add(h.responded[port.response].cycles[-1] - accepted[-1])
        for _ in range(STREAM):
            h.offer(port, h.rng.randrange(h.rows(port)))
        await h.drain()
        stream = last(accepted, STREAM)
        intervals.add(int(np.diff(stream).max()))
        figures[f"bytes_per_cycle_alone_{port.request}"] = rate(stream, port.bytes)
    assert latencies == {h.component.latency}, f"measured latencies {latencies}, stated {h.component.latency}"
    assert intervals == {h.component.initiation_interval}, f"measured intervals {intervals}"
    assert all(figures[f"bytes_per_cycle_alone_{p.request}"] == p.bytes for p in h.ports), figures
    bench.record(latency_cycles=latencies.pop(), initiation_interval=intervals.pop(), **figures)


@cocotb.test()
async def every_port_on_disjoint_banks(dut):
    """All ports stream at once, each in banks no other port uses (widest first, aligned; a port that does
    not fit beside the others sits idle): each still moves its full width every cycle."""
    h = await started(dut, seed=1)
    p, free, placed = h.params, 0, []
    for port in sorted(h.ports, key=lambda port: -port.bytes):
        words = port.bytes // p.bank_bytes
        if free + words <= p.banks:
            placed.append((port, free // words, p.banks // words))  # port, its group, groups of its width
            free += words
    for port, group, groups in placed:
        for _ in range(STREAM):
            h.offer(port, group + groups * h.rng.randrange(p.depth))
    await h.drain()
    figures = {f"bytes_per_cycle_disjoint_{port.request}": rate(h.watcher.accepted[port.request], port.bytes)
               for port, _, _ in placed}
    assert all(figures[f"bytes_per_cycle_disjoint_{port.request}"] == port.bytes for port, _, _ in placed), figures
    bench.record(**figures, bytes_per_cycle_disjoint_total=sum(figures.values()))


@cocotb.test()
async def every_port_on_one_bank(dut):
    """Every port's every request needs bank 0: one access per cycle, the grant rotating over the ports, so
    each port gets 1/ports of the cycles and waits at most `ports` cycles between grants."""
    h = await started(dut, seed=2)
    p = h.params
    for port in h.ports:
        for _ in range(STREAM):
            h.offer(port, (p.banks * p.bank_bytes // port.bytes) * h.rng.randrange(p.depth))
    await h.drain()
    figures = contended_rates(h, "one_bank")
    n = len(h.ports)
    assert all(figures[f"bytes_per_cycle_one_bank_{port.request}"] == round(port.bytes / n, 4)
               for port in h.ports), figures
    assert figures["max_wait_cycles_one_bank"] == n, f"{figures} with {n} ports"
    bench.record(**figures)


@cocotb.test()
async def random_traffic(dut):
    """Every port at once, random rows in a few lines (reads meet recent writes of every port), random byte
    masks, random gaps on every request port and random back-pressure on every response port; then every read
    port reads the lines back. Bytes per cycle per port over the whole random phase."""
    h = await started(dut, seed=3)
    p = h.params
    h.pause(0.3, 0.4)
    start = {port.request: len(h.watcher.accepted[port.request]) for port in h.ports}
    for port in h.ports:
        for _ in range(RANDOM_REQUESTS):
            h.offer(port, h.rng.randrange(WINDOW_LINES * p.line_bytes // port.bytes))
    await h.drain()
    phase = [c for port in h.ports for c in h.watcher.accepted[port.request][start[port.request]:]]
    checked = sum(len(log) for log in h.board.log.values())
    checked += await read_back(h, WINDOW_LINES)
    bench.record(random_traffic_cycles=max(phase) - min(phase) + 1, vectors_checked=checked)


@cocotb.test()
async def every_port_on_random_rows(dut):
    """Every port always has a request, each to a row drawn uniformly from the whole buffer, and every response
    is taken at once: the bytes per cycle each port gets when its banks collide at random."""
    h = await started(dut, seed=5)
    for port in h.ports:
        for _ in range(RANDOM_REQUESTS):
            h.offer(port, h.rng.randrange(h.rows(port)))
    await h.drain()
    bench.record(**contended_rates(h, "uniform"))


@cocotb.test()
async def reset_mid_traffic(dut):
    """A reset while reads wait in full response queues and writes stream: a write offered during the reset is
    refused, no response is pending afterwards, and the banks hold every write accepted before the reset."""
    h = await started(dut, seed=4)
    p = h.params
    for sink in h.sinks.values():
        sink.pause = True
    for port in h.ports:
        for _ in range(8):
            h.offer(port, h.rng.randrange(WINDOW_LINES * p.line_bytes // port.bytes))
    await ClockCycles(dut.clk, 12)
    for source in h.sources.values():
        source.clear()
    dut.rst.value = 1
    await ClockCycles(dut.clk, 1)  # the sources have dropped `valid`; one write is offered by hand
    write = next(port for port in h.ports if port.write)
    getattr(dut, f"{write.request}__payload").value = h.packers[write.request].pack(
        row=0, data=h.rng.getrandbits(8 * write.bytes), mask=(1 << write.bytes) - 1)
    getattr(dut, f"{write.request}__valid").value = 1
    await ReadOnly()
    assert getattr(dut, f"{write.request}__ready").value == 0, f"{write.request} accepted a write during reset"
    await ClockCycles(dut.clk, 1)
    getattr(dut, f"{write.request}__valid").value = 0
    dut.rst.value = 0
    assert all(getattr(dut, f"{port.response}__valid").value == 0 for port in h.reads), "a response after reset"
    h.clear()
    await read_back(h, WINDOW_LINES)


@cocotb.test(skip=not bench.soak_beats())
async def soak(dut):
    """`basedie verify pnm_buffer --soak N`: N requests on every port (random rows of a few lines, random masks)
    with random gaps on every request port and random back-pressure on every response port, every read checked
    on arrival against the golden model, a chunk at a time."""
    h = await started(dut, seed=8)
    p = h.params
    h.pause(0.3, 0.4)
    start = bench.cycles_simulated()
    beats = {port.request: 0 for port in h.ports} | {port.response: 0 for port in h.reads}
    for size in bench.soak_chunks(bench.soak_beats()):
        for port in h.ports:
            for _ in range(size):
                h.offer(port, h.rng.randrange(WINDOW_LINES * p.line_bytes // port.bytes))
            beats[port.request] += size
        await h.drain()
        for port in h.reads:
            beats[port.response] += len(h.board.log[port.response])
        h.board.clear()
        for cycles in h.watcher.accepted.values():
            cycles.clear()
    bench.record_soak(beats, bench.cycles_simulated() - start)
