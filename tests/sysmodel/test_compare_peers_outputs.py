"""scripts/compare_peers.py end to end: the peers' per-request output formats are read as documented (hand-written
sample files, hand-computed percentiles) and the workload writer produces each peer's input format."""
import csv
import runpy
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "compare_peers.py"
SAMPLES = Path(__file__).parent / "peer_samples"


@pytest.fixture(scope="module")
def script():
    return SimpleNamespace(**runpy.run_path(str(SCRIPT)))


def test_distserve_latencies_in_ms_become_seconds(script) -> None:
    got = script.percentiles(script.distserve_latencies(SAMPLES / "distserve_request_latency.csv"))
    # first_token_latency sorted 100..500 ms: p50 the 3rd (300), p90 at rank 3.6: 400 + 0.6 × 100 = 460 ms.
    assert got["ttft", 50] == pytest.approx(0.300) and got["ttft", 90] == pytest.approx(0.460)
    # tpot 10..50 ms: 30 and 40 + 0.6 × 10 = 46 ms; total_latency 1,000..6,000: 3,000 and 4,000 + 0.6 × 2,000.
    assert got["tpot", 50] == pytest.approx(0.030) and got["tpot", 90] == pytest.approx(0.046)
    assert got["e2e", 50] == pytest.approx(3.0) and got["e2e", 90] == pytest.approx(5.2)


def test_splitwise_latencies_are_read_per_request(script) -> None:
    latencies = script.splitwise_latencies(SAMPLES / "splitwise_detailed.csv")
    assert latencies["ttft"].tolist() == [0.5, 0.1, 0.3, 0.2, 0.4]
    got = script.percentiles(latencies)
    # ttft sorted 0.1..0.5: p50 0.3, p90 0.4 + 0.6 × 0.1; tbt 0.01..0.05: 0.03, 0.046; response 1..5: 3, 4.6.
    assert got["ttft", 50] == pytest.approx(0.3) and got["ttft", 90] == pytest.approx(0.46)
    assert got["tpot", 50] == pytest.approx(0.03) and got["tpot", 90] == pytest.approx(0.046)
    assert got["e2e", 50] == pytest.approx(3.0) and got["e2e", 90] == pytest.approx(4.6)
    # the TPOT both peers report, (E2E − TTFT) / output tokens, is what `ours_latencies` computes for us.
    with open(SAMPLES / "splitwise_detailed.csv", newline="") as stream:
        tokens = np.array([int(r["token_sizes"]) for r in csv.DictReader(stream)])
    assert np.allclose((latencies["e2e"] - latencies["ttft"]) / tokens, latencies["tpot"])


def test_workloads_are_written_in_each_peers_input_format(script, tmp_path) -> None:
    script.write_workloads(tmp_path)
    for name, (count, _, _, _) in script.WORKLOADS.items():
        ours = [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
        with open(tmp_path / f"{name}.splitwise.csv", newline="") as stream:
            reader = csv.DictReader(stream)
            assert reader.fieldnames == ["request_id", "request_type", "application_id", "arrival_timestamp",
                                         "batch_size", "prompt_size", "token_size"]
            rows = list(reader)
        assert len(rows) == count
        assert [int(r["request_id"]) for r in rows] == list(range(count))
        assert {(r["request_type"], r["application_id"], r["batch_size"]) for r in rows} == {("2", "0", "1")}
        # arrivals survive the text round trip exactly (repr of a float)
        assert [(float(r["arrival_timestamp"]), int(r["prompt_size"]), int(r["token_size"])) for r in rows] == [
            (r["arrival_s"], r["prompt_tokens"], r["output_tokens"]) for r in ours]
    config = (tmp_path / "splitwise-peer.yaml").read_text()
    assert "ray" not in config and "performance_model: db" in config


def test_peer_commands_read_the_written_files_and_write_where_end_to_end_looks(script, tmp_path) -> None:
    lines = script.peer_commands(tmp_path)
    splitwise = [line for line in lines if line.startswith("python run.py")]
    assert len(splitwise) == len(script.WORKLOADS) * sum(bool(p.overrides) for p in script.PEERS.values())
    for name in script.WORKLOADS:
        for peer_name, peer in script.PEERS.items():
            expected = tmp_path.resolve() / peer.output.format(w=name)
            if peer.overrides:
                line = next(x for x in splitwise if f"output_dir={tmp_path.resolve()}/{name}.{peer_name} " in x)
                assert f"trace.path={tmp_path.resolve()}/{name}.splitwise.csv" in line
                assert expected == tmp_path.resolve() / f"{name}.{peer_name}" / "detailed" / "0.csv"
            else:
                assert any(f"--workload {tmp_path.resolve()}/{name}.json " in x
                           and f"--output-request-latency {expected}" in x for x in lines)


def test_end_to_end_runs_ours_with_and_without_the_iteration_overhead(script, tmp_path, capsys) -> None:
    workloads = {"chat": (20, 2.0, 256, 16)}
    script.write_workloads(tmp_path, workloads)
    (tmp_path / script.PEERS["distserve"].output.format(w="chat")).write_text(
        (SAMPLES / "distserve_request_latency.csv").read_text())
    rows = script.end_to_end(tmp_path, perf_models=("roofline",), peers=("distserve",), overheads=(0.0, 0.002))
    assert [r["iteration_overhead_s"] for r in rows] == [0.0, 0.002]
    plain, charged = rows
    # every prefill and every decode iteration is 2 ms longer: TTFT grows by at least one iteration's, TPOT (over
    # ~16 tokens, the first of which is the prefill's) by most of it; the peer's side does not change.
    assert charged["ttft_p50_ours_ms"] > plain["ttft_p50_ours_ms"] + 1.9
    assert charged["tpot_p50_ours_ms"] > plain["tpot_p50_ours_ms"] + 1.5
    assert charged["ttft_p50_theirs_ms"] == plain["ttft_p50_theirs_ms"]
    assert "2.0ms" in capsys.readouterr().out


def test_the_markdown_table_has_a_row_per_cell_with_ours_over_theirs(script) -> None:
    ratios = {f"{key}_p{q}_ratio": value for (key, q), value in zip(script.METRICS, (0.577, 0.621, 0.56, 0.5, 1, 2))}
    row = {"peer": "splitwise-baseline-a100", "workload": "chat", "perf_model": "measured",
           "iteration_overhead_s": 0.017, **ratios}
    assert script.ratio_table([row]).splitlines() == [
        "| peer | workload | perf model | overhead (ms) | TTFT p50 | TTFT p90 | TPOT p50 | TPOT p90 | E2E p50 "
        "| E2E p90 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        "| splitwise-baseline-a100 | chat | measured | 17 | 0.58 | 0.62 | 0.56 | 0.50 | 1.00 | 2.00 |"]
