"""Golden model of the PNM top: what a program leaves in memory and in the buffer, written from docs/pnm.md
and docs/pnm-isa.md. Control (which commands issue, how a program ends) is the controller's model
(`tb.models.pnm_controller`); the data each command moves or computes is numpy here: FP16 products and FP32
round-to-nearest-even sums in the lanes' documented order and their exact accumulator (`tb.models.pnm_lane`), the
vector unit's documented algorithms (`tb.models.pnm_vector`). Commands run one after another in program order,
which is what a program whose dependent instructions are separated by BARRIERs observes."""
from dataclasses import dataclass

import numpy as np

from . import fp
from . import pnm_lane as lane_model
from . import pnm_controller as control
from . import pnm_vector as vector_model

GEMV, SCORE, PV = 0, 1, 2          # array command kinds (opcode low nibble)
SOFTMAX, VOP, NORM, ACT, MERGE = 0, 1, 2, 3, 4  # vector command kinds
UNIT_NONE, UNIT_ARRAY, UNIT_VECTOR = 0, 1, 2    # `status.unit_error`


@dataclass(frozen=True)
class Shape:
    """What the data model needs of the top's parameters."""
    row_bytes: int
    width: int       # FP16 per lane operand tile
    lanes: int
    sublane_width: int = 0  # 0: the lane is one sublane (no attention mode)

    def attention(self, fields: dict) -> bool:
        """SCORE of a head dimension of one sublane, on a lane of several: attention mode."""
        return (fields["kind"] == SCORE and 0 < self.sublane_width < self.width
                and fields["k"] == self.sublane_width)

    @property
    def tile_bytes(self) -> int:
        return 2 * self.width


@dataclass
class Result:
    outcome: control.Outcome
    unit_error: int
    unit_id: int


def _fp16(buffer: np.ndarray, row: int, row_bytes: int, count: int) -> np.ndarray:
    start = row * row_bytes
    return buffer[start:start + 2 * count].view(np.uint16)


def _fp32(buffer: np.ndarray, row: int, row_bytes: int, count: int) -> np.ndarray:
    start = row * row_bytes
    return buffer[start:start + 4 * count].view(np.uint32)


def dot_refused(fields: dict, shape: Shape) -> bool:
    """The array sequencer's limits: b on a tile boundary, m ≤ lanes; in MLP mode L a whole number of tiles and a
    on a tile boundary; in attention mode a on a query boundary (2 · sublane_width bytes)."""
    a_byte, b_byte = fields["a"] * shape.row_bytes, fields["b"] * shape.row_bytes
    if b_byte % shape.tile_bytes or fields["m"] > shape.lanes:
        return True
    if shape.attention(fields):
        return bool(a_byte % (2 * shape.sublane_width))
    length = fields["n"] if fields["kind"] == PV else fields["k"]
    return bool(length % shape.width or a_byte % shape.tile_bytes)


def dot(buffer: np.ndarray, fields: dict, shape: Shape) -> None:
    """GEMV/SCORE: d[j][i] = Σ_t a[j][t]·b[i][t] over b's n rows of k; PV: b is V transposed (k rows of n tokens),
    d[j][e] = Σ_t a[j][t]·b[e][t]. Each dot product: per tile of `width` the lane's tree of FP16 products, then
    the tiles' sums added exactly and rounded once (the lane's accumulator). In attention mode each score is one
    sublane's tree over its k = sublane_width products."""
    kind, m = fields["kind"], fields["m"]
    if shape.attention(fields):   # one sublane's tree per score: the same sums as one tile of that width
        shape = Shape(shape.row_bytes, shape.sublane_width, shape.lanes)
    rows, length = (fields["k"], fields["n"]) if kind == PV else (fields["n"], fields["k"])
    tiles = length // shape.width
    a = _fp16(buffer, fields["a"], shape.row_bytes, m * length).reshape(m, tiles, shape.width)
    b = _fp16(buffer, fields["b"], shape.row_bytes, rows * length).reshape(rows, tiles, shape.width)
    sums = lane_model.lane_sums(a[:, None], b[None], shape.width)  # (m, rows, tiles)
    total = lane_model.exact_sum(sums)
    _fp32(buffer, fields["d"], shape.row_bytes, m * rows)[:] = total.reshape(-1)


