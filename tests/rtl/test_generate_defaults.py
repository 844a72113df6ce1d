# amaranth: UnusedElaboratable=no
"""What every new user types first: `basedie generate all` at every block's default parameters elaborates every
registered block (no Verilator build), so a default beyond what Amaranth can elaborate cannot come back."""
import json

from basedie.cli import main
from rtl.params import MAX_VALUE_BITS
from rtl.registry import BLOCKS


def test_generate_all_at_the_defaults(tmp_path, capsys) -> None:
    assert main(["generate", "all", "-o", str(tmp_path)]) == 0
    for name in BLOCKS:
        assert f"module {name}(" in (tmp_path / f"{name}.v").read_text()
        manifest = json.loads((tmp_path / f"{name}.json").read_text())
        assert manifest["parameters"] == BLOCKS[name].params().as_dict()
        assert max(port["width"] for port in manifest["ports"]) <= MAX_VALUE_BITS


def test_a_parameter_set_beyond_amaranths_limit_is_one_line_exit_2(tmp_path, capsys) -> None:
    assert main(["generate", "pnm_array", "--param", "lanes=16", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "width=1024, lanes=16" in err and "65,536-bit limit" in err
    assert list(tmp_path.iterdir()) == []
