"""Programs for the controller bench, written with the assembler (`rtl.pnm_controller.isa`): random valid
instructions of every opcode whose operands fit the buffer and whose tensors fit the bench's memory, and
malformed variants of them, one per way an instruction can be wrong."""
import random
from dataclasses import dataclass, replace

from rtl.pnm_controller.isa import (ACT_OPS, COUNT_FIELDS, KINDS, ROW_FIELDS, VOP_OPS, Instruction, Opcode, Operand,
                                    act_func, vop_func)
from rtl.pnm_controller.params import ControllerParams
from rtl.pnm_vector.ports import Reduce

OPCODE_WEIGHTS = {Opcode.LOAD: 6, Opcode.STORE: 3, Opcode.GEMV: 2, Opcode.SCORE: 2, Opcode.PV: 2, Opcode.SOFTMAX: 2,
                  Opcode.VOP: 4, Opcode.NORM: 1, Opcode.ACT: 2, Opcode.MERGE: 1, Opcode.BARRIER: 3}
MALFORMATIONS = ("opcode", "reserved", "unused_field", "func_reserved", "zero_count", "bad_func", "tensor_size",
                 "misaligned", "buffer_range", "memory_range",
                 # two faults at once: the documented order decides the code
                 "reserved+zero_count", "unused_field+bad_func", "bad_func+buffer_range", "misaligned+buffer_range",
                 "buffer_range+memory_range")


@dataclass(frozen=True)
class Space:
    """Where the bench's valid tensors go: loads read [0, store_base), stores write [store_base, memory_size)."""
    params: ControllerParams
    store_base: int
    memory_size: int

    @property
    def buffer_rows(self) -> int:
        return 1 << self.params.buffer_address_bits

    @property
    def max_tensor_bytes(self) -> int:
        return self.params.mmu_params().max_tensor_bytes


