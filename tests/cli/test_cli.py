"""`basedie generate`: files, manifest, lint, and the one-line errors with exit code 2."""
import json

import pytest

from basedie import verified
from basedie.cli import main
from tb.benches import BENCHES


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


@pytest.mark.parametrize("block_name", list(BENCHES))
def test_generated_verilog_lints_clean(block_name: str, tmp_path) -> None:
    # At the first parameter set its bench proves: the paper's full sizes take minutes to elaborate.
    params = [arg for k, v in BENCHES[block_name].configs[0].items() for arg in ("--param", f"{k}={v}")]
    assert main(["generate", block_name, "-o", str(tmp_path), "--lint", *params]) == 0
    assert [p.name for p in tmp_path.glob("*.v")] == [f"{block_name}.v"]


def test_manifest_describes_struct_payload_fields(tmp_path) -> None:
    assert main(["generate", "fp16_mul_fp32", "-o", str(tmp_path)]) == 0
    ports = {p["name"]: p for p in json.loads((tmp_path / "fp16_mul_fp32.json").read_text())["ports"]}
    assert ports["i__payload"]["fields"] == {"a": {"offset": 0, "width": 16}, "b": {"offset": 16, "width": 16}}


def test_verify_writes_entries_with_provenance(tmp_path, capsys) -> None:
    table = tmp_path / "table.json"
    assert main(["verify", "fp_to_fp32", "--jobs", "1", "--table", str(table)]) == 0
    entries = json.loads(table.read_text())["entries"]
    assert sorted(e["params"]["source"] for e in entries) == sorted(["int4", "int8", "fp8_e4m3", "fp16", "bf16"])
    for e in entries:
        assert e["figures"]["latency_cycles"] == 1 and e["figures"]["initiation_interval"] == 1
        assert e["provenance"]["bench"] == "tb.fp.bench" and e["provenance"]["cycles_simulated"] > 0
    assert "5 bench runs passed" in capsys.readouterr().out
    assert len(verified.load(table).entries) == 5  # sealed and fresh: what was just measured loads
