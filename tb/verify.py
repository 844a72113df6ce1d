"""Run the benches of registered blocks and turn what they measured into verified-table entries."""
from concurrent.futures import ProcessPoolExecutor

from rtl.registry import BLOCKS
from sysmodel.verified import VerifiedEntry, rtl_digest

from .benches import BENCHES
from .runner import CLOCK_PERIOD_NS, run_bench, run_name, tool_versions


def bench_runs(block_names: list[str], include_verify_only: bool = True) -> list[tuple[str, dict]]:
    """Every (block, parameters) pair the benches of these blocks prove."""
    return [(name, config) for name in block_names
            for config in BENCHES[name].configs + (BENCHES[name].verify_only if include_verify_only else ())]


def module_runs(module: str) -> list[tuple[str, dict]]:
    """The (block, parameters) pairs `pytest` proves with the bench `module` (its `configs`, not `verify_only`)."""
    return bench_runs([name for name, bench in BENCHES.items() if bench.module == module], include_verify_only=False)


def run_ids(runs: list[tuple[str, dict]]) -> list[str]:
    """Test ids for bench runs: their run folders' names."""
    return [run_name(name, BLOCKS[name].params(**config)) for name, config in runs]


def verify_one(block_name: str, config: dict, waves: bool = False) -> VerifiedEntry:
    bench = BENCHES[block_name]
    params = BLOCKS[block_name].params(**config)
    figures = run_bench(block_name, bench.module, params, waves=waves)
    provenance = {
        "bench": bench.module,
        "clock_hz": 1e9 / CLOCK_PERIOD_NS,
        "cycles_simulated": figures.pop("cycles_simulated"),
        "random_reset_seed": figures.pop("random_reset_seed"),  # Verilator's +verilator+seed (tb.runner)
        "tools": tool_versions(),
        "rtl_module": BLOCKS[block_name].component.__module__,
        "rtl_digest": rtl_digest(BLOCKS[block_name].component.__module__),
    }
    return VerifiedEntry(block=block_name, params=params.as_dict(), figures=figures, provenance=provenance)


def verify(block_names: list[str], waves: bool = False, jobs: int = 1) -> list[VerifiedEntry]:
    """Run the benches, `jobs` at a time (each is its own simulator process); raises on the first failure."""
    runs = bench_runs(block_names)
    if jobs <= 1:
        return [verify_one(name, config, waves) for name, config in runs]
    with ProcessPoolExecutor(jobs) as pool:
        futures = [pool.submit(verify_one, name, config, waves) for name, config in runs]
        return [future.result() for future in futures]
