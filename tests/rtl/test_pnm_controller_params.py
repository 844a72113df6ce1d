# amaranth: UnusedElaboratable=no
"""The controller's parameters, stated timing, and the assembler of its instruction set."""
import pytest

from rtl.mmu.params import MMUParams
from rtl.pnm_controller import isa
from rtl.pnm_controller.controller import PNMController
from rtl.pnm_controller.isa import Instruction, Opcode
from rtl.pnm_controller.params import ControllerParams
from rtl.pnm_vector.ports import Op, Reduce


def test_defaults_drive_the_mmus_defaults() -> None:
    params = ControllerParams()
    assert (params.depth, params.pc_bits, params.row_bytes) == (1024, 10, 32)
    mmu = MMUParams()
    assert params.mmu_params() == MMUParams(**{name: getattr(mmu, name) for name in (
        "address_bits", "data_bits", "id_bits", "max_sub_requests", "buffer_address_bits")})
    controller = PNMController(params)
    assert (controller.latency, controller.initiation_interval) == (4, 1)


@pytest.mark.parametrize("fields,message", [
    (dict(depth=48), "^depth=48 must be a power of two"),
    (dict(depth=1), "^depth=1 must be a power of two ≥ 2"),
    (dict(array_outstanding=0), "^array_outstanding=0 must be at least 1"),
    (dict(buffer_address_bits=17), "^buffer_address_bits=17 must be at most 16"),
    (dict(address_bits=49), "^address_bits=49 must be at most 48"),
    (dict(max_sub_requests=2048), "^max_sub_requests=2048: a 65536-byte tensor does not fit"),
    (dict(data_bits=100), "^data_bits=100 must be a power of two"),
    (dict(design_clock_hz=0.0), "^design_clock_hz=0.0 must be positive"),
])
def test_invalid_parameters_are_one_line_errors_naming_the_field(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        ControllerParams(**fields)
    assert "\n" not in str(error.value)


def test_fields_land_where_the_layout_says() -> None:
    word = Instruction(Opcode.GEMV.value, m=3, n=0x1234, k=0x5678, d=0xA, a=0xB, b=0xC).encode()
    assert word == (0x10 | 3 << 16 | 0x1234 << 32 | 0x5678 << 48 | 0xA << 64 | 0xB << 80 | 0xC << 96)
    load = Instruction(Opcode.LOAD.value, n=64, d=2, address=0xABCDE0).encode()
    assert load == 0x01 | 64 << 32 | 2 << 64 | 0xABCDE0 << 80
    assert isa.decode_fields(load) == Instruction(Opcode.LOAD.value, n=64, d=2, address=0xABCDE0)


@pytest.mark.parametrize("fields,message", [
    (dict(m=256), "m=256 does not fit its 8-bit field"),
    (dict(d=-1), "d=-1 does not fit"),
    (dict(a=1, address=64), "address shares its bits"),
    (dict(address=1 << 48), "address=.* does not fit its 48-bit field"),
])
def test_values_that_do_not_fit_are_refused(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Instruction(Opcode.VOP.value, **fields).encode()


def test_the_text_assembler_and_disassembler_agree() -> None:
    text = """LOAD d=3 n=64 address=0x1000   # a comment
              VOP op=ADD reduce=SUM broadcast=1 d=1 a=2 b=3 n=8 m=2

              ACT op=GELU d=1 a=2 n=8 m=1
              VOP op=MAX narrow=1 d=4 a=2 b=2 n=8 m=1
              BARRIER
              DONE"""
    words = isa.assemble(text)
    assert words[1] == Instruction(Opcode.VOP.value, func=isa.vop_func(Op.ADD, Reduce.SUM, True), d=1, a=2, b=3, n=8,
                                   m=2).encode()
    assert words[1] >> 8 & 0xFF == 0x51  # op 1, reduce 1 (bits 5:4), broadcast (bit 6)
    assert words[3] >> 8 & 0xFF == 0x80  # op MAX 0, narrow (bit 7)
    assert isa.assemble("\n".join(isa.disassemble(w) for w in words)) == words
    assert isa.disassemble(0x55) == "0x00000000000000000000000000000055 (no opcode 0x55)"
    assert isa.disassemble(Instruction(Opcode.VOP.value, func=0x8F).encode()) == "VOP func=143"


@pytest.mark.parametrize("line,message", [
    ("JUMP d=1", "no instruction 'JUMP'"),
    ("VOP op=FOO n=1", "no vector op 'FOO'"),
    ("VOP n=1", "VOP needs op="),
    ("VOP op=ADD reduce=ALL", "no reduce 'ALL'"),
    ("GEMV d=1 a", "cannot read 'd=1 a'"),
    ("GEMV q=1", "no field q"),
    ("GEMV n=x", "invalid literal"),
])
def test_assembler_errors_name_the_line(line: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^line 1: .*{message}"):
        isa.assemble(line)
