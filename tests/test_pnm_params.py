# amaranth: UnusedElaboratable=no
"""PNM parameters: the paper's defaults, and invalid values rejected by name."""
import pytest

from rtl.pnm.array import PNMArray
from rtl.pnm.lane import PNMLane
from rtl.pnm.params import ArrayParams, LaneParams


def test_defaults_are_the_papers_lane_and_array() -> None:
    params = ArrayParams()
    assert (params.width, params.tree_fan_in, params.sublane_width, params.lanes) == (1024, 8, 128, 16)
    assert params.sublanes == 8
    assert PNMLane().latency == 2 + 3 * 10 + 1


@pytest.mark.parametrize("field,value", [("width", 1000), ("width", 1), ("tree_fan_in", 6), ("tree_fan_in", 1),
                                         ("sublane_width", 96), ("sublane_width", 2048)])
def test_invalid_lane_parameters_name_the_field(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=field):
        LaneParams(**{field: value})


def test_invalid_lane_count_names_the_field() -> None:
    with pytest.raises(ValueError, match="lanes"):
        ArrayParams(lanes=0)


def test_ports_carry_the_stated_payloads() -> None:
    lane = PNMLane(LaneParams(width=4, sublane_width=2))
    array = PNMArray(ArrayParams(width=4, sublane_width=2, lanes=3))
    assert lane.i.payload.shape().size == 2 * 4 * 16 + 3
    assert lane.o.payload.shape().size == 1 + 32 + 2 * 32
    assert array.i.payload.shape().size == (1 + 3) * 4 * 16 + 3
    assert array.o.payload.shape().size == 1 + 3 * 32 + 3 * 2 * 32
