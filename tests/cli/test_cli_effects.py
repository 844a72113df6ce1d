"""`basedie simulate --allreduce / --allreduce-overlap / --decode-hardware`: the options reach the run and are
recorded in config.json; bad combinations are one line, exit 2, nothing written."""
import json

import pytest

from basedie.cli import main

PD = ["simulate", "--system", "pd", "--prefill-instances", "1", "--prefill-tp", "8", "--decode-instances", "1",
      "--decode-tp", "8", "--model", "LLaMA2-70B", "--input-len", "2048", "--output-len", "4", "--requests", "2",
      "--hardware", "h100-sxm5-80gb", "--hw", "gpus=16", "--no-plots"]


def test_options_are_recorded_and_change_the_run(tmp_path, capsys) -> None:
    assert main([*PD, "--out", str(tmp_path / "plain")]) == 0
    assert main([*PD, "--allreduce", "nvls", "--allreduce-overlap", "--decode-hardware", "a100-sxm4-80gb",
                 "--out", str(tmp_path / "effects")]) == 0
    capsys.readouterr()
    plain, effects = (json.loads((tmp_path / name / "config.json").read_text()) for name in ("plain", "effects"))
    assert (plain["all_reduce"], plain["allreduce_overlap"], plain["decode_hardware"]) == ("bandwidth", False, None)
    assert (effects["all_reduce"], effects["allreduce_overlap"]) == ("nvls", True)
    assert effects["decode_hardware"]["gpu"]["name"] == "A100-SXM4-80GB"
    summaries = [json.loads((tmp_path / name / "summary.json").read_text()) for name in ("plain", "effects")]
    assert summaries[0]["tpot_s"]["p50"] != summaries[1]["tpot_s"]["p50"]


@pytest.mark.parametrize(("extra", "message"), [
    (["--allreduce", "tree"], "unknown all-reduce model 'tree'"),
    (["--allreduce", "alpha-beta", "--perf-model", "measured"], "applies to --perf-model roofline"),
    (["--decode-hardware", "tpu"], "unknown hardware 'tpu'"),
])
def test_bad_effect_options_are_one_line_exit_2(tmp_path, monkeypatch, capsys, extra, message) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([*PD, *extra]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and message in captured.err
    assert list(tmp_path.iterdir()) == []


def test_decode_hardware_outside_pd_is_refused(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["simulate", "--system", "duopd", "--model", "LLaMA2-70B", "--decode-hardware", "b200"]) == 2
    assert "applies to PD deployments" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_decode_hardware_naming_the_machine_of_hardware_means_one_machine(tmp_path, capsys) -> None:
    """`--decode-hardware` naming the preset of `--hardware` (any case) is the same run as leaving it out (it
    was refused as a second machine: "needs 16 GPUs, the hardware has 8")."""
    pd = ["simulate", "--system", "pd-1:1", "--model", "LLaMA2-70B", "--input-len", "2048", "--output-len", "4",
          "--requests", "2", "--hardware", "h100-sxm5-80gb", "--no-plots"]
    assert main([*pd, "--out", str(tmp_path / "plain")]) == 0
    assert main([*pd, "--decode-hardware", "H100-SXM5-80GB", "--out", str(tmp_path / "same")]) == 0
    capsys.readouterr()
    for name in ("summary.json", "requests.csv", "servers.csv"):
        assert (tmp_path / "plain" / name).read_bytes() == (tmp_path / "same" / name).read_bytes()
    plain, same = (json.loads((tmp_path / run / "config.json").read_text()) for run in ("plain", "same"))
    assert same.pop("command_line") != plain.pop("command_line")
    assert same == plain and same["decode_hardware"] is None
