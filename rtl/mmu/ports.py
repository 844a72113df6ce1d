"""Payload layouts of the MMU's stream ports, shaped by its parameters."""
from amaranth.hdl import unsigned
from amaranth.lib import data, enum
from amaranth.utils import ceil_log2

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
    slot_bits = max(1, ceil_log2(p.gpu_outstanding))
    entry_bits = max(1, ceil_log2(p.pending_entries))
    sub_bits = max(1, ceil_log2(p.max_sub_requests))
    return data.StructLayout({
        "index": data.UnionLayout({
            "gpu_slot": unsigned(slot_bits),
            "pnm": data.StructLayout({"sub": unsigned(sub_bits), "entry": unsigned(entry_bits)}),
        }),
        "pnm": 1,
    })


def gpu_request(p: MMUParams) -> data.StructLayout:
    return data.StructLayout({"address": p.block_address_bits, "is_write": 1, "mask": p.request_bytes,
                              "data": p.data_bits, "id": p.id_bits})


def gpu_response(p: MMUParams) -> data.StructLayout:
    """Read data (or a write acknowledgement, data undefined) with the request's address and id."""
    return data.StructLayout({"address": p.block_address_bits, "is_write": 1, "data": p.data_bits, "id": p.id_bits})


def pnm_instruction(p: MMUParams) -> data.StructLayout:
    """A tensor load (memory → PNM buffer) or store (PNM buffer → memory): `size` bytes from byte
    address `base`, to or from buffer rows `dest`, `dest`+1, …"""
    return data.StructLayout({"base": p.address_bits, "size": size_width(p), "dest": p.buffer_address_bits,
                              "store": 1, "id": p.id_bits})


def completion(p: MMUParams) -> data.StructLayout:
    return data.StructLayout({"id": p.id_bits, "dest": p.buffer_address_bits, "store": 1, "fault": Fault})


def tagged_request(p: MMUParams) -> data.StructLayout:
    """A memory request with the tag that routes its response, whether or not the port carries the tag."""
    return data.StructLayout({"address": p.block_address_bits, "is_write": 1, "mask": p.request_bytes,
                              "data": p.data_bits, "tag": tag_layout(p)})


def mc_request(p: MMUParams) -> data.StructLayout:
    fields = dict(tagged_request(p).members)
    return data.StructLayout(fields if p.out_of_order else {k: v for k, v in fields.items() if k != "tag"})


def mc_response(p: MMUParams) -> data.StructLayout:
    """One per request: read data, or a write acknowledgement (data ignored)."""
    fields = {"data": p.data_bits}
    return data.StructLayout({**fields, "tag": tag_layout(p)} if p.out_of_order else fields)


def buffer_read(p: MMUParams) -> data.StructLayout:
    return data.StructLayout({"row": p.buffer_address_bits})


def buffer_read_data(p: MMUParams) -> data.StructLayout:
    return data.StructLayout({"data": p.data_bits})


def buffer_write(p: MMUParams) -> data.StructLayout:
    """Direct TSV forwarding of PNM load data into the buffer; `mask` has one bit per byte to write."""
    return data.StructLayout({"row": p.buffer_address_bits, "data": p.data_bits, "mask": p.request_bytes})


def config_write(p: MMUParams) -> data.StructLayout:
    return data.StructLayout({"reg": max(1, ceil_log2(p.config_registers)), "value": p.address_bits + 1})
