# amaranth: UnusedElaboratable=no
"""Every block states its timing one way, `latency` and `initiation_interval` on the component in cycles, and
each statement equals what the block's bench measured (the verified table) at every verified parameter set."""
from basedie import verified
from rtl.registry import BLOCKS

# The figure a block's `latency` states. The MMU's is its unloaded minimum, the GPU path (the PNM path has one
# more stage); the DQB's is a dequantized read's data to its first response beat, which its bench records as
# `latency_cycles` (its `bypass_latency`, the short path's, as `bypass_latency_cycles`).
LATENCY_FIGURE = {"mmu": "latency_cycles_gpu"}


def statements(table: verified.VerifiedBlocks) -> list[tuple[str, str, int, int]]:
    """(block, figure, stated, measured) for the latency and the II of every entry of `table`."""
    rows = []
    for entry in table.entries:
        component = BLOCKS[entry.block].component(BLOCKS[entry.block].params(**entry.params))
        latency = LATENCY_FIGURE.get(entry.block, "latency_cycles")
        rows.append((entry.block, latency, component.latency, entry.figures[latency]))
        if hasattr(component, "bypass_latency"):  # the DQB's short path for pass-through beats
            rows.append((entry.block, "bypass_latency_cycles", component.bypass_latency,
                         entry.figures["bypass_latency_cycles"]))
        rows.append((entry.block, "initiation_interval", component.initiation_interval,
                     entry.figures["initiation_interval"]))
    return rows


def test_every_block_states_the_timing_its_bench_measured() -> None:
    rows = statements(verified.load())
    assert {block for block, *_ in rows} == set(BLOCKS), "a registered block has no verified timing"
    assert all(type(stated) is int for _, _, stated, _ in rows), rows
    wrong = [row for row in rows if row[2] != row[3]]
    assert not wrong, f"(block, figure, stated, measured): {wrong}"


def test_a_wrong_statement_is_caught(monkeypatch) -> None:
    """The check can fail: a block that claims one cycle less than its bench measured is reported."""
    monkeypatch.setattr(BLOCKS["fp32_add"].component, "latency", 2)
    table = verified.VerifiedBlocks([verified.VerifiedEntry(
        "fp32_add", {}, {"latency_cycles": 3, "initiation_interval": 1}, {})])
    assert [row for row in statements(table) if row[2] != row[3]] == [("fp32_add", "latency_cycles", 2, 3)]
