# amaranth: UnusedElaboratable=no
"""What every new user types first: `basedie generate all` at every block's default parameters elaborates every
registered block (no Verilator build; the whole PNM's units only, below), so a default beyond what Amaranth can elaborate cannot come back."""
import gc
import json

import pytest

from basedie.cli import main
from rtl.generate import manifest
from rtl.params import MAX_VALUE_BITS
from rtl.registry import BLOCKS


# The whole PNM at the paper's size (16 × 1,024 lanes, 1 MB) is left out: its generation alone takes minutes of
# CPU and 2.4 GB (docs/design/pnm.md, "Generating", measured by hand); its units are generated here at their
# defaults. So is the base die, which holds it (docs/design/base-die.md).
@pytest.mark.slow    # about a minute of CPU in all, half of it the DQB's 512-bit default
@pytest.mark.parametrize("name", [name for name in BLOCKS if name not in ("pnm", "base_die")])
def test_generate_at_the_defaults(name: str, tmp_path, capsys) -> None:
    assert main(["generate", name, "-o", str(tmp_path)]) == 0
    assert f"module {name}(" in (tmp_path / f"{name}.v").read_text()
    written = json.loads((tmp_path / f"{name}.json").read_text())
    assert written["parameters"] == BLOCKS[name].params().as_dict()
    assert max(port["width"] for port in written["ports"]) <= MAX_VALUE_BITS


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")  # built for their signatures only
def test_every_default_port_is_within_amaranths_limit_before_elaboration() -> None:
    """The quick half of the check above: every block's default component is built, and its manifest (ports
    from the signature alone, no elaboration) names its default parameters and no port over the limit."""
    for name, block in BLOCKS.items():
        params = block.params()
        info = manifest(block, params, block.build(params))
        assert info["parameters"] == params.as_dict(), name
        assert max(port["width"] for port in info["ports"]) <= MAX_VALUE_BITS, name
    gc.collect()     # the unelaborated components warn when collected: here, under the filter, not in a later test


def test_generate_all_writes_every_block(tmp_path, capsys, monkeypatch) -> None:
    """`generate all` writes each registered block in turn (the elaboration itself is timed above)."""
    written = []
    monkeypatch.setattr("rtl.generate.write", lambda block, params, out: written.append(block.name) or [
        out / f"{block.name}.v", out / f"{block.name}.json"])
    assert main(["generate", "all", "-o", str(tmp_path)]) == 0
    assert written == list(BLOCKS)


def test_a_parameter_set_beyond_amaranths_limit_is_one_line_exit_2(tmp_path, capsys) -> None:
    assert main(["generate", "pnm_array", "--param", "lanes=16", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "width=1024, lanes=16" in err and "65,536-bit limit" in err
    assert list(tmp_path.iterdir()) == []
