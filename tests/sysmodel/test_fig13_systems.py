"""The Fig. 13 systems (DuoPD §6.4): bank-level PIM and Duplex inside PD 1:1, and DuoPD with a wider PNM. Each
test checks a physical property of what was offloaded or scaled, against the model's own building blocks."""
import json
import re
from dataclasses import replace

import numpy as np
import pytest

from basedie import verified
from basedie.cli import main
from sysmodel.arbitration import MMUArbitration
from sysmodel.config import SimulationConfig, resolve
from sysmodel.errors import ConfigError
from sysmodel.execution import GPUExecution, PNMExecution, PNMFigures, array_passes, beat_groups, pnm_entries
from sysmodel.hardware import PAPER_HARDWARE
from sysmodel.llm import MODEL_PRESETS
from sysmodel.simulate import simulate
from sysmodel.offload import ATTENTION, ATTENTION_AND_EXPERTS, OffloadExecution, Part, PIMExecution
from sysmodel.operators import Shard, decode_work
from sysmodel.systems import SYSTEMS, ServingSystem
from sysmodel.engine import EventLoop
from sysmodel.workload import FixedBatch

FOUR_X_COMPUTE = ("pd-1:1-duplex-4x-compute", "duopd-4x-bw-4x-compute")
FIG13 = ("pd-1:1-pim", "pd-1:1-duplex", "duopd-4x-bw", *FOUR_X_COMPUTE)
VERIFY_64_LANES = "basedie verify pnm_array --param lanes=64 --param width=16 --param sublane_width=4"
LAYERS_LATENCY = PAPER_HARDWARE.gpu.stack.latency_s


def without_array(table: verified.VerifiedBlocks, lanes: int = 64) -> verified.VerifiedBlocks:
    """`table` without its `pnm_array` entry of `lanes` lanes."""
    return verified.VerifiedBlocks([e for e in table.entries if not (e.block == "pnm_array" and e.params["lanes"] == lanes)])


@pytest.fixture(scope="module")
def table() -> verified.VerifiedBlocks:
    """The committed table: its 64-lane array is the 4× compute PNM's."""
    return verified.load()


def model(name: str):
    return MODEL_PRESETS.lookup(name)


def pim_seconds(hardware, name: str, work) -> float:
    """The PIM's attention time without its per-operator access latency."""
    shard = Part(model(name), 4, ATTENTION, near=True)
    return PIMExecution(hardware, shard).cost(work).seconds - shard.model.layers * LAYERS_LATENCY


def with_pim(**fields):
    return replace(PAPER_HARDWARE, pim=replace(PAPER_HARDWARE.pim, **fields))


def test_every_fig13_system_is_registered() -> None:
    assert set(FIG13) <= set(SYSTEMS)


def test_pim_attention_time_scales_with_the_bank_mac_rate_when_gqa_makes_it_compute_bound() -> None:
    # LLaMA2-70B: 8 query heads per KV head, 8 FLOPs per KV byte, above the PIM's 1 FLOP/B.
    work = decode_work(16, 16 * 16384)
    base = pim_seconds(PAPER_HARDWARE, "LLaMA2-70B", work)
    assert pim_seconds(with_pim(flops_per_byte=0.5), "LLaMA2-70B", work) == pytest.approx(2 * base, rel=1e-9)
    assert pim_seconds(with_pim(flops_per_byte=2.0), "LLaMA2-70B", work) == pytest.approx(base / 2, rel=1e-9)


def test_pim_mha_attention_is_bound_by_the_internal_bandwidth_not_the_mac_rate() -> None:
    # GPT3-175B (MHA): 1 FLOP per KV byte, at the PIM's balance; more MACs change nothing, more bandwidth does.
    work = decode_work(16, 16 * 16384)
    base = pim_seconds(PAPER_HARDWARE, "GPT3-175B", work)
    assert pim_seconds(with_pim(flops_per_byte=4.0), "GPT3-175B", work) == pytest.approx(base, rel=1e-9)
    assert pim_seconds(with_pim(bandwidth_multiple=8.0, flops_per_byte=2.0), "GPT3-175B", work) == \
        pytest.approx(2 * base, rel=1e-9)


