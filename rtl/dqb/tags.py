"""Tag parser (StreamDQ Table 5) and the layouts of the tag history buffer and the block's ports."""
from types import SimpleNamespace

from amaranth.hdl import Value
from amaranth.lib import data, enum
from amaranth.utils import ceil_log2

from .params import DQBParams

BYPASS = 0b000
RESERVED = 0b111
# Table 5: tag → (weight format, output format).
MODES = {
    0b001: ("int4", "bf16"), 0b010: ("int8", "bf16"), 0b011: ("fp8_e4m3", "bf16"),
    0b100: ("int4", "fp16"), 0b101: ("int8", "fp16"), 0b110: ("fp8_e4m3", "fp16"),
}


def decode(tag: Value) -> SimpleNamespace:
    """What a 3-bit tag asks of the datapath, as combinational flags."""
    def one_of(*tags: int) -> Value:
        return tag.matches(*tags)
    return SimpleNamespace(
        dequantize=~one_of(BYPASS, RESERVED),
        reserved=one_of(RESERVED),
        int4=one_of(*(t for t, (w, _) in MODES.items() if w == "int4")),
        int8=one_of(*(t for t, (w, _) in MODES.items() if w == "int8")),
        fp8=one_of(*(t for t, (w, _) in MODES.items() if w == "fp8_e4m3")),
        bf16=one_of(*(t for t, (_, o) in MODES.items() if o == "bf16")),
    )


class Kind(enum.Enum, shape=2):
    """What a memory-controller read is for; S/Z fills are visible as such on `mc_req`."""
    GPU = 0
    SCALE = 1
    ZERO = 2


def log2_width_bits(p: DQBParams) -> int:
    return ceil_log2(p.address_bits + 1)


def line_bits(p: DQBParams) -> int:
    return max(1, ceil_log2(p.sz_lines))


def gpu_request(p: DQBParams) -> data.StructLayout:
    return data.StructLayout({"address": p.address_bits, "tag": p.tag_bits, "is_write": 1,
                              "data": p.interface_bits})


def mc_request(p: DQBParams) -> data.StructLayout:
    return data.StructLayout({"address": p.address_bits, "is_write": 1, "kind": Kind,
                              "data": p.interface_bits})


def mc_response(p: DQBParams) -> data.StructLayout:
    return data.StructLayout({"data": p.interface_bits})


def gpu_response(p: DQBParams) -> data.StructLayout:
    return data.StructLayout({"data": p.interface_bits, "error": 1})


def config_write(p: DQBParams) -> data.StructLayout:
    """One whole layer entry; `enable=0` clears it."""
    return data.StructLayout({
        "index": max(1, ceil_log2(p.table_entries)),
        "weight_base": p.address_bits, "weight_size": p.address_bits,
        "scale_base": p.address_bits, "zero_base": p.address_bits,
        "log2_group_width": log2_width_bits(p), "enable": 1,
    })


def history_entry(p: DQBParams) -> data.StructLayout:
    """One outstanding memory read, in request order: what its data is for when it returns.

    A fill names its S/Z line; a GPU read carries its tag, whether it missed the table, the S/Z lines its
    groups are in, and what the datapath needs to find each element's group.
    """
    return data.StructLayout({
        "kind": Kind, "tag": p.tag_bits, "table_miss": 1,
        "scale_line": line_bits(p), "zero_line": line_bits(p),
        "offset": p.address_bits, "log2_group_width": log2_width_bits(p),
    })
