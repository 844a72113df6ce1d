"""Bench configurations as test parameters, grouped by configuration: with `--dist loadgroup` every test of one
configuration runs in the same worker, so the `verilog_text` fixture (tests/conftest.py) generates its Verilog once."""
import pytest

from tb.verify import run_ids


def bench_params(runs: list[tuple[str, dict]], *marks, group: str = "verilog") -> list:
    """`runs` ((block name, parameters) pairs) as `pytest.param`s carrying `marks` and their configuration's group
    (`group`-<run id>: what the group's tests share, its Verilog or its Verilator build)."""
    return [pytest.param(name, config, id=run_id, marks=[pytest.mark.xdist_group(f"{group}-{run_id}"), *marks])
            for (name, config), run_id in zip(runs, run_ids(runs))]
