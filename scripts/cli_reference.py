"""Write docs/reference/cli.md: every `basedie` command's `--help`, as the command prints it (100 columns).

    python scripts/cli_reference.py [--out docs/reference/cli.md]
"""
import argparse
import contextlib
import io
import os
import re
from pathlib import Path

from basedie.cli import main as basedie

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "cli.md"
COLUMNS = "100"


def help_text(*argv: str) -> str:
    """What `basedie ARGV --help` prints, at a fixed width so that the page does not depend on the terminal."""
    out, columns = io.StringIO(), os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = COLUMNS
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            basedie([*argv, "--help"])
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    return out.getvalue().rstrip() + "\n"


def page() -> str:
    top = help_text()
    commands = re.search(r"\{([\w,-]+)\}", top).group(1).split(",")
    parts = ["# The `basedie` command", "",
             "Every command's `--help`, written by `python scripts/cli_reference.py` (regenerate after changing an "
             "option). Bad input is one line on stderr and exit code 2; nothing is written.", "",
             "Commands: " + ", ".join(f"[`{c}`](#basedie-{c})" for c in commands) + ".", "",
             "```", top.rstrip(), "```"]
    for command in commands:
        parts += ["", f"## basedie {command}", "", "```", help_text(command).rstrip(), "```"]
    return "\n".join(parts) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PAGE)
    args = parser.parse_args()
    args.out.write_text(page())


if __name__ == "__main__":
    main()
