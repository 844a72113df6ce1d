"""The PNM controller's instruction set (docs/pnm-isa.md): the word layout, the opcodes and the unit each goes
to, the operand shapes the range checks use, the error codes, and the assembler that encodes programs.

This module is the one source of the encoding: the RTL decodes with its layouts and tables, the benches
assemble with `encode`/`assemble`. The golden model (`tb/models/pnm_controller.py`) does not import it: it
decodes from the tables of docs/pnm-isa.md, so a mistake here shows up as a disagreement in the bench.
"""
import re
from dataclasses import dataclass, fields

from amaranth.hdl import unsigned
from amaranth.lib import data, enum

from ..pnm_vector.ports import Op, Reduce

WORD_BITS = 128
ROW_FIELD_BITS = 16
COUNT_FIELDS = ("n", "k", "m")
ROW_FIELDS = ("d", "a", "b", "c")


class Unit(enum.Enum, shape=4):
    """Where an instruction's command goes: the opcode's high nibble."""
    MMU = 0
    ARRAY = 1
    VECTOR = 2
    CONTROL = 3


def _opcode(unit: Unit, kind: int) -> int:
    return unit.value << 4 | kind


class Opcode(enum.Enum, shape=8):
    """(unit << 4) | kind; the low bits are the unit command's `kind`. 0x00 is no instruction, so a buffer
    entry the host never wrote (or wrote as zero) stops a program with `ErrorCode.OPCODE`."""
    LOAD = _opcode(Unit.MMU, 1)
    STORE = _opcode(Unit.MMU, 2)
    GEMV = _opcode(Unit.ARRAY, 0)
    SCORE = _opcode(Unit.ARRAY, 1)
    PV = _opcode(Unit.ARRAY, 2)
    SOFTMAX = _opcode(Unit.VECTOR, 0)
    VOP = _opcode(Unit.VECTOR, 1)
    NORM = _opcode(Unit.VECTOR, 2)
    ACT = _opcode(Unit.VECTOR, 3)
    MERGE = _opcode(Unit.VECTOR, 4)
    BARRIER = _opcode(Unit.CONTROL, 0)
    DONE = _opcode(Unit.CONTROL, 1)


def unit_of(opcode: Opcode) -> Unit:
    return Unit(opcode.value >> 4)


class ErrorCode(enum.Enum, shape=4):
    """Why a program stopped (status `error`); checked in this order within one instruction."""
    NONE = 0
    OPCODE = 1        # no such opcode
    RESERVED = 2      # a reserved bit, or a field the opcode does not use, is not zero
    FIELD = 3         # a used field's value is illegal (zero count, bad sub-op, oversized or misaligned tensor)
    BUFFER_RANGE = 4  # an operand runs past the end of the PNM buffer
    MEMORY_RANGE = 5  # a LOAD/STORE runs past the end of the address space
    END = 6           # the program ran past the last instruction-buffer entry without DONE
    MMU_PROTECTED = 7     # the MMU refused a STORE into a protected region (fault PROTECTED)
    MMU_OUT_OF_RANGE = 8  # the MMU refused a tensor beyond its configured memory size (fault OUT_OF_RANGE)
    MMU_MALFORMED = 9     # the MMU refused a tensor as malformed (controller and MMU parameters disagree)
    STRAY = 10        # a unit reported a completion with nothing outstanding


# R format (every opcode but LOAD/STORE): four buffer-row operands, three counts, a sub-operation.
_COMMON = {"opcode": unsigned(8), "func": unsigned(8), "m": unsigned(8), "reserved": unsigned(8),
           "n": unsigned(16), "k": unsigned(16), "d": unsigned(ROW_FIELD_BITS)}
R_FORMAT = data.StructLayout({**_COMMON, "a": unsigned(ROW_FIELD_BITS), "b": unsigned(ROW_FIELD_BITS),
                              "c": unsigned(ROW_FIELD_BITS)})
# M format (LOAD/STORE): the byte address takes the place of a, b and c.
ADDRESS_BITS = 48
M_FORMAT = data.StructLayout({**_COMMON, "address": unsigned(ADDRESS_BITS)})
INSTRUCTION = data.UnionLayout({"r": R_FORMAT, "mem": M_FORMAT})
# `func` of VOP (the vector unit's op and reduce, whether b is one scalar per vector, whether d is FP16) and of ACT.
VOP_FUNC = data.StructLayout({"op": Op, "reduce": Reduce, "broadcast": 1, "narrow": 1})
ACT_FUNC = data.StructLayout({"op": Op, "reserved": 4})
VOP_OPS = tuple(op for op in Op if op.value < Op.SOFTMAX.value)  # SOFTMAX and MERGE have their own opcodes
ACT_OPS = (Op.SILU, Op.GELU)
assert INSTRUCTION.size == WORD_BITS


