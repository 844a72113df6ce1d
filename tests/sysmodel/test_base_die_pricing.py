"""The PNM's quantized decode priced from the base die's verified decode layer (block `base_die`) where it covers
the case: its bytes give the S/Z share at the bench's group size, which the DQB's own bench does not measure."""
import pytest

from basedie import verified
from basedie.verified import VerifiedBlocks
from sysmodel.base_die import StackDequant
from sysmodel.errors import ConfigError
from sysmodel.hardware import PAPER_HARDWARE
from sysmodel.quantized import Quantization, base_die_sz_rows, sz_source


@pytest.fixture(scope="module")
def table():
    return verified.load()


def test_the_base_die_decode_layer_gives_the_s_z_share_of_groups_of_32(table):
    # Groups of 32 weights: INT4 packs 16 B and adds one FP16 scale and one 4-bit zero (2.5 B); INT8 32 B + 3 B.
    rows = {(row["weight_bits"], row["group_size"]): row["fraction"] for row in base_die_sz_rows(table)}
    assert rows == pytest.approx({(4, 32): 2.5 / 18.5, (8, 32): 3 / 35}, rel=1e-12)
    assert sz_source(table, 4, 32) == (pytest.approx(2.5 / 18.5, rel=1e-12), "base_die")
    assert sz_source(table, 4, 128)[1] == "dqb"


@pytest.mark.parametrize("weights, stored", [("w4a16", (16 + 2.5) / 64), ("w8a16", (32 + 3) / 64)])
def test_the_pnm_reads_the_bytes_the_base_die_read_per_fp16_weight_byte(table, weights, stored):
    """The base die's INT4 decode layer read its 49,152 B of FP16 weights as 12,288 B + 1,920 B of S/Z (INT8:
    24,576 + 2,304): 0.289 (0.547) of the FP16 bytes, which is what the serving model's PNM reads per FP16 weight
    byte at group size 32."""
    dequant = StackDequant.from_verified(table, Quantization(weights, 32, "dqb"), PAPER_HARDWARE.gpu, dqb_power_w=0.2)
    assert dequant.stored_per_fp16 == pytest.approx(stored, rel=1e-12)
    assert stored == pytest.approx((12_288 + 1_920) / 49_152 if weights == "w4a16" else (24_576 + 2_304) / 49_152)


def test_without_the_base_die_entry_group_32_is_refused_naming_the_measured_groups(table):
    no_base_die = VerifiedBlocks([entry for entry in table.entries if entry.block != "base_die"])
    with pytest.raises(ConfigError, match=r"^no measured S/Z fraction for group size 32 \(4-bit\); measured: "
                                          r"64, 128, 256$"):
        sz_source(no_base_die, 4, 32)