def test_half_the_capacity_holds_half_the_bytes_less_the_weights(table) -> None:
    def decode_kv(hardware) -> int:
        config = SimulationConfig(system="pd-1:1-pim", model="GPT3-175B", workload=FixedBatch(1, 1024, 8),
                                  hardware=hardware)
        setting = resolve(config, table)
        shard = Shard(setting.model, 4)
        _, kv, _ = setting.spec.decoder(setting, ServingSystem(EventLoop(), "pd-1:1-pim"), shard, "decode")
        return kv.capacity, shard

    half, shard = decode_kv(PAPER_HARDWARE)
    full, _ = decode_kv(with_pim(capacity_fraction=1.0))
    capacity, weights = PAPER_HARDWARE.gpu.memory.capacity_bytes, shard.weight_bytes
    assert half == int((capacity / 2 - weights) // shard.kv_bytes_per_token)
    assert full == int((capacity - weights) // shard.kv_bytes_per_token)
    assert half < full / 2


@pytest.mark.parametrize("name,ops", [("Qwen3-235B-A22B", ATTENTION_AND_EXPERTS), ("LLaMA2-70B", ATTENTION)])
def test_offloading_moves_operators_and_loses_none(name, ops) -> None:
    m, work = model(name), decode_work(8, 8 * 4096)
    whole = GPUExecution(PAPER_HARDWARE, Shard(m, 4)).cost(work)
    kept = GPUExecution(PAPER_HARDWARE, Part(m, 4, ops)).cost(work)
    moved = PIMExecution(PAPER_HARDWARE, Part(m, 4, ops, near=True)).cost(work)
    both = OffloadExecution(GPUExecution(PAPER_HARDWARE, Part(m, 4, ops)),
                            PIMExecution(PAPER_HARDWARE, Part(m, 4, ops, near=True))).cost(work)
    assert kept.flops + moved.flops == pytest.approx(whole.flops, rel=1e-12)
    assert kept.hbm_bytes < whole.hbm_bytes and moved.flops > 0
    assert both.seconds == pytest.approx(kept.seconds + moved.seconds, rel=1e-12)   # one after the other


def pnm_seconds(table, name: str, ops: tuple[str, ...], work, multiple: float) -> float:
    """The near side of Duplex (the paper's 16 lanes) reading at `multiple` × the stack's bandwidth."""
    hardware = replace(PAPER_HARDWARE, pnm=replace(PAPER_HARDWARE.pnm, bandwidth_multiple=multiple))
    mmu = MMUArbitration.from_verified(table, "prefill-first", hardware)
    near = PNMExecution(hardware, Part(model(name), 4, ops, near=True), PNMFigures.from_verified(table, hardware.pnm),
                        mmu, whole_decode=False)
    return near.cost(work).seconds


def test_4x_bandwidth_speeds_up_memory_bound_attention_and_not_compute_bound_experts(table) -> None:
    one_sequence = decode_work(1, 16384)
    # GPT3-175B's attention at batch 1: one row per key beat, so four beat groups of four lanes read four
    # times as fast.
    slow, fast = (pnm_seconds(table, "GPT3-175B", ATTENTION, one_sequence, m) for m in (1.0, 4.0))
    assert 3.0 < slow / fast <= 4.0
    # LLaMA2-70B's MLP at batch 64: a weight beat serves 64 rows, four passes of the 16 lanes, the lanes the
    # bottleneck already at 1x; however the lanes are grouped they need as many cycles, so 4x reads change nothing.
    busy = decode_work(64, 64 * 4096)
    slow, fast = (pnm_seconds(table, "LLaMA2-70B", ("mlp",), busy, m) for m in (1.0, 4.0))
    assert fast == pytest.approx(slow, rel=1e-9)


def test_beat_groups_divide_the_lanes_and_never_exceed_the_bandwidth_multiple() -> None:
    assert beat_groups(16, 1.0) == (1,) and beat_groups(16, 4.0) == (1, 2, 4) and beat_groups(6, 4.0) == (1, 2, 3)
    # 8 rows (a GQA group) on 16 lanes: two groups of 8 halve the cycles; four groups of 4 need two passes each.
    assert array_passes(8, 1024, 16, (1,)) == 1024 and array_passes(8, 1024, 16, (1, 2, 4)) == 512
    assert array_passes(8, 1024, 64, (1, 2, 4)) == 256


def test_duplex_and_duopd_variants_scale_the_pnm_not_the_gpu(table) -> None:
    for name in ("pd-1:1-duplex", "duopd-4x-bw"):
        scaled = SYSTEMS[name].pnm_hardware(PAPER_HARDWARE)
        assert scaled.pnm.bandwidth_multiple == 4.0 and scaled.pnm.lanes == PAPER_HARDWARE.pnm.lanes
        assert scaled.gpu == PAPER_HARDWARE.gpu
    for name in FOUR_X_COMPUTE:
        four = SYSTEMS[name].pnm_hardware(PAPER_HARDWARE).pnm
        assert (four.lanes, four.lane_width, four.bandwidth_multiple) == (64, 1024, 4.0)
        # 4x compute is the 64-lane array's own entry, with the paper's lane: 4x the paper PNM's peak.
        lane, array = pnm_entries(table, four)
        assert array.params["lanes"] == 64 and lane.params["width"] == 1024
        assert PNMFigures.from_verified(table, four) == replace(PNMFigures.from_verified(table, PAPER_HARDWARE.pnm),
                                                                lanes=64)
    assert SYSTEMS["pd-1:1-pim"].pnm_hardware(PAPER_HARDWARE) is None


def test_4x_compute_without_a_verified_64_lane_array_is_refused_naming_the_verify_command(table) -> None:
    four = SYSTEMS["pd-1:1-duplex-4x-compute"].pnm_hardware(PAPER_HARDWARE).pnm
    message = f"no verified pnm_array with lanes=64, design_clock_hz=1e+09; create it with `{VERIFY_64_LANES}`"
    with pytest.raises(ConfigError, match="^" + re.escape(message) + "$"):
        PNMFigures.from_verified(without_array(table), four)


SMALL = ["--model", "LLaMA2-70B", "--input-len", "2048", "--output-len", "8", "--requests", "2", "--no-plots"]


def test_each_fig13_system_runs_from_the_cli(table, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(verified, "load", lambda: table)
    for system in FIG13:
        code = main(["simulate", "--system", system, *SMALL, "--out", str(tmp_path / system)])
        assert code == 0, capsys.readouterr().err
        summary = json.loads((tmp_path / system / "summary.json").read_text())
        assert 0 < summary["tpot_s"]["p50"] <= summary["tpot_s"]["p90"] <= summary["tpot_s"]["p99"]
        used = json.loads((tmp_path / system / "config.json").read_text())["verified_blocks"]
        if system != "pd-1:1-pim":   # the run records the array entry it rests on
            assert used["pnm_array"]["params"]["lanes"] == (64 if system in FOUR_X_COMPUTE else 16)


@pytest.mark.parametrize("system", FOUR_X_COMPUTE)
def test_4x_compute_from_the_cli_without_a_64_lane_array_is_one_line_exit_2(table, tmp_path, monkeypatch, capsys,
                                                                             system) -> None:
    monkeypatch.setattr(verified, "load", lambda: without_array(table))
    code = main(["simulate", "--system", system, *SMALL, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"`{VERIFY_64_LANES}`" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("extra,message", [
    (["--weights", "w4a16", "--dequant", "dqb"], "FP16 weights in HBM only"),
    (["--mmu-policy", "mixed"], "--mmu-policy applies to"),
    (["--memory", "B"], "FP16 weights in HBM only"),
])
def test_bad_combinations_are_one_line_exit_2(tmp_path, capsys, extra, message) -> None:
    code = main(["simulate", "--system", "pd-1:1-pim", "--model", "LLaMA2-70B", "--input-len", "2048",
                 "--output-len", "8", "--requests", "2", "--no-plots", "--out", str(tmp_path / "run"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()


def test_pd_pim_decodes_faster_than_pd_on_gpus_for_mha(table) -> None:
    tpot = {}
    for system in ("pd-1:1", "pd-1:1-pim"):
        result = simulate(SimulationConfig(system=system, model="GPT3-175B", workload=FixedBatch(4, 8192, 64),
                                           max_batch=4), table)
        tpot[system] = result.summary["tpot_s"]["p50"]
    assert tpot["pd-1:1-pim"] < tpot["pd-1:1"]
    assert np.isfinite(list(tpot.values())).all()
