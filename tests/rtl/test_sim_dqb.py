"""The DQB's request table and S/Z line directory under Amaranth's own simulator, against hand-worked lookups (no
Verilator build: each runs in well under a second)."""
from amaranth.sim import Simulator

from rtl.dqb.params import DQBParams
from rtl.dqb.request_table import RequestTable
from rtl.dqb.sz_requests import LineDirectory

# 4-byte beats; 4 table entries of 32 bytes; 32 bytes of S/Z buffer = 4 lines of one beat per half.
PARAMS = DQBParams(interface_bits=32, internal_bits=64, request_table_bytes=128, sz_buffer_bytes=32,
                   outstanding_reads=4)


def simulate(dut, bench) -> None:
    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()


def test_request_table_matches_half_open_ranges_lowest_index_first() -> None:
    """Entry 2 covers [0x100, 0x140), entry 1 [0x120, 0x130) inside it (index 1 wins there), entry 0 is
    written and then cleared, entry 3 has a base that is no whole beat (hit, but not usable)."""
    assert PARAMS.table_entries == 4 and PARAMS.beat_bytes == 4
    dut = RequestTable(PARAMS)
    looked_up = {}

    async def write(ctx, index, base, size, scale=0, zero=0, log2_width=4, enable=1):
        ctx.set(dut.config.valid, 1)
        ctx.set(dut.config.payload, {"index": index, "weight_base": base, "weight_size": size, "scale_base": scale,
                                     "zero_base": zero, "log2_group_width": log2_width, "enable": enable})
        await ctx.tick()
        ctx.set(dut.config.valid, 0)

    async def bench(ctx):
        assert ctx.get(dut.config.ready)
        await write(ctx, 0, 0x100, 0x40)
        await write(ctx, 2, 0x100, 0x40, scale=0x800, zero=0x900)
        await write(ctx, 1, 0x120, 0x10, scale=0xA00, zero=0xB00, log2_width=5)
        await write(ctx, 3, 0x202, 0x10)
        await write(ctx, 0, 0, 0, enable=0)              # cleared: entry 2 serves [0x100, 0x120) again
        for address in (0x0FF, 0x100, 0x11F, 0x120, 0x12F, 0x130, 0x13F, 0x140, 0x204):
            ctx.set(dut.address, address)
            match = dut.match
            looked_up[address] = (ctx.get(match.hit), ctx.get(match.usable), ctx.get(match.weight_base),
                                  ctx.get(match.scale_base), ctx.get(match.log2_group_width))

    simulate(dut, bench)
    outer, inner = (1, 1, 0x100, 0x800, 4), (1, 1, 0x120, 0xA00, 5)
    assert looked_up[0x0FF][0] == 0 and looked_up[0x140][0] == 0          # below the base, at the end
    assert [looked_up[a] for a in (0x100, 0x11F, 0x130, 0x13F)] == [outer] * 4
    assert [looked_up[a] for a in (0x120, 0x12F)] == [inner] * 2
    assert looked_up[0x204][:2] == (1, 0)                                  # misaligned base: a hit, refused


def test_line_directory_fills_round_robin_and_forgets_on_invalidate_and_flush() -> None:
    """Four lines. Fills of beats 10, 11, 12, 13, 14 take lines 0, 1, 2, 3, 0 (beat 10 is evicted by 14).
    Invalidating beat 12 frees nothing else. The next victim, line 1, holds beat 11: invalidating 11 while
    beat 20 fills line 1 in the same cycle leaves 20 present there (the fill wins). A flush forgets every line."""
    assert PARAMS.sz_lines == 4
    dut = LineDirectory(PARAMS)
    seen = {}

    def lookup(ctx, beats) -> list:
        out = []
        for beat in beats:
            ctx.set(dut.beat, beat)
            out.append(ctx.get(dut.line) if ctx.get(dut.hit) else None)
        return out

    async def fill(ctx, beat) -> int:
        ctx.set(dut.beat, beat)
        victim = ctx.get(dut.victim)
        ctx.set(dut.allocate, 1)
        await ctx.tick()
        ctx.set(dut.allocate, 0)
        return victim

    async def bench(ctx):
        seen["victims"] = [await fill(ctx, beat) for beat in (10, 11, 12, 13, 14)]
        seen["after_fills"] = lookup(ctx, (10, 11, 12, 13, 14))
        ctx.set(dut.invalidate, 1)
        ctx.set(dut.invalidate_beat, 12)
        await ctx.tick()
        ctx.set(dut.invalidate, 0)
        seen["after_invalidate"] = lookup(ctx, (11, 12, 13, 14))
        ctx.set(dut.invalidate, 1)
        ctx.set(dut.invalidate_beat, 11)
        seen["fill_and_invalidate_victim"] = await fill(ctx, 20)
        ctx.set(dut.invalidate, 0)
        seen["after_fill_and_invalidate"] = lookup(ctx, (11, 20))
        ctx.set(dut.flush, 1)
        await ctx.tick()
        ctx.set(dut.flush, 0)
        seen["after_flush"] = lookup(ctx, (11, 13, 14, 20))

    simulate(dut, bench)
    assert seen["victims"] == [0, 1, 2, 3, 0]
    assert seen["after_fills"] == [None, 1, 2, 3, 0]
    assert seen["after_invalidate"] == [1, None, 3, 0]
    assert seen["fill_and_invalidate_victim"] == 1
    assert seen["after_fill_and_invalidate"] == [None, 1]
    assert seen["after_flush"] == [None] * 4
