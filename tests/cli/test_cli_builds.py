"""`basedie generate --lint` and `basedie verify`: Verilator's lint on every block and a verify run that writes a
sealed table."""
import json

import pytest

from basedie import verified
from basedie.cli import main
from tb.benches import BENCHES

pytestmark = pytest.mark.verilator


@pytest.mark.parametrize("block_name", list(BENCHES))
def test_generated_verilog_lints_clean(block_name: str, tmp_path) -> None:
    # At the first parameter set its bench proves: the paper's full sizes take minutes to elaborate.
    params = [arg for k, v in BENCHES[block_name].configs[0].items() for arg in ("--param", f"{k}={v}")]
    assert main(["generate", block_name, "-o", str(tmp_path), "--lint", *params]) == 0
    assert [p.name for p in tmp_path.glob("*.v")] == [f"{block_name}.v"]


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
