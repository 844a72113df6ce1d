"""The PNM vector unit: `width` FP32 lanes behind one stream input and one stream output, one beat per cycle.

Each lane runs one fixed chain of pipelined FP32 steps (`lane_chain`) whose operands the op selects, so every
op has the same latency; a reduction tree over the lanes and an accumulator across beats follow.
"""
import math
from functools import cache

from amaranth.hdl import Const, Fragment, Module, Mux, Shape, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..fp.add import FP32Add, fp32_add
from ..fp.formats import FP32
from ..pipeline import Stages, Wires
from . import approx
from .approx import ONE, add, fmax, mul, neg, order_key, parallel
from .params import VectorParams
from .ports import RESULTS, Op, Reduce, input_layout, output_layout

GELU_G1 = approx.fp32(-2 * math.sqrt(2 / math.pi))
GELU_G2 = approx.fp32(-2 * math.sqrt(2 / math.pi) * 0.044715)
NEG_INF = FP32.infinity | approx.NEG_ZERO
TREE_LEVEL_STAGES = FP32Add.latency


def _ops(carry: dict) -> dict[Op, Value]:
    """Which op the beat at this boundary carries (decoded afresh at each step from the carried code)."""
    return {o: carry["op"] == o.value for o in Op}


def lane_chain(stages: Stages, op: Value, a: Value, b: Value, c: Value, d: Value) -> list[Value]:
    """One lane's results r0..r3 (see `ports.Op`). The chain: GELU's argument (x², ·G2, +G1, ·x) beside the
    difference a − (b or c); exp; two products; a sum; reciprocal beside reciprocal square root; two products;
    the selection by op. Each step serves the ops that need it and carries the others' values past it."""
    carry = {"op": op, "a": a, "b": b, "c": c, "d": d}
    is_op = _ops(carry)
    carry["max"] = fmax(a, Mux(is_op[Op.MAX], b, c))  # r0 of MAX, and the new running max m of SOFTMAX/MERGE
    s1, carry = parallel(stages, carry, q=mul(a, a), s=add(a, neg(Mux(is_op[Op.EXP], b, c))))
    carry["s"] = s1.s
    q, carry = parallel(stages, carry, v=mul(s1.q, GELU_G2))
    q, carry = parallel(stages, carry, v=add(q.v, GELU_G1))
    u, carry = parallel(stages, carry, v=mul(q.v, carry["a"]))

    is_op, a, s = _ops(carry), carry["a"], carry.pop("s")
    z = Mux(is_op[Op.GELU], u.v, Mux(is_op[Op.SILU], neg(a), Mux(is_op[Op.EXP], s, s | approx.NEG_ZERO)))
    e, carry = parallel(stages, carry, v=lambda st: approx.exp(st, z))

    # Online softmax and merge: the larger max keeps weight 1, the smaller gets e^−|m1 − m2|.
    is_op, (a, b, c, d) = _ops(carry), (carry[k] for k in "abcd")
    both_inf = (a == c) & (a[:31] == FP32.infinity)
    weight = Mux(both_inf, ONE, e.v)
    first = order_key(a) >= order_key(c)
    alpha, beta = Mux(first, ONE, weight), Mux(first, weight, ONE)
    carry.update(e=e.v, alpha=alpha, beta=beta)
    p, carry = parallel(stages, carry, p1=mul(Mux(is_op[Op.MUL], a, b), Mux(is_op[Op.MUL], b, alpha)),
                        p2=mul(d, beta))
    carry.update(p1=p.p1, p2=p.p2)
    del carry["c"], carry["d"]

    is_op, a, b = _ops(carry), carry["a"], carry.pop("b")
    online = is_op[Op.SOFTMAX] | is_op[Op.MERGE]
    total, carry = parallel(stages, carry, v=add(
        Mux(online, p.p1, Mux(is_op[Op.ADD], a, ONE)),
        Mux(online, p.p2, Mux(is_op[Op.ADD], b, carry["e"]))))
    carry["sum"] = total.v

    is_op, a = _ops(carry), carry["a"]
    inverse, carry = parallel(
        stages, carry,
        recip=lambda st: approx.recip(st, Mux(is_op[Op.RECIP], a, total.v)),
        rsqrt=lambda st: approx.rsqrt(st, a))
    carry.update(recip=inverse.recip, rsqrt=inverse.rsqrt)

    is_op, a = _ops(carry), carry["a"]
    w, carry = parallel(stages, carry, w1=mul(Mux(is_op[Op.MERGE], carry["p1"], a), inverse.recip),
                        w2=mul(carry["p2"], inverse.recip))

    is_op, a = _ops(carry), carry["a"]
    activation = Mux(a == NEG_INF, approx.NEG_ZERO, w.w1)  # the limit at −inf, not −inf · 0
    r0 = Const(0, 32)
    for o, value in ((Op.MAX, carry["max"]), (Op.ADD, carry["sum"]), (Op.MUL, carry["p1"]), (Op.EXP, carry["e"]),
                     (Op.RECIP, carry["recip"]), (Op.RSQRT, carry["rsqrt"]), (Op.SILU, activation),
                     (Op.GELU, activation)):
        r0 = Mux(is_op[o], value, r0)
    online, merge = is_op[Op.SOFTMAX] | is_op[Op.MERGE], is_op[Op.MERGE]
    r0 = Mux(online, carry["max"], r0)
    r1 = Mux(online, carry["sum"], 0)
    r2 = Mux(online, Mux(merge, w.w1, carry["alpha"]), 0)
    r3 = Mux(online, Mux(merge, w.w2, carry["beta"]), 0)
    out = stages(r0=r0, r1=r1, r2=r2, r3=r3)
    return [out.r0, out.r1, out.r2, out.r3]


