"""The controller's golden model: its tables are docs/reference/pnm-isa.md's (and so are the RTL's), and it decodes,
checks and runs programs as hand-worked examples say."""
import re
from pathlib import Path

import pytest

from rtl.pnm_controller import isa
from tb.models import mmu as mmu_model
from tb.models import pnm_controller as model

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference" / "pnm-isa.md"
SIZES = {"bytes": 1, "FP16": 2, "FP32": 4}
# A small configuration: 64 words, 1,024 rows of 32 B, a 1 MiB address space, 128-byte tensors.
CONFIG = model.Config(depth=64, buffer_rows=1024, address_bits=20, row_bytes=32, max_tensor_bytes=128, id_bits=8)


def table(heading: str) -> list[list[str]]:
    """The rows (cells stripped, header and rule dropped) of the first table after `heading`."""
    lines = DOC.read_text().split(f"\n{heading}\n", 1)[1].splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def shape(cell: str) -> tuple[str, str, int] | None:
    """`[outer × ]inner TYPE` (an annotation in brackets ignored) as (outer, inner, bytes); None for "—"."""
    if cell == "—":
        return None
    match = re.fullmatch(r"(?:(\w+) × )?(\w+) (bytes|FP16|FP32)(?: \(.*\))?", cell)
    assert match, cell
    outer, inner, kind = match.groups()
    return outer or "1", inner, SIZES[kind]


def doc_fields() -> dict[str, tuple[int, int]]:
    out = {}
    for name, bits, _ in table("## Instruction word"):
        high, low = (int(v) for v in bits.split(":"))
        out[name.strip("`")] = (low, high - low + 1)
    return out


def doc_opcodes() -> dict[int, tuple]:
    out = {}
    for opcode, mnemonic, unit, counts, *operands, func in table("## Opcodes"):
        shapes = {name: s for name, cell in zip("dabc", operands, strict=True) if (s := shape(cell)) is not None}
        out[int(opcode, 16)] = (mnemonic, unit, counts.replace(" ", ""), shapes, None if func == "—" else func)
    return out


def test_the_models_tables_are_the_documents() -> None:
    fields = doc_fields()
    assert fields.pop("address") == model.ADDRESS
    assert fields == model.FIELDS
    assert {code: entry[:4] for code, entry in doc_opcodes().items()} == model.OPCODES
    assert {int(code): name for code, name, _ in table("## Checks and error codes")} == {
        getattr(model, name): name for name in ("NONE", "OPCODE", "RESERVED", "FIELD", "BUFFER_RANGE", "MEMORY_RANGE",
                                                "END", "MMU_PROTECTED", "MMU_OUT_OF_RANGE", "MMU_MALFORMED", "STRAY")}


def test_the_rtls_tables_are_the_documents() -> None:
    fields = doc_fields()
    assert fields.pop("address") == (isa.M_FORMAT["address"].offset, isa.M_FORMAT["address"].width)
    assert fields == {name: (field.offset, field.width) for name, field in isa.R_FORMAT}
    kinds = {}
    for opcode, kind in isa.KINDS.items():
        shapes = {name: (o.outer, o.inner, o.element_bytes) for name, o in kind.operands.items()}
        kinds[opcode.value] = (opcode.name, isa.unit_of(opcode).name.lower(), kind.counts, shapes,
                               kind.func.upper() if kind.func else None)
    assert kinds == {code: (m, "control" if u == "control" else u, c, s, f)
                     for code, (m, u, c, s, f) in doc_opcodes().items()}
    assert {int(code): name for code, name, _ in table("## Checks and error codes")} == {
        e.value: e.name for e in isa.ErrorCode}


def word(opcode: int, **fields: int) -> int:
    """A word built from the model's own field table (the assembler is not the model's to trust)."""
    out = opcode
    for name, value in fields.items():
        low, _ = model.ADDRESS if name == "address" else model.FIELDS[name]
        out |= value << low
    return out


GEMV = dict(n=16, k=32, m=2)  # d: 2 × 16 FP32 = 4 rows; a: 2 × 32 FP16 = 4 rows; b: 16 × 32 FP16 = 32 rows


