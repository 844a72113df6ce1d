"""Payload layouts of the DQB's stream ports and of the tag history stream between its parts."""
from amaranth.lib import data, enum
from amaranth.utils import ceil_log2

from .params import DQBParams


class Kind(enum.Enum, shape=2):
    """What a memory-controller read is for; S/Z fills are visible as such on `mc_req`."""
    GPU = 0
    SCALE = 1
    ZERO = 2


def log2_width_bits(params: DQBParams) -> int:
    return ceil_log2(params.address_bits + 1)


def line_bits(params: DQBParams) -> int:
    return max(1, ceil_log2(params.sz_lines))


def gpu_request(params: DQBParams) -> data.StructLayout:
    """A read (`tag`) or a store (`data`, `mask`: one bit per byte of the beat to write; reads ignore it)."""
    return data.StructLayout({"address": params.address_bits, "tag": params.tag_bits, "is_write": 1,
                              "mask": params.beat_bytes, "data": params.interface_bits})


def mc_request(params: DQBParams) -> data.StructLayout:
    """As the MMU's: a store's `mask` has one bit per byte to write (fills and reads carry 0)."""
    return data.StructLayout({"address": params.address_bits, "is_write": 1, "kind": Kind,
                              "mask": params.beat_bytes, "data": params.interface_bits})


def mc_response(params: DQBParams) -> data.StructLayout:
    """One per request, in request order: read data, or a store's acknowledgement (data ignored)."""
    return data.StructLayout({"data": params.interface_bits})


def gpu_response(params: DQBParams) -> data.StructLayout:
    """A read's beat, or (`is_write`, data 0) a store's acknowledgement: the store is in memory."""
    return data.StructLayout({"data": params.interface_bits, "error": 1, "is_write": 1})


def config_write(params: DQBParams) -> data.StructLayout:
    """One whole layer entry; `enable=0` clears it. `last` ends an update: an update of several entries is its
    beats up to one with `last` set (a single-entry update is one beat with `last`); no GPU request is looked up
    between its first and last beats, so every read sees the table before the update or after it."""
    return data.StructLayout({
        "index": max(1, ceil_log2(params.table_entries)),
        "weight_base": params.address_bits, "weight_size": params.address_bits,
        "scale_base": params.address_bits, "zero_base": params.address_bits,
        "log2_group_width": log2_width_bits(params), "enable": 1, "last": 1,
    })


def history_entry(params: DQBParams) -> data.StructLayout:
    """One outstanding memory read, in request order: what its data is for when it returns.

    A fill names its S/Z line; a GPU store only that it is one (its answer is an acknowledgement); a GPU read
    carries its tag, whether it missed the table, the S/Z lines its groups are in, and what the datapath needs
    to find each element's group.
    """
    return data.StructLayout({
        "kind": Kind, "tag": params.tag_bits, "is_write": 1, "table_miss": 1,
        "scale_line": line_bits(params), "zero_line": line_bits(params),
        "offset": params.address_bits, "log2_group_width": log2_width_bits(params),
    })
