"""docs/reference/ports.md's port tables are the ones the Amaranth layouts give now, and they state bit ranges right."""
from pathlib import Path

from rtl import port_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference" / "ports.md"


def test_docs_tables_are_current() -> None:
    text = DOC.read_text()
    generated = text.split(port_table.BEGIN)[1].split(port_table.END)[0]
    assert generated.strip() == port_table.markdown().strip(), \
        "docs/reference/ports.md is stale: run python -m rtl.port_table docs/reference/ports.md"


def test_dqb_fields_by_hand() -> None:
    """At the defaults (32-bit addresses, 3-bit tags, 512-bit beats) the request is address | tag | is_write |
    mask (one bit per byte: 64) | data from bit 0 up, mc_req.kind sits after address and is_write, and a
    response's is_write after its 512 data bits and error."""
    table = port_table.block_table("dqb")
    assert "| | | | `address` | [31:0] |  |" in table
    assert "| | | | `tag` | [34:32] |  |" in table
    assert "| | | | `is_write` | [35] |  |" in table
    assert "| | | | `mask` | [99:36] |  |" in table
    assert "| | | | `data` | [611:100] |  |" in table
    assert "| | | | `is_write` | [513] |  |" in table
    assert "| | | | `kind` | [34:33] | 0 = GPU, 1 = SCALE, 2 = ZERO |" in table
    assert "| `gpu_req__ready` | out | 1 | | | |" in table and "| `gpu_resp__ready` | in | 1 | | | |" in table
