"""cocotb bench of the DuoPD MMU arbiter: latency, saturated throughput, every policy over a grid of offered
loads, protection faults, random traffic under back-pressure on every port, reset mid-traffic.

Figures (README, "DuoPD MMU arbiter"): `latency_cycles_gpu`/`_pnm` from handshake probes on an idle system;
`requests_per_cycle_saturated`; `arbitration`, one dict per (policy, offered GPU load, offered PNM load);
`worst_gpu_wait_decode_first`, `worst_pnm_wait_prefill_first`.

The run's memory model (`basedie verify --memory-model`, docs/dram.md) answers the MMU's requests: the ideal
controller (8 cycles, always ready) by default, or an HBM pseudo channel. The checks that hold only for an
always-ready controller (one issue per cycle, strict priority's one-cycle bound, WRR's exact grant order, no idle
slot while a request waits) run only behind the ideal one; behind a DRAM the slot shares become what the
memory delivered.
"""
import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge

from rtl.mmu.params import POLICIES, REG_REGION_BASE, REG_REGION_LIMIT

from .. import bench
from ..dram.controller import SKID_ENTRIES
from ..models import mmu as model
from . import streams
from .harness import GRID_GPU_KV, GRID_PNM_KV, GRID_WEIGHTS, PNM_STORE_SPACE, PROTECTED, Harness

GRID_LOADS = (0.25, 0.5, 1.0)       # requests per cycle offered by each source
GRID_CYCLES = 1_000                  # cycles of offered traffic per grid point
ICARUS_GRID_CYCLES = 200             # under Icarus (the X check, not the figures: the grid takes ~10 min there)
GRID_TENSOR_REQUESTS = 8             # PNM tensors of the saturation and WRR tests: 256-byte loads
STREAMS = streams.StreamModel()      # the grid's prefill and decode address streams
MIXED_WEIGHTS = (1, 1)
IDEAL_MEMORY = bench.config()["memory"] == "ideal"


async def started(dut, **harness_options) -> Harness:
    await bench.start(dut)
    h = Harness(dut, **harness_options)
    await h.standard_memory_map()
    return h


def reordering(h: Harness) -> int:
    """How far the memory-controller model spreads its latencies: responses overtake each other only
    when the MMU is built to take them out of order."""
    return 12 if h.params.out_of_order else 0


@cocotb.test()
async def idle_latency(dut):
    """One GPU request, then one PNM load of one request, each on an idle system: queue entry → MC request; and
    the GPU read's round trip, queue entry → response."""
    h = await started(dut)
    h.offer_gpu(h.gpu_request(write=False))
    await h.drain()
    gpu = h.probes["mc_req"].cycles[0] - h.probes["gpu_req"].cycles[0]
    round_trip = h.probes["gpu_resp"].cycles[0] - h.probes["gpu_req"].cycles[0]
    h.offer_pnm(h.tensor(store=False, size=h.params.request_bytes))
    await h.drain()
    pnm = h.probes["mc_req"].cycles[1] - h.probes["pnm_instr"].cycles[0]
    h.check()
    assert 1 <= gpu <= 3 and 1 <= pnm <= 4, f"latencies GPU {gpu}, PNM {pnm} cycles"
    bench.record(latency_cycles_gpu=gpu, latency_cycles_pnm=pnm, round_trip_cycles_gpu=round_trip)


