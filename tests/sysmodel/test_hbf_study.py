"""The HBF study in quick mode: every item writes its CSV and PNG, the headline covers items 1-7, and what it
reports follows from hand-computable facts (layout capacities, uniform dedup, Arrhenius)."""
import csv
import re
from pathlib import Path

import pytest

from tests.sysmodel import pinned
from sysmodel.hbf.media import PROVENANCE

pytestmark = pinned.xdist_group("hbf_headline")     # the quick run is shared with test_pinned_results.py
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
    for item in range(1, 8):
        assert (study / f"item{item}.csv").stat().st_size > 0
        assert (study / f"item{item}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = [line for line in (study / "headline.md").read_text().splitlines() if re.match(r"\| \d \|", line)]
    assert sorted({row.split("|")[1].strip() for row in rows}) == [str(i) for i in range(1, 8)]


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
    docs = (ROOT / "docs" / "hbf.md").read_text()
    for p in PROVENANCE:
        assert f"| {p.name} | {p.value} | {p.mark} | {p.source} |" in docs, p.name
