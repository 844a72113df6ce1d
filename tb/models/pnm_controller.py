"""Reference behaviour of the PNM controller, in plain Python, written from docs/pnm-isa.md and never from the RTL:
its tables (field bits, opcodes, operand shapes, error codes) are typed in here again from the document, so that
an encoding mistake in `rtl/pnm_controller/isa.py` (shared by the RTL and the assembler) shows up as a
disagreement. `tests/tb/test_pnm_controller_golden.py` checks these tables against the document's.

Given the instruction buffer's words and a start address, `run` gives the commands the controller issues to each
unit in order, which BARRIER epoch each belongs to, and how the program ends."""
from collections.abc import Callable
from dataclasses import dataclass

from . import mmu as mmu_model

# "Instruction word": field → (lowest bit, width). LOAD/STORE's byte address takes the bits of a, b and c.
FIELDS = {"opcode": (0, 8), "func": (8, 8), "m": (16, 8), "reserved": (24, 8), "n": (32, 16), "k": (48, 16),
          "d": (64, 16), "a": (80, 16), "b": (96, 16), "c": (112, 16)}
ADDRESS = (80, 48)

# "Opcodes": opcode → (mnemonic, unit, count fields used, operands {field: (outer, inner, bytes per element)}).
OPCODES = {
    0x01: ("LOAD", "mmu", "n", {"d": ("1", "n", 1)}),
    0x02: ("STORE", "mmu", "n", {"d": ("1", "n", 1)}),
    0x10: ("GEMV", "array", "nkm", {"d": ("m", "n", 4), "a": ("m", "k", 2), "b": ("n", "k", 2)}),
    0x11: ("SCORE", "array", "nkm", {"d": ("m", "n", 4), "a": ("m", "k", 2), "b": ("n", "k", 2)}),
    0x12: ("PV", "array", "nkm", {"d": ("m", "k", 4), "a": ("m", "n", 2), "b": ("n", "k", 2)}),
    0x20: ("SOFTMAX", "vector", "nm", {"d": ("m", "2", 4), "a": ("m", "n", 4), "b": ("m", "n", 2),
                                       "c": ("m", "1", 4)}),
    0x21: ("VOP", "vector", "nm", {"d": ("m", "n", 4), "a": ("m", "n", 4), "b": ("m", "n", 4)}),
    0x22: ("NORM", "vector", "nm", {"d": ("m", "n", 4), "a": ("m", "n", 4), "b": ("1", "n", 4), "c": ("1", "2", 4)}),
    0x23: ("ACT", "vector", "nm", {"d": ("m", "n", 4), "a": ("m", "n", 4)}),
    0x24: ("MERGE", "vector", "km", {"d": ("m", "k", 4), "a": ("m", "2", 4), "b": ("m", "2", 4),
                                     "c": ("m", "k", 4)}),
    0x30: ("BARRIER", "control", "", {}),
    0x31: ("DONE", "control", "", {}),
}
# "func": VOP = op (bits 0–3, vector-unit ops MAX … GELU = 0 … 7), reduce (bits 4–5: 0 none, 1 sum, 2 max),
# broadcast (bit 6), narrow (bit 7: d is FP16; not with a reduction); ACT = op (bits 0–3: SILU 6 or GELU 7),
# bits 4–7 reserved.
VOP_OPS, REDUCES, ACT_OPS = range(8), range(3), (6, 7)

# "Error codes".
NONE, OPCODE, RESERVED, FIELD, BUFFER_RANGE, MEMORY_RANGE, END = 0, 1, 2, 3, 4, 5, 6
MMU_PROTECTED, MMU_OUT_OF_RANGE, MMU_MALFORMED, STRAY = 7, 8, 9, 10
MMU_FAULTS = {mmu_model.PROTECTED: MMU_PROTECTED, mmu_model.OUT_OF_RANGE: MMU_OUT_OF_RANGE,
              mmu_model.MALFORMED: MMU_MALFORMED}


@dataclass(frozen=True)
class Config:
    depth: int
    buffer_rows: int
    address_bits: int
    row_bytes: int
    max_tensor_bytes: int
    id_bits: int


@dataclass(frozen=True)
class Command:
    unit: str      # "mmu", "array" or "vector"
    fields: dict   # the command port's payload fields
    pc: int
    epoch: int     # BARRIERs before it: it waits for every command of an earlier epoch to complete


@dataclass(frozen=True)
class Outcome:
    commands: list[Command]
    """Every command the controller may issue, in program order."""
    required: int
    """How many of them it must issue (after an MMU fault, the rest of that fault's epoch may or may not go)."""
    state: str     # "done" or "error"
    error: int
    pc: int


def field(word: int, name: str) -> int:
    low, width = ADDRESS if name == "address" else FIELDS[name]
    return (word >> low) & ((1 << width) - 1)


