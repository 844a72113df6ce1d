"""Golden model of the PNM top: what a program leaves in memory and in the buffer, written from docs/pnm-top.md
and docs/pnm-isa.md. Control (which commands issue, how a program ends) is the controller's model
(`tb.models.pnm_controller`); the data each command moves or computes is numpy here: FP16 products and FP32
round-to-nearest-even sums in the lanes' documented order (`tb.models.pnm`), the vector unit's documented
algorithms (`tb.models.pnm_vector`). Commands run one after another in program order, which is what a program
whose dependent instructions are separated by BARRIERs observes."""
from dataclasses import dataclass

import numpy as np

from . import fp
from . import pnm as lane_model
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
    the tiles' sums added in order to the first (the accumulator). In attention mode each score is one sublane's
    tree over its k = sublane_width products."""
    kind, m = fields["kind"], fields["m"]
    if shape.attention(fields):   # one sublane's tree per score: the same sums as one tile of that width
        shape = Shape(shape.row_bytes, shape.sublane_width, shape.lanes)
    rows, length = (fields["k"], fields["n"]) if kind == PV else (fields["n"], fields["k"])
    tiles = length // shape.width
    a = _fp16(buffer, fields["a"], shape.row_bytes, m * length).reshape(m, tiles, shape.width)
    b = _fp16(buffer, fields["b"], shape.row_bytes, rows * length).reshape(rows, tiles, shape.width)
    sums = lane_model.lane_sums(a[:, None], b[None], shape.width)  # (m, rows, tiles)
    total = sums[..., 0]
    for t in range(1, tiles):
        total = fp.fp32_add(total, sums[..., t])
    _fp32(buffer, fields["d"], shape.row_bytes, m * rows)[:] = total.reshape(-1)


def elementwise_refused(fields: dict, shape: Shape) -> bool:
    """The vector sequencer runs ACT and VOP; a VOP with a broadcast or a reduction needs n a multiple of the
    vector unit's width (one row)."""
    width = shape.row_bytes // 4
    if fields["kind"] == ACT:
        return False
    return fields["kind"] != VOP or bool((fields["reduce"] or fields["broadcast"]) and fields["n"] % width)


def elementwise(buffer: np.ndarray, fields: dict, shape: Shape) -> None:
    """VOP: d[j][i] = op(a[j][i], b[j][i]), or op(a[j][i], b[j]) with broadcast; with a reduction d[j] is vector
    j's r0s folded as the vector unit folds them (a tree over each beat's lanes, then beat after beat). ACT:
    d[j][i] = op(a[j][i], +0)."""
    m, n, width = fields["m"], fields["n"], shape.row_bytes // 4
    count = m * n
    a = _fp32(buffer, fields["a"], shape.row_bytes, count)
    if fields["kind"] != VOP:
        b = np.zeros(count, np.uint32)
    elif fields["broadcast"]:
        b = np.repeat(_fp32(buffer, fields["b"], shape.row_bytes, m), n)
    else:
        b = _fp32(buffer, fields["b"], shape.row_bytes, count)
    zero = np.zeros(count, np.uint32)
    if fields["kind"] != VOP or not fields["reduce"]:
        _fp32(buffer, fields["d"], shape.row_bytes, count)[:] = vector_model.elementwise(fields["op"], a, b, zero,
                                                                                          zero)[0]
        return
    beats = [vector_model.Beat(fields["op"], fields["reduce"], int((q + 1) % (n // width) == 0),
                               np.stack([a[q * width:(q + 1) * width], b[q * width:(q + 1) * width],
                                         zero[:width], zero[:width]]))
             for q in range(count // width)]
    _fp32(buffer, fields["d"], shape.row_bytes, m)[:] = [out[0, 0] for out in vector_model.run(beats)]


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
            elementwise(buffer, f, shape)
    return Result(outcome, unit_error, unit_id)
