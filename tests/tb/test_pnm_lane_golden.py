"""The PNM golden model against hand-worked values, independent of the RTL."""
import numpy as np

from tb.models import fp, pnm_lane

ONE, MINUS_ZERO, INF = 0x3C00, 0x8000, 0x7C00  # FP16 bits


def f32(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32).view(np.uint32)


def f16(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float16).view(np.uint16)


def test_tree_is_pairwise_not_sequential() -> None:
    # Sequentially every 1 + 2^-24 ties back to 1. Pairwise: (1 + 2^-24 → 1) + (2^-24 + 2^-24) = 1 + 2^-23,
    # and (2^-24 + 0) + 0 = 2^-24; then 1 + 2^-23 + 2^-24 ties to the even 1 + 2^-22.
    values = f32(1, 2**-24, 2**-24, 2**-24, 2**-24, 0, 0, 0)
    assert pnm_lane.tree_sum(values) == f32(1 + 2**-22)[0]


def test_products_are_exact_and_sublanes_are_separate() -> None:
    a = f16(65504, 65504, 1, 2)
    b = f16(65504, -65504, 3, 0.5)
    assert list(pnm_lane.sublane_sums(a, b, sublane_width=2)) == list(f32(0, 4))
    assert pnm_lane.lane_sums(a, b, sublane_width=2) == f32(4)[0]
    assert fp.fp16_mul_fp32(a[:1], b[:1])[0] == f32(65504.0 * 65504.0)[0]


def test_accumulator_clear_emit_and_reset_value() -> None:
    a = np.array([[[MINUS_ZERO, MINUS_ZERO]]] * 4, np.uint16)  # every product −0
    b = np.full_like(a, ONE)
    mode = np.zeros(4, np.uint8)
    clear, emit = np.array([0, 1, 0, 0]), np.array([1, 1, 1, 0])
    out = pnm_lane.run(a, b, mode, clear, emit, sublane_width=2)
    # From reset: +0 + −0 = +0; a clear takes −0 as is; −0 + −0 = −0; the last beat is not emitted.
    assert [int(o.accumulator[0]) for o in out] == [0, 0x80000000, 0x80000000]


def test_the_accumulator_sums_exactly_and_rounds_once() -> None:
    # 2·65,504² then 1 then −2·65,504²: added in turn in FP32 the 1 is lost (the ulp at 2^33 is 2^10); exactly, 1.
    a = np.array([[f16(65504, 65504)], [f16(1, 0)], [f16(-65504, -65504)]])
    b = np.array([[f16(65504, 65504)], [f16(1, 0)], [f16(65504, 65504)]])
    out = pnm_lane.run(a, b, np.zeros(3), np.array([1, 0, 0]), np.array([0, 0, 1]), sublane_width=2)
    assert [int(o.accumulator[0]) for o in out] == list(f32(1))


def test_exact_sum_by_hand() -> None:
    cases = [((1, 2**-24), 1),                          # a tie to the even neighbour below
             ((1 + 2**-23, 2**-24), 1 + 2**-22),        # and above
             ((1, 2**-24, 2**-24), 1 + 2**-23),         # two ties, rounded once: in turn they give 1
             ((1, 2**-24, 2**-60), 1 + 2**-23),         # just above a tie
             ((2**-149, 2**-149), 2**-148),             # subnormals exactly
             ((3e38, 3e38), np.inf), ((-3e38, -3e38, 1e38), -np.inf), ((3e38, 3e38, -3e38), 3e38),
             ((5, -5), 0), ((-0.0, -0.0), -0.0), ((-0.0, 0.0), 0)]
    for terms, total in cases:
        assert pnm_lane.exact_sum(f32(*terms)) == f32(total)[0], terms
    assert fp.is_nan(pnm_lane.exact_sum(f32(np.inf, 1, -np.inf)), "fp32")
    assert fp.is_nan(pnm_lane.exact_sum(f32(np.nan, np.inf)), "fp32")
    assert pnm_lane.exact_sum(f32(-np.inf, 3e38, 3e38)) == f32(-np.inf)[0]


def test_attention_beats_leave_the_accumulator_alone() -> None:
    a = np.array([[f16(1, 2)], [f16(INF, 0)], [f16(3, 4)]]).view(np.uint16)
    a[1, 0, 0] = INF
    b = np.full_like(a, ONE)
    out = pnm_lane.run(a, b, np.array([0, 1, 0]), np.array([1, 0, 0]), np.array([0, 0, 1]),
                  sublane_width=1 * 2)
    assert out[0].mode == pnm_lane.ATTENTION and out[0].sublane_sums[0, 0] == f32(np.inf)[0]
    assert out[1].mode == pnm_lane.MLP and out[1].accumulator[0] == f32(10)[0]


def test_inf_minus_inf_is_nan() -> None:
    sums = pnm_lane.sublane_sums(np.array([INF, INF | 0x8000], np.uint16), f16(1, 1), sublane_width=2)
    assert fp.is_nan(sums, "fp32").all()


def test_array_broadcasts_memory_and_the_query() -> None:
    memory = np.arange(4, dtype=np.uint16)[None, :]
    buffer = np.array([[[10, 11, 12, 13], [20, 21, 22, 23]]], np.uint16)
    a, b = pnm_lane.array_operands(memory, buffer, np.array([pnm_lane.ATTENTION]), sublane_width=2)
    assert a.tolist() == [[[10, 11, 10, 11], [20, 21, 20, 21]]] and b.tolist() == [[[0, 1, 2, 3]] * 2]
    a, _ = pnm_lane.array_operands(memory, buffer, np.array([pnm_lane.MLP]), sublane_width=2)
    assert (a == buffer).all()