@pytest.mark.parametrize("instruction,code", [
    (word(0x00), model.OPCODE),
    (word(0x13, **GEMV), model.OPCODE),
    (word(0x10, **GEMV), model.NONE),
    (word(0x10, **GEMV, reserved=1), model.RESERVED),
    (word(0x10, **GEMV, c=5), model.RESERVED),          # GEMV has no c
    (word(0x10, **GEMV, func=1), model.RESERVED),       # nor a func
    (word(0x10, n=16, k=0, m=2), model.FIELD),
    (word(0x10, n=16, k=0, m=2, c=1), model.RESERVED),  # RESERVED is checked before FIELD
    (word(0x10, **GEMV, d=1020), model.NONE),           # rows 1020 … 1023: the last four
    (word(0x10, **GEMV, d=1021), model.BUFFER_RANGE),
    (word(0x10, **GEMV, b=992), model.NONE),
    (word(0x10, **GEMV, b=993), model.BUFFER_RANGE),
    (word(0x21, n=8, m=3, func=0x01, d=1021), model.NONE),         # VOP ADD: 3 × 8 FP32 = 3 rows
    (word(0x21, n=8, m=3, func=0x01, d=1022), model.BUFFER_RANGE),
    (word(0x21, n=8, m=3, func=0x11, d=1023), model.NONE),         # with a sum: 3 FP32 = 1 row
    (word(0x21, n=8, m=3, func=0x41, b=1023), model.NONE),         # broadcast b: 3 FP32 = 1 row
    (word(0x21, n=8, m=3, func=0x41, b=1024), model.BUFFER_RANGE),
    (word(0x21, n=8, m=3, func=0x08), model.FIELD),                # op SOFTMAX is not a VOP op
    (word(0x21, n=8, m=3, func=0x31), model.FIELD),                # reduce 3
    (word(0x21, n=8, m=3, func=0x81, d=1022), model.NONE),         # narrow: 3 × 8 FP16 = 2 rows
    (word(0x21, n=8, m=3, func=0x81, d=1023), model.BUFFER_RANGE),
    (word(0x21, n=8, m=3, func=0x91), model.FIELD),                # narrow with a reduction
    (word(0x23, n=8, m=1, func=0x06), model.NONE),                 # ACT SILU
    (word(0x23, n=8, m=1, func=0x02), model.FIELD),
    (word(0x23, n=8, m=1, func=0x16), model.RESERVED),
    (word(0x23, n=8, m=1, func=0x06, b=1), model.RESERVED),        # ACT has no b
    (word(0x01, n=128, d=1020, address=0x400), model.NONE),        # 128 B = 4 rows
    (word(0x01, n=129, d=0, address=0x400), model.FIELD),          # beyond the largest tensor
    (word(0x01, n=100, d=1021, address=0x400), model.BUFFER_RANGE),
    (word(0x01, n=100, d=0, address=0x401), model.FIELD),          # not a whole row
    (word(0x01, n=96, d=0, address=(1 << 20) - 96), model.NONE),   # ends at the end of the address space
    (word(0x02, n=96, d=0, address=(1 << 20) - 64), model.MEMORY_RANGE),
    (word(0x01, n=32, d=0, address=1 << 40), model.MEMORY_RANGE),
    (word(0x01, n=32, k=1, address=0x400), model.RESERVED),
    (word(0x30), model.NONE),
    (word(0x31, m=1), model.RESERVED),
])
def test_check_gives_the_documented_code(instruction: int, code: int) -> None:
    assert model.check(instruction, 5, CONFIG) == code


def test_an_address_past_the_buffer_is_the_end() -> None:
    assert model.check(word(0x31), CONFIG.depth, CONFIG) == model.END


