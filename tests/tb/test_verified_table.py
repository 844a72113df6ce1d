"""The committed verified-figures table follows `rtl/` and `tb/`, covers every bench, and refuses to be stale or
edited by hand."""
import dataclasses
import json
import shutil
import sys
from pathlib import Path

import pytest

from basedie import verified
from rtl.registry import BLOCKS
from basedie.flow.verify import bench_runs


def test_committed_table_matches_current_sources() -> None:
    table = verified.load()  # raises StaleTableError when rtl/ or tb/ changed since `basedie verify`
    for block_name, config in bench_runs(list(BLOCKS)):
        entry = table.entry(block_name, **config)  # the stated timing: tests/rtl/test_timing_statements.py
        assert entry.provenance["cycles_simulated"] > 0
        assert {"verilator", "cocotb", "amaranth"} <= set(entry.provenance["tools"])


@pytest.fixture
def tree(tmp_path) -> Path:
    """A copy of the sources the table's digests cover (`rtl/`, `tb/` and, in `basedie/`, the build flow and the
    weight layouts), which the committed table matches."""
    root = verified.project_root()
    for package in ("rtl", "tb", "basedie"):
        shutil.copytree(root / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    verified.load(root=tmp_path)
    return tmp_path


def touch(path: Path) -> None:
    path.write_text(path.read_text() + "\n# changed\n")


def stale_blocks(error: pytest.ExceptionInfo) -> set[str]:
    return set(str(error.value).split("is stale: ")[1].split(" measured")[0].split(", "))


def test_a_changed_shared_source_makes_every_block_built_on_it_stale(tree: Path) -> None:
    touch(tree / "rtl" / "fp" / "add.py")
    with pytest.raises(verified.StaleTableError, match="run `basedie verify") as stale:
        verified.load(root=tree)
    assert {"fp32_add", "dqb", "pnm_lane"} <= stale_blocks(stale)
    assert "mmu" not in stale_blocks(stale)  # the MMU has no floating point


def test_a_changed_block_source_makes_only_the_blocks_built_from_it_stale(tree: Path) -> None:
    touch(tree / "rtl" / "mmu" / "arbiter.py")     # the MMU's, and the whole PNM's and the base die's, which contain it
    with pytest.raises(verified.StaleTableError,
                       match="stale: base_die, mmu, pnm measured on other rtl/ or tb/ sources"):
        verified.load(root=tree)


@pytest.mark.parametrize("edited,blocks", [
    ("tb/pnm_lane/bench.py", {"pnm_lane", "pnm_array"}),        # the bench
    ("tb/pnm_lane/stimulus.py", {"pnm_lane", "pnm_array"}),     # its stimulus
    ("tb/models/pnm_lane.py", {"pnm_lane", "pnm_array", "pnm", "base_die"}),  # its golden model (the whole PNM's uses it)
    ("tb/models/mmu.py", {"mmu", "pnm_controller", "pnm", "base_die"}),  # the controller's model packs MMU instructions
    ("basedie/weights/pc_layout.py", {"dqb", "base_die"}),   # the quantized layers their benches read
])
def test_a_changed_bench_stimulus_or_golden_model_makes_its_blocks_stale(tree: Path, edited: str,
                                                                         blocks: set[str]) -> None:
    touch(tree / edited)
    with pytest.raises(verified.StaleTableError) as stale:
        verified.load(root=tree)
    assert stale_blocks(stale) == blocks


@pytest.mark.parametrize("edited", ["tb/bench.py", "basedie/flow/runner.py"])   # a bench part; the build flow
def test_a_changed_shared_bench_part_makes_every_block_stale(tree: Path, edited: str) -> None:
    touch(tree / edited)
    with pytest.raises(verified.StaleTableError) as stale:
        verified.load(root=tree)
    assert stale_blocks(stale) == set(BLOCKS)


def committed_entries() -> list[dict]:
    return json.loads(verified.TABLE_PATH.read_text())["entries"]


def write_table(path: Path, entries: list[dict]) -> Path:
    path.write_text(json.dumps({"schema": verified.SCHEMA, "entries": entries}))
    return path


def test_a_figure_edited_by_hand_is_refused(tmp_path) -> None:
    entries = committed_entries()
    lane = next(e for e in entries if e["block"] == "pnm_lane")
    lane["figures"]["macs_per_cycle"] = 4096
    with pytest.raises(verified.StaleTableError, match="figures of pnm_lane do not match their content hash"):
        verified.load(write_table(tmp_path / "table.json", entries))


def test_other_tool_versions_are_named_in_a_warning(tmp_path) -> None:
    entries = committed_entries()
    mmu = next(e for e in entries if e["block"] == "mmu")
    mmu["provenance"]["tools"]["verilator"] = "4.0"
    mmu["provenance"]["content_sha256"] = verified.content_hash(mmu)
    installed = verified.tool_versions()["verilator"]
    with pytest.warns(verified.ToolVersionWarning, match=f"verilator 4.0 \\(installed {installed}\\)"):
        verified.load(write_table(tmp_path / "table.json", entries))


def test_lookup_without_enough_parameters_is_refused() -> None:
    table = verified.load()
    with pytest.raises(KeyError, match="5 verified parameter sets"):
        table.entry("fp_to_fp32")
    assert table.figure("fp32_narrow", "latency_cycles", target="bf16", rounding="nearest_even") == 2


def test_missing_old_and_unknown(tmp_path) -> None:
    with pytest.raises(verified.StaleTableError, match="basedie verify"):
        verified.load(tmp_path / "absent.json")
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema": 1, "entries": []}))
    with pytest.raises(verified.StaleTableError, match="schema 1, expected 2"):
        verified.load(old)
    with pytest.raises(KeyError, match="no measured figure"):
        verified.load().figure("fp32_add", "miss_penalty_cycles")


def test_store_seals_and_replaces_only_matching_entries(tmp_path) -> None:
    path = tmp_path / "table.json"
    path.write_text(verified.TABLE_PATH.read_text())
    before = json.loads(path.read_text())["entries"]
    first = verified.VerifiedEntry(**before[0])
    changed = verified.VerifiedEntry(first.block, first.params, {**first.figures, "latency_cycles": 99},
                                     first.provenance)
    verified.store([changed], path)
    after = json.loads(path.read_text())["entries"]
    assert len(after) == len(before)
    assert verified.load(path).figure(first.block, "latency_cycles", **first.params) == 99  # sealed: loads
    verified.store([changed], path, remeasured=[first.block])  # its bench proves only this set now
    assert [e["figures"] for e in json.loads(path.read_text())["entries"] if e["block"] == first.block] == [
        changed.figures]


def test_the_sources_are_found_beside_the_installed_packages_whatever_sys_path_holds(tmp_path, monkeypatch) -> None:
    # An importable folder named `rtl` earlier on sys.path (pytest once put `tests/`, holding `tests/rtl`, there)
    # must not become the tree the digests are computed over.
    (tmp_path / "rtl").mkdir()
    (tmp_path / "rtl" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "rtl", raising=False)
    assert (verified.project_root() / "rtl" / "fp").is_dir()
    verified.load()


def test_store_drops_entries_measured_under_obsolete_parameter_names(tmp_path) -> None:
    """`basedie verify --quick` replaces no block's entries wholesale: without this, an entry whose parameter
    was renamed since (here the MMU's `pending_entries`, as if it had been called `pending`) stays forever."""
    path = tmp_path / "table.json"
    committed = json.loads(verified.TABLE_PATH.read_text())
    mmu = [e for e in committed["entries"] if e["block"] == "mmu"]
    renamed = {**mmu[0], "params": {("pending" if k == "pending_entries" else k): v
                                    for k, v in mmu[0]["params"].items()}}
    odd_other = {**committed["entries"][0], "params": {"no_such_field": 1}}    # a block not listed: left alone
    assert odd_other["block"] != "mmu"
    path.write_text(json.dumps({**committed, "entries": committed["entries"] + [renamed, odd_other]}))
    fresh = verified.VerifiedEntry(**next(e for e in committed["entries"] if e["block"] == "fp32_add"))
    mmu_fields = [f.name for f in dataclasses.fields(BLOCKS["mmu"].params)]
    assert "pending_entries" in mmu_fields and "pending" not in mmu_fields
    verified.store([fresh], path, params_fields={"mmu": mmu_fields})
    stored = json.loads(path.read_text())["entries"]
    assert renamed["params"] not in [e["params"] for e in stored]
    assert [e["params"] for e in stored if e["block"] == "mmu"] == [e["params"] for e in mmu]   # current ones kept
    assert odd_other["params"] in [e["params"] for e in stored]
    assert len(stored) == len(committed["entries"]) + 1
    verified.store([fresh], path)          # without the field names: nothing is dropped
    assert len(json.loads(path.read_text())["entries"]) == len(committed["entries"]) + 1
