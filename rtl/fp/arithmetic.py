"""Adders and multipliers written as logarithmic-depth networks for the 1 GHz FP pipelines.

Yosys maps `+` to a ripple-carry adder and `*` to an array multiplier, a carry chain per row, and ABC's
delay-driven mapping does not restructure either into a tree: a 48-bit `+` alone takes 1.5 ns on the ASAP7
cells. These networks give the mapper the logarithmic depth to start from.
"""
from amaranth.hdl import Cat, Const, Mux, Value

from ..pipeline import Stages


def prefix_sum(stages: Stages, a: Value, b: Value, carry_in: int = 0) -> Value:
    """a + b + carry_in (unsigned, one bit wider than the wider operand) by a Kogge-Stone carry network:
    log2(width) levels of generate/propagate merging instead of a carry rippling through every bit."""
    width = max(len(a), len(b))
    bits = stages.nets(generate=(a & b)[:width] | (carry_in & (a ^ b)[0]), propagate=(a ^ b)[:width])
    carry, propagate, span = bits.generate, bits.propagate, 1
    while span < width:
        merged = stages.nets(carry=carry | (propagate & (carry << span)[:width]),
                             propagate=propagate & (propagate << span)[:width])
        carry, propagate, span = merged.carry, merged.propagate, 2 * span
    return Cat(bits.propagate ^ Cat(Const(carry_in, 1), carry[:width - 1]), carry[width - 1])


def carry_select_sum(stages: Stages, a: Value, b: Value) -> Value:
    """a + b (as wide as the wider operand): the two halves summed side by side, the upper one for both carries
    out of the lower, then selected by it; half the carry network's depth, for a second copy of its upper half."""
    width = max(len(a), len(b))
    half = width // 2
    low = prefix_sum(stages, a[:half], b[:half])
    high = [prefix_sum(stages, a[half:], b[half:], carry_in) for carry_in in (0, 1)]
    return Cat(low[:half], Mux(low[half], high[1], high[0]))[:width]


def carry_save_product(stages: Stages, a: Value, b: Value) -> tuple[Value, Value]:
    """a × b as two rows whose sum is the product: the partial products reduced by rows of full adders
    (a Wallace tree), so that one carry chain remains, in the adder that sums the two rows."""
    width = len(a) + len(b)
    rows = [stages.nets(row=(Mux(b[i], a, 0) << i)[:width]).row for i in range(len(b))]
    while len(rows) > 2:
        reduced = []
        for k in range(0, len(rows) - 2, 3):
            x, y, z = rows[k:k + 3]
            added = stages.nets(sum=x ^ y ^ z, carry=(((x & y) | (x & z) | (y & z)) << 1)[:width])
            reduced += [added.sum, added.carry]
        rows = reduced + rows[len(rows) - len(rows) % 3:]
    return rows[0], rows[1]
