"""Where a program's operands go: buffer rows handed out in order, each operand on a tile boundary (the array
sequencer needs its a and b there), memory addresses beside them, and the LOADs that bring each operand in."""
from collections.abc import Callable

import numpy as np

from rtl.pnm_controller.isa import Instruction, Opcode


def loads(row: int, address: int, size: int, row_bytes: int, max_tensor: int) -> list[Instruction]:
    """LOADs of `size` bytes from `address` into rows `row`, …, cut into tensors the MMU takes (`max_tensor`)."""
    return [Instruction(Opcode.LOAD.value, n=min(max_tensor, size - off), d=row + off // row_bytes,
                        address=address + off) for off in range(0, size, max_tensor)]


def stores(row: int, address: int, size: int, row_bytes: int, max_tensor: int) -> list[Instruction]:
    """STOREs of `size` bytes of rows `row`, … to `address`, cut as `loads` cuts."""
    return [Instruction(Opcode.STORE.value, n=i.n, d=i.d, address=i.address)
            for i in loads(row, address, size, row_bytes, max_tensor)]


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

    def release(self, row: int) -> None:
        """Hand the rows from `row` on out again (a stack: what was taken after `row` is dead)."""
        self.next_row = row

    def place(self, values: np.ndarray) -> int:
        """`values` put in fresh memory on a 64-byte boundary, without buffer rows (streamed later): the address."""
        address = self.next_address
        self.next_address += -(-values.nbytes // 64) * 64
        self.put(address, values)
        return address

    def operand(self, values: np.ndarray) -> tuple[int, list[Instruction]]:
        """Rows holding `values`, placed (`put`) in fresh memory on a 64-byte boundary: the row and its LOADs."""
        row = self.take(values.nbytes)
        return row, self.load(row, self.place(values), values.nbytes)

    def load(self, row: int, address: int, size: int) -> list[Instruction]:
        return loads(row, address, size, self.row_bytes, self.max_tensor)

    def store(self, row: int, address: int, size: int) -> list[Instruction]:
        return stores(row, address, size, self.row_bytes, self.max_tensor)
