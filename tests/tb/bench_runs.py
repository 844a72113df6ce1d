"""The common start of every bench module's `test_bench`: one test per parameter set its bench proves under
pytest (`Bench.configs`), each built and run under Verilator."""
import pytest

from rtl.params import Params
from rtl.registry import BLOCKS
from basedie.flow.runner import run_bench
from basedie.flow.verify import module_runs

from tests.bench_configurations import bench_params


def built_together(runs: list[tuple[str, dict]]) -> list:
    """`runs` as `pytest.param`s grouped by build: with `--dist loadgroup` the tests that run one parameter set's
    Verilator build run in one worker, which builds it once (two workers building the same model at once each
    build it: 255 s lost to the vector unit's in the fresh-clone run of 2026-12-01)."""
    return bench_params(runs, group="build")


def each_run(bench_module: str):
    """Parametrize a test over `(block_name, config)` for every pytest set of the benches in `bench_module`."""
    return pytest.mark.parametrize("block_name,config", built_together(module_runs(bench_module)))


def measure(block_name: str, config: dict) -> tuple[Params, dict]:
    """The block's parameters at `config` and the figures its bench measured there."""
    params = BLOCKS[block_name].params(**config)
    return params, run_bench(block_name, BLOCKS[block_name].bench.module, params)
