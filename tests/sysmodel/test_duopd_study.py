"""The DuoPD study (`basedie study duopd`) in quick mode: its files exist, the paper's values are carried over as stated, the sweeps
cover their grids, queueing and utilization behave. Its results themselves are pinned
(`tests/sysmodel/pinned/duopd_headline.json`, checked by `test_pinned_results.py` on the same run)."""
import csv
import math
import re
from itertools import product
from pathlib import Path

import pytest

from basedie.studies import duopd
from tests.sysmodel import pinned

pytestmark = [pinned.xdist_group("duopd_headline"), pytest.mark.slow]     # the quick run is shared with test_pinned_results.py
FIGURES = ("fig11", "fig12", "fig9", "fig13", "fig14", "fig15", "fig16")


def read(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def study():
    """The quick run the pinned results come from: (module, output folder, what it printed)."""
    out, printed = pinned.run(pinned.command("duopd_headline"))
    return duopd, out, printed


def test_every_figure_writes_a_csv_and_a_png(study) -> None:
    _, out, _ = study
    for name in FIGURES:
        assert read(out / f"{name}.csv"), name
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_headline_tables_carry_the_papers_values_as_stated(study) -> None:
    _, out, printed = study
    rows = read(out / "headline.csv")
    assert {r["figure"] for r in rows} == {"11", "12", "9", "13", "14", "15", "16"}
    markdown = (out / "headline.md").read_text()
    table = [line for line in markdown.splitlines() if line.startswith("| ") and line.split("|")[1].strip().isdigit()]
    assert len(table) == len(rows)
    assert markdown.strip() in printed and "wall time" in printed
    # The paper's own numbers, e.g. §4.3's TBT, §6.2's speed-ups and §6.7's energy savings.
    paper = {r["claim"]: float(r["paper"]) for r in rows}
    assert paper["GPT3-175B p50 TBT, prefill-first, batch 16, 16K context (ms)"] == 15.71
    assert paper["end-to-end energy reduction vs PD 1:1, output 512 (%)"] == 37.9
    assert paper["max speed-up over pd-3:1 (all models and configurations)"] == 2.23
    # §6.4's five Fig. 13 headlines (and PIM's own gain over PD on GPUs).
    assert paper["DuoPD over PD 1:1 on PIM, prefill-heavy, max"] == 1.82
    assert paper["DuoPD over PD 1:1 on PIM, decode-heavy, max"] == 1.80
    assert paper["DuoPD over PD 1:1 on Duplex, dense models, decode-heavy, max"] == 1.49
    assert paper["PD 1:1 on Duplex over DuoPD, Qwen3-235B-A22B (MoE), decode-heavy, max"] == 1.09
    assert paper["DuoPD (4x BW + 4x compute) over PD 1:1 on Duplex (4x compute), max"] == 2.18
    # A deviation row states ours ÷ paper (or ours − paper in points) of its own values: GPT3-175B's TBT row.
    tbt = next(r for r in rows if r["claim"].startswith("GPT3-175B p50 TBT"))
    assert tbt["deviation_kind"] == "ours/paper" and f"{float(tbt['deviation']):.2f}x" in markdown


def test_every_claim_off_the_paper_names_its_mechanism_and_the_rerun_behind_it(study) -> None:
    script, out, _ = study
    rows = read(out / "headline.csv")
    off = [r for r in rows if r["agrees"] == "False"]
    assert off and all(r["mechanism"].startswith("agrees") for r in rows if r["agrees"] == "True")
    for r in off:
        name, reason, value = re.fullmatch(r"(.+) \(reason (\d)\); .+: (\S+)", r["mechanism"]).groups()
        # A Fig. 16 claim under the papers' PNM power has the mechanism of the default source's claim.
        entry = script.MECHANISMS[r["claim"].removesuffix(script.POWER_LABEL["paper"])]
        why = next(m for m in (entry if isinstance(entry, tuple) else [entry]) if m.name == name)
        assert int(reason) == why.reason and math.isfinite(float(value))
        # The rerun's figure is on disk, and it differs from the study's own run.
        figure = f"fig{r['figure']}.csv"
        assert read(out / "sensitivity" / why.sensitivity / figure) != read(out / figure)
    # What overlapping the all-reduces does to PD 3:1 at output 32 is read off its own fig11.csv.
    overlap = read(out / "sensitivity" / "allreduce-overlap" / "fig11.csv")
    rps = {(r["model"], r["system"], r["input_len"], r["max_batch"]): float(r["requests_per_s"]) for r in overlap
           if r["output_len"] == "32"}
    best = max(rps[(m, "duopd", i, b)] / rps[(m, "pd-3:1", i, b)] for m, s, i, b in rps if s == "duopd")
    row = next(r for r in off if r["claim"].startswith("output 32 (prefill-heavy) vs PD 3:1: highest"))
    assert row["mechanism"].endswith(f"--allreduce-overlap: {best:.4g}")


def test_fig11_covers_the_quick_grid(study) -> None:
    script, out, _ = study
    rows = read(out / "fig11.csv")
    quick = script.QUICK
    seen = {(r["model"], r["system"], int(r["input_len"]), int(r["output_len"]), int(r["max_batch"])) for r in rows}
    assert seen == set(product(script.MODELS, ("duopd", "pd-1:1", "pd-3:1", "chunked"), quick.inputs, quick.outputs,
                               quick.batches))
    assert len(rows) == len(seen)
    assert all(r["requests"] == r["max_batch"] and r["status"] == "ok" for r in rows)
    for r in rows:   # normalized to PD 1:1 of the same configuration
        reference = next(float(x["requests_per_s"]) for x in rows if x["system"] == "pd-1:1" and all(
            x[k] == r[k] for k in ("model", "input_len", "output_len", "max_batch")))
        assert float(r["normalized_to_pd_1_1"]) == pytest.approx(float(r["requests_per_s"]) / reference)


def test_fig13_covers_its_grid_and_decode_accelerators_matter_only_when_decoding_does(study) -> None:
    script, out, _ = study
    rows = read(out / "fig13.csv")
    seen = {(r["model"], r["system"], r["workload_kind"], int(r["max_batch"])) for r in rows}
    kinds = [kind for kind, _ in script.FIG13_WORKLOADS]
    assert seen == set(product(script.MODELS, script.FIG13_SYSTEMS, kinds, script.QUICK.batches))
    assert len(rows) == len(seen)
    ratio = {(r["model"], r["system"], r["workload_kind"], r["max_batch"]): float(r["normalized_to_pd_1_1"] or "nan")
             for r in rows}
    for (model, system, kind, batch), value in ratio.items():
        if system.startswith("pd-1:1-") and kind == "prefill-heavy" and math.isfinite(value):
            # 32 output tokens after a 16K prompt: the decode phase is a sliver of the makespan.
            assert value == pytest.approx(1.0, abs=0.02), (model, system, batch)
        if system == "duopd":
            assert value > 1.0, (model, kind, batch)


def test_fig12_ttft_grows_with_qps_for_every_system(study) -> None:
    script, out, _ = study
    rows = read(out / "fig12.csv")
    for model, system in product(script.MODELS, ("duopd", "pd-1:1", "pd-3:1", "chunked")):
        mine = sorted((float(r["qps"]), float(r["ttft_p50_s"])) for r in rows
                      if r["model"] == model and r["system"] == system)
        assert len(mine) == len(script.QUICK.qps_multiples)
        assert mine[-1][1] > mine[0][1], (model, system)   # queueing at the highest load


def test_fig15_decode_instance_computes_less_than_prefill_instance(study) -> None:
    script, out, _ = study
    rows = read(out / "fig15.csv")
    for model in script.MODELS:
        part = {r["part"].split(" (")[0]: float(r["gpu_compute"]) for r in rows if r["model"] == model}
        assert part["PD 1:1 decode instance"] < part["PD 1:1 prefill instance"]


def test_fig16_the_power_source_moves_only_the_pnms_decode_energy(study) -> None:
    """PD 1:1 has no PNM, and DuoPD prefills on its GPUs: only DuoPD's decode energy depends on the PNMs' power,
    which the synthesis table puts above DuoPD's 6.45 W per stack (docs/results/ppa.md)."""
    _, out, _ = study
    energy = {(r["system"], r["output_len"], r["power_source"]): r for r in read(out / "fig16.csv")}
    assert {source for _, _, source in energy} == {"synthesized", "paper"}
    for (system, output, _), r in energy.items():
        paper = energy[(system, output, "paper")]
        assert float(r["prefill_j"]) == float(paper["prefill_j"]), (system, output)
        if system == "pd-1:1":
            assert float(r["energy_j"]) == float(paper["energy_j"]), output
    for output in {output for _, output, _ in energy}:
        assert (float(energy[("duopd", output, "synthesized")]["decode_j"])
                > float(energy[("duopd", output, "paper")]["decode_j"])), output


def test_impossible_configurations_are_recorded_not_dropped(tmp_path, monkeypatch, capsys) -> None:
    script = duopd
    monkeypatch.setattr(script, "FIG16_INPUT", 10**6)   # a million-token GPT3-175B KV cache fits nowhere
    script.main(["--only", "fig16", "--workers", "0", "--out", str(tmp_path)])
    rows = read(tmp_path / "fig16.csv")
    assert len(rows) == 2 * len(script.FIG16_OUTPUTS) * len(script.POWER_SOURCES)
    assert all(r["status"].startswith("impossible:") and "KV cache" in r["status"] for r in rows)
    assert all(math.isnan(float(r["ours"])) for r in read(tmp_path / "headline.csv"))
    assert "n/a" in capsys.readouterr().out


def test_only_rejects_an_unknown_figure(tmp_path) -> None:
    with pytest.raises(SystemExit):
        duopd.main(["--only", "fig99", "--out", str(tmp_path)])
