"""What `basedie verify` runs (no bench is built here): `--quick` leaves out the full-size sets, `--param` runs
exactly the named set, and a full verify re-measures the sets verified by name before; the progress estimate
uses recorded times, then stated ones; a failed run keeps what passed before it."""
import json

import pytest

from basedie.verified import VerifiedEntry, store
from rtl.pnm_lane.params import LaneParams
from rtl.registry import BLOCKS
from basedie.flow.progress import Progress, read_timings
from basedie import cli
from basedie.flow import verify as verify_module
from basedie.flow.verify import Run, module_runs, planned_runs, stated_seconds


def test_quick_runs_only_the_small_configs_and_keeps_other_entries(tmp_path) -> None:
    runs, remeasured = planned_runs(["pnm_lane", "dqb"], None, True, tmp_path / "table.json")
    assert [(r.block, r.config) for r in runs] == [("pnm_lane", c) for c in BLOCKS["pnm_lane"].bench.configs] + [
        ("dqb", c) for c in BLOCKS["dqb"].bench.configs]
    assert remeasured == ()


def test_pytest_leaves_only_sets_whose_target_and_rounding_it_proves_in_another(tmp_path) -> None:
    """fp32_narrow: pytest proves FP16 to nearest even and BF16 toward zero under Verilator; `basedie verify`, quick
    or not, proves all four sets."""
    narrow = [config for block, config in module_runs("tb.fp.bench") if block == "fp32_narrow"]
    assert narrow == [{"target": "fp16", "rounding": "nearest_even"}, {"target": "bf16", "rounding": "toward_zero_ftz"}]
    assert [r.config for r in planned_runs(["fp32_narrow"], None, True, tmp_path / "t.json")[0]] == \
        list(BLOCKS["fp32_narrow"].bench.configs) and len(BLOCKS["fp32_narrow"].bench.configs) == 4
    for name, block in BLOCKS.items():
        assert all(config in block.bench.configs for config in block.bench.pytest_leaves), name


def test_a_named_set_runs_alone_and_a_full_verify_re_measures_it(tmp_path) -> None:
    params = LaneParams(width=64, sublane_width=16)
    runs, remeasured = planned_runs(["pnm_lane"], params, False, tmp_path / "table.json")
    assert runs == [Run("pnm_lane", params.as_dict(), requested=True)] and remeasured == ()
    table = tmp_path / "table.json"
    store([VerifiedEntry("pnm_lane", params.as_dict(), {}, {"requested": True})], table)
    runs, remeasured = planned_runs(["pnm_lane"], None, False, table)
    bench_sets = BLOCKS["pnm_lane"].bench.configs + BLOCKS["pnm_lane"].bench.verify_only
    assert [r.config for r in runs] == [*bench_sets, params.as_dict()] and remeasured == ("pnm_lane",)
    assert planned_runs(["pnm_lane"], None, True, table)[0] == [Run("pnm_lane", c)
                                                                for c in BLOCKS["pnm_lane"].bench.configs]


def test_estimates_use_recorded_times_then_stated_ones(tmp_path) -> None:
    full_size = Run("pnm_lane", BLOCKS["pnm_lane"].bench.verify_only[0])
    small = Run("pnm_lane", BLOCKS["pnm_lane"].bench.configs[0])
    stated = BLOCKS["pnm_lane"].bench.verify_only_minutes * 60
    assert stated_seconds(full_size) == stated and stated_seconds(small) is None
    timings = tmp_path / "timings.json"
    timings.write_text(json.dumps({small.name: 40.0}))
    progress = Progress([(small.name, None), (full_size.name, stated_seconds(full_size)),
                         ("never-timed", None)], jobs=2, waves=False, enabled=False, timings=timings)
    seconds, unknown = progress.remaining()
    assert seconds == (40 + stated) / 2 and unknown == 1
    progress.phase(small.name, "running")
    progress.finished(small.name)
    assert progress.remaining() == (stated / 2, 1)
    assert set(read_timings(timings)) == {small.name}
    progress.close()


def _fp32_mul_fails(run: Run, waves, events) -> VerifiedEntry:
    """A bench run that passes for every block but `fp32_mul` (forked into the pool's worker, so module-level)."""
    if run.block == "fp32_mul":
        raise RuntimeError("fp32_mul: bench failed")
    return VerifiedEntry(run.block, BLOCKS[run.block].params(**run.config).as_dict(), {"latency_cycles": 5},
                         {"bench": "tb.fp.bench"})


def test_a_failed_run_keeps_the_entries_of_the_runs_that_passed_before_it(monkeypatch, tmp_path) -> None:
    """`basedie verify` writes the runs that passed before a bench failed, each under its own parameters (the
    table's other entries stay), and still fails with the bench's error."""
    table = tmp_path / "table.json"
    store([VerifiedEntry("mmu", {"out_of_order": True}, {"latency_cycles": 1}, {})], table)
    monkeypatch.setattr(verify_module, "verify_one", _fp32_mul_fails)
    with pytest.raises(RuntimeError, match="fp32_mul: bench failed"):
        cli.main(["verify", "fp32_add", "fp32_mul", "-j", "1", "--table", str(table)])
    entries = {e["block"]: e for e in json.loads(table.read_text())["entries"]}
    assert sorted(entries) == ["fp32_add", "mmu"]
    assert entries["fp32_add"]["figures"] == {"latency_cycles": 5} and entries["mmu"]["figures"] == {"latency_cycles": 1}