def elementwise_refused(fields: dict, shape: Shape) -> bool:
    """The vector sequencer runs every vector command; a VOP with a broadcast or a reduction, SOFTMAX and NORM
    need n a multiple of the vector unit's width W (one row), MERGE k."""
    width, kind = shape.row_bytes // 4, fields["kind"]
    if kind == ACT:
        return False
    if kind == VOP:
        return bool((fields["reduce"] or fields["broadcast"]) and fields["n"] % width)
    return bool(fields["k" if kind == MERGE else "n"] % width)


def _fold(values: np.ndarray, reduce: int, width: int) -> np.uint32:
    """One vector's values folded as the vector unit folds a reduction: a tree over each row's W lanes, then
    row after row."""
    rows = vector_model.tree(values.reshape(-1, width), reduce)
    total = rows[0]
    for value in rows[1:]:
        total = fp.fp32_add(total, value) if reduce == vector_model.SUM else vector_model.fmax(total, value)
    return total


def _op(op: int, a, b=0) -> np.ndarray:
    """r0 of the vector unit's `op` on (a, b)."""
    a = np.asarray(a, np.uint32)
    b = np.broadcast_to(np.asarray(b, np.uint32), a.shape)
    zero = np.zeros_like(a)
    return vector_model.elementwise(op, a, b, zero, zero)[0]


def softmax(buffer: np.ndarray, fields: dict, shape: Shape) -> None:
    """Per head j (docs/pnm-isa.md): m' = max(m_j, max_t a[j][t]); P_t = e^(a[j][t] − m'); l' = l_j·α + Σ_t P_t
    with α = e^(m_j − m') as the vector unit's SOFTMAX op gives it; d[j] = (m', l'), b[j] = P in FP16 (nearest
    even), c[j] = α. The sum is folded in the vector unit's order."""
    n, width, rb = fields["n"], shape.row_bytes // 4, shape.row_bytes
    for j in range(fields["m"]):
        a = _fp32(buffer, fields["a"], rb, (j + 1) * n)[j * n:]
        state = _fp32(buffer, fields["d"], rb, 2 * j + 2)[2 * j:]
        top = _fold(_op(vector_model.MAX, a, state[0]), vector_model.REDUCE_MAX, width)
        p = _op(vector_model.EXP, a, top)
        m_new, l_new, alpha, _ = vector_model.softmax_update(state[0], state[1], top,
                                                             _fold(p, vector_model.SUM, width))
        state[:] = [m_new, l_new]
        _fp16(buffer, fields["b"], rb, (j + 1) * n)[j * n:] = fp.narrow(p, "fp16", "nearest_even")
        _fp32(buffer, fields["c"], rb, j + 1)[j] = alpha


def norm(buffer: np.ndarray, fields: dict, shape: Shape) -> None:
    """RMSNorm per vector j: r_j = rsqrt((Σ_i a[j][i]²)·c₀ + c₁), the sum folded in the vector unit's order;
    d[j][i] = (a[j][i]·r_j)·b[i]."""
    n, width, rb = fields["n"], shape.row_bytes // 4, shape.row_bytes
    c0, c1 = _fp32(buffer, fields["c"], rb, 2).copy()
    gains = _fp32(buffer, fields["b"], rb, n).copy()
    for j in range(fields["m"]):
        a = _fp32(buffer, fields["a"], rb, (j + 1) * n)[j * n:].copy()
        total = _fold(_op(vector_model.MUL, a, a), vector_model.SUM, width)
        r = _op(vector_model.RSQRT, _op(vector_model.ADD, _op(vector_model.MUL, total, c0), c1))
        _fp32(buffer, fields["d"], rb, (j + 1) * n)[j * n:] = _op(vector_model.MUL, _op(vector_model.MUL, a, r),
                                                                   gains)


