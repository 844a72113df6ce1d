"""The HBF study in quick mode: every item writes its CSV and PNG, the headline covers items 1-8, and what it
reports follows from hand-computable facts (layout capacities, uniform dedup, Arrhenius, DuoPD's frame fills)."""
import csv
import re
from pathlib import Path

import pytest

from tests.sysmodel import pinned
from sysmodel.hbf.media import PROVENANCE

pytestmark = [pinned.xdist_group("hbf_headline"), pytest.mark.slow]     # the quick run is shared with test_pinned_results.py
ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def study() -> Path:
    """The quick run the pinned results come from (`tests/sysmodel/pinned/hbf_headline.json`)."""
    out, _ = pinned.run(pinned.command("hbf_headline"))
    return out


def read(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_item_writes_csv_png_and_a_headline_row(study) -> None:
    for item in range(1, 9):
        assert (study / f"item{item}.csv").stat().st_size > 0
        assert (study / f"item{item}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = [line for line in (study / "headline.md").read_text().splitlines() if re.match(r"\| \d \|", line)]
    assert sorted({row.split("|")[1].strip() for row in rows}) == [str(i) for i in range(1, 9)]


def test_duopd_reads_each_expert_once_when_the_frame_cache_holds_them(study) -> None:
    """Qwen3-30B-A3B over 8 GPUs: 768 experts of 3 x 2048 x 768 x 2 B per GPU fit B's and C's 8 GiB frame caches.
    The first prompt reads them all from HBF; every later access, the PNMs' decode included, hits."""
    rows = {(r["model"], r["memory"]): r for r in read(study / "item8.csv")}
    for memory in ("B", "C"):
        row = rows[("Qwen3-30B-A3B", memory)]
        assert float(row["prefill_media_gb"]) == pytest.approx(8 * 768 * 3 * 2048 * 768 * 2 / 1e9, rel=1e-12)
        assert float(row["decode_media_gb"]) == 0 and float(row["decode_hit_rate"]) == 1
    # 8 GiB cannot hold Qwen3-235B-A22B's 1,504 local experts of 37.7 MB (56.7 GB): its decode reads the media.
    assert float(rows[("Qwen3-235B-A22B", "C")]["decode_hit_rate"]) < 0.5


def test_layout_capacities(study) -> None:
    rows = {r["layout"]: r for r in read(study / "item4.csv")}
    assert float(rows["A"]["installed_gib"]) == 216           # 6 x 36 GiB
    assert float(rows["C"]["installed_gib"]) == 1572          # 36 + 3 x 512 GiB
    # A: (216 GiB - 54.0 GiB experts - 2.87 GiB other weights) / 96 KiB per token = 1.74 M tokens.
    assert float(rows["A"]["kv_tokens_experts_in_hbm"]) == pytest.approx(1.738e6, rel=2e-3)


def test_uniform_dedup_matches_the_closed_form(study) -> None:
    rows = read(study / "item5.csv")
    uniform = {int(r["batch"]): float(r["dedup_demand_x"]) for r in rows if float(r["skew"]) == 0}
    assert uniform[1] == 1.0
    assert uniform[8] == pytest.approx(128 * (1 - (1 - 8 / 128) ** 8) / 8, rel=0.03)   # 6.45


def test_refresh_follows_arrhenius(study) -> None:
    rows = {int(r["hbf_c"]): r for r in read(study / "item7.csv")}
    assert float(rows[85]["retention_h"]) == pytest.approx(24)
    assert float(rows[125]["refresh_bytes_per_s"]) / float(rows[85]["refresh_bytes_per_s"]) == pytest.approx(
        86400 / 2926, rel=1e-3)


def test_docs_list_every_parameter_with_its_evidence() -> None:
    docs = (ROOT / "docs" / "design" / "hbf.md").read_text()
    for p in PROVENANCE:
        assert f"| {p.name} | {p.value} | {p.mark} | {p.source} |" in docs, p.name


def test_the_prefetch_trace_shows_what_arrives_before_each_layer(study) -> None:
    """item6_trace.csv, one decode iteration: the stream reaches layer 0 after tR (20 us) as the iteration starts;
    each layer starts when the previous one has waited and computed; the part of a layer's prediction in time is
    what the stream read between reaching it and the layer's start, at the media rate (all of it, or none)."""
    rows = read(study / "item6_trace.csv")
    assert len(rows) == 48                                        # Qwen3-30B-A3B's layers
    assert float(rows[0]["layer_starts_us"]) == 0 and float(rows[0]["stream_reaches_us"]) == pytest.approx(20)
    for before, r in zip([None, *rows], rows):
        prefetched, used = int(r["experts_prefetched"]), int(r["prefetched_used"])
        assert 0 <= used <= prefetched <= 128 and float(r["waited_us"]) >= 0
        if before is not None:
            assert float(r["layer_starts_us"]) == pytest.approx(
                float(before["layer_starts_us"]) + float(before["waited_us"]) + float(before["layer_compute_us"]))
        lead_s = (float(r["layer_starts_us"]) - float(r["stream_reaches_us"])) * 1e-6
        read_mb = max(lead_s, 0.0) * float(r["media_rate_gb_s"]) * 1e3
        assert float(r["arrived_in_time"]) == pytest.approx(min(1.0, read_mb / float(r["prefetch_mb"])), abs=1e-9)


def test_headline_marks_the_calibration_and_the_cells_within_20_percent(study) -> None:
    rows = read(study / "headline.csv")
    assert {r["within_20pct"] for r in rows} <= {"yes", "no", "n/a"}
    calibrated = [r for r in rows if "skew closest" in r["what"]]
    assert len(calibrated) == 1 and calibrated[0]["what"].startswith("CALIBRATION")
    assert any(r["item"] == "6" and r["within_20pct"] == "no" and "Sensitivity" in r["why"] for r in rows)


def test_the_reference_package_row_states_what_the_seeds_layer_span_implies(study) -> None:
    """§6.3's eight HBF layers span 44.4 K at the HBF limit: with the hottest at 85 C, the coolest is
    85 - 44.4 - 26.85 = 13.75 K above a 300 K ambient at 105.9 W, 0.13 K per watt. The row also gives the limits
    under the shared-power reading, each with its ratio to the seed's."""
    row = next(r for r in read(study / "headline.csv") if r["what"].endswith("HBFSim's reference package"))
    assert "coolest layer is 0.13 K per HBF watt" in row["why"]
    assert re.search(r"read as one package power shared evenly .* gpu [\d.]+ W \([\d.]+\), hbm [\d.]+ W \([\d.]+\), "
                     r"hbf [\d.]+ W \([\d.]+\)", row["why"])
