"""INT→FP32 through one lookup table sized for INT8 (StreamDQ §3.6).

Every INT8 value is exact in FP32 with at most 7 fraction bits, so the low 16 bits of its FP32 pattern are
zero and the table stores only the upper 16. INT4 reuses it by sign extension to INT8.
"""
import struct

from amaranth.hdl import Cat, Const, Module, Value
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out


def _upper_half(value: int) -> int:
    bits = struct.unpack("<I", struct.pack("<f", float(value)))[0]
    assert bits & 0xFFFF == 0, f"{value} needs more than 16 bits of FP32"
    return bits >> 16


class IntLUT(wiring.Component):
    """One table, `lookups` combinational reads: `values[k]` is the FP32 bits of the INT8 code `codes[k]`."""

    def __init__(self, lookups: int) -> None:
        super().__init__({"codes": In(data.ArrayLayout(8, lookups)), "values": Out(data.ArrayLayout(32, lookups))})

    def elaborate(self, platform) -> Module:
        m = Module()
        # Address = the INT8 two's-complement pattern.
        m.submodules.table = table = memory.Memory(
            shape=16, depth=256, init=[_upper_half(code - 256 if code >= 128 else code) for code in range(256)])
        for code, value in zip(self.codes, self.values):
            port = table.read_port(domain="comb")
            m.d.comb += [port.addr.eq(code), value.eq(Cat(Const(0, 16), port.data))]
        return m


def sign_extend_int4(nibble: Value) -> Value:
    return Cat(nibble[:4], nibble[3].replicate(4))
