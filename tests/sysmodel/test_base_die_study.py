"""The composed base-die study in quick mode: every row runs with finite figures, and the composition's
mechanisms show in them (4-bit weights in HBF read fewer flash bytes, layouts without HBF read none)."""
import csv
import math
import pytest

from basedie.studies import base_die
from sysmodel import power
from tests.sysmodel import pinned

pytestmark = [pinned.xdist_group("base_die_headline"), pytest.mark.slow]     # the quick run is shared with test_pinned_results.py
METRICS = ("tpot_p50_ms", "ttft_p50_ms", "energy_j_per_token", "flash_read_gb")


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    """The quick run's headline rows by row name (`tests/sysmodel/pinned/base_die_headline.json`)."""
    out, _ = pinned.run(pinned.command("base_die_headline"))
    assert (out / "tpot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with (out / "headline.csv").open(newline="") as handle:
        return {r["row"]: r for r in csv.DictReader(handle)}


def test_every_row_runs_with_finite_positive_figures(rows) -> None:
    assert len(rows) == 9
    for name, r in rows.items():
        assert r["status"] == "ok", name
        assert all(math.isfinite(float(r[k])) and float(r[k]) >= 0 for k in METRICS), name
        assert float(r["tpot_p50_ms"]) > 0 and float(r["energy_j_per_token"]) > 0, name


def test_w4a16_on_layout_c_reads_fewer_flash_bytes_than_fp16(rows) -> None:
    quantized, fp16 = float(rows["duopd+dqb+C"]["flash_read_gb"]), float(rows["duopd+C"]["flash_read_gb"])
    assert 0 < quantized < fp16 / 3.5          # 4.125 bits per weight with group-128 scales against 16


def test_only_the_hbf_rows_read_flash(rows) -> None:
    for name, r in rows.items():
        assert (float(r["flash_read_gb"]) > 0) == ("+C" in name), name


def test_duopd_decodes_faster_than_pd_on_gpus(rows) -> None:
    """Decode on the base die's PNM lanes reads the stacks at their internal bandwidth."""
    assert float(rows["duopd"]["tpot_p50_ms"]) < float(rows["pd-1:1"]["tpot_p50_ms"])
    assert float(rows["duopd"]["energy_j_per_token"]) < float(rows["pd-1:1"]["energy_j_per_token"])


def test_the_kv_cache_holds_what_the_memory_leaves_beside_the_weights(rows) -> None:
    # DuoPD keeps the KV in each GPU's 8 HBM stacks beside its share of the weights: 4-bit weights leave more room;
    # layout C's one HBM stack (36 GiB) holds far less, whatever the format. LLaMA2-70B at TP 8, counted by hand:
    # 80 layers × 1 KV head × 128 × 2 (K and V) × 2 B = 40,960 B per token per GPU.
    kv = {name: int(float(r["kv_tokens"])) for name, r in rows.items()}
    assert kv["duopd+dqb"] > kv["duopd"] > kv["duopd+C"] and kv["duopd+dqb+C"] >= kv["duopd+C"]
    assert kv["duopd+C"] < 36 * 2**30 / 40960 < kv["duopd"]
    # With the KV cache in HBF it has layout C's three 512 GiB HBF stacks less the weights there (under 17.5 GB per
    # GPU even in FP16: 69 B parameters × 2 B / 8 GPUs): more than the HBM stacks of any other row hold.
    assert 3 * 512 * 2**30 / 40960 > kv["duopd+dqb+C+kv"] > (3 * 512 * 2**30 - 17.5e9) / 40960 > kv["duopd+dqb"]


def test_the_kv_cache_in_hbf_is_read_from_flash_every_decode_step(rows) -> None:
    # Without an HBM region for KV the PNMs read every step's context from the media: far more than the weights,
    # which stay in the frame cache; a shared prefix in HBF is read as part of every context alike.
    weights_only = float(rows["duopd+dqb+C"]["flash_read_gb"])
    assert float(rows["duopd+dqb+C+kv"]["flash_read_gb"]) > 10 * weights_only
    assert float(rows["duopd+dqb+C+kv"]["tpot_p50_ms"]) > float(rows["duopd+dqb+C"]["tpot_p50_ms"])
    # Half of each prompt is the prefix: the prefill computes the other half only.
    assert float(rows["duopd+dqb+C+kv+prefix"]["ttft_p50_ms"]) < float(rows["duopd+dqb+C+kv"]["ttft_p50_ms"])


def test_a_bad_slo_is_refused_and_writes_nothing(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        base_die.main(["--quick", "--slo-ms", "-1", "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2 and not (tmp_path / "out").exists()
    assert "--slo-ms" in capsys.readouterr().err


def test_the_papers_power_changes_only_the_rows_with_pnms_or_dqbs(rows) -> None:
    """PD 1:1 and one GPU reading HBF use neither; DuoPD's PNMs draw more synthesized than DuoPD's 6.45 W, the
    DQBs less than StreamDQ's 0.355 W (docs/results/ppa.md), and the DQB rows draw both."""
    for name in ("pd-1:1", "gpu+C"):
        assert float(rows[name]["energy_j_per_token"]) == float(rows[name]["energy_paper_j_per_token"]), name
    for name in ("duopd", "duopd+C"):
        assert float(rows[name]["energy_j_per_token"]) > float(rows[name]["energy_paper_j_per_token"]), name
    assert float(rows["gpu+dqb"]["energy_j_per_token"]) < float(rows["gpu+dqb"]["energy_paper_j_per_token"])
    for name in ("duopd+dqb", "duopd+dqb+C"):
        assert float(rows[name]["energy_j_per_token"]) != float(rows[name]["energy_paper_j_per_token"]), name


def test_the_base_die_logic_composes_the_pnm_and_the_dqbs(rows) -> None:
    """Rows without base-die logic have none; the PNM rows hold at least their 16 paper-width lanes' synthesized
    area; a row with both is the PNM's figures plus 64 DQBs' (one per pseudo-channel), the DQB-only row's."""
    figures = {name: (float(r["logic_mm2"]), float(r["logic_w"])) for name, r in rows.items()}
    assert figures["pd-1:1"] == figures["gpu+C"] == (0.0, 0.0)
    lane = power.block_entry("pnm_lane", width=1024)["figures"]["area_with_sram_um2"]
    pnm, dqbs, both = figures["duopd"], figures["gpu+dqb"], figures["duopd+dqb"]
    assert pnm[0] > 16 * lane * 1e-6 and pnm[1] > 0 and dqbs[0] > 0 and dqbs[1] > 0
    assert both == pytest.approx((pnm[0] + dqbs[0], pnm[1] + dqbs[1]), rel=1e-9)
    assert figures["duopd+C"] == pnm and figures["duopd+dqb+C"] == both
