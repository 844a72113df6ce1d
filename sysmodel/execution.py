"""How long an iteration takes on a device, and what it moves: GPUs (roofline per operator) and DuoPD's PNMs
(cycle counts from the verified lane and vector-unit figures, bandwidth from the stack and the MMU's share).

Every executor answers `cost(work, bandwidth_scale)` (the `Work` counts may be numpy arrays: one decode
block of consecutive iterations is priced at once): the iteration's time on all the devices of one
instance working together, its FLOPs, HBM bytes and link bytes in total, and `offered`, the fraction of the
memory bandwidth it asked for (what a co-runner on the same stacks competes with). `bandwidth_scale` < 1
stretches the memory side of every operator when a co-runner wins part of the bandwidth. The GPU and PNM
executors also take `share`: the scale an operator gets at its own offered load against the co-runners'
(per-operator coupling; a memory-bound operator asks for more than the iteration's average and gets less).

Both split a price in two: the iteration's plan, every figure of its operators that the bandwidth it obtains does
not change (memoised for one iteration; a decode block's is kept for its price beside co-runners, which follows
its price alone), and the price of that plan at a bandwidth scale or share. The split does the same
floating-point operations in the same order as one walk over the operators, so the prices are the same, bit for
bit (tests/sysmodel/test_pricing_plan.py).
"""
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from .arbitration import MMUArbitration
from .base_die import QUANTIZED_OPS, StackDequant
from .errors import ConfigError, require
from .hardware import Hardware, PNMArray
from .llm import BYTES_PER_VALUE
from .memo import Memo
from .operators import Shard, Work
from .perf import ROOFLINE, PerfModel, _larger as elementwise_max, layer_seconds
from .vector_work import Step, decode_head, decode_layer
from basedie.verified import VerifiedBlocks, VerifiedEntry


def _larger(work: Work):
    """Elementwise maximum for a block of iterations, the (much faster) builtin for one."""
    return np.maximum if isinstance(work.kv_read, np.ndarray) else max


Share = Callable[[Any], Any]     # offered fraction of the bandwidth → the scale it obtains (arrays too)


def _scalar(work: Work) -> bool:
    """One iteration (not a decode block's arrays): its price can be memoised by its counts."""
    return not any(isinstance(count, np.ndarray) for count in work)


def _fraction(seconds_at_peak, seconds):
    """The fraction of the peak bandwidth an operator asks for: its bytes' time at peak over its time (0 for an
    operator that takes no time)."""
    if isinstance(seconds, np.ndarray) or isinstance(seconds_at_peak, np.ndarray):
        seconds = np.asarray(seconds, float)
        return np.divide(seconds_at_peak, seconds, out=np.zeros(np.broadcast(seconds_at_peak, seconds).shape),
                         where=seconds > 0)
    return seconds_at_peak / seconds if seconds > 0 else 0.0


class Cost(NamedTuple):
    seconds: float
    flops: float
    hbm_bytes: float
    link_bytes: float
    offered: float          # fraction of the instance's memory bandwidth this iteration asks for


