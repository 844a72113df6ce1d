"""`basedie prove`: bad arguments are one line and exit 2 with nothing run; a real run reports each property's
verdict with the depth it reached, and exit 1 when the prover finds a counterexample."""
import pytest

from basedie import cli
from rtl.mmu import mmu as rtl_mmu


@pytest.mark.parametrize("argv, message", [
    (["prove", "fp32_add"], "no formal properties for 'fp32_add' (blocks with some: mmu, dqb, fp32_narrow)"),
    (["prove", "mmu", "--depth", "0"], "--depth must be >= 1, got 0"),
    (["prove", "mmu", "--property", "gpu_twice"], "mmu has no property 'gpu_twice' (known: gpu_once, "),
])
def test_bad_arguments_are_one_line_and_exit_2(argv, message, capsys, tmp_path) -> None:
    assert cli.main([*argv, "--keep", str(tmp_path / "jobs")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"basedie prove: error: {message}") and err.count("\n") == 1
    assert not (tmp_path / "jobs").exists()


@pytest.mark.slow     # runs SymbiYosys
def test_a_property_that_holds_is_reported_with_its_induction(capsys) -> None:
    assert cli.main(["prove", "mmu", "--property", "mc_req_stable", "--depth", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:4] for line in lines] == [["mmu", "mc_req_stable", "in_order", "PROVED"],
                                                    ["mmu", "mc_req_stable", "out_of_order", "PROVED"]]
    assert all("basecase 3 steps" in line for line in lines)


@pytest.mark.slow     # runs SymbiYosys
def test_a_counterexample_fails_the_command_and_keeps_its_trace(monkeypatch, capsys, tmp_path) -> None:
    class Hasty(rtl_mmu.MMU):
        """The arbiter's request register reloads whether or not the memory controller took the request."""
        def elaborate(self, platform):
            m = super().elaborate(platform)
            m.d.comb += m.submodules.arbiter.request.ready.eq(1)
            return m
    monkeypatch.setattr(rtl_mmu, "MMU", Hasty)
    argv = ["prove", "mmu", "--property", "mc_req_stable", "--depth", "4", "--bmc", "--keep", str(tmp_path)]
    assert cli.main(argv) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.split()[3] == "FAIL" and "tb/formal/mmu.py:" in line for line in lines)
    assert (tmp_path / "mmu" / "mc_req_stable-in_order" / "job" / "engine_0" / "trace.vcd").exists()
