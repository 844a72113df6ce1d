"""Payload layouts of the base die's own ports and of the queues inside its view port."""
from amaranth.lib import data
from amaranth.utils import ceil_log2

from ..dqb.params import DQBParams
from .params import BaseDieParams

MAX_EXPANSION = 4
"""Output beats per DQB read at most: 16-bit outputs of INT4 weights."""


def view_write(p: BaseDieParams) -> data.StructLayout:
    """One view-table entry: MMU block addresses [`view_base`, `view_base` + `view_rows`) read as the FP16 (or
    BF16) expansion, under `tag`, of the weights the DQB holds from byte address `weight_base` on. `enable=0`
    clears the entry."""
    block_bits = p.mmu_params().block_address_bits
    return data.StructLayout({"index": max(1, ceil_log2(p.views)), "view_base": block_bits,
                              "view_rows": block_bits + 1, "weight_base": p.address_bits,
                              "tag": DQBParams.tag_bits, "enable": 1})


def answer_entry() -> data.StructLayout:
    """An MMU read waiting for its answer: which beat `beat` of which DQB read (`read`, its parity) answers it."""
    return data.StructLayout({"beat": ceil_log2(MAX_EXPANSION), "read": 1})


def read_entry() -> data.StructLayout:
    """A DQB request waiting for its beats: the index of its last beat and its parity."""
    return data.StructLayout({"last": ceil_log2(MAX_EXPANSION), "read": 1})