@dataclass(frozen=True)
class GPUExecution:
    """`shard.tp` GPUs running one iteration in tensor parallel, with a fraction of their SMs.

    Each operator's time comes from the performance model (`sysmodel.perf`; the roofline by default: the longer
    of its compute time and its memory time), operators one after another, all-reduces after them (or overlapped
    with them when the model says so); `sm_fraction` < 1 scales the compute and caps the bandwidth by the GPU's
    bandwidth-vs-SM curve (paper §3.2). `overhead_s`, the host's time per iteration (`--iteration-overhead`), is
    added to every iteration: the GPUs wait for it, so it lengthens the iteration and lowers its offered load."""
    hardware: Hardware
    shard: Shard
    sm_fraction: float = 1.0
    perf: PerfModel = ROOFLINE
    overhead_s: float = 0.0

    def __post_init__(self) -> None:
        require(0 < self.sm_fraction <= 1, f"SM fraction must be in (0, 1], got {self.sm_fraction}")

    def cost(self, work: Work, bandwidth_scale: float = 1.0, loads: Mapping[str, float] | None = None,
             share: Share | None = None) -> Cost:
        """`loads` (the co-runners' offered loads) do not matter to a GPU beyond its share; with `share`, each
        operator's share is the one its own offered load obtains. Without `share`, one iteration's price is
        a function of its counts and `bandwidth_scale` alone (the executor is frozen): memoised."""
        if share is None and _scalar(work):
            return self._memo((work, bandwidth_scale), self._cost, work, bandwidth_scale, None)
        return self._cost(work, bandwidth_scale, share)

    @cached_property
    def _memo(self) -> Memo:
        return Memo()

    @cached_property
    def _rates(self) -> tuple[float, float]:
        """FLOP/s of the SMs this executor has, and the bandwidth they can reach alone."""
        gpu = self.hardware.gpu
        return gpu.flops * self.sm_fraction, gpu.memory.bandwidth * gpu.sm_bandwidth(self.sm_fraction)

    def _cost(self, work: Work, bandwidth_scale: float, share: Share | None) -> Cost:
        """The iteration's plan (`_plan`) with each operator's time at the bandwidth scale, or at the share its own
        offered load (alone, `_loads`) obtains."""
        gpu, shard, perf = self.hardware.gpu, self.shard, self.perf
        flop_rate, reachable = self._rates
        byte_rate = reachable * bandwidth_scale
        plan = self._plan(work)
        loads = None if share is None else self._loads(work, plan)

        def seconds_of(ops, tokens, offered) -> float:
            seconds = 0.0
            if offered is None:
                for op in ops:
                    seconds += perf.op_seconds(op, tokens, shard, flop_rate, byte_rate)
            else:
                for op, load in zip(ops, offered):
                    seconds += perf.op_seconds(op, tokens, shard, flop_rate, reachable * share(load))
            return seconds

        layer_s = seconds_of(plan.layer, work.tokens, loads and loads[0])
        layer_s += perf.layer_extra_seconds(work.tokens, shard, byte_rate)
        head_s = seconds_of(plan.head, work.logits, loads and loads[1])
        seconds = shard.model.layers * layer_seconds(perf, layer_s, plan.reduce_s) + head_s + self.overhead_s
        return Cost(seconds, plan.flops, plan.hbm_bytes, plan.link_bytes,
                    plan.hbm_per_tp / (seconds * gpu.memory.bandwidth))

    @cached_property
    def _plans(self) -> Memo:
        return Memo()

    def _plan(self, work: Work) -> "_GPUPlan":
        """Everything of the iteration's price that the bandwidth does not change (memoised for one iteration)."""
        return self._plans(work, self._planned, work) if _scalar(work) else self._planned(work)

    def _planned(self, work: Work) -> "_GPUPlan":
        shard = self.shard

        def totals(ops) -> tuple[float, float]:
            flops = nbytes = 0.0
            for op in ops:
                flops += op.flops
                nbytes += op.weight_bytes + op.kv_bytes + op.act_bytes
            return flops, nbytes

        layer, head = shard.layer_ops(work), shard.head_ops(work)
        (layer_flops, layer_bytes), (head_flops, head_bytes) = totals(layer), totals(head)
        reduce_bytes = shard.all_reduce_bytes(work)
        # two all-reduces per layer (after attention, after the MLP), half the bytes each
        reduce_s = self.perf.all_reduce_seconds(reduce_bytes / 2, 2, shard.tp, self.hardware.link.bandwidth)
        layers = shard.model.layers
        hbm = layers * layer_bytes + head_bytes
        link = layers * (2 * (shard.tp - 1) / shard.tp) * reduce_bytes
        return _GPUPlan(layer, head, reduce_s, (layers * layer_flops + head_flops) * shard.tp, hbm * shard.tp,
                        link * shard.tp, hbm)

    @cached_property
    def _load_memo(self) -> Memo:
        return Memo()

    def _loads(self, work: Work, plan: "_GPUPlan") -> tuple[list, list]:
        """The fraction of the bandwidth each layer and head operator asks for alone (memoised for one
        iteration): what its share is looked up at."""
        return self._load_memo(work, self._offered, work, plan) if _scalar(work) else self._offered(work, plan)

    def _offered(self, work: Work, plan: "_GPUPlan") -> tuple[list, list]:
        gpu, shard, perf = self.hardware.gpu, self.shard, self.perf
        flop_rate, reachable = self._rates
        return tuple([_fraction(op.bytes / gpu.memory.bandwidth,
                                perf.op_seconds(op, tokens, shard, flop_rate, reachable)) for op in ops]
                     for ops, tokens in ((plan.layer, work.tokens), (plan.head, work.logits)))


