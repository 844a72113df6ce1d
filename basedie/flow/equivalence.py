"""Whether two Verilog texts of one top module are the same design, by Yosys's equivalence checker.

`rtl.generate` writes a repeated submodule once and instantiates it by name where Amaranth writes it again at
every use; this proves the two agree. Each text is flattened on its own (its memories mapped to registers), the
registers and outputs of the two are paired by their hierarchical names (the instances keep Amaranth's
submodule names), and `equiv_simple`/`equiv_induct` prove every pair equal in every reachable state."""
import subprocess
from pathlib import Path

from .yosys import COMMAND, ready

_READ = "read_verilog -sv {file}; hierarchy -check -top {top}; proc; memory_map; flatten; opt_clean; " \
        "rename {top} {as_}; design -stash {as_}"
SCRIPT = "; ".join([_READ.format(file="gold.v", top="{top}", as_="gold"),
                    _READ.format(file="gate.v", top="{top}", as_="gate"),
                    "design -copy-from gold -as gold gold", "design -copy-from gate -as gate gate",
                    "equiv_make gold gate equiv", "hierarchy -top equiv", "equiv_simple -seq 5",
                    "equiv_induct -seq 5", "equiv_status -assert"])


def unproven(gold: str, gate: str, top: str, folder: Path) -> list[str]:
    """Yosys's complaints when `gate` is not proven equivalent to `gold` (both with top module `top`); empty when
    it is. Writes `gold.v`, `gate.v` and `equiv.log` into `folder`."""
    ready()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gold.v").write_text(gold)
    (folder / "gate.v").write_text(gate)
    # The WebAssembly Yosys sees only the current directory tree: run it beside the files.
    result = subprocess.run([*COMMAND, "-q", "-l", "equiv.log", "-p", SCRIPT.format(top=top)], cwd=folder,
                            capture_output=True, text=True)
    if result.returncode == 0:
        return []
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "ERROR" in line or "nproven" in line]
    return lines or [f"yosys exited with {result.returncode}: {result.stderr.strip()[-500:]}"]
