"""The MMU's arbiter and PNM pending table under Amaranth's own simulator, cycle by cycle against hand-worked
sequences (no Verilator build: each runs in well under a second)."""
from amaranth.sim import Simulator

from rtl.mmu.arbiter import Arbiter
from rtl.mmu.params import POLICIES, MMUParams
from rtl.mmu.pending import PendingTable

PARAMS = MMUParams(pending_entries=4, max_sub_requests=4)


def simulate(dut, bench) -> None:
    sim = Simulator(dut)
    sim.add_clock(1e-9)
    sim.add_testbench(bench)
    sim.run()


def arbitrate(policy: str, weights: tuple[int, int], gpu_wants: list[int], pnm_wants: list[int],
              mc_ready: list[int]) -> tuple[list[str], list[str]]:
    """Per cycle, who was granted (`g`, `p` or `-`) and which request the registered output presents to the
    memory controller (`-` when none is valid), the GPU's requests carrying address 1 and the PNM's 2."""
    dut = Arbiter(PARAMS)
    grants, presented = [], []

    async def bench(ctx):
        ctx.set(dut.config.policy, POLICIES.index(policy))
        ctx.set(dut.config.weight_gpu, weights[0])
        ctx.set(dut.config.weight_pnm, weights[1])
        ctx.set(dut.gpu.payload.address, 1)
        ctx.set(dut.pnm.payload.address, 2)
        for gpu, pnm, ready in zip(gpu_wants, pnm_wants, mc_ready):
            ctx.set(dut.gpu.valid, gpu)
            ctx.set(dut.pnm.valid, pnm)
            ctx.set(dut.request.ready, ready)
            presented.append(str(ctx.get(dut.request.payload.address)) if ctx.get(dut.request.valid) else "-")
            grants.append("g" if ctx.get(dut.gpu.ready) and gpu else "p" if ctx.get(dut.pnm.ready) and pnm else "-")
            await ctx.tick()

    simulate(dut, bench)
    return grants, presented


def test_mixed_policy_grants_in_the_ratio_of_the_weights() -> None:
    """Both always want, the memory always takes: GPU weight 2, PNM weight 1 gives g g p, g g p, ..."""
    grants, presented = arbitrate("mixed", (2, 1), [1] * 9, [1] * 9, [1] * 9)
    assert "".join(grants) == "ggpggpggp"
    assert "".join(presented) == "-11211211"      # the grant of cycle t is presented in cycle t + 1


def test_mixed_policy_is_work_conserving_and_the_idle_source_keeps_its_turn() -> None:
    """Weights 1:1. Cycle 0 the GPU is favoured and granted; the PNM is favoured next, but wants nothing in
    cycles 1-2, so the GPU takes those slots without using up a turn; in cycle 3 the PNM wants again and is
    granted at once, then the GPU."""
    grants, _ = arbitrate("mixed", (1, 1), [1, 1, 1, 1, 1], [0, 0, 0, 1, 1], [1] * 5)
    assert "".join(grants) == "gggpg"


def test_fixed_priorities_and_a_stalled_memory_controller_holds_the_request() -> None:
    grants, _ = arbitrate("prefill_first", (1, 1), [1, 1, 0], [1, 1, 1], [1, 1, 1])
    assert "".join(grants) == "ggp"
    grants, _ = arbitrate("decode_first", (1, 1), [1, 1, 1], [1, 1, 0], [1, 1, 1])
    assert "".join(grants) == "ppg"
    # Cycle 0 grants the GPU; cycles 1-3 the memory controller refuses, so nobody is granted and the GPU's
    # request stays presented; cycle 4 it is taken and the PNM (decode_first) is granted in the same cycle.
    grants, presented = arbitrate("decode_first", (1, 1), [1, 0, 0, 0, 0, 0], [0, 1, 1, 1, 1, 0],
                                  [1, 0, 0, 0, 1, 1])
    assert "".join(grants) == "g---p-"
    assert "".join(presented) == "-1111" + "2"


def test_pending_table_allocates_the_lowest_free_entry_and_finishes_on_the_last_expected_answer() -> None:
    """Entry 0 expects sub-requests 0 and 2 (bitmap 0b0101); entry 1 is a refused instruction (expects
    nothing) and is finished at once; entry 0 finishes only after both its answers. Retiring entry 1 frees it,
    so the next allocation takes index 1 again, not 2."""
    dut = PendingTable(PARAMS)
    log = {}

    async def allocate(ctx, expected: int, dest: int) -> int:
        ctx.set(dut.allocate.valid, 1)
        ctx.set(dut.allocate.payload.expected, expected)
        ctx.set(dut.allocate.payload.dest, dest)
        ctx.set(dut.allocate.payload.last, 2)
        index = ctx.get(dut.allocate.index)
        await ctx.tick()
        ctx.set(dut.allocate.valid, 0)
        return index

    async def mark(ctx, entry: int, sub: int) -> None:
        ctx.set(dut.lookup.entry, entry)
        ctx.set(dut.lookup.sub, sub)
        ctx.set(dut.lookup.mark, 1)
        await ctx.tick()
        ctx.set(dut.lookup.mark, 0)

    def awaited(ctx, entry: int, sub: int) -> tuple[int, int]:
        ctx.set(dut.lookup.entry, entry)
        ctx.set(dut.lookup.sub, sub)
        return ctx.get(dut.lookup.state.awaited), ctx.get(dut.lookup.state.row)

    async def bench(ctx):
        log["first"] = await allocate(ctx, 0b0101, dest=10)
        log["second"] = await allocate(ctx, 0b0000, dest=20)
        log["finished_at_start"] = ctx.get(dut.retire.finished)
        log["awaited"] = [awaited(ctx, 0, sub) for sub in range(4)]
        await mark(ctx, 0, 2)
        log["after_one_answer"] = (ctx.get(dut.retire.finished), awaited(ctx, 0, 2)[0])
        await mark(ctx, 0, 0)
        log["after_both"] = ctx.get(dut.retire.finished)
        ctx.set(dut.retire.entry, 1)
        log["retired_dest"] = ctx.get(dut.retire.retired.dest)
        ctx.set(dut.retire.retire, 1)
        await ctx.tick()
        ctx.set(dut.retire.retire, 0)
        log["after_retire"] = ctx.get(dut.retire.finished)
        log["third"] = await allocate(ctx, 0b0001, dest=30)

    simulate(dut, bench)
    assert (log["first"], log["second"], log["third"]) == (0, 1, 1)
    assert log["finished_at_start"] == 0b0010                      # only the refused instruction's entry
    # Sub-requests 0 and 2 are awaited; 1 and 3 are not expected. A sub-request's buffer row is dest + sub.
    assert log["awaited"] == [(1, 10), (0, 11), (1, 12), (0, 13)]
    assert log["after_one_answer"] == (0b0010, 0)                  # answered: no longer awaited
    assert log["after_both"] == 0b0011
    assert log["retired_dest"] == 20
    assert log["after_retire"] == 0b0001
