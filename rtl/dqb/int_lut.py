"""INT→FP32 through one lookup table sized for INT8 (StreamDQ §3.6).

Every INT8 value is exact in FP32 with at most 7 fraction bits, so the low 16 bits of its FP32 pattern are
zero and the table stores only the upper 16. INT4 reuses it by sign extension to INT8.
"""
import struct

from amaranth.hdl import Cat, Const, Module, Value
from amaranth.lib import memory


def _upper_half(value: int) -> int:
    bits = struct.unpack("<I", struct.pack("<f", float(value)))[0]
    assert bits & 0xFFFF == 0, f"{value} needs more than 16 bits of FP32"
    return bits >> 16


class IntLUT:
    """The shared table; each `lookup` adds a combinational read port."""

    def __init__(self, m: Module) -> None:
        # Address = the INT8 two's-complement pattern.
        self.table = memory.Memory(shape=16, depth=256,
                                   init=[_upper_half(code - 256 if code >= 128 else code) for code in range(256)])
        m.submodules.int8_lut = self.table
        self.m = m

    def lookup(self, code: Value) -> Value:
        """FP32 bits of an INT8 code."""
        port = self.table.read_port(domain="comb")
        self.m.d.comb += port.addr.eq(code)
        return Cat(Const(0, 16), port.data)


def sign_extend_int4(nibble: Value) -> Value:
    return Cat(nibble[:4], nibble[3].replicate(4))