def _operand_rows(word: int, name: str, shape: tuple[str, str, int], row_bytes: int) -> int:
    outer, inner, size = shape
    count = {f: field(word, f) for f in "nkm"} | {"1": 1, "2": 2}
    func = field(word, "func")
    if field(word, "opcode") == 0x21 and ((name == "d" and (func >> 4) & 3) or (name == "b" and (func >> 6) & 1)):
        inner = "1"  # VOP: one result per vector with a reduction; one b per vector with broadcast
    if field(word, "opcode") == 0x21 and name == "d" and func >> 7:
        size = 2     # VOP with narrow: the results are FP16
    return -(-count[outer] * count[inner] * size // row_bytes)


def check(word: int, pc: int, config: Config) -> int:
    """The error code of the instruction at `pc` (NONE if it may issue), in the documented order."""
    if pc >= config.depth:
        return END
    opcode = field(word, "opcode")
    if opcode not in OPCODES:
        return OPCODE
    name, _, counts, operands = OPCODES[opcode]
    memory = name in ("LOAD", "STORE")
    func = field(word, "func")
    reserved_func = {"VOP": 0, "ACT": func & 0xF0}.get(name, func)
    unused = [f for f in "nkm" if f not in counts] + [f for f in "dabc" if f not in operands and not memory]
    if field(word, "reserved") or reserved_func or any(field(word, f) for f in unused):
        return RESERVED
    if any(field(word, f) == 0 for f in counts):
        return FIELD
    narrow_reduced = func >> 7 and (func >> 4) & 3
    if name == "VOP" and (func & 0xF not in VOP_OPS or (func >> 4) & 3 not in REDUCES or narrow_reduced):
        return FIELD
    if name == "ACT" and func & 0xF not in ACT_OPS:
        return FIELD
    address, size = field(word, "address"), field(word, "n")
    if memory and (size > config.max_tensor_bytes or address % config.row_bytes):
        return FIELD
    if any(field(word, f) + _operand_rows(word, f, shape, config.row_bytes) > config.buffer_rows
           for f, shape in operands.items()):
        return BUFFER_RANGE
    if memory and address + size > 1 << config.address_bits:
        return MEMORY_RANGE
    return NONE


def command(word: int, pc: int, config: Config) -> Command | None:
    """The command a checked instruction sends (None for BARRIER and DONE); epoch 0 (`run` sets it)."""
    opcode = field(word, "opcode")
    name, unit, _, _ = OPCODES[opcode]
    ident = pc % (1 << config.id_bits)
    if unit == "mmu":
        fields = {"base": field(word, "address"), "size": field(word, "n"), "dest": field(word, "d"),
                  "store": int(name == "STORE"), "id": ident}
    elif unit == "array":
        fields = {"kind": opcode & 0xF, **{f: field(word, f) for f in ("d", "a", "b", "n", "k", "m")}, "id": ident}
    elif unit == "vector":
        func = field(word, "func")
        fields = {"kind": opcode & 0xF, "op": func & 0xF, "reduce": (func >> 4) & 3, "broadcast": (func >> 6) & 1,
                  "narrow": func >> 7,
                  **{f: field(word, f) for f in ("d", "a", "b", "c", "n", "k", "m")}, "id": ident}
    else:
        return None
    return Command(unit, fields, pc, 0)


def run(words: list[int], start: int, config: Config,
        mmu_fault: Callable[[dict], int] = lambda fields: mmu_model.NONE) -> Outcome:
    """The program in `words` (the whole buffer) from `start`. `mmu_fault` gives the MMU's fault code for an MMU
    command (the bench's memory configuration); the first faulting command stops the program."""
    commands, epoch, pc, fault = [], 0, start, None
    while True:
        error = check(words[pc] if pc < config.depth else 0, pc, config)
        if error != NONE:
            if fault is not None:
                raise ValueError(f"pc {pc}: a malformed instruction in the epoch of an MMU fault: which stops the "
                                 f"program first depends on timing")
            return _stop(commands, fault, "error", error, pc)
        found = command(words[pc], pc, config)
        name = OPCODES[field(words[pc], "opcode")][0]
        if found is None and (name == "DONE" or fault is not None):
            return _stop(commands, fault, "done", NONE, pc)
        if found is None:
            epoch += 1
        else:
            commands.append(Command(found.unit, found.fields, pc, epoch))
            if fault is None and found.unit == "mmu" and (code := mmu_fault(found.fields)) != mmu_model.NONE:
                fault = (len(commands), MMU_FAULTS[code], found.fields["id"])
        pc += 1


def _stop(commands: list[Command], fault, state: str, error: int, pc: int) -> Outcome:
    """How the program ends: at `pc` with `state`/`error`, unless an MMU fault came first. A faulting command's
    epoch may run to its end (the controller learns of the fault only from its completion)."""
    if fault is None:
        return Outcome(commands, len(commands), state, error, pc)
    required, code, ident = fault
    return Outcome(commands, required, "error", code, ident)


def mmu_faults(request_bytes: int, max_sub_requests: int, buffer_rows: int, memory_size: int,
               regions: list[tuple[int, int]]) -> Callable[[dict], int]:
    """The fault the MMU (its golden model) gives an MMU command, for a given memory configuration."""
    def fault(fields: dict) -> int:
        instruction = mmu_model.Instruction(fields["base"], fields["size"], fields["dest"], bool(fields["store"]),
                                            fields["id"])
        return mmu_model.fault(instruction, request_bytes=request_bytes, max_sub_requests=max_sub_requests,
                               buffer_rows=buffer_rows, memory_size=memory_size, regions=regions)
    return fault
