"""`basedie verify --simulator icarus`: the benches under Icarus Verilog, a four-state simulator, as a user's
flow would run the generated Verilog. A check, not a measurement: the verified table's figures come from
Verilator runs (cycle counts do not depend on the simulator), so nothing here writes the table."""
from concurrent.futures import ProcessPoolExecutor

from rtl.registry import BLOCKS

from .runner import prepare_toolchain, run_bench
from .verify import bench_runs


def check_one(block_name: str, config: dict, waves: bool = False) -> tuple[str, dict]:
    params = BLOCKS[block_name].params(**config)
    run_bench(block_name, BLOCKS[block_name].bench.module, params, waves=waves, simulator="icarus")
    return block_name, config


def check(block_names: list[str], waves: bool = False, jobs: int = 1,
          runs: list[tuple[str, dict]] | None = None) -> list[tuple[str, dict]]:
    """Run every bench run of these blocks (or `runs`, block and parameters) under Icarus, `jobs` at a time;
    raises on the first failure."""
    prepare_toolchain("icarus")  # one clear message before any bench starts
    runs = bench_runs(block_names) if runs is None else runs
    if jobs <= 1:
        return [check_one(name, config, waves) for name, config in runs]
    with ProcessPoolExecutor(jobs) as pool:
        return [f.result() for f in [pool.submit(check_one, name, config, waves) for name, config in runs]]
