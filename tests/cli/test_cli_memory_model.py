"""`basedie verify --memory-model`: the refusals (one line, exit 2, no table written) and the runs it plans."""
import pytest

from basedie.cli import main
from basedie.flow.verify import Run, planned_runs


@pytest.mark.parametrize("argv,message", [
    (["verify", "mmu", "--memory-model", "hbm5"], "--memory-model 'hbm5' is not one of ideal, hbm3, hbm4"),
    (["verify", "fp32_add", "--memory-model", "hbm3"],
     "--memory-model hbm3: the benches of fp32_add have no DRAM option (blocks that have one: mmu, dqb, base_die)"),
    (["verify", "mmu", "--memory-model", "hbm3", "--simulator", "icarus"],
     "--memory-model applies to Verilator runs, which measure the figures"),
])
def test_bad_memory_model_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, argv, message) -> None:
    table = tmp_path / "table.json"
    assert main([*argv, "--table", str(table)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not table.exists()


def test_memory_model_reaches_every_planned_run(tmp_path) -> None:
    runs, _ = planned_runs(["mmu"], None, True, tmp_path / "table.json", "hbm3")
    assert runs == [Run("mmu", {"out_of_order": False}, memory="hbm3"), Run("mmu", {"out_of_order": True}, memory="hbm3")]
    assert [run.name for run in runs] == ["mmu-memory=hbm3", "mmu-out_of_order=True-memory=hbm3"]


def test_the_dqb_runs_behind_a_dram_model_when_named(tmp_path) -> None:
    runs, _ = planned_runs(["dqb"], None, True, tmp_path / "table.json", "hbm4")
    assert [run.memory for run in runs] == ["hbm4", "hbm4"]


def test_without_memory_model_each_bench_runs_behind_its_own(tmp_path) -> None:
    """The MMU's figures come from HBM4 (DuoPD's memory), every other block's from the ideal controller."""
    runs, _ = planned_runs(["mmu", "fp32_add", "dqb"], None, True, tmp_path / "table.json")
    assert [(run.block, run.memory) for run in runs] == [("mmu", "hbm4"), ("mmu", "hbm4"), ("fp32_add", "ideal"),
                                                         ("dqb", "ideal"), ("dqb", "ideal")]
    assert planned_runs(["mmu"], None, True, tmp_path / "table.json", "ideal")[0][0].memory == "ideal"