@cache
def chain_stages() -> int:
    """`lane_chain`'s depth, counted on a lane built apart: it follows from the FP units' latencies."""
    m = Module()
    stages = Stages(m, Const(1))
    lane_chain(stages, Const(0, Shape.cast(Op)), *(Const(0, FP32.width) for _ in range(4)))
    Fragment.get(m, None)  # elaborated, as every module must be
    return stages.count


def reduce_tree(stages: Stages, kind: Value, values: list[Value], carry: dict) -> tuple[Value, dict]:
    """The lanes' values folded by a balanced tree of adjacent pairs, each node a sum or a max by `kind`."""
    while len(values) > 1:
        pairs = {f"n{k}": (values[2 * k], values[2 * k + 1]) for k in range(len(values) // 2)}
        sums, carry = parallel(stages, carry | {"kind": kind},
                               **{f"{name}_sum": add(x, y) for name, (x, y) in pairs.items()},
                               **{f"{name}_max": (lambda x, y: lambda st: fmax(x, y))(x, y)
                                  for name, (x, y) in pairs.items()})
        kind = carry.pop("kind")
        values = [Mux(kind == Reduce.SUM.value, getattr(sums, f"{name}_sum"), getattr(sums, f"{name}_max"))
                  for name in pairs]
    return values[0], carry


class PNMVector(wiring.Component):
    """The vector unit: `i` takes one beat of `width` lanes per cycle (`ports.input_layout`), `o` gives the
    results (`ports.output_layout`) after a fixed `latency` for every op; a reduction gives one beat per vector.

    All stages advance together whenever the output register can move, as in `pipeline.PipelinedUnit`; the
    accumulator of a reduction updates only when its beat leaves the last stage, so stalls never repeat a fold.
    """

    initiation_interval = 1

    @property
    def shared_modules(self) -> dict[str, wiring.Component]:
        """The FP32 units the lanes instantiate by name; `rtl.generate` writes each once beside the unit."""
        return approx.shared_modules()

    def __init__(self, params: VectorParams = VectorParams()) -> None:
        self.params = params
        self.latency = chain_stages() + TREE_LEVEL_STAGES * ceil_log2(params.width) + 1
        super().__init__({"i": In(stream.Signature(input_layout(params.width))),
                          "o": Out(stream.Signature(output_layout(params.width)))})

    def elaborate(self, platform) -> Module:
        m = Module()
        advance = Signal()
        m.d.comb += advance.eq(~self.o.valid | self.o.ready)
        stages = Stages(m, advance)
        beat = self.i.payload
        lanes = []
        for k in range(self.params.width):
            lane = beat.lanes[k]
            lanes.append(lane_chain(stages.fork(), Value.cast(beat.op), lane.a, lane.b, lane.c, lane.d))
        stages.count = stages.depth
        # The controls travel beside the chain, registered at every stage boundary.
        carry = {"reduce": Value.cast(beat.reduce), "last": beat.last}
        control = Stages(m, advance)
        while control.count < stages.count:
            carry = vars(control(**carry))
        carry["lanes"] = [v for lane in lanes for v in lane]
        value, carry = reduce_tree(stages, carry["reduce"], [lane[0] for lane in lanes],
                                   {k: v for k, v in carry.items() if k != "lanes"}
                                   | {f"l{k}": v for k, v in enumerate(carry["lanes"])})

        # Across beats: the first beat of a vector (after reset or after `last`) starts the fold.
        accumulator, fresh = Signal(32), Signal(init=1)
        reduce, last = carry["reduce"], carry["last"]
        folded_sum = fp32_add(Wires(m, "fold"), accumulator, value)
        folded = Mux(fresh, value, Mux(reduce == Reduce.SUM.value, folded_sum, fmax(accumulator, value)))
        reducing = reduce != Reduce.NONE.value
        flat = [carry[f"l{k}"] for k in range(len(RESULTS) * self.params.width)]
        results = [Mux(reducing, folded if k == 0 else 0, v) for k, v in enumerate(flat)]
        out = stages(keep=~reducing | last, **{f"l{k}": v for k, v in enumerate(results)})
        if stages.count != self.latency:
            raise AssertionError(f"{type(self).__name__} states latency {self.latency} but has {stages.count}")

        valid = self.i.valid
        for stage in range(1, self.latency + 1):
            delayed = Signal(name=f"s{stage}_valid")
            with m.If(advance):
                m.d.sync += delayed.eq(valid)
            if stage == self.latency:
                with m.If(advance & valid & reducing):
                    m.d.sync += [accumulator.eq(folded), fresh.eq(last)]
            valid = delayed
        m.d.comb += [self.i.ready.eq(advance), self.o.valid.eq(valid & out.keep)]
        for k in range(self.params.width):
            for j, name in enumerate(RESULTS):
                m.d.comb += getattr(self.o.payload.lanes[k], name).eq(getattr(out, f"l{len(RESULTS) * k + j}"))
        return m
