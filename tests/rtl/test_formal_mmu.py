"""The MMU's formal properties can fail: plant a bug in the RTL and the prover must find a counterexample to the
property that names it (docs/guides/formal.md). The full proofs of the unchanged design run under
`basedie prove mmu`."""
import inspect
from types import SimpleNamespace

import pytest
from amaranth.lib.fifo import SyncFIFO

from rtl.mmu import arbiter, lsu
from rtl.mmu import mmu as rtl_mmu
from basedie.flow import sby
from tb.formal import mmu

pytestmark = pytest.mark.slow     # SymbiYosys runs (Yosys and a solver): minutes of CPU in all

PROPERTIES = {p.name: p for p in mmu.PROPERTIES}


def rewire(monkeypatch, part: str, assignments) -> None:
    """Replace the class `part` of rtl/mmu/mmu.py by a subclass whose `elaborate` ends with the comb statements
    `assignments(self, m)`: a later comb assignment overrides an earlier one, so this rewires signals of the real
    block and leaves the rest as it is."""
    base = getattr(rtl_mmu, part)

    class Mutant(base):
        def elaborate(self, platform):
            m = super().elaborate(platform)
            m.d.comb += assignments(self, m)
            return m
    monkeypatch.setattr(rtl_mmu, part, Mutant)


def counterexample(name: str, depth: int, variant: str = "in_order") -> sby.Outcome:
    """BMC of property `name` on the (mutated) MMU; the outcome must be a counterexample from that property's
    own assertions."""
    prop = PROPERTIES[name]
    outcome = sby.run(prop.harness(variant), "bmc", depth)
    assert outcome.status == "FAIL", outcome.log[-2000:]
    lines, first = inspect.getsourcelines(prop.check)
    path = inspect.getsourcefile(prop.check)
    assert outcome.failed_assertions, outcome.log[-2000:]
    for where in outcome.failed_assertions:
        file, line = where.rsplit(":", 1)
        assert path.endswith(file) and first <= int(line) < first + len(lines), (where, prop.check.__name__)
    return outcome


def test_a_response_the_router_never_consumes_is_seen_twice(monkeypatch) -> None:
    rewire(monkeypatch, "ResponseRouter",
           lambda self, m: [self.mc_resp.ready.eq(0), self.tag.ready.eq(0), self.slots.release.eq(0)])
    counterexample("gpu_once", 6)


def test_a_gpu_slot_never_released_starves_later_requests(monkeypatch) -> None:
    rewire(monkeypatch, "ResponseRouter", lambda self, m: self.slots.release.eq(0))
    counterexample("gpu_delivered", PROPERTIES["gpu_delivered"].depth)


def test_an_entry_never_retired_completes_again_and_again(monkeypatch) -> None:
    rewire(monkeypatch, "Completion", lambda self, m: self.table.retire.eq(0))
    counterexample("pnm_once", 6)


def test_answers_never_marked_leave_the_instruction_pending(monkeypatch) -> None:
    rewire(monkeypatch, "ResponseRouter", lambda self, m: self.entries.mark.eq(0))
    counterexample("pnm_delivered", PROPERTIES["pnm_delivered"].depth)


def test_a_protection_check_that_sees_only_the_first_region(monkeypatch) -> None:
    checked = lsu.fault_of

    def first_region_only(m, p, instruction, config):
        return checked(m, p, instruction, SimpleNamespace(memory_size=config.memory_size,
                                                          region_base=[config.region_base[0]],
                                                          region_limit=[config.region_limit[0]]))
    monkeypatch.setattr(lsu, "fault_of", first_region_only)
    counterexample("protected_store", 7)


def test_a_policy_encoding_that_reads_mixed_as_prefill_first(monkeypatch) -> None:
    monkeypatch.setattr(arbiter, "POLICIES", ("mixed", "decode_first", "prefill_first"))
    counterexample("wrr_bound", 8)


def test_an_in_order_tag_fifo_one_entry_short_overflows(monkeypatch) -> None:
    monkeypatch.setattr(rtl_mmu, "SyncFIFO", lambda *, width, depth: SyncFIFO(width=width, depth=depth - 1))
    counterexample("no_fifo_overflow", 10)


def test_an_arbiter_that_ignores_the_memory_controllers_ready(monkeypatch) -> None:
    rewire(monkeypatch, "MMU", lambda self, m: m.submodules.arbiter.request.ready.eq(1))
    counterexample("mc_req_stable", 4)


def test_a_router_that_takes_every_memory_response_at_once(monkeypatch) -> None:
    # Whether or not the GPU (or the buffer) took it: an untaken response vanishes from gpu_resp.
    rewire(monkeypatch, "ResponseRouter",
           lambda self, m: [self.mc_resp.ready.eq(1), self.tag.ready.eq(self.mc_resp.valid & self.tag.valid)])
    counterexample("outputs_stable", 6)


@pytest.mark.parametrize("variant", ["in_order", "out_of_order"])
def test_requests_tagged_with_slot_0_whatever_slot_they_hold(monkeypatch, variant) -> None:
    rewire(monkeypatch, "GPUPath", lambda self, m: self.request.payload.tag.index.gpu_slot.eq(0))
    counterexample("responses_routed", 7, variant)


def test_the_real_arbiter_keeps_mc_req_still_by_induction() -> None:
    outcome = sby.run(PROPERTIES["mc_req_stable"].harness("in_order"), "prove", 3)
    assert outcome.status == "PASS" and outcome.induction is not None, outcome.log[-2000:]


def test_a_memory_size_beyond_the_address_space_is_ignored() -> None:
    """Regression: the proof of protected_store found that a memory_size above 2**address_bits let a tensor run
    past the top of memory and wrap to address 0, which the protection check (on unwrapped addresses) missed."""
    from amaranth.sim import Simulator

    from rtl.mmu.config import ConfigRegisters
    from rtl.mmu.params import REG_MEMORY_SIZE

    p = mmu.PARAMS
    dut = ConfigRegisters(p)
    seen = []

    async def bench(ctx):
        for value in (2 ** p.address_bits - 2, 2 ** p.address_bits + 1, 2 ** p.address_bits):
            ctx.set(dut.write.valid, 1)
            ctx.set(dut.write.payload, {"reg": REG_MEMORY_SIZE, "value": value})
            await ctx.tick()
            seen.append(ctx.get(dut.values.memory_size))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    top = 2 ** p.address_bits
    assert seen == [top - 2, top - 2, top]


def test_the_real_mmu_keeps_stores_out_of_protected_regions_where_the_wrap_showed() -> None:
    # The wrap-around counterexample was found at step 6 of this BMC.
    outcome = sby.run(PROPERTIES["protected_store"].harness("in_order"), "bmc", 7)
    assert outcome.status == "PASS", outcome.log[-2000:]
