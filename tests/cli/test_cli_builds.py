"""`basedie generate --lint` and `basedie verify`: Verilator's lint, which bench builds apply too, and a verify run
that writes a sealed table."""
import json

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from basedie import verified
from basedie.cli import main
from rtl.params import NoParams
from rtl.registry import BLOCKS, Bench, Block
from basedie.flow import runner

from tests.bench_configurations import beside_build

pytestmark = pytest.mark.verilator


def test_generated_verilog_lints_clean(tmp_path) -> None:
    """`generate --lint` on a block (every block is linted with the same flags by its bench build, below)."""
    assert main(["generate", "fp32_add", "-o", str(tmp_path), "--lint"]) == 0
    assert [p.name for p in tmp_path.glob("*.v")] == ["fp32_add.v"]


class Incomplete(wiring.Component):
    """A case statement that leaves a value uncovered: Verilator's CASEINCOMPLETE, which no waiver allows."""
    i: In(2)
    o: Out(1)

    def elaborate(self, platform) -> Module:
        m = Module()
        with m.Switch(self.i):
            with m.Case(0):
                m.d.comb += self.o.eq(1)
            with m.Case(1):
                m.d.comb += self.o.eq(0)
        return m


def test_a_warning_fails_the_lint_and_every_bench_build(monkeypatch, tmp_path, capsys) -> None:
    """Bench builds use the lint's flags and waivers, with warnings fatal: building every block's bench
    configurations (the tests of tests/tb/) lints them, so the lint is not run again block by block here."""
    monkeypatch.setitem(BLOCKS, "incomplete", Block("incomplete", NoParams, lambda params: Incomplete(), "planted",
                                                    Bench("tb.selftest")))
    assert main(["generate", "incomplete", "-o", str(tmp_path), "--lint"]) == 1
    assert "CASEINCOMPLETE" in capsys.readouterr().out
    monkeypatch.setattr(runner, "BUILD_ROOT", tmp_path / "build")
    with pytest.raises(RuntimeError, match="return code: 1"):   # cocotb's runner: Verilator failed
        runner.build("incomplete", NoParams())
    assert "%Warning-CASEINCOMPLETE" in next((tmp_path / "build" / "sim").glob("*/build.log")).read_text()


@beside_build("fp_to_fp32", source="int4")
def test_verify_writes_entries_with_provenance(tmp_path, capsys) -> None:
    """The two sets of the cheapest bench (16 and 256 vectors: the FP bench's figures and provenance, not its
    numerics, are what this checks; pytest's own bench runs prove those)."""
    table = tmp_path / "table.json"
    for source in ("int4", "int8"):
        assert main(["verify", "fp_to_fp32", "--jobs", "1", "--table", str(table), "--param", f"source={source}"]) == 0
        assert "1 bench run passed" in capsys.readouterr().out
    entries = json.loads(table.read_text())["entries"]
    assert sorted(e["params"]["source"] for e in entries) == ["int4", "int8"]
    for e in entries:
        assert e["figures"]["latency_cycles"] == 1 and e["figures"]["initiation_interval"] == 1
        assert e["figures"]["vectors_checked"] == {"int4": 16, "int8": 256}[e["params"]["source"]]
        assert e["provenance"]["bench"] == "tb.fp.bench" and e["provenance"]["cycles_simulated"] > 0
    assert len(verified.load(table).entries) == 2  # sealed and fresh: what was just measured loads
