"""The PNM buffer's golden model on hand-worked cases: byte addresses and banks, masked writes, reads after
writes, bytes never written left undefined, and two accesses of one bank in one cycle refused."""
import pytest

from tb.models.pnm_buffer import Access, BankConflict, Buffer, ReadData


def test_an_access_covers_row_times_width_bytes_and_the_banks_they_interleave_over() -> None:
    b = Buffer(total_bytes=256, banks=4, bank_bytes=4)
    assert b.banks_of(Access("x", row=5, nbytes=4)) == {1}          # bytes 20..23: word 5, bank 1
    assert b.banks_of(Access("x", row=1, nbytes=8)) == {2, 3}       # bytes 8..15: words 2, 3
    assert b.banks_of(Access("x", row=3, nbytes=16)) == {0, 1, 2, 3}


def test_a_masked_write_changes_only_its_bytes_little_endian() -> None:
    b = Buffer(total_bytes=64, banks=2, bank_bytes=4)
    b.cycle([Access("w", row=1, nbytes=4, write=True, data=0x44332211, mask=0b1111)])
    b.cycle([Access("w", row=1, nbytes=4, write=True, data=0xDDCCBBAA, mask=0b0101)])
    assert list(b.memory[4:8]) == [0xAA, 0x22, 0xCC, 0x44]
    assert b.cycle([Access("r", row=0, nbytes=8)]) == [ReadData(8, 0x44CC22AA_00000000, 0xFFFFFFFF_00000000)]


def test_reads_see_every_write_of_earlier_cycles_and_each_port_its_own_bytes() -> None:
    b = Buffer(total_bytes=64, banks=4, bank_bytes=4)
    b.cycle([Access("w", row=2, nbytes=4, write=True, data=7, mask=0xF),
             Access("v", row=0, nbytes=8, write=True, data=0x06050403_020100FF, mask=0xFE)])  # not byte 0
    r, s = b.cycle([Access("r", row=1, nbytes=8), Access("s", row=0, nbytes=4)])
    assert (r.data, r.known, s.data, s.known) == (7, 0xFFFFFFFF, 0x02010000, 0xFFFFFF00)
    [whole] = b.cycle([Access("r", row=0, nbytes=16)])
    assert whole.data == 0x06050403_02010000 | 7 << 64
    assert repr(whole) == "0x????????0000000706050403020100??"


def test_undefined_bytes_match_anything_and_defined_ones_only_themselves() -> None:
    value = ReadData(2, 0x1200, 0xFF00)
    assert value.matches(0x12AB) and value.matches(0x1200)
    assert not value.matches(0x13AB)


def test_two_accesses_of_one_bank_in_one_cycle_are_a_conflict() -> None:
    b = Buffer(total_bytes=64, banks=4, bank_bytes=4)
    with pytest.raises(BankConflict, match="bank 1 accessed by a and b in one cycle"):
        b.cycle([Access("a", row=1, nbytes=4), Access("b", row=0, nbytes=8)])
