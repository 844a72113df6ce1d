"""The vector unit bench's payload packing against the port layouts: by hand for one lane, and against Amaranth's
own constants of the layouts for random beats of several lanes."""
import numpy as np
import pytest

from rtl.pnm_vector.ports import OPERANDS, RESULTS, Op, Reduce, input_layout, output_layout
from tb.models import pnm_vector as model
from tb.pnm_vector import stimulus

ONE, TWO, THREE, FOUR = 0x3F800000, 0x40000000, 0x40400000, 0x40800000


def test_one_lane_packs_op_reduce_last_then_the_operands_in_order() -> None:
    # op: 4 bits at 0; reduce: 2 bits at 4; last: bit 6; lane 0's a, b, c, d: 32 bits each from bit 7.
    beat = model.Beat(Op.ADD.value, Reduce.SUM.value, 1, np.array([[ONE], [TWO], [THREE], [FOUR]], np.uint32))
    assert stimulus.pack(beat, 1) == 1 | 1 << 4 | 1 << 6 | ONE << 7 | TWO << 39 | THREE << 71 | FOUR << 103


def test_one_lane_unpacks_the_results_in_order() -> None:
    got = stimulus.unpack(ONE | TWO << 32 | THREE << 64 | FOUR << 96, 1)
    assert got.dtype == np.uint32 and got.tolist() == [[ONE], [TWO], [THREE], [FOUR]]


@pytest.mark.parametrize("width", [2, 5])
def test_packing_agrees_with_the_layouts(width: int) -> None:
    rng = np.random.default_rng(width)
    for _ in range(20):
        values = rng.integers(0, 1 << 32, (4, width), dtype=np.uint64).astype(np.uint32)
        beat = model.Beat(int(rng.integers(0, len(Op))), int(rng.integers(0, 3)), int(rng.integers(0, 2)), values)
        lanes = [{name: int(values[j, k]) for j, name in enumerate(OPERANDS)} for k in range(width)]
        expected = input_layout(width).const({"op": Op(beat.op), "reduce": Reduce(beat.reduce), "last": beat.last,
                                              "lanes": lanes}).as_bits()
        assert stimulus.pack(beat, width) == expected
        results = [{name: int(values[j, k]) for j, name in enumerate(RESULTS)} for k in range(width)]
        bits = output_layout(width).const({"lanes": results}).as_bits()
        assert np.array_equal(stimulus.unpack(bits, width), values)


def test_pack_results_is_the_inverse_of_unpack() -> None:
    assert stimulus.pack_results(np.array([[ONE], [TWO], [THREE], [FOUR]], np.uint32), 1) == \
        ONE | TWO << 32 | THREE << 64 | FOUR << 96
    values = np.random.default_rng(0).integers(0, 1 << 32, (4, 3), dtype=np.uint64).astype(np.uint32)
    assert np.array_equal(stimulus.unpack(stimulus.pack_results(values, 3), 3), values)
