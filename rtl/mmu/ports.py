"""Payload layouts of the MMU's stream ports, shaped by its parameters."""
from amaranth.hdl import unsigned
from amaranth.lib import data, enum

from .params import MMUParams


class Fault(enum.Enum, shape=2):
    """Why a PNM instruction was refused (reported in its completion; nothing reached memory)."""
    NONE = 0
    PROTECTED = 1     # a store overlapping a protected (model-parameter) region (§5.3)
    OUT_OF_RANGE = 2  # the tensor does not end at or below the configured memory size
    MALFORMED = 3     # size 0 or above max_tensor_bytes, base not request-aligned, or buffer rows overflow


def size_width(p: MMUParams) -> int:
    return p.max_tensor_bytes.bit_length()


def tag_layout(p: MMUParams) -> data.StructLayout:
    """The memory-request tag: which source, and which GPU slot or PNM entry and sub-request it answers."""
    slot_bits = max(1, (p.gpu_outstanding - 1).bit_length())
    entry_bits = max(1, (p.pending_entries - 1).bit_length())
    sub_bits = max(1, (p.max_sub_requests - 1).bit_length())
    return data.StructLayout({
        "index": data.UnionLayout({
            "gpu_slot": unsigned(slot_bits),
            "pnm": data.StructLayout({"sub": unsigned(sub_bits), "entry": unsigned(entry_bits)}),
        }),
        "pnm": 1,
    })


def gpu_request(p: MMUParams) -> data.StructLayout:
    return data.StructLayout({"addr": p.block_addr_width, "write": 1, "mask": p.request_bytes,
                              "data": p.data_width, "id": p.id_width})


def gpu_response(p: MMUParams) -> data.StructLayout:
    """Read data (or a write acknowledgement, data undefined) with the request's address and id."""
    return data.StructLayout({"addr": p.block_addr_width, "write": 1, "data": p.data_width, "id": p.id_width})


def pnm_instruction(p: MMUParams) -> data.StructLayout:
    """A tensor load (memory → PNM buffer) or store (PNM buffer → memory): `size` bytes from byte
    address `base`, to or from buffer rows `dest`, `dest`+1, …"""
    return data.StructLayout({"base": p.addr_width, "size": size_width(p), "dest": p.buffer_addr_width,
                              "store": 1, "id": p.id_width})


def completion(p: MMUParams) -> data.StructLayout:
    return data.StructLayout({"id": p.id_width, "dest": p.buffer_addr_width, "store": 1, "fault": Fault})


def mc_request(p: MMUParams) -> data.StructLayout:
    fields = {"addr": p.block_addr_width, "write": 1, "mask": p.request_bytes, "data": p.data_width}
    return data.StructLayout({**fields, "tag": tag_layout(p)} if p.out_of_order else fields)


def mc_response(p: MMUParams) -> data.StructLayout:
    """One per request: read data, or a write acknowledgement (data ignored)."""
    fields = {"data": p.data_width}
    return data.StructLayout({**fields, "tag": tag_layout(p)} if p.out_of_order else fields)


def buffer_read(p: MMUParams) -> data.StructLayout:
    return data.StructLayout({"row": p.buffer_addr_width})


def buffer_read_data(p: MMUParams) -> data.StructLayout:
    return data.StructLayout({"data": p.data_width})


def buffer_write(p: MMUParams) -> data.StructLayout:
    """Direct TSV forwarding of PNM load data into the buffer; `mask` has one bit per byte to write."""
    return data.StructLayout({"row": p.buffer_addr_width, "data": p.data_width, "mask": p.request_bytes})


def config_write(p: MMUParams) -> data.StructLayout:
    return data.StructLayout({"reg": max(1, (p.config_registers - 1).bit_length()), "value": p.addr_width + 1})
