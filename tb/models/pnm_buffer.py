"""Reference behaviour of the PNM buffer, written from its contract (docs/pnm-buffer.md), never from the RTL:
a byte array in which an access moves `nbytes` bytes at byte address row·nbytes; accesses take effect in the
order they were accepted. No two accesses of one cycle may touch one bank (byte a is in bank
(a // bank_bytes) mod banks), so they touch disjoint bytes and their order within the cycle is immaterial.
A byte nobody has written is undefined (SRAM powers up with anything in it): a read states which of its
bytes are known."""
from dataclasses import dataclass

import numpy as np


class BankConflict(AssertionError):
    """Two accesses accepted in one cycle touch the same bank (a single-ported bank cannot serve both)."""


@dataclass(frozen=True)
class Access:
    port: str
    row: int
    nbytes: int
    write: bool = False
    data: int = 0
    """Write data, byte k in bits 8k..8k+7."""
    mask: int = 0
    """One bit per byte of a write: bit k set writes byte k."""

    @property
    def address(self) -> int:
        return self.row * self.nbytes


@dataclass(frozen=True, repr=False)
class ReadData:
    nbytes: int
    data: int
    """Byte k in bits 8k..8k+7; undefined bytes are 0."""
    known: int
    """0xFF over each byte that has been written, 0 over the others."""

    def matches(self, got: int) -> bool:
        return (got ^ self.data) & self.known == 0

    def __repr__(self) -> str:
        """Hex, most significant byte first, `??` for an undefined byte."""
        return "0x" + "".join(f"{(self.data >> 8 * k) & 0xFF:02x}" if (self.known >> 8 * k) & 0xFF else "??"
                              for k in reversed(range(self.nbytes)))


class Buffer:
    def __init__(self, total_bytes: int, banks: int, bank_bytes: int) -> None:
        self.memory = np.zeros(total_bytes, np.uint8)
        self.written = np.zeros(total_bytes, bool)
        self.banks, self.bank_bytes = banks, bank_bytes

    def banks_of(self, access: Access) -> set[int]:
        return {(a // self.bank_bytes) % self.banks for a in range(access.address, access.address + access.nbytes)}

    def read(self, address: int, nbytes: int) -> ReadData:
        span = slice(address, address + nbytes)
        return ReadData(nbytes, int.from_bytes(self.memory[span].tobytes(), "little"),
                        int.from_bytes(np.where(self.written[span], 0xFF, 0).astype(np.uint8).tobytes(), "little"))

    def cycle(self, accesses: list[Access]) -> list[ReadData | None]:
        """Apply one cycle's accepted accesses; each read's data (None for a write), in the order given."""
        used: dict[int, str] = {}
        for access in accesses:
            for bank in self.banks_of(access):
                if bank in used:
                    raise BankConflict(f"bank {bank} accessed by {used[bank]} and {access.port} in one cycle")
                used[bank] = access.port
        out = [None if a.write else self.read(a.address, a.nbytes) for a in accesses]
        for a in accesses:
            if a.write:
                new = np.frombuffer(a.data.to_bytes(a.nbytes, "little"), np.uint8)
                keep = np.array([(a.mask >> k) & 1 for k in range(a.nbytes)], bool)
                self.memory[a.address:a.address + a.nbytes][keep] = new[keep]
                self.written[a.address:a.address + a.nbytes] |= keep
        return out
