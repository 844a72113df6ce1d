"""HBF tier (issue 14): page-granular reads, the frame cache (LRU, write-back) and its fast layer form,
the throttle's hysteresis, the package RC network against the closed-form step response, Arrhenius
deadlines, deduplicated MoE demand, and `simulate --memory` (outputs, bad input, speed)."""
import json

import numpy as np
import pytest

from basedie.cli import main
from sysmodel.hardware import PAPER_HARDWARE, with_overrides
from sysmodel.hbf.cache import FrameCache, LayerLRU
from sysmodel.hbf.media import PAGE_BYTES, page_reads
from sysmodel.hbf.retention import Retention, retention_s
from sysmodel.hbf.routing import Router, RoutingModel, unique_per_layer
from sysmodel.hbf.service import HBFOptions
from sysmodel.hbf.thermal import PackageRC, Thermal, Throttle, first_order_step
from sysmodel.simulate import SimulationConfig, simulate
from sysmodel.workload import FixedBatch, PoissonArrivals


# ----- media --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("address, nbytes, expected", [
    (0, 4096, [(0, 0, 4096)]),
    (100, 10, [(0, 64, 64)]),                             # one 64 B step holds bytes 100..109
    (4000, 200, [(0, 3968, 128), (1, 0, 128)]),           # 3968..4223 split at the page boundary
    (0, 10000, [(0, 0, 4096), (1, 0, 4096), (2, 0, 1856)]),
    (8192, 0, []),
])
def test_reads_are_64_byte_steps_within_one_page(address, nbytes, expected) -> None:
    reads = page_reads(address, nbytes)
    assert reads == expected
    for page, offset, length in reads:
        assert offset % 64 == 0 and length % 64 == 0 and 64 <= length <= PAGE_BYTES
        assert offset + length <= PAGE_BYTES


# ----- frame cache --------------------------------------------------------------------------------------
def test_frame_cache_evicts_least_recent_and_writes_back_dirty_frames() -> None:
    cache = FrameCache(2)
    assert not cache.write(1)          # miss; frame 1 dirty
    assert not cache.read(2)
    assert not cache.read(3)           # evicts 1 (least recent), dirty: written back
    assert cache.read(2)               # hit: 2 becomes most recent
    assert not cache.read(4)           # evicts 3, clean: nothing written back
    assert cache.read(2) and not cache.read(3)
    assert (cache.hits, cache.misses, cache.written_back) == (2, 5, [1])
    assert list(cache.frames) == [2, 3]


def test_rewriting_a_cached_frame_keeps_it_dirty_once() -> None:
    cache = FrameCache(1)
    cache.write(7)
    cache.read(7)                      # a read does not clean it
    cache.read(8)
    assert cache.written_back == [7]


@pytest.mark.parametrize("capacity", [0, 1, 5, 17, 40, 64])
def test_layer_lru_matches_the_reference_cache_access_for_access(capacity) -> None:
    layers, slots = 4, 16
    rng = np.random.default_rng(capacity)
    fast, reference = LayerLRU(layers, slots, capacity), FrameCache(capacity)
    for iteration in range(60):
        mask = rng.random((layers, slots)) < rng.choice([0.1, 0.3, 0.8])
        got = fast.access(mask)
        for layer in range(layers):          # a layer is looked up as a whole, then its frames read in order
            frames = [layer * slots + s for s in np.flatnonzero(mask[layer])]
            expected = [reference.contains(f) for f in frames]
            for frame in frames:
                reference.read(frame)
            assert got[layer, mask[layer]].tolist() == expected, (iteration, layer)
        assert not got[~mask].any()


# ----- thermal ------------------------------------------------------------------------------------------
def test_throttle_hysteresis() -> None:
    throttle = Throttle()
    path = [(70, "normal"), (80, "light"), (85, "light"), (79, "light"), (78, "normal"), (90, "severe"),
            (85, "severe"), (80, "light"), (79, "light"), (77, "normal"), (101, "shutdown"), (90, "shutdown"),
            (81, "shutdown"), (78, "normal")]
    states = ["normal", "light", "severe", "shutdown"]
    for temp, expected in path:
        assert states[throttle.update(temp)] == expected, temp
    assert [Throttle(state=s).service for s in range(4)] == [1.0, 0.9, 0.0, 0.0]


def test_rc_network_follows_the_first_order_step_response() -> None:
    # Decoupled nodes (couplings of 1e12 K/W): each is one RC under its own power step.
    rc = PackageRC(to_coolant=(0.03, 0.15, 0.6), capacitance=(60.0, 10.0, 5.0), coupling=(1e12, 1e12, 1e12))
    power = (1000.0, 100.0, 20.0)
    for t in (0.1, 1.8, 5.0, 30.0):
        thermal = Thermal(rc, 45.0)
        temps = thermal.step(t, power)
        for node in range(3):
            expected = first_order_step(rc.to_coolant[node], rc.capacitance[node], power[node], 45.0, t)
            assert temps[node] == pytest.approx(expected, rel=1e-9)
    # One node: 1000 W x 0.03 K/W = 30 K rise; after one time constant (1.8 s) 30 (1 - 1/e) = 18.964 K.
    assert Thermal(rc, 45.0).step(1.8, power)[0] == pytest.approx(45 + 18.964, abs=1e-3)


