"""Bench configurations as test parameters, grouped by configuration: with `--dist loadgroup` every test of one
configuration runs in the same worker, so the `verilog_text` fixture (tests/conftest.py) generates its Verilog once."""
import pytest

from basedie.flow.verify import run_ids


def bench_params(runs: list[tuple[str, dict]], *marks, group: str = "verilog") -> list:
    """`runs` ((block name, parameters) pairs) as `pytest.param`s carrying `marks` and their configuration's group
    (`group`-<run id>: what the group's tests share, its Verilog or its Verilator build)."""
    return [pytest.param(name, config, id=run_id, marks=[pytest.mark.xdist_group(f"{group}-{run_id}"), *marks])
            for (name, config), run_id in zip(runs, run_ids(runs))]


def beside_build(block_name: str, **config) -> pytest.MarkDecorator:
    """The `xdist_group` of the bench tests that build `block_name` at `config` under Verilator
    (`tests/tb/bench_runs.built_together`), for another test that runs that build: in their worker it reuses the
    build, where in the other worker it could build the same model at the same time (the runner's cache shares
    finished builds only)."""
    return pytest.mark.xdist_group(f"build-{run_ids([(block_name, config)])[0]}")
