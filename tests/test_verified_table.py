"""The committed verified-figures table follows `rtl/`, covers every bench, and refuses to be stale."""
import json
from pathlib import Path

import pytest

from rtl.registry import BLOCKS
from sysmodel import verified
from tb.benches import BENCHES
from tb.verify import bench_runs


def test_committed_table_matches_current_rtl() -> None:
    table = verified.load()  # raises StaleTableError when rtl/ changed since `basedie verify`
    for block_name, config in bench_runs(list(BENCHES)):
        entry = table.entry(block_name, **config)
        unit = BLOCKS[block_name].component
        if hasattr(unit, "latency"):  # fixed-latency units state it; blocks with data-dependent timing do not
            assert entry.figures["latency_cycles"] == unit.latency
            assert entry.figures["initiation_interval"] == unit.initiation_interval
        assert entry.provenance["cycles_simulated"] > 0
        assert {"verilator", "cocotb", "amaranth"} <= set(entry.provenance["tools"])


@pytest.fixture
def rtl_copy(tmp_path) -> Path:
    copy = tmp_path / "rtl"
    for source in verified.rtl_root().rglob("*.py"):
        target = copy / source.relative_to(verified.rtl_root())
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
    verified.load(rtl=copy)
    return copy


def touch(path: Path) -> None:
    path.write_text(path.read_text() + "\n# changed\n")


def test_a_changed_shared_source_makes_every_block_built_on_it_stale(rtl_copy: Path) -> None:
    touch(rtl_copy / "fp" / "add.py")
    with pytest.raises(verified.StaleTableError, match="run `basedie verify") as stale:
        verified.load(rtl=rtl_copy)
    assert {"fp32_add", "dqb", "pnm_lane"} <= set(str(stale.value).split(": ")[1].split(" measured")[0].split(", "))
    assert "mmu" not in str(stale.value)  # the MMU has no floating point


def test_a_changed_block_source_makes_only_that_block_stale(rtl_copy: Path) -> None:
    touch(rtl_copy / "mmu" / "arbiter.py")
    with pytest.raises(verified.StaleTableError, match="stale: mmu measured on other RTL"):
        verified.load(rtl=rtl_copy)


def test_lookup_without_enough_parameters_is_refused() -> None:
    table = verified.load()
    with pytest.raises(KeyError, match="5 verified parameter sets"):
        table.entry("fp_to_fp32")
    assert table.figure("fp32_narrow", "latency_cycles", target="bf16", rounding="nearest_even") == 2


def test_missing_table_and_unknown_figure(tmp_path) -> None:
    with pytest.raises(verified.StaleTableError, match="basedie verify"):
        verified.load(tmp_path / "absent.json")
    with pytest.raises(KeyError, match="no measured figure"):
        verified.load().figure("fp32_add", "miss_penalty_cycles")


def test_store_replaces_only_matching_entries(tmp_path) -> None:
    path = tmp_path / "table.json"
    path.write_text(verified.TABLE_PATH.read_text())
    before = json.loads(path.read_text())["entries"]
    first = verified.VerifiedEntry(**before[0])
    changed = verified.VerifiedEntry(first.block, first.params, {**first.figures, "latency_cycles": 99},
                                     first.provenance)
    verified.store([changed], path)
    after = json.loads(path.read_text())["entries"]
    assert len(after) == len(before)
    assert verified.load(path).figure(first.block, "latency_cycles", **first.params) == 99
    verified.store([changed], path, remeasured=[first.block])  # its bench proves only this set now
    assert [e for e in json.loads(path.read_text())["entries"] if e["block"] == first.block] == [changed.__dict__]
