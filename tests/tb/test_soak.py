"""`basedie verify --soak N`: what it plans, how its figure joins an entry of the table (and stays with it), and
its refusals (one line, exit 2, nothing written). The soaks themselves run in `test_soak_benches.py`."""
import json

import pytest

from basedie import verified
from basedie.cli import main
from rtl.mmu.params import MMUParams
from tb import bench
from basedie.flow.verify import Run, soak_runs

SOAK = {"beats_per_port": 5, "beats": {"i": 5, "o": 5}, "cycles": 17, "memory": "ideal", "lost": 0, "duplicated": 0, "reordered": 0,
        "wall_seconds": 3}


def _table(tmp_path):
    path = tmp_path / "table.json"
    path.write_text(verified.TABLE_PATH.read_text())
    return path, json.loads(path.read_text())["entries"]


def _soaked(entry: dict, soak: dict = SOAK, **provenance) -> verified.VerifiedEntry:
    return verified.VerifiedEntry(entry["block"], entry["params"], {"soak": soak},
                                  {**entry["provenance"], **provenance})


def test_soak_runs_are_the_small_parameter_sets_or_the_named_one() -> None:
    runs = soak_runs(["pnm_lane", "mmu"], None, 7)
    assert [(run.block, run.config["width"] if run.block == "pnm_lane" else run.config["out_of_order"])
            for run in runs] == [("pnm_lane", 2), ("mmu", False), ("mmu", True)]  # not the 1,024-wide lane
    assert all(run.soak == 7 and run.memory == "ideal" for run in runs)
    assert runs[1].name == "mmu-soak"
    named = MMUParams(queue_depth=8)
    assert soak_runs(["mmu"], named, 3) == [Run("mmu", named.as_dict(), requested=True, soak=3)]


def test_soak_chunks_add_up() -> None:
    assert list(bench.soak_chunks(25_001)) == [10_000, 10_000, 5_001]
    assert list(bench.soak_chunks(3, chunk=2)) == [2, 1]
    assert list(bench.soak_chunks(0)) == []


def test_a_soak_figure_joins_its_entry_sealed_and_nothing_else_changes(tmp_path) -> None:
    path, before = _table(tmp_path)
    add = next(e for e in before if e["block"] == "fp32_add")
    verified.add_figures([_soaked(add)], path)
    table = verified.load(path)  # sealed again: the content hash matches
    assert table.figure("fp32_add", "soak") == SOAK
    assert table.figure("fp32_add", "latency_cycles") == add["figures"]["latency_cycles"]
    after = json.loads(path.read_text())["entries"]
    assert [e for e in after if e["block"] != "fp32_add"] == [e for e in before if e["block"] != "fp32_add"]


def test_a_soak_of_other_sources_or_parameters_is_refused(tmp_path) -> None:
    path, before = _table(tmp_path)
    add = next(e for e in before if e["block"] == "fp32_add")
    with pytest.raises(ValueError, match="run `basedie verify fp32_add` first"):
        verified.add_figures([_soaked(add, sources_digest="0" * 64)], path)
    other = verified.VerifiedEntry("fp32_add", {**add["params"], "latency": 9}, {"soak": SOAK}, add["provenance"])
    with pytest.raises(ValueError, match="no entry of fp32_add"):
        verified.add_figures([other], path)
    assert json.loads(path.read_text())["entries"] == before


def test_re_measuring_keeps_the_soak_figure_until_the_sources_change(tmp_path) -> None:
    path, before = _table(tmp_path)
    add = next(e for e in before if e["block"] == "fp32_add")
    verified.add_figures([_soaked(add)], path)
    measured = {name: figure for name, figure in add["figures"].items() if name != "soak"}  # a bench run's figures
    fresh = verified.VerifiedEntry("fp32_add", add["params"], measured, add["provenance"])
    verified.store([fresh], path)
    assert verified.load(path).figure("fp32_add", "soak") == SOAK
    changed = verified.VerifiedEntry("fp32_add", add["params"], measured,
                                     {**add["provenance"], "sources_digest": "1" * 64})
    verified.store([changed], path)
    entry = next(e for e in json.loads(path.read_text())["entries"] if e["block"] == "fp32_add")
    assert "soak" not in entry["figures"]


def test_entries_missing_names_the_verify_commands(tmp_path) -> None:
    path, before = _table(tmp_path)
    add = next(e for e in before if e["block"] == "fp32_add")
    digest = add["provenance"]["sources_digest"]
    assert verified.entries_missing(path, [("fp32_add", add["params"], digest)]) == []
    assert verified.entries_missing(path, [("fp32_add", add["params"], "2" * 64)]) == ["basedie verify fp32_add"]
    assert verified.entries_missing(tmp_path / "absent.json", [("fp32_add", add["params"], digest)]) == [
        "basedie verify fp32_add"]


@pytest.mark.parametrize("argv,message", [
    (["verify", "fp32_add", "--soak", "0"], "--soak 0: the beats per port must be at least 1"),
    (["verify", "mmu", "--soak", "5", "--memory-model", "hbm3"], "does not combine with --memory-model"),
    (["verify", "mmu", "--soak", "5", "--quick"], "does not combine with --memory-model, --quick or --scheduler"),
    (["verify", "mmu", "--soak", "5", "--simulator", "icarus"], "--soak applies to Verilator runs, which measure the figures"),
    (["verify", "fp32_add", "--soak", "5"], "has none measured on the current sources for: basedie verify fp32_add"),
])
def test_bad_soaks_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, argv, message) -> None:
    table = tmp_path / "table.json"
    assert main([*argv, "--table", str(table)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not table.exists()


def test_a_soak_run_is_named_apart_from_the_ordinary_run() -> None:
    assert Run("fp32_add", {}, soak=4).name == "fp32_add-soak" != Run("fp32_add", {}).name