@dataclass(frozen=True)
class Operand:
    """A buffer operand of `outer` × `inner` elements of `element_bytes` each, contiguous from its row; a count
    is a field name or a literal. `scalar_if` (VOP only): the func bit that makes the operand one element per
    vector (`reduce` for the result, `broadcast` for b). `half_if` (VOP only): the func bit that makes the
    elements FP16 (`narrow` for the result)."""
    outer: str
    inner: str
    element_bytes: int
    scalar_if: str | None = None
    half_if: str | None = None


@dataclass(frozen=True)
class Kind:
    """What an opcode uses: its count fields (each 1 or more) and its buffer operands; every other field,
    and `reserved`, must be zero. `func`: which sub-operation layout `func` has, if any."""
    counts: str
    operands: dict[str, Operand]
    func: str | None = None
    address: bool = False


FP16, FP32 = 2, 4
_MEMORY = Kind("n", {"d": Operand("1", "n", 1)}, address=True)  # n bytes from (LOAD) or to (STORE) rows d, …
_MATRIX = Kind("nkm", {"d": Operand("m", "n", FP32), "a": Operand("m", "k", FP16), "b": Operand("n", "k", FP16)})
KINDS: dict[Opcode, Kind] = {
    Opcode.LOAD: _MEMORY,
    Opcode.STORE: _MEMORY,
    # d[j][i] = Σ_t a[j][t]·b[i][t]: GEMV (a: m activations, b: n weight rows) and SCORE (a: m queries,
    # b: n keys) share the arithmetic; the array runs them in MLP and attention mode.
    Opcode.GEMV: _MATRIX,
    Opcode.SCORE: _MATRIX,
    # d[h][e] = Σ_t a[h][t]·b[t][e]: probabilities of m heads over n tokens times n value rows of k elements.
    Opcode.PV: Kind("nkm", {"d": Operand("m", "k", FP32), "a": Operand("m", "n", FP16),
                            "b": Operand("n", "k", FP16)}),
    # Online-softmax step of m heads over n scores: state d (m, l per head), scores a, probabilities b (FP16),
    # rescale factors c (one per head).
    Opcode.SOFTMAX: Kind("nm", {"d": Operand("m", "2", FP32), "a": Operand("m", "n", FP32),
                                "b": Operand("m", "n", FP16), "c": Operand("m", "1", FP32)}),
    Opcode.VOP: Kind("nm", {"d": Operand("m", "n", FP32, scalar_if="reduce", half_if="narrow"),
                            "a": Operand("m", "n", FP32),
                            "b": Operand("m", "n", FP32, scalar_if="broadcast")}, func="vop"),
    # RMSNorm of m vectors of n: d = a · rsqrt(mean(a²) + ε) · b (gains); c holds the FP32 constants 1/n, ε.
    Opcode.NORM: Kind("nm", {"d": Operand("m", "n", FP32), "a": Operand("m", "n", FP32),
                             "b": Operand("1", "n", FP32), "c": Operand("1", "2", FP32)}),
    Opcode.ACT: Kind("nm", {"d": Operand("m", "n", FP32), "a": Operand("m", "n", FP32)}, func="act"),
    # FlashDecoding merge of partial 2 (state b, output c) into partial 1 (state a, output d), in place.
    Opcode.MERGE: Kind("km", {"d": Operand("m", "k", FP32), "a": Operand("m", "2", FP32),
                              "b": Operand("m", "2", FP32), "c": Operand("m", "k", FP32)}),
    Opcode.BARRIER: Kind("", {}),
    Opcode.DONE: Kind("", {}),
}
assert set(KINDS) == set(Opcode)


# ---- the assembler ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Instruction:
    """One instruction's fields as integers (any values that fit their fields, so malformed instructions can be
    written too). `address` is the M format's byte address; it shares bits with a, b and c."""
    opcode: int
    func: int = 0
    m: int = 0
    n: int = 0
    k: int = 0
    d: int = 0
    a: int = 0
    b: int = 0
    c: int = 0
    address: int = 0
    reserved: int = 0

    def encode(self) -> int:
        if self.address and (self.a or self.b or self.c):
            raise ValueError("address shares its bits with a, b and c: give one or the other")
        values = {f.name: int(getattr(self, f.name)) for f in fields(self)}
        word = _pack(R_FORMAT, {name: v for name, v in values.items() if name != "address"})
        return word | _pack(data.StructLayout({"address": M_FORMAT["address"].shape}), {"address": values["address"]},
                            offset=M_FORMAT["address"].offset)


