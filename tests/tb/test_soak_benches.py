"""Every bench's `soak` test at a tiny N (`basedie verify --soak` runs it at 10^6): it runs alone, streams at least N
beats through every input port under random back-pressure, and records what each port carried. One small parameter
set per bench (one FP unit for the FP bench; the MMU built for reordered answers); the builds are the ones the
benches' own tests use."""
import pytest

from rtl.registry import BLOCKS
from basedie.flow.runner import run_bench

from tests.tb.bench_runs import built_together

pytestmark = pytest.mark.verilator

N = 300
RUNS = [("fp32_add", {}), ("mmu", {"out_of_order": True})] + [
    (block, BLOCKS[block].bench.configs[0]) for block in ("pnm_lane", "pnm_array", "pnm_vector", "pnm_controller",
                                                          "pnm_buffer", "dqb", "pnm", "base_die")]
INPUTS = {"fp32_add": ("i",), "mmu": ("gpu_req", "pnm_sub_requests"), "pnm_lane": ("i",), "pnm_array": ("i",),
          "pnm_vector": ("i",), "pnm_controller": ("commands",), "pnm_buffer": None, "dqb": ("gpu_req",),
          "pnm": ("mc_req", "mc_resp"), "base_die": ("mc_req", "mc_resp")}


@pytest.mark.parametrize("block_name,config", built_together(RUNS))   # beside the bench test of its build
def test_soak_streams_n_beats_per_input_port(block_name: str, config: dict, tmp_path) -> None:
    params = BLOCKS[block_name].params(**config)
    figures = run_bench(block_name, BLOCKS[block_name].bench.module, params, runs=tmp_path, soak=N)
    soak = figures["soak"]
    others = {"latency_cycles", "arbitration", "back_pressure_vectors", "random_vectors"}  # other tests' figures
    assert not set(figures) & others, "the soak test ran with others"
    inputs = INPUTS[block_name] or [name for name in soak["beats"] if name.endswith(("_rd", "_wr"))]
    assert soak["beats_per_port"] == N and all(soak["beats"][port] >= N for port in inputs), soak
    assert soak["cycles"] >= N and soak["memory"] == "ideal" and (soak["lost"], soak["duplicated"], soak["reordered"]) == (0, 0, 0)
    if block_name in ("pnm", "base_die"):   # the memory side: every request answered, and its programs all checked
        assert soak["beats"]["mc_resp"] == soak["beats"]["mc_req"] and soak["beats"]["programs"] >= 1, soak
    assert (tmp_path / next(p.name for p in tmp_path.iterdir() if p.name.endswith("-soak"))).is_dir()
