"""`basedie generate`: files and manifest, and the one-line errors with exit code 2 (no build needed)."""
import json
import shutil

import pytest

from basedie.cli import main


@pytest.mark.parametrize("argv,message", [
    (["generate", "nope"], "unknown block 'nope'"),
    (["generate", "fp32_narrow", "--param", "rounding=up"], "rounding='up'"),
    (["generate", "fp32_narrow", "--param", "width=3"], "unknown parameter 'width'"),
    (["generate", "fp32_narrow", "--param", "target"], "not NAME=VALUE"),
    (["generate", "all", "--param", "target=bf16"], "one block"),
    (["verify", "nope"], "unknown block 'nope'"),
    (["verify", "pnm_lane", "--param", "width=3"], "width=3 must be a power of two"),
    (["verify", "pnm_array", "--param", "lanes=16"], "width=1024, lanes=16: port i"),
    (["verify", "all", "--param", "width=4"], "one block"),
    (["verify", "pnm_lane", "--quick", "--param", "width=4"], "does not combine with --param"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, argv, message) -> None:
    out = tmp_path / "out"
    extra = ["-o", str(out)] if argv[0] == "generate" else []
    assert main(argv + extra) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def test_generate_writes_verilog_and_manifest(tmp_path) -> None:
    assert main(["generate", "fp32_narrow", "-o", str(tmp_path), "--param", "target=bf16",
                 "--param", "rounding=toward_zero_ftz"]) == 0
    verilog = (tmp_path / "fp32_narrow.v").read_text()
    manifest = json.loads((tmp_path / "fp32_narrow.json").read_text())
    assert "module fp32_narrow" in verilog
    assert manifest["parameters"] == {"target": "bf16", "rounding": "toward_zero_ftz"}
    assert manifest["latency_cycles"] == 2 and manifest["initiation_interval"] == 1
    ports = {p["name"]: (p["direction"], p["width"]) for p in manifest["ports"]}
    assert ports["i__payload"] == ("input", 32) and ports["o__payload"] == ("output", 16)
    assert ports["o__ready"] == ("input", 1) and ports["o__valid"] == ("output", 1)
    for name in ports:
        assert f" {name};" in verilog  # every manifest port is a port of the module


def test_manifest_describes_struct_payload_fields(tmp_path) -> None:
    assert main(["generate", "fp16_mul_fp32", "-o", str(tmp_path)]) == 0
    ports = {p["name"]: p for p in json.loads((tmp_path / "fp16_mul_fp32.json").read_text())["ports"]}
    assert ports["i__payload"]["fields"] == {"a": {"offset": 0, "width": 16}, "b": {"offset": 16, "width": 16}}


def test_cli_without_icarus_is_a_one_line_error(monkeypatch, capsys, tmp_path) -> None:
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "iverilog" else real(tool))
    table = tmp_path / "table.json"
    assert main(["verify", "fp32_add", "--simulator", "icarus", "--table", str(table)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "apt-get install iverilog" in err
    assert not table.exists()


def test_icarus_runs_the_param_set_it_is_given(monkeypatch, capsys) -> None:
    """`--simulator icarus --param …` checks that one parameter set, not the bench's own (it used to ignore them)."""
    asked = []
    monkeypatch.setattr("basedie.flow.icarus.check", lambda names, waves, jobs, runs: asked.append(runs) or runs or [])
    assert main(["verify", "fp_to_fp32", "--simulator", "icarus", "--param", "source=int8"]) == 0
    assert asked == [[("fp_to_fp32", {"source": "int8"})]]
    assert main(["verify", "fp_to_fp32", "--simulator", "icarus"]) == 0
    assert asked[1] is None
    assert main(["verify", "all", "--simulator", "icarus", "--param", "source=int8"]) == 2
