"""Every bench's small configurations under Icarus Verilog, a four-state simulator: state that depends on
uninitialised or don't-care bits shows up there as X, and the shared stream ends (`tb.bench`) fail a bench on
any X or Z in a payload whose `valid` is high or in a `valid`/`ready`. Skipped, with the reason, when Icarus is
not installed (`apt-get install iverilog`; `.ci/run` installs it)."""
import pytest

from rtl.registry import BLOCKS
from basedie.flow.runner import run_bench
from basedie.flow.verify import bench_runs, run_ids

from tests.tb.planted import needs_icarus

pytestmark = pytest.mark.verilator

RUNS = bench_runs(list(BLOCKS), include_verify_only=False)


@needs_icarus
@pytest.mark.parametrize("block_name,config", RUNS, ids=run_ids(RUNS))
def test_bench_under_icarus(block_name: str, config: dict) -> None:
    figures = run_bench(block_name, BLOCKS[block_name].bench.module, BLOCKS[block_name].params(**config),
                        simulator="icarus")
    checked = {name: count for name, count in figures.items() if name.endswith("_checked")}
    assert checked and all(count > 0 for count in checked.values()), checked  # each bench names what it checked
    assert "random_reset_seed" not in figures  # a Verilator seed; Icarus leaves uninitialised bits X instead


@needs_icarus
def test_bench_parts_under_icarus() -> None:
    """The sampling semantics the monitors rely on hold under Icarus too, and a sink rejects an X payload."""
    run_bench("fp_to_fp32", "tb.selftest", BLOCKS["fp_to_fp32"].params(source="int4"), simulator="icarus")
