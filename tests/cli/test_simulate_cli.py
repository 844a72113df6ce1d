"""`basedie simulate`: the files it writes and their consistency, reproducibility, the MMU policy flag, a
Hugging Face config.json as the model, and bad input (one line, exit code 2, nothing written)."""
import csv
import functools
import importlib.metadata
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import basedie.verified
from basedie.cli import main
from sysmodel import power, report

pytestmark = pytest.mark.xdist_group("simulate-cli")   # the tests of `small_run` share one run
SMALL = ["simulate", "--system", "duopd", "--model", "LLaMA2-70B", "--input-len", "2048", "--output-len", "16",
         "--requests", "8"]
QUICK = [*SMALL, "--no-plots"]     # for the tests that read no plot: matplotlib takes 90 % of a small run
FILES = ("summary.json", "config.json", "requests.csv", "servers.csv", "latency_cdf.png", "timeline.png",
         "utilization.png")
FORBIDDEN = ("amaranth", "cocotb", "rtl", "tb.")

# Mistral-7B-v0.1's config.json (huggingface.co/mistralai/Mistral-7B-v0.1), as a user would pass it.
MISTRAL_7B = {"architectures": ["MistralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
              "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000,
              "hidden_act": "silu", "max_position_embeddings": 32768, "rms_norm_eps": 1e-05,
              "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as stream:
        return list(csv.DictReader(stream))


def column(rows: list[dict[str, str]], name: str) -> np.ndarray:
    return np.array([float(row[name]) for row in rows])


@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> Path:
    """One DuoPD fixed-batch run shared by the consistency tests."""
    out = tmp_path_factory.mktemp("small") / "out"
    assert main([*SMALL, "--out", str(out)]) == 0
    return out


def test_every_output_file_is_written(small_run) -> None:
    out = small_run
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)
    for name in FILES:
        if name.endswith(".png"):
            data = (out / name).read_bytes()
            assert data[:8] == b"\x89PNG\r\n\x1a\n"
            width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
            assert width >= 400 and height >= 200
    assert not [p for p in out.parent.iterdir() if p.name != "out"]  # no staging folder left behind


def test_requests_csv_matches_the_summary_and_the_metric_definitions(small_run) -> None:
    out = small_run
    rows = read_csv(out / "requests.csv")
    summary = json.loads((out / "summary.json").read_text())
    assert len(rows) == summary["requests"] == 8
    assert [int(r["id"]) for r in rows] == list(range(8))
    assert all(int(r["input_len"]) == 2048 and int(r["output_len"]) == 16 for r in rows)
    assert np.all(column(rows, "arrival_s") == 0.0)  # a fixed batch arrives at once
    ttft, tpot, e2e, queue = (column(rows, k) for k in ("ttft_s", "tpot_s", "e2e_s", "queue_s"))
    for key, values in (("ttft_s", ttft), ("tpot_s", tpot), ("e2e_s", e2e)):
        assert summary[key]["mean"] == pytest.approx(values.mean(), rel=1e-12)
        assert summary[key]["p50"] == pytest.approx(np.median(values), rel=1e-12)
        assert summary[key]["p90"] == pytest.approx(np.percentile(values, 90), rel=1e-12)
        assert summary[key]["p99"] == pytest.approx(np.percentile(values, 99), rel=1e-12)
    # E2E = TTFT + 15 later tokens at TPOT each (TPOT is the mean gap after the first token).
    assert e2e == pytest.approx(ttft + 15 * tpot, rel=1e-12)
    # One prefill server, first come first served: each prompt starts when the one before has its first token.
    assert queue[0] == 0.0 and queue[1:] == pytest.approx(ttft[:-1], rel=1e-12)
    tbt50, tbt99 = column(rows, "tbt_p50_s"), column(rows, "tbt_p99_s")
    assert np.all((0 < tbt50) & (tbt50 <= tbt99))
    assert summary["makespan_s"] == pytest.approx(e2e.max(), rel=1e-12)  # from time 0 to the last token


def test_servers_csv_matches_the_summary(small_run) -> None:
    out = small_run
    servers = read_csv(out / "servers.csv")
    summary = json.loads((out / "summary.json").read_text())
    assert [s["server"] for s in servers] == ["prefill (GPU)", "decode (PNM)"]
    energy = column(servers, "energy_j")
    assert energy.sum() == pytest.approx(summary["energy_j"]["total"], rel=1e-12)
    assert summary["energy_j"]["per_request"] == pytest.approx(energy.sum() / 8, rel=1e-12)
    assert summary["energy_j"]["per_output_token"] == pytest.approx(energy.sum() / (8 * 16), rel=1e-12)
    for server in servers:
        for key in ("busy", "compute_utilization", "hbm_bandwidth_utilization"):
            assert 0 < float(server[key]) <= 1


def test_config_json_names_what_ran_and_how(small_run) -> None:
    out = small_run
    config = json.loads((out / "config.json").read_text())
    assert config["system"] == "duopd" and config["mmu_policy"] == "prefill-first"
    assert config["model"]["name"] == "LLaMA2-70B" and config["model"]["layers"] == 80
    assert config["workload"] == {"kind": "FixedBatch", "requests": 8, "input_len": 2048, "output_len": 16}
    assert config["max_batch"] == 16
    assert config["command_line"] == ["basedie", *SMALL, "--out", str(out)]
    assert config["basedie_version"] == importlib.metadata.version("basedie")
    assert {"pnm_lane", "mmu"} <= set(config["verified_blocks"])


def test_only_duopd_records_the_pnm_and_mmu_it_did_not_use_otherwise(tmp_path, capsys) -> None:
    out = tmp_path / "pd"
    code, _, _ = run([*QUICK[:2], "pd-1:1", *QUICK[3:], "--hw", "pnm.lane_width=512", "--out", str(out)], capsys)
    config = json.loads((out / "config.json").read_text())
    assert code == 0 and config["verified_blocks"] == {} and config["mmu_policy"] is None


def test_printed_summary_is_one_table_in_human_units_then_the_folder(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    code, stdout, err = run([*QUICK, "--out", str(out)], capsys)
    assert code == 0 and err == ""
    summary = json.loads((out / "summary.json").read_text())
    lines = stdout.splitlines()
    assert lines[-1] == f"output folder: {out}"
    table = dict(line.split("  ", 1) for line in lines[:-1])
    assert set(table) == {"system", "model", "hardware", "requests", "makespan", "throughput", "TTFT p50 / p99",
                          "TPOT p50 / p99", "TBT p50 / p99", "E2E p50 / p99", "decode wait p50 / p99",
                          "GPU compute util",
                          "HBM bandwidth util", "energy"}
    ttft = summary["ttft_s"]  # well below a second here, so in ms
    assert table["TTFT p50 / p99"].strip() == f"{ttft['p50'] * 1e3:.3f} ms / {ttft['p99'] * 1e3:.3f} ms"
    assert table["model"].strip() == "LLaMA2-70B"
    assert f"{summary['energy_j']['per_request']:.1f} J/request" in table["energy"]


def test_seed_reproduces_poisson_runs_and_another_seed_changes_them(tmp_path, capsys) -> None:
    poisson = [*QUICK, "--qps", "20"]
    outs = {name: tmp_path / name for name in ("a", "b", "c", "flat")}
    for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
        assert run([*poisson, "--seed", seed, "--out", str(outs[name])], capsys)[0] == 0
    assert run([*poisson, "--length-cv", "0", "--out", str(outs["flat"])], capsys)[0] == 0
    a, b, c, flat = (read_csv(outs[name] / "requests.csv") for name in ("a", "b", "c", "flat"))
    assert a == b
    assert (outs["a"] / "summary.json").read_text() == (outs["b"] / "summary.json").read_text()
    assert not np.array_equal(column(a, "arrival_s"), column(c, "arrival_s"))
    arrivals = column(a, "arrival_s")
    assert arrivals[0] > 0 and np.all(np.diff(arrivals) > 0)
    assert len(set(column(a, "input_len"))) > 1  # lengths drawn around the mean with cv 0.1 ...
    assert set(column(flat, "input_len")) == {2048} and set(column(flat, "output_len")) == {16}  # ... or exact
    workload = json.loads((outs["c"] / "config.json").read_text())["workload"]
    assert workload == {"kind": "PoissonArrivals", "qps": 20.0, "requests": 8, "input_len": 2048, "output_len": 16,
                        "length_cv": 0.1, "seed": 2}


def test_a_gamma_run_prints_its_arrivals_and_per_field_lengths(tmp_path, capsys) -> None:
    code, stdout, err = run([*QUICK, "--qps", "20", "--arrival-cv", "2", "--input-dist", "lognormal",
                             "--out", str(tmp_path / "out")], capsys)
    assert (code, err) == (0, "")
    assert ("requests               8 (Gamma arrivals 20 req/s (cv 2), lognormal prompts of mean 2048, normal outputs "
            "of mean 16, seed 0; max decode batch 16)") in stdout.splitlines()


def test_decode_first_trades_ttft_for_tpot_against_prefill_first(tmp_path, capsys) -> None:
    summaries = {}
    for policy in ("prefill-first", "decode-first"):
        out = tmp_path / policy
        assert run([*QUICK, "--mmu-policy", policy, "--out", str(out)], capsys)[0] == 0
        summaries[policy] = json.loads((out / "summary.json").read_text())
        assert json.loads((out / "config.json").read_text())["mmu_policy"] == policy
    first, second = summaries["prefill-first"], summaries["decode-first"]
    # Prompts arrive while earlier requests decode, so the two compete for HBM: the favoured side is faster.
    assert second["tpot_s"]["p50"] < first["tpot_s"]["p50"]
    assert second["ttft_s"]["p50"] > first["ttft_s"]["p50"]


def test_hugging_face_config_json_is_a_model(tmp_path, capsys) -> None:
    path = tmp_path / "mistral-7b" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(MISTRAL_7B))
    mistral, llama = tmp_path / "mistral", tmp_path / "llama"
    assert run([*QUICK, "--model", str(path), "--out", str(mistral)], capsys)[0] == 0
    assert run([*QUICK, "--out", str(llama)], capsys)[0] == 0
    model = json.loads((mistral / "config.json").read_text())["model"]
    assert model == {"name": "mistral-7b", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
                     "head_dim": 4096 // 32, "ffn": 14336, "vocab": 32000, "gated_mlp": True, "experts": 0,
                     "experts_per_token": 0, "tied_embeddings": False}
    # Decoding streams the weights: ~14.5 GB for Mistral-7B against ~138 GB for LLaMA-2-70B.
    tpot = {name: json.loads((out / "summary.json").read_text())["tpot_s"]["p50"]
            for name, out in (("mistral", mistral), ("llama", llama))}
    assert tpot["mistral"] < tpot["llama"] / 2


def test_default_folder_is_named_after_the_run_and_filesystem_safe(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    argv = [*QUICK, "--system", "pd-1:1"]
    code, stdout, _ = run(argv, capsys)
    assert code == 0
    [folder] = (tmp_path / "build" / "simulate").iterdir()
    assert folder.name == "pd-1_1-llama2-70b-fixed-r8-b16-in2048-out16"
    assert stdout.splitlines()[-1] == f"output folder: {folder}"
    assert run([*argv, "--qps", "4", "--seed", "3"], capsys)[0] == 0
    assert {p.name for p in (tmp_path / "build" / "simulate").iterdir()} == {
        folder.name, "pd-1_1-llama2-70b-qps4-r8-b16-in2048-out16-cv0.1-seed3"}


def test_a_previous_run_is_replaced_only_by_a_successful_one(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert run([*QUICK, "--out", str(out)], capsys)[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert run([*QUICK, "--input-len", "0", "--out", str(out)], capsys)[0] == 2
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert run([*QUICK, "--requests", "4", "--out", str(out)], capsys)[0] == 0
    assert len(read_csv(out / "requests.csv")) == 4
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize("content,message", [
    (None, "exists and is not a folder"),
    ({"notes.txt": "mine"}, "holds files a simulation did not write (notes.txt)"),
])
def test_a_destination_that_is_not_a_previous_run_is_refused(tmp_path, capsys, content, message) -> None:
    out = tmp_path / "out"
    if content is None:
        out.write_text("mine")
    else:
        out.mkdir()
        for name, text in content.items():
            (out / name).write_text(text)
    code, _, err = run([*SMALL, "--out", str(out)], capsys)
    assert code == 2 and message in err and err.count("\n") == 1
    assert (out.read_text() == "mine") if content is None else ((out / "notes.txt").read_text() == "mine")
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def _models(folder: Path) -> dict[str, str]:
    """Bad config.json files, each in its own folder (the folder names the model)."""
    files = {
        "malformed": '{"hidden_size": 4096,',
        "incomplete": json.dumps({k: v for k, v in MISTRAL_7B.items() if k != "num_attention_heads"}),
        "mistyped": json.dumps({**MISTRAL_7B, "hidden_size": "4096"}),
        # Weights of ~80 layers × 12 × 1M² parameters: far beyond 8 GPUs × 384 GB.
        "huge": json.dumps({**MISTRAL_7B, "hidden_size": 1 << 20, "num_attention_heads": 64}),
        # 12 heads cannot be split over DuoPD's tensor parallelism of 8.
        "twelve_heads": json.dumps({**MISTRAL_7B, "hidden_size": 1536, "num_attention_heads": 12,
                                    "num_key_value_heads": 4}),
    }
    paths = {}
    for name, text in files.items():
        path = folder / name / "config.json"
        path.parent.mkdir(parents=True)
        path.write_text(text)
        paths[name] = str(path)
    return paths


BAD_INPUT = [
    (["--model", "gpt5"], "unknown model 'gpt5'"),
    (["--system", "pd-2:1"], "unknown system 'pd-2:1'"),
    (["--mmu-policy", "fastest"], "unknown MMU policy 'fastest'"),
    (["--model", "{malformed}"], "not valid JSON"),
    (["--model", "{incomplete}"], "missing num_attention_heads"),
    (["--model", "{mistyped}"], "hidden_size must be an integer"),
    (["--model", "{huge}"], "huge does not fit"),
    (["--model", "{twelve_heads}"], "12 attention heads cannot be split over TP=8"),
    (["--hw", "gpu.stack.bandwidth=0"], "bandwidth must be > 0"),
    (["--hw", "gpu.stack.bandwidth=-2e12"], "bandwidth must be > 0"),
    (["--hw", "gpu.stack.bandwidth=inf"], "'gpu.stack.bandwidth' must be finite"),
    (["--hw", "link.bandwidth=0"], "link bandwidth must be > 0"),
    (["--hw", "gpu.flops=0"], "GPU flops must be > 0"),
    (["--system", "pd-1:1", "--hw", "gpus=2"], "pd-1:1 needs 8 GPUs, the hardware has 2"),
    (["--hw", "gpu.stack.capacity_bytes=1e9"], "LLaMA2-70B does not fit"),
    (["--hw", "gpu.nope=1"], "hardware has no field 'gpu.nope'"),
    (["--hw", "pnm.lanes=1.5"], "'pnm.lanes' needs a int"),
    (["--hw", "gpu.stack.bandwidth"], "--hw takes FIELD=VALUE"),
    (["--input-len", "0"], "input length must be >= 1"),
    (["--output-len", "-5"], "output length must be >= 1"),
    (["--input-len", "20000000"], "tokens of KV cache"),
    (["--qps", "-2"], "qps must be > 0"),
    (["--qps", "0"], "qps must be > 0"),
    (["--qps", "nan"], "--qps must be a finite number"),
    (["--qps", "5", "--requests", "0"], "requests must be >= 1"),
    (["--requests", "0"], "requests must be >= 1"),
    (["--batch", "0"], "max batch must be >= 1"),
    (["--qps", "5", "--length-cv", "-0.1"], "length_cv must be >= 0"),
    (["--length-cv", "0.2"], "--length-cv applies to Poisson arrivals"),
    (["--qps", "5", "--seed", "-1"], "--seed must be >= 0"),
    (["--system", "chunked", "--chunk-tokens", "0"], "chunk size must be >= 1"),
    (["--system", "chunked", "--mmu-policy", "mixed"],
     "--mmu-policy applies to duopd, duopd-4x-bw and duopd-4x-bw-4x-compute only"),
    (["--iteration-overhead", "-0.001"], "iteration overhead must be a finite number of seconds >= 0"),
    (["--iteration-overhead", "nan"], "iteration overhead must be a finite number of seconds >= 0"),
]


@pytest.mark.parametrize("extra,message", BAD_INPUT, ids=[" ".join(extra) for extra, _ in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, monkeypatch, capsys, extra, message) -> None:
    models = _models(tmp_path / "models")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # the default output folder would be created here
    code, stdout, err = run([*SMALL, *(arg.format(**models) for arg in extra)], capsys)
    assert code == 2 and stdout == ""
    assert err.startswith("basedie simulate: error: ") and err.count("\n") == 1
    assert message in err
    assert list(cwd.iterdir()) == []


def test_a_stale_verified_table_is_one_line_exit_2(tmp_path, monkeypatch, capsys) -> None:
    table = json.loads(basedie.verified.TABLE_PATH.read_text())
    mmu = next(e for e in table["entries"] if e["block"] == "mmu")
    mmu["provenance"]["sources_digest"] = "0" * 64  # as if the MMU's RTL had changed since it was measured
    mmu["provenance"]["content_sha256"] = basedie.verified.content_hash(mmu)
    stale = tmp_path / "table.json"
    stale.write_text(json.dumps(table))
    monkeypatch.setattr(basedie.verified, "load", functools.partial(basedie.verified.load, stale))
    out = tmp_path / "out"
    code, _, err = run([*SMALL, "--out", str(out)], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "is stale: mmu" in err and "basedie verify mmu" in err
    assert not out.exists()


def test_a_stale_synthesis_table_is_one_line_exit_2(tmp_path, monkeypatch, capsys) -> None:
    table = json.loads(power.TABLE_PATH.read_text())
    lane = next(e for e in table["entries"] if e["block"] == "pnm_lane")
    lane["provenance"]["rtl_digest"] = "0" * 64  # as if the lane's RTL had changed since it was synthesized
    stale = tmp_path / "table.json"
    stale.write_text(json.dumps(table))
    committed = power.load
    monkeypatch.setattr(power, "load", lambda path: committed(stale))
    out = tmp_path / "out"
    # The synthesized power is the default source: a stale table is refused without asking for it.
    code, _, err = run([*SMALL, "--out", str(out)], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "is stale: pnm_lane" in err and "basedie synth pnm_lane" in err
    assert not out.exists()
    # The papers' figures need no synthesis table.
    assert run([*QUICK, "--power-source", "paper", "--out", str(out)], capsys)[0] == 0
    resolved = json.loads((out / "config.json").read_text())
    assert resolved["base_die_power"]["source"] == "paper"
    assert resolved["base_die_power"]["pnm_power"]["watts"] == 6.45


def test_the_pnms_power_comes_from_the_synthesis_table_by_default(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert run([*QUICK, "--out", str(out)], capsys)[0] == 0
    used = json.loads((out / "config.json").read_text())["base_die_power"]
    # One stack's PNM, composed by hand from the committed table: 16 paper-size lanes, the 2-lane vector unit 64
    # times (128 lanes), the 64 KiB buffer, the controller and the in-order MMU.
    entries = json.loads(power.TABLE_PATH.read_text())["entries"]

    def watts(block: str, **params) -> float:
        found = [e for e in entries if e["block"] == block and e["figures"]
                 and all(e["params"][k] == v for k, v in params.items())]
        assert len(found) == 1, block
        return found[0]["figures"]["power"]["total_w"]

    expected = (16 * watts("pnm_lane", width=1024) + 64 * watts("pnm_vector", width=2)
                + watts("pnm_buffer", total_bytes=65536) + watts("pnm_controller") + watts("mmu", out_of_order=False))
    assert used["source"] == "synthesized"
    assert used["pnm_power"]["watts"] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("extra", [["--qps", "fast"], ["--batch", "2.5"], ["--system"]])
def test_argparse_errors_exit_2_and_write_nothing(tmp_path, capsys, extra) -> None:
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        main([*SMALL, "--out", str(out), *extra])
    assert exit_info.value.code == 2 and "basedie simulate: error:" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_simulate_never_imports_the_rtl_toolchain_and_help_stays_light(tmp_path) -> None:
    argv = [*SMALL, "--out", str(tmp_path / "out")]
    simulate = (f"import basedie.cli, sys; assert basedie.cli.main({argv!r}) == 0; "
                f"print(any(m.startswith({FORBIDDEN!r}) for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", simulate], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "False"
    assert (tmp_path / "out" / "summary.json").exists()
    # `simulate --help` lists the registries' entries (the system model's, without its plots); any other command
    # imports none of the system model.
    for command, heavy in ((["simulate", "--help"], "['numpy', 'sysmodel']"), (["--help"], "[]"),
                           (["generate", "--help"], "[]")):
        helping = (f"import basedie.cli, sys\ntry:\n    basedie.cli.main({command!r})\nexcept SystemExit:\n"
                   "    pass\nprint(sorted({m.split('.')[0] for m in sys.modules} & {'matplotlib', 'sysmodel', "
                   "'numpy'}))")
        done = subprocess.run([sys.executable, "-c", helping], capture_output=True, text=True, check=True)
        assert done.stdout.splitlines()[-1] == heavy
        assert ("--mmu-policy" in done.stdout) == (command[0] == "simulate")


def test_timeline_sample_spreads_over_the_run() -> None:
    many = list(range(1000))
    picked = report.sample(many)
    assert len(picked) == report.TIMELINE_REQUESTS and picked[0] == 0 and picked[-1] == 999
    assert all(b > a for a, b in zip(picked, picked[1:]))
    gaps = np.diff(picked)
    assert gaps.max() - gaps.min() <= 1  # evenly spread
    assert report.sample(many[:150]) == many[:150]


def test_json_outputs_are_strict_json_when_a_metric_is_undefined(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert run([*QUICK, "--output-len", "1", "--out", str(out)], capsys)[0] == 0
    summary = json.loads((out / "summary.json").read_text(), parse_constant=pytest.fail)
    assert summary["tpot_s"] == {"mean": None, "p50": None, "p90": None, "p99": None}  # no token after the first
    rows = read_csv(out / "requests.csv")
    assert all(math.isnan(float(r["tpot_s"])) and math.isnan(float(r["tbt_p50_s"])) for r in rows)