class _GPUPlan(NamedTuple):
    """An iteration on the GPUs up to what the bandwidth changes: its operators, its all-reduces' time and the
    totals the `Cost` reports (`hbm_per_tp`: one GPU's bytes, what its offered load is over)."""
    layer: list
    head: list
    reduce_s: Any
    flops: Any
    hbm_bytes: Any
    link_bytes: Any
    hbm_per_tp: Any


# The paper's lane has eight 128-wide sublanes (DuoPD §4.2): the sublane width a suggested verify names.
PAPER_SUBLANE_WIDTH = 128


def _verified(table: VerifiedBlocks, block: str, prefer: dict[str, Any], command: str, **required: Any):
    """The entry of `block` with the `required` parameters (preferring those that also have `prefer`), or a
    ConfigError naming the `basedie verify` command that would create one."""
    found = [e for e in table.entries if e.block == block and all(e.params.get(k) == v for k, v in required.items())]
    if not found:
        wanted = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in required.items())
        raise ConfigError(f"no verified {block}{' with ' + wanted if wanted else ''}; create it with `{command}`")
    preferred = [e for e in found if all(e.params.get(k) == v for k, v in prefer.items())]
    return max(preferred or found, key=lambda e: e.params.get("width", 0))


@dataclass(frozen=True)
class PNMFigures:
    """Every hardware number of the PNM's compute, from the verified entries `hardware.pnm` names: the lane of
    `hardware.pnm.lane_width` (its latency, its measured MACs per cycle, which include its width, and its design
    clock) and an array of `lanes` lanes at that clock (the proof that so many lanes run in lockstep on one
    broadcast operand; its own width may be narrower, as Amaranth cannot build a full-width array's ports). Every
    lane count is its own verified entry (DuoPD §6.4's 4× compute is the 64-lane array): a count nobody verified is
    refused with the command that verifies it."""
    lanes: int
    clock_hz: float              # the lane's design clock (`design_clock_hz`), not the bench's time step
    latency_cycles: int
    macs_per_cycle: float        # one lane: operand pairs accepted per cycle × width, as the bench measured it

    @classmethod
    def from_verified(cls, table: VerifiedBlocks, pnm: PNMArray) -> "PNMFigures":
        lane, array = pnm_entries(table, pnm)
        return cls(int(array.params["lanes"]), float(lane.params["design_clock_hz"]),
                   int(lane.figures["latency_cycles"]), float(lane.figures["macs_per_cycle"]))


def pnm_entries(table: VerifiedBlocks, pnm: PNMArray) -> tuple[VerifiedEntry, VerifiedEntry]:
    """The verified lane and array entries `pnm` names, or a ConfigError naming the command that makes one."""
    width, clock = pnm.lane_width, pnm.clock_hz
    clock_param = [] if clock == 1e9 else [f"--param design_clock_hz={clock:g}"]  # 1 GHz: DuoPD §6.1
    lane = _verified(table, "pnm_lane", {}, " ".join([
        "basedie verify pnm_lane", f"--param width={width}",
        f"--param sublane_width={min(width, PAPER_SUBLANE_WIDTH)}", *clock_param]),
        width=width, design_clock_hz=clock)
    array = _verified(table, "pnm_array", {"width": width}, " ".join([
        "basedie verify pnm_array", f"--param lanes={pnm.lanes}", "--param width=16 --param sublane_width=4",
        *clock_param]), lanes=pnm.lanes, design_clock_hz=clock)
    return lane, array


def vector_entries(table: VerifiedBlocks, pnm: PNMArray) -> tuple[VerifiedEntry, VerifiedEntry | None]:
    """The verified vector-unit entry (of `pnm.vector_width` if there is one, else the widest) and, when its width
    is not the system's, the fp32_add entry whose latency is one more level of the unit's reduction tree."""
    entry = _verified(table, "pnm_vector", {"width": pnm.vector_width}, "basedie verify pnm_vector")
    same = entry.params["width"] == pnm.vector_width
    return entry, None if same else _verified(table, "fp32_add", {}, "basedie verify fp32_add")


