"""Trace replay, Gamma arrivals with per-field length distributions, and deployments given as options."""
import json

import numpy as np
import pytest

from basedie.cli import main
from sysmodel.arrivals import GammaArrivals, Lengths
from sysmodel.errors import ConfigError
from sysmodel.simulate import SimulationConfig, simulate
from sysmodel.traces import Trace
from sysmodel.workload import FixedBatch, PoissonArrivals


def test_csv_trace_in_vidur_and_azure_column_names(tmp_path) -> None:
    vidur = tmp_path / "conv.csv"
    vidur.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,374,44\n4.314579,396,109\n1.5,10,1\n")
    requests = Trace(str(vidur)).generate()
    assert [(r.id, r.arrival, r.input_len, r.output_len) for r in requests] == [
        (0, 0.0, 374, 44), (2, 1.5, 10, 1), (1, 4.314579, 396, 109)]         # replayed in arrival order
    azure = tmp_path / "azure.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,4808,10\n"
                     "2023-11-16 18:15:50.9951690,3180,8\n")
    first, second = Trace(str(azure)).generate()
    assert second.arrival - first.arrival == pytest.approx(4.314579, abs=1e-6)
    assert (first.input_len, first.output_len) == (4808, 10)


def test_jsonl_trace_and_its_errors(tmp_path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"arrival_s": 0.5, "prompt_tokens": 8, "output_tokens": 2}\n\n{"arrival_s": 0.25, '
                    '"prompt_tokens": 4, "output_tokens": 3}\n')
    assert [(r.arrival, r.input_len) for r in Trace(str(path)).generate()] == [(0.25, 4), (0.5, 8)]
    for text, message in (('{"arrival_s": 0, "prompt_tokens": 0, "output_tokens": 2}', "row 1, prompt_tokens"),
                          ('{"arrival_s": -1, "prompt_tokens": 3, "output_tokens": 2}', "arrival must be"),
                          ('{"arrival_s": 0, "prompt_tokens": 2.5, "output_tokens": 2}', "integer >= 1"),
                          ('{"t": 0, "prompt_tokens": 3}', "columns t, prompt_tokens are no known trace format"),
                          ('{"t": 0, "prompt_tokens": 3, "output_tokens": 2}', "no arrival column arrival_s"),
                          ("[1]", "item 1: not a JSON object")):
        path.write_text(text + "\n")
        with pytest.raises(ConfigError, match=message):
            Trace(str(path)).generate()


def test_gamma_arrivals_have_the_requested_rate_and_burstiness() -> None:
    for cv in (0.5, 1.0, 3.0):
        workload = GammaArrivals(10.0, 20000, Lengths(100), Lengths(10), arrival_cv=cv, seed=1)
        gaps = np.diff([r.arrival for r in workload.generate()])
        assert gaps.mean() == pytest.approx(0.1, rel=0.05)
        assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.05)


@pytest.mark.parametrize("kind", ["normal", "lognormal", "uniform", "exponential"])
def test_length_distributions_have_their_mean_and_cv_and_are_clipped(kind: str) -> None:
    cv = 1.0 if kind == "exponential" else 0.5
    draws = Lengths(1000, kind, 0.5).draw(np.random.default_rng(3), 50000)
    assert draws.mean() == pytest.approx(1000, rel=0.03)
    assert draws.std() / draws.mean() == pytest.approx(cv, rel=0.05)
    clipped = Lengths(1000, kind, 0.5, low=800, high=1200).draw(np.random.default_rng(3), 5000)
    assert clipped.min() == 800 and clipped.max() == 1200


def test_named_systems_and_their_option_forms_are_the_same_system() -> None:
    workload = PoissonArrivals(3.0, 24, 2048, 32, seed=4)
    for named, spelled in (("pd-1:1", "pd:1x4+1x4"), ("pd-3:1", "pd:3x2+1x2"), ("chunked", "colocated:1x8:sarathi")):
        a, b = (simulate(SimulationConfig(system=s, model="llama2-70b", workload=workload)) for s in (named, spelled))
        assert [r.token_times for r in a.requests] == [r.token_times for r in b.requests]


def test_schedulers_differ_as_designed() -> None:
    # 8 prompts at once on one TP8 instance with a 4,096-token budget: vLLM runs whole prompts two at a time and
    # no decoding meanwhile; Orca runs the same prompt batches but decodes alongside; Sarathi splits prompts.
    workload = FixedBatch(8, 2048, 16)
    runs = {s: simulate(SimulationConfig(system=f"colocated:1x8:{s}", model="llama2-70b", workload=workload,
                                         chunk_tokens=4096))
            for s in ("vllm", "orca", "sarathi")}
    firsts = {s: sorted(r.first_token for r in run.requests) for s, run in runs.items()}
    # Whole prompts, two per iteration: first tokens arrive in pairs.
    for s in ("vllm", "orca"):
        assert firsts[s][0] == firsts[s][1] < firsts[s][2] == firsts[s][3]
    # vLLM pauses decoding while prompts wait: request 0's second token comes after the last prompt is done.
    vllm = runs["vllm"].requests
    assert vllm[0].token_times[1] > max(firsts["vllm"])
    orca = runs["orca"].requests
    assert orca[0].token_times[1] < max(firsts["orca"])


