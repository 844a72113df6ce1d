# amaranth: UnusedElaboratable=no
"""The block registry: a block added as one module plus one registration line is generated, offered by the
command line, planned by `basedie verify`, listed in the port tables and verified by its own bench; unknown and
twice-registered names are refused."""
import importlib
import json
import sys

import pytest

from basedie.cli import main
from rtl import port_table
from rtl.params import NoParams
from rtl.registry import BLOCKS, register
from basedie.flow.verify import Run, planned_runs, verify_one

TOY = "tests.rtl.toy_block"


@pytest.fixture
def toy():
    """The toy block registered for one test (the registry restored after it)."""
    saved = dict(BLOCKS)
    module = importlib.reload(sys.modules[TOY]) if TOY in sys.modules else importlib.import_module(TOY)
    yield module.Toy
    BLOCKS.clear()
    BLOCKS.update(saved)


def test_generate_writes_a_registered_toy_block(toy, tmp_path, capsys) -> None:
    assert main(["generate", "toy", "-o", str(tmp_path)]) == 0
    verilog = (tmp_path / "toy.v").read_text()
    assert "module toy(" in verilog and "i__payload" in verilog and "o__ready" in verilog
    manifest = json.loads((tmp_path / "toy.json").read_text())
    assert manifest["parameters"] == {}
    assert {(p["name"], p["width"]) for p in manifest["ports"]} >= {("i__payload", 8), ("o__payload", 8)}


def test_the_command_line_tables_and_verify_plan_list_the_toy(toy, tmp_path, capsys) -> None:
    assert main(["generate", "nonesuch", "-o", str(tmp_path)]) == 2
    assert capsys.readouterr().err.rstrip().endswith(", base_die, toy, all)")
    for other in [name for name in BLOCKS if name != "toy"]:
        del BLOCKS[other]    # the other blocks' tables build them at the paper's sizes (tests/rtl/test_port_table.py)
    assert port_table.markdown().startswith("### `toy`: a one-stage register stream (a test's toy)")
    assert "| `i__payload` | in | [7:0] |" in port_table.block_table("toy")
    runs, _ = planned_runs(["toy"], None, True, tmp_path / "table.json")
    assert runs == [Run("toy", {})]


def test_without_the_registration_the_toy_is_unknown(tmp_path, capsys) -> None:
    assert "toy" not in BLOCKS
    assert main(["generate", "toy", "-o", str(tmp_path)]) == 2
    assert "unknown block 'toy'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_name_registered_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="block 'fp32_add' is registered already"):
        register(BLOCKS["fp32_add"])


@pytest.mark.verilator
def test_the_toys_own_bench_verifies_it(toy) -> None:
    """Its bench, named by the registration, runs under Verilator and yields a verified-table entry."""
    entry = verify_one(Run("toy", NoParams().as_dict()))
    assert (entry.block, entry.params, entry.figures["vectors_checked"]) == ("toy", {}, 200)
    assert entry.provenance["bench"] == entry.provenance["rtl_module"] == TOY
