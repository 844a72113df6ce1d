"""The Verilog cache the Yosys and synthesis-table tests share. The markers (registered in pyproject.toml):

`verilator`: the test builds a block with Verilator (or lints with it) or runs a cocotb bench (under Verilator or
Icarus). `slow`: the test needs Yosys on a real block, runs SymbiYosys (`basedie prove`), elaborates blocks at
full size, or runs a whole study, sweep or large simulation (seconds to minutes each); it still runs in the
default `pytest`. `pytest -m "not verilator and not slow"` runs everything else: the golden
models, the parameter checks, the Amaranth-simulator unit tests, the system model and the CLI's argument checks."""
import functools

import pytest


@pytest.fixture(scope="session")
def verilog_text():
    """`verilog_text(block name, parameters)`: the block's generated Verilog, elaborated once per test process."""
    from rtl.generate import verilog_of
    from rtl.registry import BLOCKS

    @functools.cache
    def text(name: str, params) -> str:
        return verilog_of(BLOCKS[name], params)[1]

    return text