@cocotb.test()
async def saturated_throughput(dut):
    """Both queues backlogged: behind the always-ready controller one request issued every cycle; behind a DRAM,
    no more than its data bus carries (one burst per `bl` tCK) beyond what its queue and port hold."""
    h = await started(dut)
    await h.set_policy("mixed", 1, 1)
    for _ in range(400):
        h.offer_gpu(h.gpu_request())
    for _ in range(50):
        h.offer_pnm(h.tensor(store=h.rng.random() < 0.5, size=GRID_TENSOR_REQUESTS * h.params.request_bytes))
    await h.drain()
    h.check()
    issued = h.probes["mc_req"].cycles
    rate = (len(issued) - 1) / (issued[-1] - issued[0])
    # The II: the shortest gap between consecutive requests issued while both queues were backlogged (the MMU's
    # own rate, whatever memory is behind it); the longest gap is what the memory's stalls cost it.
    gaps = np.diff(issued)
    interval, longest = int(gaps.min()), int(gaps.max())
    bench.record(requests_per_cycle_saturated=round(rate, 4), initiation_interval=interval,
                 longest_issue_gap_cycles=longest, beats_per_cycle=round(rate, 4))
    if IDEAL_MEMORY:
        assert rate >= 0.99 and longest == 1, f"{rate:.3f} requests per cycle under saturation, gaps up to {longest}"
    else:
        waiting = h.memory.params.queue_depth + SKID_ENTRIES
        assert len(issued) - waiting <= h.memory.peak_requests_per_cycle * (issued[-1] - issued[0]) + 1, \
            f"{len(issued)} requests in {issued[-1] - issued[0]} cycles: faster than the DRAM's data bus"


@cocotb.test(skip=not IDEAL_MEMORY)
async def weighted_round_robin_order(dut):
    """Mixed policy, both sources backlogged: from the first PNM grant on, exactly weight_pnm PNM grants
    then weight_gpu GPU grants, repeating (golden order); weights reprogrammed at run time. (Behind a DRAM the GPU
    stops at its outstanding limit and the order is no longer the arbiter's alone: skipped.)"""
    h = await started(dut)
    checked = 0
    for weights in ((3, 1), (1, 4)):
        await bench.reset(dut)  # the WRR credit starts afresh: the GPU favoured, nothing granted yet
        h.new_phase()
        await h.standard_memory_map()
        await h.set_policy("mixed", *weights)
        first = len(h.memory.requests)
        for _ in range(120):
            h.offer_gpu(h.gpu_request(write=False))
        for _ in range(12):
            h.offer_pnm(h.tensor(store=False, size=GRID_TENSOR_REQUESTS * h.params.request_bytes))
        await h.drain()
        sources = h.origins()[first:]
        start = sources.index("pnm")
        both_backlogged = sources[start:start + 80]
        expected = model.wrr_sources(*weights, 80 + weights[0])[weights[0]:weights[0] + 80]
        assert both_backlogged == expected, f"weights {weights}: grant order {''.join(s[0] for s in both_backlogged)}"
        checked += len(both_backlogged)
        h.check()
    bench.record(wrr_grants_checked=checked)