def test_coupled_network_steps_exactly_and_reaches_its_steady_state() -> None:
    thermal, power = Thermal(PackageRC(), 45.0), (800.0, 60.0, 18.0)
    once = Thermal(PackageRC(), 45.0).step(10.0, power)
    for _ in range(100):
        thermal.step(0.1, power)
    assert thermal.temps == pytest.approx(once, abs=1e-9)
    # Steady state: heat in = heat out to the coolant.
    steady = thermal.steady(power)
    assert sum((steady - 45.0) / np.array(PackageRC().to_coolant)) == pytest.approx(sum(power))
    assert Thermal(PackageRC(), 45.0).step(1e5, power) == pytest.approx(steady)


# ----- retention ----------------------------------------------------------------------------------------
def test_arrhenius_retention() -> None:
    assert retention_s(85.0) == pytest.approx(24 * 3600)
    # 125 C: 24 h x exp(1.04 eV / k x (1/398.15 K - 1/358.15 K)) = 24 h x exp(-3.3854) = 2,926 s.
    assert retention_s(125.0) == pytest.approx(2926, abs=1)
    assert retention_s(55.0) > retention_s(85.0) * 10


def test_refresh_deadlines() -> None:
    fresh = Retention(1)
    assert fresh.advance(24 * 3600 - 1, 85.0) == 0
    assert fresh.advance(2, 85.0) == 1                      # the 24 h deadline at 85 C
    assert fresh.advance(retention_s(125.0) * 2.5, 125.0) == 2
    spread = Retention(4, np.array([0.125, 0.375, 0.625, 0.875]))
    assert spread.advance(12 * 3600, 85.0) == 2             # half a lifetime: the two older zones
    assert spread.damage.tolist() == pytest.approx([0.625, 0.875, 0.125, 0.375])


# ----- routing ------------------------------------------------------------------------------------------
def test_deduplicated_demand_counts_each_expert_once_per_layer() -> None:
    choices = np.array([[[1, 2], [2, 3], [1, 3]],
                        [[0, 1], [0, 1], [0, 1]]])
    assert unique_per_layer(choices).tolist() == [3, 2]


def test_uniform_routing_demand() -> None:
    router = Router(RoutingModel(128, 8), layers=4)
    # 128 (1 - (1 - 8/128)^8) = 51.62 distinct experts for 8 tokens.
    assert router.expected_unique(8) == pytest.approx(51.62, abs=0.01)
    choices = router.choices(8)
    assert choices.shape == (4, 8, 8)
    assert all(len(set(token)) == 8 for layer in choices for token in layer.tolist())   # distinct per token
    assert unique_per_layer(router.choices(1)).tolist() == [8] * 4


def test_skew_concentrates_demand() -> None:
    uniform, skewed = Router(RoutingModel(128, 8, 0.0), 2), Router(RoutingModel(128, 8, 1.2, seed=1), 2)
    assert skewed.expected_unique(16) < uniform.expected_unique(16)
    assert skewed.inclusion.sum(axis=1) == pytest.approx([8, 8], abs=1e-9)


# ----- simulate --memory ---------------------------------------------------------------------------------
BASE = ["simulate", "--system", "chunked", "--model", "Qwen3-30B-A3B", "--hw", "gpus=1", "--input-len", "1024",
        "--output-len", "8", "--requests", "4"]


def test_simulate_with_hbf_writes_hbf_figures(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    assert main([*BASE, "--memory", "C", "--prefetch", "moe-speculative", "--out", str(out)]) == 0
    assert "frame cache hits" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())["hbf"]
    assert (out / "temperature.png").stat().st_size > 0
    assert summary["media_page_reads"] == summary["hbf_media_read_bytes"] / PAGE_BYTES
    assert 0 <= summary["frame_cache_hit_rate"] <= 1
    config = json.loads((out / "config.json").read_text())
    assert config["memory"]["name"] == "C" and config["hbf"]["prefetch"] == "moe-speculative"
    assert {p["mark"] for p in config["hbf"]["provenance"]} == {"standard", "paper", "assumption"}