@dataclass(frozen=True)
class VectorFigures:
    """The PNM's vector unit at the system's width (`PNMArray.vector_width`), from the verified `pnm_vector`
    entry: per op, its latency and its elements per cycle, and the PNM's clock (§6.1: every PNM unit at 1 GHz;
    the entry records no clock of its own).

    The table holds the bench's width; the system's is scaled by the RTL's structure (rtl/pnm_vector/vector.py):
    every lane is its own copy of the op chain and a beat of all lanes enters each cycle, so elements per cycle
    scale linearly with width (the bench measured elements per cycle = width for every op); the latency grows by
    one fp32_add (its verified latency) per extra level of the balanced reduction tree over the lanes, log2 of the
    width ratio (both widths are powers of two)."""
    clock_hz: float
    latency_cycles: dict[str, float]          # by op ("mul", "exp", ...)
    elements_per_cycle: dict[str, float]      # by op, and by "reduce_<sum|max>_<op>" where the bench measured one

    @classmethod
    def from_verified(cls, table: VerifiedBlocks, pnm: PNMArray) -> "VectorFigures":
        entry, adder = vector_entries(table, pnm)
        measured_width = entry.params["width"]
        levels = math.log2(pnm.vector_width) - math.log2(measured_width)
        require(levels == int(levels), f"the vector unit's width must be a power of two, got {pnm.vector_width}")
        extra = 0 if adder is None else levels * adder.figures["latency_cycles"]
        scale = pnm.vector_width / measured_width
        figures = entry.figures
        return cls(pnm.clock_hz,
                   {k.removeprefix("latency_cycles_"): v + extra for k, v in figures.items()
                    if k.startswith("latency_cycles_")},
                   {k.removeprefix("elements_per_cycle_"): v * scale for k, v in figures.items()
                    if k.startswith("elements_per_cycle_")})

    @cached_property
    def _cycles_per_element(self) -> dict[tuple[str, str], float]:
        """By (op, reduce). A reduction the bench did not measure for an op streams at the op's rate: the tree and
        the fold come after the op's chain and accept a beat every cycle for every op (the bench's reductions of
        ADD, EXP, MAX and SOFTMAX all ran at the op's rate)."""
        rates = self.elements_per_cycle
        return {(op, reduce): 1 / rates.get(f"reduce_{reduce}_{op}", rates[op]) if reduce else 1 / rates[op]
                for op in self.latency_cycles for reduce in ("", "sum", "max")}

    def chain(self, steps: list[Step]) -> tuple[Any, Any]:
        """(stream, latency) seconds of a chain of steps: every pass's elements at its rate through the unit's
        input, and the unit's latency once per step that has work (a step waits for the previous one's results
        to leave the pipeline)."""
        cycles, latencies = self._cycles_per_element, self.latency_cycles
        stream = latency = 0.0
        for step in steps:
            elements = deepest = 0
            for p in step:
                stream = stream + p.elements * cycles[p.op, p.reduce]
                elements = elements + p.elements
                deepest = max(deepest, latencies[p.op])
            latency = latency + (elements > 0) * deepest
        return stream / self.clock_hz, latency / self.clock_hz

    def linear(self, steps_of: Callable[[Work], list[Step]]) -> "LinearChain":
        """`chain(steps_of(work))` for any `work`, priced once: from the chain of one unit of each Work count."""
        prices = [self.chain(steps_of(Work(*(int(i == k) for i in range(len(Work._fields))))))
                  for k in range(len(Work._fields))]
        return LinearChain(tuple(p[0] for p in prices), tuple(p[1] for p in prices))


class LinearChain(NamedTuple):
    """A chain's (stream, latency) seconds as functions of an iteration's `Work` counts. Every step of
    `sysmodel.vector_work` streams elements proportional to one count, so the stream is linear in the counts and
    a step pays its latency when its count is not zero (a numpy array of counts gives arrays)."""
    stream_s: tuple[float, ...]      # per unit of each count
    latency_s: tuple[float, ...]     # of the steps each count drives

    def __call__(self, work: Work) -> tuple[Any, Any]:
        stream = latency = 0.0
        for count, per_unit, steps_latency in zip(work, self.stream_s, self.latency_s):
            if per_unit or steps_latency:
                stream = stream + per_unit * count
                latency = latency + steps_latency * (count > 0)
        return stream, latency


