"""The vector unit's parameters and stated timing."""
import pytest
from amaranth.hdl import Fragment

from rtl.pnm_vector.params import VectorParams
from rtl.pnm_vector.vector import PNMVector

# The lane chain of docs/design/pnm-vector.md, step by step, with fp32_add 5 and fp32_mul 6 stages.
CHAIN = 6 + 6 + 5 + 6 + 104 + 6 + 5 + 78 + 6 + 1


@pytest.mark.parametrize("width", [0, 3, 12, -2])
def test_width_must_be_a_power_of_two(width: int) -> None:
    with pytest.raises(ValueError, match=f"width={width} must be a power of two"):
        VectorParams(width=width)


def test_width_beyond_amaranths_value_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="beyond Amaranth"):
        VectorParams(width=1024)


@pytest.mark.parametrize("width,tree_levels", [(1, 0), (2, 1), (4, 2)])    # 4: log2, not width - 1
def test_latency_is_the_chain_the_tree_and_the_fold(width: int, tree_levels: int) -> None:
    unit = PNMVector(VectorParams(width=width))
    Fragment.get(unit, None)  # elaboration checks the built stages against the stated latency
    assert unit.latency == CHAIN + 5 * tree_levels + 1
    assert unit.initiation_interval == 1
