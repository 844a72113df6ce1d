# amaranth: UnusedElaboratable=no
"""PNM parameters: the paper's defaults, and invalid values rejected by name."""
import pytest

from rtl.pnm_lane.array import PNMArray
from rtl.pnm_lane.lane import PNMLane
from rtl.pnm_lane.params import ArrayParams, LaneParams


def test_defaults_are_the_papers_lane_and_an_array_amaranth_can_build() -> None:
    params = ArrayParams()
    assert (params.width, params.sublane_width, params.lanes, params.design_clock_hz) == (1024, 128, 2, 1e9)
    assert params.sublanes == 8
    assert PNMLane().latency == 3 + 5 * 10 + 1 + 5  # multiply, ten levels of fp32_add, the fold, rounding to FP32


@pytest.mark.parametrize("params,fields", [
    # 2 × 2,048 × 16 + 3 = 65,539 bits; (1 + 3) × 1,024 × 16 + 3 = 65,539; the paper's 16 × 1,024 array.
    (dict(width=2048), "width=2048"), (dict(lanes=3), "width=1024, lanes=3"),
    (dict(lanes=16), "width=1024, lanes=16"), (dict(width=256, lanes=15), "width=256, lanes=15")])
def test_ports_beyond_amaranths_limit_are_refused_up_front(params: dict, fields: str) -> None:
    kind = LaneParams if "lanes" not in params else ArrayParams
    with pytest.raises(ValueError, match=f"^{fields}: port i .* beyond Amaranth's 65,536-bit limit"):
        kind(**params)
    ArrayParams(width=256, lanes=14)  # (1 + 14) × 256 × 16 + 3 = 61,443 bits: accepted


@pytest.mark.parametrize("field,value", [("width", 1000), ("width", 1), ("design_clock_hz", 0),
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
