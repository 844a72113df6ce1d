"""`basedie -v`: the packages' diagnostics reach stderr only when asked for, and only for that command."""
import logging

from basedie.cli import main

SIMULATE = ["simulate", "--system", "duopd", "--model", "LLaMA2-70B", "--input-len", "2048", "--output-len", "16",
            "--requests", "4", "--no-plots"]


def test_verbose_logs_the_verified_figures_a_simulation_used(tmp_path, capsys) -> None:
    assert main(["-v", *SIMULATE, "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "INFO sysmodel.simulate: verified figures used: pnm_lane" in err
    assert "INFO sysmodel.simulate: duopd: 4 requests on LLaMA2-70B simulated in" in err


def test_without_verbose_stderr_stays_empty_and_logging_is_left_as_found(tmp_path, capsys) -> None:
    assert main([*SIMULATE, "--out", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().err == ""
    for name in ("basedie", "rtl", "tb", "sysmodel"):
        assert logging.getLogger(name).handlers == []
        assert logging.getLogger(name).level == logging.NOTSET