def test_commands_carry_the_fields_and_the_address_as_id() -> None:
    gemv = model.command(word(0x11, **GEMV, d=7, a=8, b=9), 300, CONFIG)
    assert (gemv.unit, gemv.fields) == ("array", {"kind": 1, "d": 7, "a": 8, "b": 9, "n": 16, "k": 32, "m": 2,
                                                  "id": 300 - 256})
    store = model.command(word(0x02, n=64, d=3, address=0x8000), 4, CONFIG)
    assert (store.unit, store.fields) == ("mmu", {"base": 0x8000, "size": 64, "dest": 3, "store": 1, "id": 4})
    vop = model.command(word(0x21, n=8, m=2, func=0x52, d=1, a=2, b=3), 9, CONFIG)
    assert vop.fields == {"kind": 1, "op": 2, "reduce": 1, "broadcast": 1, "narrow": 0, "d": 1, "a": 2, "b": 3,
                          "c": 0, "n": 8, "k": 0, "m": 2, "id": 9}
    assert model.command(word(0x30), 0, CONFIG) is None


def program(*words: int, at: int = 0) -> list[int]:
    out = [0] * CONFIG.depth
    out[at:at + len(words)] = words
    return out


LOAD = word(0x01, n=32, address=0x40)
STORE_PROTECTED = word(0x02, n=32, address=0x100)
SOFTMAX = word(0x20, n=4, m=1, a=10, b=20, c=30)


def test_a_run_counts_barrier_epochs_and_stops_at_done() -> None:
    out = model.run(program(LOAD, SOFTMAX, word(0x30), LOAD, word(0x30), word(0x30), SOFTMAX, word(0x31), LOAD,
                            at=3), 3, CONFIG)
    assert [(c.unit, c.pc, c.epoch) for c in out.commands] == [("mmu", 3, 0), ("vector", 4, 0), ("mmu", 6, 1),
                                                              ("vector", 9, 3)]
    assert (out.required, out.state, out.error, out.pc) == (4, "done", model.NONE, 10)


def test_a_run_stops_at_its_first_bad_instruction_or_the_end() -> None:
    out = model.run(program(LOAD, word(0x10, **GEMV, reserved=2), LOAD, word(0x31)), 0, CONFIG)
    assert (len(out.commands), out.required, out.state, out.error, out.pc) == (1, 1, "error", model.RESERVED, 1)
    words = program(*[LOAD] * 4, at=CONFIG.depth - 4)
    out = model.run(words, CONFIG.depth - 4, CONFIG)
    assert (len(out.commands), out.error, out.pc) == (4, model.END, CONFIG.depth)
    assert model.run(program(), 0, CONFIG).error == model.OPCODE  # an empty buffer


def protected(fields: dict) -> int:
    return model.mmu_faults(32, 4, 1024, 1 << 20, [(0, 0x1000)])(fields)


def test_an_mmu_fault_stops_the_program_and_its_epoch_may_run_on() -> None:
    words = program(LOAD, SOFTMAX, word(0x30), LOAD, STORE_PROTECTED, SOFTMAX, LOAD, word(0x30), LOAD, word(0x31))
    out = model.run(words, 0, CONFIG, protected)
    assert [c.pc for c in out.commands] == [0, 1, 3, 4, 5, 6]  # the fault's epoch runs to its BARRIER
    assert (out.required, out.state, out.error, out.pc) == (4, "error", model.MMU_PROTECTED, 4)
    assert model.run(words, 0, CONFIG).state == "done"  # a load is allowed anywhere: no fault without the store


def test_a_fault_and_a_bad_instruction_in_one_epoch_is_refused() -> None:
    with pytest.raises(ValueError, match="depends on timing"):
        model.run(program(STORE_PROTECTED, word(0x00)), 0, CONFIG, protected)


def test_mmu_fault_codes_map_to_their_own_errors() -> None:
    assert model.MMU_FAULTS == {mmu_model.PROTECTED: 7, mmu_model.OUT_OF_RANGE: 8, mmu_model.MALFORMED: 9}


def test_the_documents_example_runs_to_done() -> None:
    listing = DOC.read_text().split("An attention block of one GQA group", 1)[1].split("```")[1]
    words = isa.assemble(listing)
    config = model.Config(depth=1024, buffer_rows=1 << 15, address_bits=36, row_bytes=32, max_tensor_bytes=1024,
                          id_bits=8)
    out = model.run(words + [0] * (1024 - len(words)), 0, config)
    assert (out.state, out.error, len(out.commands)) == ("done", model.NONE, 7)
