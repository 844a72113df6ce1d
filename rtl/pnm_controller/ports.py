"""Payload layouts of the PNM controller's ports: the host's program writes, start and status; one command and
one completion port per unit. The MMU's are the MMU's own (`rtl/mmu/ports.py`), so the two connect directly."""
from amaranth.hdl import unsigned
from amaranth.lib import data, enum

from ..mmu import ports as mmu_ports
from ..pnm_vector.ports import Op, Reduce
from .isa import WORD_BITS, ErrorCode, Opcode, Unit
from .params import ControllerParams


class State(enum.Enum, shape=2):
    IDLE = 0     # after reset: nothing started yet
    RUNNING = 1
    DONE = 2     # DONE retired: every command of the program completed
    ERROR = 3    # stopped with `error` (commands already issued may still be completing)


class ArrayKind(enum.Enum, shape=2):
    """The low bits of the array opcodes."""
    GEMV = Opcode.GEMV.value & 0xF
    SCORE = Opcode.SCORE.value & 0xF
    PV = Opcode.PV.value & 0xF


class VectorKind(enum.Enum, shape=3):
    """The low bits of the vector-unit opcodes."""
    SOFTMAX = Opcode.SOFTMAX.value & 0xF
    VOP = Opcode.VOP.value & 0xF
    NORM = Opcode.NORM.value & 0xF
    ACT = Opcode.ACT.value & 0xF
    MERGE = Opcode.MERGE.value & 0xF


KIND_SHAPES = {Unit.ARRAY: ArrayKind, Unit.VECTOR: VectorKind}


def program_write(p: ControllerParams) -> data.StructLayout:
    """The host writes instruction `word` at `address` (while no program runs)."""
    return data.StructLayout({"address": p.pc_bits, "word": WORD_BITS})


def start(p: ControllerParams) -> data.StructLayout:
    return data.StructLayout({"pc": p.pc_bits})


def status(p: ControllerParams) -> data.StructLayout:
    """`pc`: DONE's address, or where the program stopped (an MMU fault: the faulting command's `id`; END: `depth`).
    While running: the instruction at the head of the issue stage, one cycle late."""
    return data.StructLayout({"state": State, "error": ErrorCode, "pc": p.pc_bits + 1})


def mmu_command(p: ControllerParams) -> data.StructLayout:
    return mmu_ports.pnm_instruction(p.mmu_params())


def mmu_completion(p: ControllerParams) -> data.StructLayout:
    return mmu_ports.completion(p.mmu_params())


def _operands(p: ControllerParams, rows: str) -> dict:
    return {**{name: unsigned(p.buffer_address_bits) for name in rows}, "n": unsigned(16), "k": unsigned(16),
            "m": unsigned(8)}


def array_command(p: ControllerParams) -> data.StructLayout:
    """GEMV/SCORE: d[j][i] = Σ_t a[j][t]·b[i][t]; PV: d[h][e] = Σ_t a[h][t]·b[t][e] (docs/pnm-isa.md)."""
    return data.StructLayout({"kind": ArrayKind, **_operands(p, "dab"), "id": p.id_bits})


def vector_command(p: ControllerParams) -> data.StructLayout:
    """`op`, `reduce`, `broadcast`, `narrow`: VOP's sub-operation (ACT: `op` alone); zero for the other kinds."""
    return data.StructLayout({"kind": VectorKind, "op": Op, "reduce": Reduce, "broadcast": 1, "narrow": 1,
                              **_operands(p, "dabc"), "id": p.id_bits})


def unit_completion(p: ControllerParams) -> data.StructLayout:
    """One per command, in any order; `id` echoes the command's (the controller only counts them)."""
    return data.StructLayout({"id": p.id_bits})
