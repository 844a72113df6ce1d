"""Payload layouts of the vector unit's stream ports, and its operation codes."""
from amaranth.lib import data, enum

FP32_BITS = 32
OPERANDS = ("a", "b", "c", "d")
RESULTS = ("r0", "r1", "r2", "r3")
LANE_IN_BITS = len(OPERANDS) * FP32_BITS


class Op(enum.Enum, shape=4):
    """What each lane computes from its operands (a, b, c, d) into results (r0..r3); unused results are +0.

    SOFTMAX: online-softmax state (m1=a, l1=b) absorbs (m2=c, l2=d) (one score x is (x, 1)) →
    (m, l, α, β): m = max(m1, m2), α = e^(m1 − m) rescales the old accumulator, β = e^(m2 − m) weighs the
    new one, l = l1·α + l2·β. MERGE: FlashDecoding merge of two normalised partials →
    (m, l, l1·α/l, l2·β/l), the weights of o1 and o2 in the merged output.
    """

    MAX = 0    # max(a, b)
    ADD = 1    # a + b
    MUL = 2    # a · b
    EXP = 3    # e^(a − b); b = +0 gives e^a
    RECIP = 4  # 1 / a
    RSQRT = 5  # 1 / √a
    SILU = 6   # a · sigmoid(a)
    GELU = 7   # tanh-form GELU of a
    SOFTMAX = 8
    MERGE = 9


class Reduce(enum.Enum, shape=2):
    """NONE: every beat gives an output beat. SUM/MAX: the lanes' r0 fold into one value over the beats of a
    vector (up to and including the beat marked `last`), given in lane 0's r0 of one output beat."""

    NONE = 0
    SUM = 1
    MAX = 2


def lane_in() -> data.StructLayout:
    return data.StructLayout({name: FP32_BITS for name in OPERANDS})


def lane_out() -> data.StructLayout:
    return data.StructLayout({name: FP32_BITS for name in RESULTS})


def input_layout(width: int) -> data.StructLayout:
    """One beat: `width` lanes of operands and the controls every lane shares."""
    return data.StructLayout({"op": Op, "reduce": Reduce, "last": 1,
                              "lanes": data.ArrayLayout(lane_in(), width)})


def output_layout(width: int) -> data.StructLayout:
    return data.StructLayout({"lanes": data.ArrayLayout(lane_out(), width)})