def rows(instruction: Instruction, operand: Operand, row_bytes: int, scalar: bool = False) -> int:
    counts = {name: getattr(instruction, name) for name in COUNT_FIELDS} | {"1": 1, "2": 2}
    inner = 1 if scalar else counts[operand.inner]
    size = 2 if operand.half_if == "narrow" and instruction.func >> 7 else operand.element_bytes
    return -(-counts[operand.outer] * inner * size // row_bytes)


def _scalar(instruction: Instruction, operand: Operand) -> bool:
    return ((operand.scalar_if == "reduce" and (instruction.func >> 4) & 3 != 0)
            or (operand.scalar_if == "broadcast" and (instruction.func >> 6) & 1 == 1))


def valid(rng: random.Random, opcode: Opcode, space: Space) -> Instruction:
    """A well-formed instruction: counts of 1 … 40 (m: 1 … 4), operands at random rows that fit the buffer."""
    kind = KINDS[opcode]
    p = space.params
    counts = {name: rng.randint(1, 4 if name == "m" else 40) for name in kind.counts}
    func = 0
    if kind.func == "vop":
        reduce = rng.choice(list(Reduce))
        func = vop_func(rng.choice(VOP_OPS), reduce, rng.random() < 0.3,
                        reduce == Reduce.NONE and rng.random() < 0.5)
    elif kind.func == "act":
        func = act_func(rng.choice(ACT_OPS))
    instruction = Instruction(opcode.value, func=func, **counts)
    if kind.address:
        size = rng.randint(1, space.max_tensor_bytes)
        low, high = (space.store_base, space.memory_size) if opcode == Opcode.STORE else (0, space.store_base)
        address = rng.randrange(low, high - size + 1) // p.row_bytes * p.row_bytes
        instruction = replace(instruction, n=size, address=address)
    placed = {}
    for name, operand in kind.operands.items():
        extent = rows(instruction, operand, p.row_bytes, _scalar(instruction, operand))
        placed[name] = rng.randint(0, space.buffer_rows - extent)
    return replace(instruction, **placed)


def program(rng: random.Random, length: int, space: Space, done: bool = True) -> list[Instruction]:
    """`length` random instructions (BARRIERs among them), then DONE unless `done` is false."""
    opcodes = rng.choices(list(OPCODE_WEIGHTS), weights=list(OPCODE_WEIGHTS.values()), k=length)
    body = [valid(rng, opcode, space) for opcode in opcodes]
    return body + [Instruction(Opcode.DONE.value)] if done else body


def malformed(rng: random.Random, how: str, space: Space) -> Instruction:
    """An instruction wrong in the way `how` names (one of MALFORMATIONS, or several joined by "+", which the
    error order decides between)."""
    if how == "opcode":
        known = {op.value for op in Opcode}
        return Instruction(rng.choice([v for v in range(256) if v not in known]), n=rng.randint(0, 3))
    parts = how.split("+")
    candidates = set(Opcode)
    for part in parts:
        candidates &= set(_CANDIDATES[part]())
    opcode = rng.choice(sorted(candidates, key=lambda op: op.value))
    instruction = valid(rng, opcode, space) if KINDS[opcode].counts else Instruction(opcode.value)
    for part in parts:
        instruction = _break(rng, part, instruction, space)
    return instruction


_CANDIDATES = {
    "reserved": lambda: list(Opcode),
    "unused_field": lambda: [op for op in Opcode if _unused(op)],
    "func_reserved": lambda: [op for op in Opcode if op != Opcode.VOP],   # every bit of VOP's func has a meaning
    "zero_count": lambda: [op for op in Opcode if KINDS[op].counts],
    "bad_func": lambda: [Opcode.VOP, Opcode.ACT],
    "tensor_size": lambda: [Opcode.LOAD, Opcode.STORE],
    "misaligned": lambda: [Opcode.LOAD, Opcode.STORE],
    "buffer_range": lambda: [op for op in Opcode if KINDS[op].operands],
    "memory_range": lambda: [Opcode.LOAD, Opcode.STORE],
}


def _break(rng: random.Random, how: str, good: Instruction, space: Space) -> Instruction:
    p, kind = space.params, KINDS[Opcode(good.opcode)]
    if how == "reserved":
        return replace(good, reserved=rng.randint(1, 255))
    if how == "unused_field":
        name = rng.choice(_unused(Opcode(good.opcode)))
        return replace(good, **{name: rng.randint(1, 255 if name == "m" else 65535)})
    if how == "func_reserved":
        bits = {"act": rng.choice([0x10, 0x20, 0x40, 0x80])}.get(kind.func, 1 << rng.randrange(8))
        return replace(good, func=good.func | bits)
    if how == "zero_count":
        return replace(good, **{rng.choice(kind.counts): 0})
    if how == "bad_func":
        if kind.func == "vop":
            return replace(good, func=rng.choice([(good.func & 0xF0) | rng.randint(8, 15), (good.func & 0xCF) | 0x30,
                                                  (good.func & 0x4F) | 0x80 | rng.choice([0x10, 0x20])]))
        return replace(good, func=rng.choice([v for v in range(16) if v not in [op.value for op in ACT_OPS]]))
    if how == "tensor_size":
        return replace(good, n=rng.randint(space.max_tensor_bytes + 1, 65535), address=0)
    if how == "misaligned":
        return replace(good, address=good.address + rng.randint(1, p.row_bytes - 1))
    if how == "buffer_range":
        name = rng.choice(list(kind.operands))
        extent = rows(good, kind.operands[name], p.row_bytes, _scalar(good, kind.operands[name]))
        return replace(good, **{name: rng.randint(space.buffer_rows - extent + 1, 65535)})
    # memory_range: the tensor ends past the address space (its start inside it or beyond).
    last_inside = ((1 << p.address_bits) - good.n) // p.row_bytes * p.row_bytes
    return replace(good, address=last_inside + p.row_bytes * rng.randint(1, 8))


def _unused(opcode: Opcode) -> list[str]:
    """The fields `opcode` does not use (LOAD/STORE's a, b, c are address bits)."""
    kind = KINDS[opcode]
    return [name for name in (*COUNT_FIELDS, *ROW_FIELDS)
            if name not in kind.counts and name not in kind.operands and not (kind.address and name in "abc")]