def beat_groups(lanes: int, bandwidth_multiple: float) -> tuple[int, ...]:
    """How the lanes may split into broadcast groups: a read path of `bandwidth_multiple` × the stack's delivers
    that many beats per cycle, and `g` groups of `lanes / g` lanes each take their own beat (g divides the lanes,
    g ≤ the multiple). One group (the paper's PNM, §4.2) broadcasts every beat to all lanes. The split is our
    reading of a wider PNM (DuoPD §6.4 gives no microarchitecture for it); each group is the verified array's
    structure with fewer lanes."""
    return tuple(g for g in range(1, int(bandwidth_multiple) + 1) if lanes % g == 0)


def array_passes(rows, elements, lanes: int, groups: tuple[int, ...], smaller=min):
    """Lane-beats of an operator whose `elements` each serve `rows` rows: with `g` groups, each beat serves up to
    lanes / g rows (more take more passes) and the groups share the elements; the fastest split is taken."""
    best = None
    for g in groups:
        cycles = -(-rows // (lanes // g)) * elements / g
        best = cycles if best is None else smaller(best, cycles)
    return best


@dataclass(frozen=True)
class PNMExecution:
    """DuoPD decoding on the PNMs of `shard.tp` GPUs (one PNM per stack), paper §4.2 and §5.

    Within a GPU the weights are split over its stacks and the KV cache is split along the sequence
    (sequence parallelism, FlashDecoding partial softmax, §5.2). Per operator and PNM, the lanes need
    `passes × elements / macs_per_cycle` cycles: the memory operand is broadcast to all lanes (§4.2), so a
    weight beat serves up to `lanes` token rows (the sequences, or for an expert the tokens routed to it)
    and a key/value beat up to `lanes` query heads of a GQA group; the rows an operand serves are its
    FLOPs / (2 × its elements), and more rows than lanes take more passes. The memory side moves the PNM's bytes
    at its share of its read path: the stack's bandwidth × `pnm.bandwidth_multiple` (a wider path's loads and
    shares are fractions of it; `beat_groups` says how its lanes use more beats per cycle). Each operator pays
    the lane's pipeline latency and the MMU's access latency at the loads the GPU and the operator offer; each
    layer pays two inter-PNM all-reduces (§5.2) and the GPU-level tensor-parallel all-reduces over NVLink (priced
    by `perf`, as the GPUs' own).

    The vector unit (`vector`, §4.2) runs norms, residual adds, softmax, activations and the FlashDecoding merge
    (`sysmodel.vector_work`): the online softmax streams beside the attention operator and the activation beside
    the MLP's (a slower stream bounds the operator like its lanes do), and each adds its chain's latency after
    the array's last beat; norms, residual adds and the merge stand between array operators and add their whole
    time. Without `vector` that work is free (the array's own mechanisms, tested alone)."""
    hardware: Hardware
    shard: Shard
    figures: PNMFigures
    mmu: MMUArbitration
    perf: PerfModel = ROOFLINE
    vector: VectorFigures | None = None
    dequant: "StackDequant | None" = None    # quantized weights, read through the stack's DQBs (`base_die`)
    # False: the PNMs run only the operators of `shard` (offloaded from a GPU decode instance, `sysmodel.offload`);
    # the GPUs run the norms, residual adds and the head, so the vector unit's chains beside those do not apply.
    whole_decode: bool = True

    @cached_property
    def _vector_chains(self) -> tuple[LinearChain, LinearChain, dict[str, LinearChain]]:
        """The vector unit's serial chain of a layer, its head chain and its chains beside array operators."""
        vector, shard, stacks = self.vector, self.shard, self.hardware.gpu.stacks
        beside = decode_layer(shard, Work(1, 1, 1, 1), stacks).overlapped
        return (vector.linear(lambda work: decode_layer(shard, work, stacks).serial),
                vector.linear(lambda work: decode_head(shard, work)),
                {name: vector.linear(lambda work, name=name: decode_layer(shard, work, stacks).overlapped[name])
                 for name in beside})

    @property
    def peak_flops(self) -> float:
        """One PNM: every lane's multipliers, two FLOPs per MAC."""
        return self.figures.lanes * self.figures.macs_per_cycle * 2 * self.figures.clock_hz

    def cost(self, work: Work, bandwidth_scale: float = 1.0, loads: Mapping[str, float] | None = None,
             share: Share | None = None) -> Cost:
        """`loads["gpu"]`, the GPU's offered load, sets the MMU's wait; with `share`, each operator streams at the
        share its own offered load obtains. Without `share`, one iteration's price is a function of its counts,
        `bandwidth_scale` and the GPU's load alone (the executor and its arbiter are frozen): memoised."""
        gpu_load = (loads or {}).get("gpu", 0.0)
        if share is None and _scalar(work) and not isinstance(gpu_load, np.ndarray):
            return self._memo((work, bandwidth_scale, gpu_load), self._cost, work, bandwidth_scale, gpu_load, None)
        return self._cost(work, bandwidth_scale, gpu_load, share)

    @cached_property
    def _memo(self) -> Memo:
        return Memo()

    @cached_property
    def _stack_bandwidth(self) -> float:
        """The PNM's own read path: the stack's bandwidth × `pnm.bandwidth_multiple`."""
        return self.hardware.gpu.stack.bandwidth * self.hardware.pnm.bandwidth_multiple

    @cached_property
    def _fixed_s(self) -> float:
        """What every operator pays before its first beat besides the MMU's wait: the lane's pipeline latency,
        the stack's access latency and the DQB's, if any."""
        lane, dequant = self.figures, self.dequant
        return (lane.latency_cycles / lane.clock_hz + self.hardware.gpu.stack.latency_s
                + (dequant.latency_s if dequant else 0.0))

    def _cost(self, work: Work, bandwidth_scale: float, gpu_load, share: Share | None) -> Cost:
        """The iteration's plan (`_plan`) at this bandwidth: each operator's MMU wait at its load and the GPU's,
        and its memory time at the bandwidth scale or at the share its own load obtains."""
        plan = self._plan(work)
        stack_bandwidth, fixed_s, latency = self._stack_bandwidth, self._fixed_s, self.mmu.access_latency_s
        byte_rate = stack_bandwidth * bandwidth_scale
        larger = elementwise_max

        def seconds_of(operators: tuple[_Operator, ...]):
            total = 0.0
            for op in operators:
                if op.drain_s is not None:
                    total += op.drain_s
                start_s = fixed_s + latency("pnm", {"gpu": gpu_load, "pnm": op.offered})
                rate = byte_rate if share is None else stack_bandwidth * share(op.offered)
                total += larger(op.compute_s, op.nbytes / rate) + start_s
            return total

        layer_s, head_s = seconds_of(plan.layer), seconds_of(plan.head)
        if plan.serial_s is not None:
            layer_s += plan.serial_s
            head_s += plan.final_s
        seconds = self.shard.model.layers * layer_seconds(self.perf, layer_s, plan.exchange_s) + head_s
        return Cost(seconds, plan.flops, plan.hbm_bytes, plan.link_bytes,
                    plan.hbm_per_stack / (seconds * stack_bandwidth))

    @cached_property
    def _plans(self) -> Memo:
        return Memo()

    @cached_property
    def _last_plan(self) -> list:
        """[work, plan] of the last decode block planned: a block is priced alone and then beside its co-runners."""
        return [None, None]

    def _plan(self, work: Work) -> "_Plan":
        """Everything of the iteration's price that no co-runner changes: memoised by the counts of one iteration,
        and kept for the last decode block (the same `Work` object)."""
        if _scalar(work):
            return self._plans(work, self._planned, work)
        last = self._last_plan
        if last[0] is not work:
            last[:] = work, self._planned(work)
        return last[1]

    def _planned(self, work: Work) -> "_Plan":
        hw, shard = self.hardware, self.shard
        stacks = hw.gpu.stacks
        serial, final, beside = self._vector_chains if self.vector else (None, None, {})
        layer, head = shard.layer_ops(work), shard.head_ops(work)
        layer_ops, head_ops = self._operators(work, layer, beside), self._operators(work, head, {})
        layer_bytes = head_bytes = 0.0
        for op in layer_ops:
            layer_bytes += op.nbytes
        for op in head_ops:
            head_bytes += op.nbytes
        serial_s = final_s = None
        if self.vector and self.whole_decode:
            serial_s, final_s = sum(serial(work)), sum(final(work))
        reduce_bytes = shard.all_reduce_bytes(work)
        exchange_s = 2 * hw.pnm.all_reduce_s + self.perf.all_reduce_seconds(reduce_bytes / 2, 2, shard.tp,
                                                                            hw.link.bandwidth)
        layers = shard.model.layers
        flops = layers * sum(op.flops for op in layer) + sum(op.flops for op in head)
        hbm_per_stack = layers * layer_bytes + head_bytes
        link = layers * (2 * (shard.tp - 1) / shard.tp) * reduce_bytes
        return _Plan(layer_ops, head_ops, serial_s, final_s, exchange_s, flops * shard.tp,
                     hbm_per_stack * stacks * shard.tp, link * shard.tp, hbm_per_stack)

    def _operators(self, work: Work, ops, overlapped: dict[str, LinearChain]) -> tuple["_Operator", ...]:
        """The array operators of `ops` (vector operators and empty ones take no lanes): per PNM, the lanes'
        passes (and the DQBs', and a vector chain streaming beside), the bytes read and the load offered."""
        hw, lane, dequant = self.hardware, self.figures, self.dequant
        stacks, stack_bandwidth = hw.gpu.stacks, self._stack_bandwidth
        smaller = np.minimum if _larger(work) is np.maximum else min
        larger = elementwise_max   # per operator: a decode block's weight operators are scalars, its attention arrays
        groups = beat_groups(lane.lanes, hw.pnm.bandwidth_multiple)
        operators = []
        for op in ops:
            elements = (op.weight_bytes + op.kv_bytes) / BYTES_PER_VALUE
            if op.kind == "vector" or (not isinstance(elements, np.ndarray) and not elements):
                continue
            compute_s = array_passes(op.flops / (2 * elements), elements, lane.lanes, groups, smaller) \
                / stacks / lane.macs_per_cycle / lane.clock_hz
            if dequant is None:
                nbytes = elements * BYTES_PER_VALUE / stacks
            else:     # the lanes still take FP16, delivered by the DQBs from the stored bytes
                weights, other = ((op.weight_bytes, op.kv_bytes) if op.name in QUANTIZED_OPS
                                  else (0.0, op.weight_bytes + op.kv_bytes))
                nbytes = dequant.read_bytes(weights, other) / stacks
                compute_s = larger(compute_s, dequant.seconds(weights / stacks, other / stacks))
            drain_s = None
            if op.name in overlapped:
                stream_s, drain_s = overlapped[op.name](work)
                compute_s = larger(compute_s, stream_s)
            # What the operator asks of the stack while it streams: all of it when memory-bound, less
            # when the lanes are the bottleneck; the MMU's wait is looked up at that load.
            alone_s = nbytes / stack_bandwidth
            operators.append(_Operator(compute_s, nbytes, alone_s / larger(compute_s, alone_s), drain_s))
        return tuple(operators)


class _Operator(NamedTuple):
    """One array operator of an iteration on one PNM, as far as no co-runner changes it."""
    compute_s: Any       # the lanes' time (or the DQBs', or a vector chain's stream beside it, if longer)
    nbytes: Any          # bytes it reads from the stack
    offered: Any         # the fraction of the read path it asks for while it streams
    drain_s: Any         # the latency of the vector chain beside it after its last beat (None: no chain)


class _Plan(NamedTuple):
    """An iteration on the PNMs up to what a co-runner changes: its array operators, the layer's serial and the
    head's vector chains (None without a vector unit or when the GPUs run them), the layer's all-reduces, and
    the totals the `Cost` reports."""
    layer: tuple[_Operator, ...]
    head: tuple[_Operator, ...]
    serial_s: Any
    final_s: Any
    exchange_s: Any
    flops: Any
    hbm_bytes: Any
    link_bytes: Any
    hbm_per_stack: Any