def merge(buffer: np.ndarray, fields: dict, shape: Shape) -> None:
    """FlashDecoding merge per head j: (m, l, w1, w2) by the vector unit's MERGE op on a[j] and b[j]; a[j] =
    (m, l); c[j][e] = w2·c[j][e] (c is the scratch, docs/pnm-isa.md); d[j][e] = w1·d[j][e] + c[j][e]."""
    k, rb = fields["k"], shape.row_bytes
    for j in range(fields["m"]):
        first = _fp32(buffer, fields["a"], rb, 2 * j + 2)[2 * j:]
        second = _fp32(buffer, fields["b"], rb, 2 * j + 2)[2 * j:].copy()
        m_new, l_new, w1, w2 = vector_model.merge(first[0], first[1], second[0], second[1])
        first[:] = [m_new, l_new]
        o2 = _fp32(buffer, fields["c"], rb, (j + 1) * k)[j * k:]
        o2[:] = _op(vector_model.MUL, o2, w2)
        o1 = _fp32(buffer, fields["d"], rb, (j + 1) * k)[j * k:]
        o1[:] = _op(vector_model.ADD, _op(vector_model.MUL, o1, w1), o2)


def elementwise(buffer: np.ndarray, fields: dict, shape: Shape) -> None:
    """VOP: d[j][i] = op(a[j][i], b[j][i]), or op(a[j][i], b[j]) with broadcast; with a reduction d[j] is vector
    j's r0s folded as the vector unit folds them (a tree over each beat's lanes, then beat after beat); with
    `narrow` the results are written as FP16 (nearest even). ACT: d[j][i] = op(a[j][i], +0)."""
    m, n, width = fields["m"], fields["n"], shape.row_bytes // 4
    count = m * n
    a = _fp32(buffer, fields["a"], shape.row_bytes, count)
    if fields["kind"] != VOP:
        b = np.zeros(count, np.uint32)
    elif fields["broadcast"]:
        b = np.repeat(_fp32(buffer, fields["b"], shape.row_bytes, m), n)
    else:
        b = _fp32(buffer, fields["b"], shape.row_bytes, count)
    results = _op(fields["op"], a, b)
    if fields["kind"] == VOP and fields["reduce"]:
        _fp32(buffer, fields["d"], shape.row_bytes, m)[:] = [_fold(results[j * n:(j + 1) * n], fields["reduce"],
                                                                   width) for j in range(m)]
    elif fields["kind"] == VOP and fields["narrow"]:   # FP16 results, nearest even
        _fp16(buffer, fields["d"], shape.row_bytes, count)[:] = fp.narrow(results, "fp16", "nearest_even")
    else:
        _fp32(buffer, fields["d"], shape.row_bytes, count)[:] = results


def run(words: list[int], start: int, config: control.Config, shape: Shape, memory: np.ndarray,
        buffer: np.ndarray, mmu_fault=lambda fields: 0) -> Result:
    """Run the program in `words` from `start`, updating `memory` (bytes from address 0) and `buffer` (bytes) in
    place. A program that stops with an error has run every command before the one that stopped it."""
    outcome = control.run(words, start, config, mmu_fault)
    unit_error, unit_id = UNIT_NONE, 0
    for command in outcome.commands[:outcome.required]:
        f = command.fields
        if command.unit == "mmu":
            if mmu_fault(f):
                break
            span = slice(f["dest"] * shape.row_bytes, f["dest"] * shape.row_bytes + f["size"])
            memory_span = slice(f["base"], f["base"] + f["size"])
            if f["store"]:
                memory[memory_span] = buffer[span]
            else:
                buffer[span] = memory[memory_span]
        elif command.unit == "array":
            if dot_refused(f, shape):
                unit_error, unit_id = unit_error or UNIT_ARRAY, unit_id if unit_error else f["id"]
            else:
                dot(buffer, f, shape)
        elif elementwise_refused(f, shape):
            unit_error, unit_id = unit_error or UNIT_VECTOR, unit_id if unit_error else f["id"]
        else:
            {SOFTMAX: softmax, NORM: norm, MERGE: merge}.get(f["kind"], elementwise)(buffer, f, shape)
    return Result(outcome, unit_error, unit_id)