def _streams(h: Harness) -> tuple[streams.GpuPrefill, streams.PnmDecode]:
    """Prefill's and decode's address streams over the grid's plan, in request addresses."""
    rb = h.params.request_bytes

    def region(plan: tuple[int, int]) -> streams.Region:
        return streams.Region(plan[0] // rb, plan[1] // rb)

    return (streams.GpuPrefill(STREAMS, h.rng, region(GRID_WEIGHTS), region(GRID_GPU_KV)),
            streams.PnmDecode(STREAMS, h.rng, region(GRID_WEIGHTS), region(GRID_PNM_KV), h.params.max_sub_requests))


async def _offer_load(h: Harness, gpu_load: float, pnm_load: float, cycles: int) -> None:
    """Bernoulli offers of the streams' requests and tensors (`pnm_load` requests per cycle), made between clock
    edges: the stream sources then present every request at the next rising edge, whatever order cocotb wakes
    its tasks in at an edge."""
    gpu, pnm = _streams(h)
    rb = h.params.request_bytes
    for _ in range(cycles):
        await FallingEdge(h.dut.clk)
        if h.rng.random() < gpu_load:
            address, write = gpu.next()
            h.offer_gpu(h.gpu_request(write=write, address=address))
        if h.rng.random() < pnm_load / pnm.bursts:
            first, bursts = pnm.next()
            h.offer_pnm(h.tensor(store=False, size=bursts * rb, base=first * rb))


def _issue_cycles(h: Harness) -> tuple[list[int], list[int]]:
    gpu, pnm = [], []
    for source, cycle in zip(h.origins(), h.probes["mc_req"].cycles, strict=True):
        (gpu if source == "gpu" else pnm).append(cycle)
    return gpu, pnm


def _serialized(cycles: list[int]) -> list[int]:
    """One offer per cycle at most: the PNM source (its LSU) offers requests one after another."""
    out = []
    for cycle in cycles:
        out.append(max(cycle, out[-1] + 1) if out else cycle)
    return out


def _idle_while_waiting(origin: int, waiting: list[tuple[int, int]], issued: list[int]) -> list[int]:
    """Cycles on which nothing was issued although a request was ready to be (from `ready` to its issue)."""
    end = max(issued) + 2 - origin
    pending, busy = np.zeros(end + 1, int), np.zeros(end + 1, bool)
    for ready, issue in waiting:
        pending[ready - origin] += 1
        pending[issue - origin] -= 1
    busy[[c - origin for c in issued]] = True
    return [int(c) + origin for c in np.flatnonzero((np.cumsum(pending) > 0) & ~busy)]


def _delays(offers: list[int], issues: list[int]) -> list[int]:
    return [i - t for t, i in zip(offers, issues, strict=True)]


def _latencies(h: Harness) -> dict:
    """What one grid point's requests took, to add to its figures: GPU requests from entering the MMU to their
    responses and PNM instructions to their completions (p50, p99); behind a DRAM also its own latency for the
    GPU's requests (acceptance to answer; the mean too, for Little's law) and the fraction of column commands
    that found their row open. Over every request of the point, its drain included."""
    turnarounds = h.turnarounds()
    figures = {f"{source}_latency_{k}": v for source in ("gpu", "pnm")
               for k, v in model.wait_statistics(turnarounds[source]).items() if k != "max"}
    if not IDEAL_MEMORY:
        source = {id(request): s for request, s in zip(h.memory.requests, h.origins(), strict=True)}
        cycles = [cycles for request, cycles in h.memory.latencies if source[id(request)] == "gpu"]
        memory = model.wait_statistics(cycles)
        commands = h.memory.channel.statistics()
        figures |= {"gpu_memory_latency_p50": memory["p50"], "gpu_memory_latency_p99": memory["p99"],
                    "gpu_memory_latency_mean": round(float(np.mean(cycles)), 2) if cycles else 0.0,
                    "row_hit_rate": round(1 - commands["ACT"] / max(1, commands["RD"] + commands["WR"]), 4)}
    return figures


def _grid_point(run: tuple, base_gpu: int, base_pnm: int, grid_cycles: int) -> dict:
    """One grid point's slot shares and waits (beyond each source's shortest delay), with its checks. Behind the
    always-ready controller: strict priority keeps the favoured source's wait within a cycle; the controller slot
    is never idle while a request waits."""
    policy, gpu_load, pnm_load, start, gpu_offer, pnm_offer, gpu_issue, pnm_issue, latencies, answers = run
    window = (start + min(base_gpu, base_pnm), start + min(base_gpu, base_pnm) + grid_cycles)

    def share(cycles: list[int]) -> float:
        return round(sum(window[0] <= c < window[1] for c in cycles) / grid_cycles, 4)

    g = model.wait_statistics([d - base_gpu for d in _delays(gpu_offer, gpu_issue)])
    p = model.wait_statistics([d - base_pnm for d in _delays(pnm_offer, pnm_issue)])
    point = {"policy": policy, "gpu_offered": gpu_load, "pnm_offered": pnm_load,
             "gpu_offered_actual": round(len(gpu_offer) / grid_cycles, 4),
             "pnm_offered_actual": round(len(pnm_offer) / grid_cycles, 4),
             "gpu_share": share(gpu_issue), "pnm_share": share(pnm_issue),
             "gpu_served": share(answers[0]), "pnm_served": share(answers[1]),
             **{f"gpu_wait_{k}": v for k, v in g.items()}, **{f"pnm_wait_{k}": v for k, v in p.items()},
             **latencies}
    assert point["gpu_share"] + point["pnm_share"] <= 1.0, point
    if not IDEAL_MEMORY:
        return point
    if policy == "prefill_first":
        assert point["gpu_wait_max"] <= 1, point
    if policy == "decode_first":
        assert point["pnm_wait_max"] <= 1, point
    if policy == "mixed" and gpu_load == pnm_load == 1.0:
        # Bernoulli offers and the PNM's gaps between tensors: 20 cycles' worth of the window (0.02 of 1,000).
        assert abs(point["gpu_share"] - MIXED_WEIGHTS[0] / sum(MIXED_WEIGHTS)) <= 20 / grid_cycles, point
    idle = _idle_while_waiting(start, [(t + base_gpu, i) for t, i in zip(gpu_offer, gpu_issue)]
                               + [(t + base_pnm, i) for t, i in zip(pnm_offer, pnm_issue)], gpu_issue + pnm_issue)
    assert not idle, f"{point}: the controller slot went unused at cycles {idle[:10]} with requests waiting"
    return point


@cocotb.test()
async def arbitration_grid(dut):
    """Every policy at every pair of offered loads (including both saturated): slot shares and waits.

    A request's delay runs from the cycle its source offers it (the k-th request of a PNM tensor is
    offered k cycles after the tensor, and never two in a cycle: the LSU's one request per cycle) to its
    memory-controller request;
    its wait is the delay beyond the shortest one of its source seen anywhere in the grid, i.e. what
    contention and queueing added to the idle path. Strict priority keeps the favoured source's wait within
    a cycle; a work-conserving arbiter never leaves a saturated controller idle. `*_share` counts requests
    issued in the window, `*_served` answers delivered in it (GPU responses, PNM buffer writes): behind a DRAM
    the two differ by what its queue holds. The traffic is prefill's and decode's address streams
    (`tb.mmu.streams`): GPU weight reads and KV writes, PNM loads of the same weights and of KV.
    """
    h = await started(dut, mc_latency=8)
    await h.grid_memory_map()
    grid_cycles = ICARUS_GRID_CYCLES if bench.under_icarus() else GRID_CYCLES
    raw = []
    for policy in POLICIES:
        await h.set_policy(policy, *MIXED_WEIGHTS)
        for gpu_load in GRID_LOADS:
            for pnm_load in GRID_LOADS:
                h.new_phase()
                start = h.cycle.now
                await _offer_load(h, gpu_load, pnm_load, grid_cycles)
                await h.drain()
                h.check()
                gpu_issue, pnm_issue = _issue_cycles(h)
                pnm_offers = _serialized([t + k for t, instr in h.offered.pnm
                                          for k in range(-(-instr.size // h.params.request_bytes))])
                answers = (list(h.probes["gpu_resp"].cycles), list(h.probes["buf_wr"].cycles))
                raw.append((policy, gpu_load, pnm_load, start, [t for t, _ in h.offered.gpu], pnm_offers,
                            gpu_issue, pnm_issue, _latencies(h), answers))
    # Over the requests of every point: a short (Icarus) point may offer no 32-request PNM tensor at all.
    base_gpu = min(d for r in raw for d in _delays(r[4], r[6]))
    base_pnm = min(d for r in raw for d in _delays(r[5], r[7]))
    points = [_grid_point(run, base_gpu, base_pnm, grid_cycles) for run in raw]
    # Worst waits of the unfavoured source where the stack is not oversubscribed (nominal offered loads sum
    # below 1): what strict priority alone costs it. Oversubscribed, its backlog grows with the run length.
    undersubscribed = [pt for pt in points if pt["gpu_offered"] + pt["pnm_offered"] < 1.0]
    bench.record(
        arbitration=points, arbitration_window_cycles=grid_cycles, arbitration_mixed_weights=list(MIXED_WEIGHTS),
        worst_gpu_wait_decode_first=max(pt["gpu_wait_max"] for pt in undersubscribed
                                        if pt["policy"] == "decode_first"),
        worst_pnm_wait_prefill_first=max(pt["pnm_wait_max"] for pt in undersubscribed
                                         if pt["policy"] == "prefill_first"),
    )


@cocotb.test()
async def protection_faults(dut):
    """Stores into the parameter region, accesses beyond memory and malformed instructions are refused:
    an error completion each, not a single memory request; loads from the region pass. Regions are
    reprogrammed at run time."""
    h = await started(dut, reorder_spread=0)
    rb, top = h.params.request_bytes, h.memory_size
    cases = [
        h.tensor(store=True, size=64, base=PROTECTED[0]),                  # store into parameters
        h.tensor(store=True, size=3 * rb, base=PROTECTED[1] - rb),         # store overlapping its end
        h.tensor(store=False, size=100, base=PROTECTED[1] - 2 * rb),       # load from parameters: fine
        h.tensor(store=True, size=rb, base=PROTECTED[1]),                  # store just past it: fine
        h.tensor(store=False, size=2 * rb, base=top - rb),                 # runs past the memory size
        h.tensor(store=True, size=rb, base=top),                           # starts at the memory size
        h.tensor(store=False, size=0),                                     # empty
        h.tensor(store=False, size=h.params.max_tensor_bytes + 1),              # too large for the bitmap
        h.tensor(store=False, size=rb, base=PNM_STORE_SPACE[0] + 1),       # unaligned base
        h.tensor(store=True, size=h.params.max_tensor_bytes),                   # largest tensor: fine
    ]
    cases.append(model.Instruction(base=0, size=2 * rb, dest=h.buffer_rows - 1, store=False, id=99))  # rows overflow
    for instr in cases:
        h.offer_pnm(instr)
        h.offer_gpu(h.gpu_request())
    await h.drain()
    counts = h.check()
    faults = [h.fault(i) for i in cases]
    assert faults == [1, 1, 0, 0, 2, 2, 3, 3, 3, 0, 3], faults  # the golden model agrees with the list above
    # A second region, programmed at run time, now covers the store space; region 0 is switched off.
    h.new_phase()
    await h.configure(REG_REGION_BASE + 2, PNM_STORE_SPACE[0])
    await h.configure(REG_REGION_LIMIT + 2, PNM_STORE_SPACE[1])
    await h.configure(REG_REGION_LIMIT, 0)
    for store in (True, False, True):
        h.offer_pnm(h.tensor(store=store))
    h.offer_pnm(h.tensor(store=True, size=rb, base=PROTECTED[0]))
    await h.drain()
    second = h.check()
    assert [h.fault(i) for _, i in h.offered.pnm] == [1, 0, 1, 0]
    bench.record(refused_instructions_checked=counts["refused"] + second["refused"])


async def _random_traffic(h: Harness, instructions: int, gpu_requests: int, change_policy: bool) -> None:
    """Bursty prefill-like GPU phases (back-to-back bursts, then quiet) beside a stream of PNM tensor loads
    and stores of 1 to max_sub_requests requests with unaligned sizes; now and then a refused one."""
    gpu_left, pnm_left = gpu_requests, instructions
    while gpu_left or pnm_left:
        if gpu_left and h.rng.random() < 0.1:
            burst = min(gpu_left, h.rng.randint(1, 40))
            for _ in range(burst):
                h.offer_gpu(h.gpu_request())
            gpu_left -= burst
        if pnm_left and h.rng.random() < 0.15:
            store = h.rng.random() < 0.4
            if h.rng.random() < 0.1:
                # Into the parameters (refused if a store), or running past the end of memory (refused).
                instr = h.tensor(store=store, size=h.rng.randint(h.params.request_bytes + 1, 200),
                                 base=h.rng.choice([PROTECTED[0], h.memory_size - h.params.request_bytes]))
            else:
                instr = h.tensor(store=store)
            h.offer_pnm(instr)
            pnm_left -= 1
        if change_policy and h.rng.random() < 0.01:
            await h.set_policy(h.rng.choice(POLICIES), h.rng.randint(1, 4), h.rng.randint(1, 4))
        await RisingEdge(h.dut.clk)


@cocotb.test()
async def random_traffic_back_pressure(dut):
    """Random traffic with random gaps and stalls on every port, run-time policy changes and (when built
    for it) reordered responses: the full scoreboard."""
    h = await started(dut, reorder_spread=0, seed=5)
    h.reorder(reordering(h))
    h.pause_everything(0.3)
    await _random_traffic(h, instructions=150, gpu_requests=600, change_policy=True)
    await h.drain()
    counts = h.check()
    assert (h.memory.overtaken > 0) == h.params.out_of_order, f"{h.memory.overtaken} responses overtook earlier ones"
    bench.record(vectors_checked=counts["gpu_requests"] + counts["pnm_requests"],
                 back_pressure_instructions=counts["pnm_instructions"], responses_reordered=h.memory.overtaken)


@cocotb.test()
async def reset_mid_traffic(dut):
    """A reset with requests queued, issued and half answered empties the MMU; traffic after it is exact."""
    h = await started(dut, seed=7)
    h.reorder(reordering(h))
    h.pause_everything(0.2)
    await _random_traffic(h, instructions=20, gpu_requests=80, change_policy=False)
    await bench.reset(dut)
    h.new_phase()
    for port in ("gpu_resp", "completion", "mc_req", "buf_wr", "buf_rd"):
        assert getattr(dut, f"{port}__valid").value == 0, f"{port} valid right after reset"
    await ClockCycles(dut.clk, 20)  # the memory-controller model's answers to pre-reset requests die out
    h.new_phase()
    await h.standard_memory_map()
    await _random_traffic(h, instructions=40, gpu_requests=150, change_policy=False)
    await h.drain()
    h.check()


@cocotb.test()
async def stray_response_is_dropped(dut):
    """A memory response that answers nothing outstanding is consumed, goes nowhere and is flagged."""
    h = await started(dut)
    h.sources["mc_resp"].send_nowait(12345)
    await ClockCycles(dut.clk, 10)
    assert dut.stray_response.value == 1 and not h.probes["gpu_resp"].cycles and not h.probes["buf_wr"].cycles
    await bench.reset(dut)
    assert dut.stray_response.value == 0


@cocotb.test(skip=not bench.soak_beats())
async def soak(dut):
    """`basedie verify mmu --soak N`: at least N GPU requests and N PNM sub-requests (random tensors, a tenth of
    them refused) through the MMU with random gaps and stalls on every port and run-time policy changes, a chunk
    at a time (`pnm_instr` and `completion` carry one beat per instruction, about N / 16), each chunk under the
    full scoreboard: every response, completion and buffer write exactly once,
    the memory controller's requests exactly the GPU's and the accepted instructions' in order."""
    h = await started(dut, seed=11)
    h.reorder(reordering(h))
    h.pause_everything(0.3)
    start, gpu, pnm = bench.cycles_simulated(), 0, 0
    mean_sub_requests = (h.params.max_sub_requests + 1) / 2
    while min(gpu, pnm) < bench.soak_beats():
        chunk = min(bench.SOAK_CHUNK, bench.soak_beats())
        await _random_traffic(h, instructions=max(1, round(chunk / mean_sub_requests)), gpu_requests=chunk,
                              change_policy=True)
        await h.drain()
        counts = h.check()
        gpu, pnm = gpu + counts["gpu_requests"], pnm + counts["pnm_requests"]
        h.new_phase()
    # Every request is answered, writes too; a PNM sub-request is the request a tensor's instruction makes.
    bench.record_soak({"gpu_req": gpu, "gpu_resp": gpu, "pnm_sub_requests": pnm, "mc_req": gpu + pnm,
                       "mc_resp": gpu + pnm}, bench.cycles_simulated() - start)
