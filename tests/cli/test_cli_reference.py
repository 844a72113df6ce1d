"""docs/reference/cli.md is every command's `--help` as the code prints it now."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_cli_reference_is_what_the_commands_print() -> None:
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "scripts" / "cli_reference.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.PAGE.read_text() == script.page(), \
        "docs/reference/cli.md is stale: run python scripts/cli_reference.py"