def test_least_tokens_router_balances_uneven_requests(tmp_path) -> None:
    path = tmp_path / "t.csv"
    # Long, short, short, long... at t = 0: round robin puts both long ones on instance 0 of 2.
    path.write_text("arrival_s,input_len,output_len\n" + "".join(
        f"0,{4096 if i % 2 == 0 else 128},16\n" for i in range(4)))
    runs = {router: simulate(SimulationConfig(system=f"colocated:2x4:sarathi:{router}", model="llama2-70b",
                                              workload=Trace(str(path))))
            for router in ("round-robin", "least-tokens")}
    assert runs["least-tokens"].summary["makespan_s"] < runs["round-robin"].summary["makespan_s"]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_replays_a_trace_with_a_measured_h100_pd_deployment(tmp_path, capsys) -> None:
    trace = tmp_path / "chat.jsonl"
    trace.write_text("".join(json.dumps({"arrival_s": 0.2 * i, "prompt_tokens": 512, "output_tokens": 8}) + "\n"
                             for i in range(10)))
    out = tmp_path / "out"
    code, stdout, err = run(["simulate", "--system", "pd", "--prefill-instances", "1", "--prefill-tp", "4",
                             "--decode-instances", "1", "--decode-tp", "4", "--model", "Llama-2-70B", "--hardware",
                             "h100-sxm5-80gb", "--perf-model", "measured", "--trace", str(trace), "--no-plots",
                             "--out", str(out)], capsys)
    assert (code, err) == (0, "")
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "requests.csv", "servers.csv", "summary.json"]
    config = json.loads((out / "config.json").read_text())
    assert (config["system"], config["perf_model"], config["hardware"]["gpu"]["name"]) == (
        "pd:1x4+1x4", "measured", "H100-SXM5-80GB")
    assert json.loads((out / "summary.json").read_text())["requests"] == 10


@pytest.mark.parametrize("extra,message", [
    (["--system", "pd", "--prefill-instances", "1"], "--system pd needs --prefill-tp"),
    (["--system", "duopd", "--tp", "2"], "--tp applies to --system colocated only"),
    (["--system", "colocated", "--instances", "2", "--tp", "4", "--scheduler", "fcfs"], "unknown scheduler 'fcfs'"),
    (["--system", "colocated", "--instances", "4", "--tp", "4"], "needs 16 GPUs, the hardware has 8"),
    (["--system", "duopd", "--perf-model", "measured"], "no measured profile for GB300-class"),
    (["--system", "duopd", "--hardware", "tpu-v5"], "unknown hardware 'tpu-v5'"),
    (["--system", "chunked", "--arrival-cv", "2"], "--arrival-cv applies to generated arrivals; give --qps"),
    (["--system", "chunked", "--qps", "2", "--input-dist", "zipf"], "length distribution 'zipf'"),
    (["--system", "chunked", "--qps", "2", "--input-range", "9:x"], "--input-range takes MIN:MAX"),
    (["--system", "chunked", "--trace", "t.csv", "--qps", "2"], "--qps does not apply to --trace"),
    (["--system", "chunked", "--trace", "missing.csv"], "trace missing.csv: cannot be read"),
])
def test_bad_fidelity_options_are_one_line_errors(tmp_path, monkeypatch, capsys, extra, message) -> None:
    monkeypatch.chdir(tmp_path)
    code, stdout, err = run(["simulate", "--model", "llama2-70b", "--input-len", "512", "--output-len", "4",
                             *extra], capsys)
    assert (code, stdout) == (2, "") and err.count("\n") == 1
    assert message in err
    assert list(tmp_path.iterdir()) == []


def test_default_folders_of_runs_that_differ_in_hardware_or_performance_model_differ(tmp_path, monkeypatch,
                                                                                     capsys) -> None:
    monkeypatch.chdir(tmp_path)
    base = ["simulate", "--system", "chunked", "--model", "llama2-70b", "--input-len", "512", "--output-len", "4",
            "--requests", "2", "--no-plots"]
    for extra in ([], ["--hardware", "h100-sxm5-80gb"], ["--hardware", "h100-sxm5-80gb", "--perf-model", "measured"]):
        assert run([*base, *extra], capsys)[0] == 0
    assert len(list((tmp_path / "build" / "simulate").iterdir())) == 3


@pytest.mark.parametrize("scheduler, iterations", [("sarathi", 8), ("orca", 1), ("vllm", 1)])
def test_whole_prompt_schedulers_prefill_a_long_prompt_in_one_iteration(scheduler, iterations) -> None:
    # A 4,096-token prompt with a 512-token budget: eight chunks, or one whole-prompt iteration (a prompt longer
    # than the budget runs alone). At 1 s of host time per iteration, the first token comes after that many seconds
    # plus the iterations' compute (well under a second for LLaMA2-70B on 8 GPUs).
    result = simulate(SimulationConfig(system=f"colocated:1x8:{scheduler}", model="LLaMA2-70B",
                                       workload=FixedBatch(1, 4096, 2), chunk_tokens=512, iteration_overhead_s=1.0))
    assert iterations <= result.summary["ttft_s"]["p50"] < iterations + 1
