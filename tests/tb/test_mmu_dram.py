"""The MMU bench behind the HBM3 pseudo-channel model (`basedie verify mmu --memory-model hbm3`): the full
scoreboard holds under DRAM timing, with answers in request order for the in-order build and as they finish for
the out-of-order one, and what the bench measures respects the DRAM's own limits."""
import math

import pytest

from rtl.mmu.params import MMUParams
from tb.dram.timing import HBM3
from basedie.flow.runner import run_bench

from tests.bench_configurations import beside_build
from tests.tb.planted import needs_icarus

pytestmark = pytest.mark.verilator


@pytest.mark.parametrize("out_of_order", [
    pytest.param(False, id="in_order", marks=beside_build("mmu", out_of_order=False)),
    pytest.param(True, id="out_of_order", marks=beside_build("mmu", out_of_order=True))])
def test_mmu_behind_hbm3(out_of_order: bool, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("COCOTB_TEST_FILTER", "idle_latency|saturated_throughput|random_traffic_back_pressure")
    figures = run_bench("mmu", "tb.mmu.bench", MMUParams(out_of_order=out_of_order), runs=tmp_path, memory="hbm3")
    # The data bus carries one 32-byte burst per bl = 2 tCK of 0.625 ns: 0.8 requests per 1 GHz MMU cycle.
    assert figures["requests_per_cycle_saturated"] < 1e3 / (HBM3.tck_ps * HBM3.bl)
    # An idle GPU read finds its bank closed: tRCD_RD + CL + BL = 31 + 20 + 2 = 53 tCK = 33.125 ns after it joins
    # the queue, at most 0.6 tCK (0.375 ns) after its transfer edge; its response is driven at the first MMU edge
    # after that, 34 edges after the request's transfer whatever the phase. The handshake probes count a transfer
    # at the cycle before its edge, so the round trip minus the MMU's path in is 34 + 1 (the fixed-latency
    # controller of `idle_latency`, answering 6 cycles after its acceptance, shows 8 here: round trip 10).
    assert math.ceil(33.125 + 0.375) == math.ceil((HBM3.rcd_rd + HBM3.cl + HBM3.bl) * HBM3.tck_ps / 1e3) == 34
    assert figures["round_trip_cycles_gpu"] - figures["latency_cycles_gpu"] == 34 + 1, figures
    assert (figures["responses_reordered"] > 0) == out_of_order


@needs_icarus
def test_a_request_of_two_bursts_is_answered_after_its_second(monkeypatch, tmp_path) -> None:
    """64-byte requests (`data_bits=512`, as the full DQB's beats) take two consecutive 32-byte bursts: the path
    a full-size DQB behind HBM4 would take (tb/dram/controller.py). Under Icarus: cycle counts do not depend on
    the simulator, and no other test builds this MMU (8 s of CPU in all, where its Verilator build and run take
    36 s; both measure the same figures)."""
    monkeypatch.setenv("COCOTB_TEST_FILTER", "idle_latency|saturated_throughput")
    figures = run_bench("mmu", "tb.mmu.bench", MMUParams(data_bits=512), runs=tmp_path, memory="hbm3",
                        simulator="icarus")
    # Two bursts per request: at most half the one-burst rate, 0.4 requests per MMU cycle.
    assert figures["requests_per_cycle_saturated"] < 1e3 / (HBM3.tck_ps * HBM3.bl) / 2
    # The second burst's RD is tCCD_L = 4 tCK after the first (same bank group): its data is done 31 + 4 + 20 + 2 =
    # 57 tCK = 35.625 ns after the request joins the queue; with at most 0.375 ns of phase, 36 MMU edges.
    assert math.ceil(35.625 + 0.375) == math.ceil((HBM3.rcd_rd + HBM3.ccd_l + HBM3.cl + HBM3.bl) * HBM3.tck_ps / 1e3)
    assert figures["round_trip_cycles_gpu"] - figures["latency_cycles_gpu"] == 36 + 1, figures
