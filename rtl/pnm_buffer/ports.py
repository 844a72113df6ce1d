"""Payload layouts of the buffer's stream ports: the shapes of the MMU's `buf_rd`/`buf_rdata`/`buf_wr`
(`rtl/mmu/ports.py`) for every client, so the MMU connects to the buffer with `wiring.connect`."""
from amaranth.lib import data, stream
from amaranth.lib.wiring import In, Out

from .params import BufferParams


def read_request(row_bits: int) -> data.StructLayout:
    return data.StructLayout({"row": row_bits})


def read_data(nbytes: int) -> data.StructLayout:
    return data.StructLayout({"data": 8 * nbytes})


def write_request(row_bits: int, nbytes: int) -> data.StructLayout:
    """`mask`: one bit per byte of `data` to write."""
    return data.StructLayout({"row": row_bits, "data": 8 * nbytes, "mask": nbytes})


def signature_members(params: BufferParams) -> dict:
    """Every port's request stream (in) and, for a read port, its response stream (out)."""
    members = {}
    for port in params.ports:
        rows = params.row_bits(port.bytes)
        if port.write:
            members[port.request] = In(stream.Signature(write_request(rows, port.bytes)))
        else:
            members[port.request] = In(stream.Signature(read_request(rows)))
            members[port.response] = Out(stream.Signature(read_data(port.bytes)))
    return members
