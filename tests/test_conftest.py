"""tests/conftest.py: the order tests are dealt to workers in, the CPU seconds recorded for each test, and the
compiler cache the Verilator builds use."""
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import conftest


def item(module: str, marker: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(path=Path(module), name=f"{module}:{marker}",
                           get_closest_marker=lambda name: getattr(pytest.mark, name) if name == marker else None)


def test_costliest_modules_come_first_whole_and_otherwise_in_file_order() -> None:
    items = [item("a.py"), item("b.py"), item("b.py", "slow"), item("c.py"), item("d.py", "verilator"),
             item("d.py"), item("e.py", "slow")]
    conftest.pytest_collection_modifyitems(items)
    # d holds a bench (rank 0), b and e a slow test (rank 1); a module's quick tests stay beside its costly one.
    assert [i.name for i in items] == ["d.py:verilator", "d.py:None", "b.py:None", "b.py:slow", "e.py:slow",
                                       "a.py:None", "c.py:None"]


def test_cpu_seconds_count_the_children_the_test_waited_for() -> None:
    before = conftest.cpu_seconds()
    subprocess.run([sys.executable, "-c", "import time\nend = time.process_time() + 0.3\n"
                    "while time.process_time() < end: pass"], check=True)
    assert conftest.cpu_seconds() - before >= 0.3


def test_verilator_builds_compile_through_ccache_unless_another_cache_is_named(monkeypatch) -> None:
    from basedie.flow.runner import BUILD_ROOT

    monkeypatch.delenv("OBJCACHE", raising=False)
    monkeypatch.delenv("CCACHE_DIR", raising=False)
    conftest.pytest_configure(None)
    assert Path(os.environ["OBJCACHE"]).name == "ccache"
    assert os.environ["CCACHE_DIR"] == str(BUILD_ROOT / "ccache")
    monkeypatch.setenv("OBJCACHE", "distcc")
    monkeypatch.setenv("CCACHE_DIR", "/elsewhere")
    conftest.pytest_configure(None)
    assert (os.environ["OBJCACHE"], os.environ["CCACHE_DIR"]) == ("distcc", "/elsewhere")