def _pack(layout: data.StructLayout, values: dict[str, int], offset: int = 0) -> int:
    """The fields at the offsets `layout` gives them; a value that does not fit its field is refused."""
    word = 0
    for name, value in values.items():
        field = layout[name]
        if not 0 <= value < 1 << field.width:
            raise ValueError(f"{name}={value} does not fit its {field.width}-bit field")
        word |= value << (offset + field.offset)
    return word


def vop_func(op: Op, reduce: Reduce = Reduce.NONE, broadcast: bool = False, narrow: bool = False) -> int:
    return int(VOP_FUNC.const({"op": op, "reduce": reduce, "broadcast": int(broadcast),
                               "narrow": int(narrow)}).as_bits())


def act_func(op: Op) -> int:
    return int(ACT_FUNC.const({"op": op}).as_bits())


def decode_fields(word: int) -> Instruction:
    """The fields of a word, as the assembler names them (for messages and the disassembler)."""
    values = {name: (word >> field.offset) & ((1 << field.width) - 1) for name, field in R_FORMAT}
    if values["opcode"] in (Opcode.LOAD.value, Opcode.STORE.value):
        values.update(a=0, b=0, c=0, address=word >> M_FORMAT["address"].offset)
    return Instruction(**values)


# One line per instruction: `MNEMONIC field=value ...` (decimal or 0x hex); VOP and ACT take `op=` an `Op` name
# and VOP also `reduce=` a `Reduce` name, `broadcast=0/1` and `narrow=0/1`; `#` starts a comment.
_TOKEN = re.compile(r"(\w+)=(\S+)")


def assemble(text: str) -> list[int]:
    """Encode a program written one instruction per line."""
    words = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#")[0].strip()
        if not line:
            continue
        mnemonic, _, rest = line.partition(" ")
        try:
            args = dict(_TOKEN.findall(rest))
            if len(args) != len(rest.split()):
                raise ValueError(f"cannot read {rest!r}: write field=value pairs")
            words.append(_instruction(_name(Opcode, mnemonic.upper(), "instruction"), args).encode())
        except ValueError as error:
            raise ValueError(f"line {number}: {line!r}: {error}") from None
    return words


def _name(kind: type[enum.Enum], name: str, what: str) -> enum.Enum:
    if name not in kind.__members__:
        raise ValueError(f"no {what} {name!r} (known: {', '.join(kind.__members__)})")
    return kind[name]


def _instruction(opcode: Opcode, args: dict[str, str]) -> Instruction:
    func = 0
    if opcode in (Opcode.VOP, Opcode.ACT) and "op" not in args:
        raise ValueError(f"{opcode.name} needs op=")
    if opcode == Opcode.VOP:
        func = vop_func(_name(Op, args.pop("op"), "vector op"), _name(Reduce, args.pop("reduce", "NONE"), "reduce"),
                        bool(int(args.pop("broadcast", "0"))), bool(int(args.pop("narrow", "0"))))
    elif opcode == Opcode.ACT:
        func = act_func(_name(Op, args.pop("op"), "vector op"))
    known = {f.name for f in fields(Instruction)} - {"opcode", "func"}
    if unknown := set(args) - known:
        raise ValueError(f"no field {', '.join(sorted(unknown))} (fields: {', '.join(sorted(known))})")
    return Instruction(opcode.value, func=func, **{name: int(value, 0) for name, value in args.items()})


def disassemble(word: int) -> str:
    """One line of `assemble`'s syntax; a sub-op field that names no sub-op is shown as a raw `func`."""
    fields_ = decode_fields(word)
    if fields_.opcode not in {op.value for op in Opcode}:
        return f"0x{word:032x} (no opcode 0x{fields_.opcode:02x})"
    opcode = Opcode(fields_.opcode)
    parts, func = [opcode.name], fields_.func
    ops = {op.value: op.name for op in Op}
    if opcode in (Opcode.VOP, Opcode.ACT) and func & 0xF in ops and not func & (0 if opcode == Opcode.VOP else 0xF0) \
            and (opcode == Opcode.ACT or (func >> 4) & 3 in {r.value for r in Reduce}):
        parts.append(f"op={ops[func & 0xF]}")
        if opcode == Opcode.VOP:
            parts += [f"reduce={Reduce((func >> 4) & 3).name}", f"broadcast={(func >> 6) & 1}",
                      f"narrow={func >> 7}"]
        func = 0
    for f in fields(fields_)[1:]:
        value = func if f.name == "func" else getattr(fields_, f.name)
        if value:
            parts.append(f"{f.name}={value:#x}" if f.name == "address" else f"{f.name}={value}")
    return " ".join(parts)