def _layout_file(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("extra, message", [
    (["--memory", "C", "--hbf-read-us", "-5"], "page read time"),
    (["--memory", "C", "--frame-cache-gb", "64"], "does not fit in 36 GiB of HBM"),
    (["--memory", "Z"], "unknown memory layout"),
    (["--hbf-grade", "2"], "needs a --memory layout"),
    (["--memory", "C", "--hbf-grade", "4"], "grade"),
    (["--memory", "C", "--prefetch", "always"], "unknown prefetch"),
    (["--memory", "C", "--ambient-c", "85"], "ambient temperature"),
])
def test_bad_hbf_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, extra, message) -> None:
    out = tmp_path / "out"
    assert main([*BASE, *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def test_bad_layouts_are_refused(tmp_path, capsys) -> None:
    cases = [
        (_layout_file(tmp_path, "broken.toml", "hbm_stacks = [1,\n"), "malformed layout file"),
        (_layout_file(tmp_path, "list.json", "[1, 2]"), "one table/object"),
        (_layout_file(tmp_path, "typo.toml", "hbm_stacks = 2\nhbf_stack = 1\n"), "unknown layout key"),
        (_layout_file(tmp_path, "kv.json", '{"hbm_stacks": 2, "kv": "hbf"}'), "kv placed in HBF but the package has no"),
        (_layout_file(tmp_path, "ssd.json", '{"hbm_stacks": 2, "prefix": "ssd"}'), "prefix must be hbm or hbf"),
    ]
    for layout, message in cases:
        out = tmp_path / "out"
        assert main([*BASE, "--memory", layout, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and not out.exists()
    # A model that fits in neither tier: GPT-3's 350 GB of weights in layout A's 216 GiB of HBM.
    out = tmp_path / "out"
    assert main([*BASE[:4], "GPT3-175B", *BASE[5:], "--memory", "A", "--out", str(out)]) == 2
    assert "does not fit layout A" in capsys.readouterr().err and not out.exists()


def test_a_layout_file_runs(tmp_path) -> None:
    layout = _layout_file(tmp_path, "mine.toml", 'hbm_stacks = 2\nhbf_stacks = 1\nweights = "hbf"\n'
                                                 'frame_cache_gib = 60\n')
    hardware = with_overrides(PAPER_HARDWARE, {"gpus": "1"})
    result = simulate(SimulationConfig(system="chunked", model="Qwen3-30B-A3B",
                                       workload=PoissonArrivals(50, 20, 512, 8, 0.1, 0),
                                       hardware=hardware, memory=layout))
    # 60 GiB holds all 6,144 experts of 9.4 MB: after the first touch every access hits.
    hbf = result.summary["hbf"]
    assert hbf["media_page_reads"] <= 6144 * 2304
    assert hbf["frame_cache_hit_rate"] > 0.9


def test_blocks_cut_short_keep_only_the_iterations_that_ran() -> None:
    """Poisson arrivals cut decode blocks; the service's clock (throttle residency summed) must end with the
    last iteration that really ran, not with iterations priced and then dropped."""
    hardware = with_overrides(PAPER_HARDWARE, {"gpus": "1"})
    result = simulate(SimulationConfig(system="chunked", model="Qwen3-30B-A3B",
                                       workload=PoissonArrivals(5, 30, 512, 64, 0.3, 1),
                                       hardware=hardware, memory="C"))
    last = max(r.finish for r in result.requests)
    assert sum(result.summary["hbf"]["throttle_residency_s"].values()) == pytest.approx(last, rel=1e-9)
    assert result.temperatures[-1][0] == pytest.approx(last, rel=1e-9)


def test_a_hot_package_throttles_and_waits_to_cool() -> None:
    hardware = with_overrides(PAPER_HARDWARE, {"gpus": "1"})

    def run(ambient: float):
        return simulate(SimulationConfig(system="chunked", model="Qwen3-30B-A3B", workload=FixedBatch(16, 512, 64),
                                         hardware=hardware,
                                         memory="C", hbf=HBFOptions(ambient_c=ambient))).summary
    cool, hot = run(45.0), run(79.0)
    assert set(cool["hbf"]["throttle_residency_s"]) == {"normal", "light", "severe", "shutdown"}
    assert cool["hbf"]["throttle_residency_s"]["normal"] == pytest.approx(
        sum(cool["hbf"]["throttle_residency_s"].values()))
    residency = hot["hbf"]["throttle_residency_s"]
    assert residency["light"] > 0 and residency["severe"] + residency["shutdown"] > 0
    assert hot["hbf"]["cooling_wait_s"] > 0
    assert hot["tpot_s"]["p50"] > cool["tpot_s"]["p50"]
    # Hotter dies retain data for less time: more zones reach their deadline, are reread and reprogrammed.
    assert hot["hbf"]["refreshed_zones"] > cool["hbf"]["refreshed_zones"]
    assert hot["hbf"]["hbf_programmed_bytes"] == hot["hbf"]["hbf_refresh_read_bytes"] > 0
    assert hot["hbf"]["pe_cycles_per_block"] > 0
