"""The common start of every bench module's `test_bench`: one test per parameter set its bench proves under
pytest (`Bench.configs`), each built and run under Verilator."""
import pytest

from rtl.params import Params
from rtl.registry import BLOCKS
from tb.benches import BENCHES
from tb.runner import run_bench
from tb.verify import module_runs, run_ids


def each_run(bench_module: str):
    """Parametrize a test over `(block_name, config)` for every pytest set of the benches in `bench_module`."""
    runs = module_runs(bench_module)
    return pytest.mark.parametrize("block_name,config", runs, ids=run_ids(runs))


def measure(block_name: str, config: dict) -> tuple[Params, dict]:
    """The block's parameters at `config` and the figures its bench measured there."""
    params = BLOCKS[block_name].params(**config)
    return params, run_bench(block_name, BENCHES[block_name].module, params)
