"""Where a program's operands go: buffer rows handed out in order, each operand on a tile boundary (the array
sequencer needs its a and b there), memory addresses beside them, and the LOADs that bring each operand in."""
from collections.abc import Callable

import numpy as np

from rtl.pnm_controller.isa import Instruction, Opcode


def loads(row: int, address: int, size: int, row_bytes: int, max_tensor: int) -> list[Instruction]:
    """LOADs of `size` bytes from `address` into rows `row`, …, cut into tensors the MMU takes (`max_tensor`)."""
    return [Instruction(Opcode.LOAD.value, n=min(max_tensor, size - off), d=row + off // row_bytes,
                        address=address + off) for off in range(0, size, max_tensor)]


class Rows:
    def __init__(self, put: Callable[[int, np.ndarray], None], row_bytes: int, tile_bytes: int, max_tensor: int,
                 address: int) -> None:
        self.put, self.row_bytes, self.max_tensor = put, row_bytes, max_tensor
        self.align = max(1, tile_bytes // row_bytes)
        self.next_row, self.next_address = 0, address

    def take(self, nbytes: int) -> int:
        """The first of the rows that hold `nbytes`; the next operand starts on the following tile boundary."""
        row = self.next_row
        self.next_row = -(-(row + -(-nbytes // self.row_bytes)) // self.align) * self.align
        return row

    def operand(self, values: np.ndarray) -> tuple[int, list[Instruction]]:
        """Rows holding `values`, placed (`put`) in fresh memory on a 64-byte boundary: the row and its LOADs."""
        row, address = self.take(values.nbytes), self.next_address
        self.next_address += -(-values.nbytes // 64) * 64
        self.put(address, values)
        return row, loads(row, address, values.nbytes, self.row_bytes, self.max_tensor)
