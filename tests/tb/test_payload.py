"""The benches' payload packer puts every field at the bit positions its Amaranth layout states."""
import numpy as np
import pytest
from amaranth.lib import data

from tb.payload import Packer

# flag: bit 0; small: bits 1-3; grid: 2 rows of 3 4-bit elements, bits 4-27 (row-major); wide: bits 28-99.
LAYOUT = data.StructLayout({"flag": 1, "small": 3, "grid": data.ArrayLayout(data.ArrayLayout(4, 3), 2), "wide": 72})


def test_scalar_fields_at_hand_computed_positions() -> None:
    p = Packer(data.StructLayout({"flag": 1, "small": 3, "wide": 72}))
    word = p.pack(flag=1, small=0b101, wide=(1 << 71) | 0x3)
    assert word == 1 | 0b101 << 1 | 0x3 << 4 | 1 << 75
    assert p.unpack(word) == {"flag": 1, "small": 0b101, "wide": (1 << 71) | 0x3}
    assert p.pack(small=0b1111) == 0b111 << 1, "a value wider than its field is cut to the field"


def test_array_fields_round_trip_at_hand_computed_positions() -> None:
    p = Packer(LAYOUT)
    grid = np.array([[0x1, 0x2, 0x3], [0xA, 0xB, 0xC]])
    word = p.pack(flag=1, small=6, grid=grid, wide=(1 << 71) | 5)
    # Element (r, c) sits at bit 4 + 4 * (3 r + c).
    assert word == (1 | 6 << 1 | 0x1 << 4 | 0x2 << 8 | 0x3 << 12 | 0xA << 16 | 0xB << 20 | 0xC << 24
                    | 5 << 28 | 1 << 99)
    fields = p.unpack(word)
    assert fields["flag"] == 1 and fields["small"] == 6 and fields["wide"] == (1 << 71) | 5
    assert fields["grid"].shape == (2, 3) and (fields["grid"] == grid).all()


def test_many_beats_match_one_at_a_time() -> None:
    p = Packer(data.StructLayout({"flag": 1, "grid": data.ArrayLayout(data.ArrayLayout(16, 8), 4), "x": 64}))
    rng = np.random.default_rng(0)
    columns = {"flag": rng.integers(0, 2, 50), "grid": rng.integers(0, 1 << 16, (50, 4, 8)),
               "x": rng.integers(0, 1 << 63, 50, dtype=np.uint64) | np.uint64(1 << 63)}
    words = p.pack_many(**columns)
    for k in (0, 17, 49):
        expected = int(columns["flag"][k]) | int(columns["x"][k]) << (1 + 16 * 32)
        for element, value in enumerate(columns["grid"][k].ravel()):
            expected |= int(value) << (1 + 16 * element)
        assert words[k] == expected
    back = p.unpack_many(words)
    assert all((back[name] == np.asarray(column, np.uint64)).all() for name, column in columns.items())


def test_unknown_field_is_named() -> None:
    with pytest.raises(KeyError, match="colour"):
        Packer(LAYOUT).pack(colour=1)


def test_narrow_payloads_pack_many_at_hand_computed_positions() -> None:
    """Payloads of at most 64 bits are packed in one uint64 per beat: the same positions, values cut to fields."""
    p = Packer(data.StructLayout({"flag": 1, "grid": data.ArrayLayout(data.ArrayLayout(4, 3), 2), "top": 39}))
    assert p.width == 64
    words = p.pack_many(flag=[1, 0], grid=[[[1, 2, 3], [0xA, 0xB, 0x1F]], [[0] * 3] * 2], top=[(1 << 38) | 1, 0])
    assert words == [1 | 0x1 << 1 | 0x2 << 5 | 0x3 << 9 | 0xA << 13 | 0xB << 17 | 0xF << 21 | 1 << 25 | 1 << 63, 0]
