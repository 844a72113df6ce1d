"""The StreamDQ study script in quick mode: every figure's CSV and PNG exist, the headline's deviations follow
from the values beside them, and the sweeps hold the relations the model implies."""
import csv
from pathlib import Path

import pytest

from tests.sysmodel import pinned

pytestmark = [pinned.xdist_group("streamdq_headline"), pytest.mark.slow]     # the quick run is shared with test_pinned_results.py


def read(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def study() -> Path:
    """The quick run the pinned results come from (`tests/sysmodel/pinned/streamdq_headline.json`)."""
    out, _ = pinned.run(pinned.command("streamdq_headline"))
    return out


def test_every_figure_writes_its_files(study) -> None:
    for name in ("fig1", "fig16", "fig17", "fig18"):
        assert (study / f"{name}.csv").stat().st_size > 0 and (study / f"{name}.png").stat().st_size > 0
    assert (study / "headline.md").read_text().count("\n| ") >= 20


def test_headline_deviations_follow_from_the_values(study) -> None:
    for row in read(study / "headline.csv"):
        paper, ours, deviation = float(row["paper"]), float(row["ours"]), float(row["deviation"])
        expected = ours - paper if "%" in row["claim"] else ours / paper
        assert deviation == pytest.approx(expected, nan_ok=True), row["claim"]


def test_fig16_dqb_matches_the_fp16_gemm_when_memory_bound_and_wins_when_compute_bound(study) -> None:
    rows = [r for r in read(study / "fig16.csv") if r["kernel_model"] == "roofline"]
    time = {(r["pair"], r["kernel"], int(r["M"])): float(r["time_us"]) for r in rows}
    # At M = 1 the DQB returns as many bytes as an FP16 GEMM reads: the same time give or take its latency.
    assert time[("INT4->FP16", "dqb-expanded", 1)] == pytest.approx(time[("INT4->FP16", "fp16", 1)], rel=0.01)
    # At M = 256 the fused kernels re-dequantize on CUDA cores; the DQB's GEMM does not.
    for kernel in ("gptq", "awq-v1", "awq-v2"):
        assert time[("INT4->FP16", "dqb-expanded", 256)] < time[("INT4->FP16", kernel, 256)]
    assert {r["bound"] for r in rows if r["kernel"] == "dqb-expanded" and r["M"] == "1"} == {"link"}


def test_fig16_measured_has_only_the_kernels_measured(study) -> None:
    """Under measured kernels the DQB overtakes every INT4 fused kernel far earlier than under the roofline, and
    a kernel nobody published timings of (AWQ-v2, INT8 GPTQ) has no row."""
    rows = read(study / "fig16.csv")
    kernels = {}
    for r in rows:
        kernels.setdefault((r["kernel_model"], r["pair"]), set()).add(r["kernel"])
    assert "awq-v2" in kernels[("roofline", "INT4->FP16")] and "awq-v2" not in kernels[("measured", "INT4->FP16")]
    assert "gptq" not in kernels[("measured", "INT8->FP16")]
    time = {(r["kernel_model"], r["kernel"], int(r["M"])): float(r["time_us"]) for r in rows
            if r["pair"] == "INT4->FP16"}
    assert time[("measured", "dqb-expanded", 64)] < time[("measured", "awq-v1", 64)]
    assert time[("roofline", "dqb-expanded", 64)] > time[("roofline", "awq-v2", 64)]


def test_within_column_follows_the_ratio(study) -> None:
    for row in read(study / "headline.csv"):
        paper, ours = float(row["paper"]), float(row["ours"])
        if row["paper_relation"] == "=" and ours == ours:
            assert (row["within_20pct"] == "yes") == (abs(ours / paper - 1) <= 0.2), row["claim"]
        assert (row["mechanism"] == "") == (row["within_20pct"] == "yes"), row["claim"]


def test_fig1_share_grows_with_batch(study) -> None:
    gptq = [r for r in read(study / "fig1.csv") if r["kernel"] == "gptq" and r["kernel_model"] == "roofline"]
    shares = [float(r["dequant_share_pct"]) for r in sorted(gptq, key=lambda r: int(r["batch"]))]
    assert shares[0] < 5 and max(shares) > 20 and all(0 <= s < 100 for s in shares)


def test_fig18_speedups_are_the_ratios_of_fig17(study) -> None:
    e2e = {(r["kernel_model"], r["model"], r["weights"], r["system"], r["batch"]): float(r["decode_tok_s"])
           for r in read(study / "fig17.csv")}
    for s in read(study / "fig18.csv"):
        key = (s["kernel_model"], s["model"], s["weights"])
        expected = e2e[(*key, s["dqb"], s["batch"])] / e2e[(*key, s["baseline"], s["batch"])]
        assert float(s["decode_speedup"]) == pytest.approx(expected)
