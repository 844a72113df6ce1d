"""`basedie synth`: the statistics match hand-known facts of tiny circuits, the estimates follow the cited
per-cell figures, bad input writes nothing, and the committed table covers every bench configuration."""
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from amaranth.back import verilog
from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from basedie.cli import main
from rtl.generate import verilog_of
from rtl.registry import BLOCKS
from basedie.flow import synthesis
from basedie.flow.synthesis import Netlist, SynthesisError, figures, run_yosys

from tests.bench_configurations import bench_params


class _Register(wiring.Component):
    """An 8-bit register: 8 flip-flops and no gates; with a synchronous reset, one AND per bit and one inverter
    of the reset (the flip-flops are plain D flip-flops, so the reset becomes `d & ~rst`)."""
    d: In(8)
    q: Out(8)

    def __init__(self, reset_less: bool):
        self.reset_less = reset_less
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        held = Signal(8, reset_less=self.reset_less)
        m.d.sync += held.eq(self.d)
        m.d.comb += self.q.eq(held)
        return m


class _AndTree(wiring.Component):
    """Registered inputs, their 8-input AND registered: 9 flip-flops, at least 7 two-input gates in 3 levels."""
    d: In(8)
    q: Out(1)

    def elaborate(self, platform):
        m = Module()
        held, result = Signal(8, reset_less=True), Signal(reset_less=True)
        m.d.sync += [held.eq(self.d), result.eq(held.all())]
        m.d.comb += self.q.eq(result)
        return m


class _Memory(wiring.Component):
    """A 4 x 8-bit memory with one write and one synchronous read port (32 memory bits) beside a 4 x 8-bit
    table whose every bit differs between entries (32 ROM bits)."""
    addr: In(2)
    data: In(8)
    we: In(1)
    out: Out(8)
    looked_up: Out(8)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=8, depth=4, init=[])
        m.submodules.rom = rom = memory.Memory(shape=8, depth=4, init=[0x01, 0x80, 0x7F, 0xFE])
        write, read, lookup = mem.write_port(), mem.read_port(), rom.read_port(domain="comb")
        m.d.comb += [write.addr.eq(self.addr), write.data.eq(self.data), write.en.eq(self.we),
                     read.addr.eq(self.addr), self.out.eq(read.data),
                     lookup.addr.eq(self.addr), self.looked_up.eq(lookup.data)]
        return m


def _synthesize(component, clock_hz: float = 1e9) -> Netlist:
    return run_yosys(verilog.convert(component, name="top", emit_src=False), "top", clock_hz)


def _figures(component, clock_hz: float = 1e9) -> dict:
    return figures(_synthesize(component, clock_hz), "top", clock_hz)


def _others(f: dict) -> set[str]:
    return {cell for cell in f["cells_by_type"] if not cell.startswith("DFF")}


def test_a_plain_register_is_its_flip_flops_and_nothing_else() -> None:
    f = _figures(_Register(reset_less=True))
    assert f["flip_flops"] == 8 and f["depth_levels"] == 0 and f["memory_bits"] == 0
    # A flip-flop with an inverted output only (DFFHQN) needs an inverter (or buffer) after it, and nothing else.
    assert all(cell.startswith(("INV", "BUF", "HB")) for cell in _others(f))


def test_a_synchronous_reset_costs_gates_in_front_of_the_flip_flops() -> None:
    plain, reset = _figures(_Register(reset_less=True)), _figures(_Register(reset_less=False))
    assert reset["depth_levels"] == 2  # rst -> inverter -> AND -> flip-flop, in 2-input gates
    assert reset["flip_flops"] == 8 and reset["area_um2"] > plain["area_um2"]


def test_an_eight_input_and_needs_three_levels_of_two_input_gates() -> None:
    f = _figures(_AndTree())
    assert f["flip_flops"] == 9
    assert 3 <= f["depth_levels"] <= 4  # log2(8) levels; at most one inverter more


def test_ram_and_rom_bits_are_counted_before_they_become_flip_flops_and_gates() -> None:
    netlist = _synthesize(_Memory())
    assert netlist.memory_bits == 32 and netlist.rom_bits == 32
    assert figures(netlist, "top", 1e9)["flip_flops"] >= 32


def test_slack_is_the_period_less_the_critical_path() -> None:
    fast, slow = _figures(_AndTree(), 2e9), _figures(_AndTree(), 1e9)
    assert fast["timing"]["critical_path_ps"] > 0
    for f in (fast, slow):
        t = f["timing"]
        assert t["slack_ps"] == pytest.approx(t["period_ps"] - t["critical_path_ps"], abs=0.2)
    assert slow["timing"]["period_ps"] == 1000 and fast["timing"]["period_ps"] == 500


def test_leakage_is_the_sum_of_the_library_leakage_of_the_cells() -> None:
    from liberty.parser import parse_liberty
    import gzip
    from basedie import liberty

    f = _figures(_Register(reset_less=True))
    leak = {}
    for name in liberty.FILES:
        with gzip.open(liberty.CELLS_DIR / f"{name}.gz", "rt") as text:
            for cell in parse_liberty(text.read()).get_groups("cell"):
                states = {}
                for group in cell.get_groups("leakage_power"):
                    states[str(group["when"])] = states.get(str(group["when"]), 0.0) + float(group["value"])
                leak[str(cell.args[0]).strip('"')] = sum(states.values()) / len(states)
    expected = sum(n * leak[cell] for cell, n in f["cells_by_type"].items()) * 1e-12
    assert f["power"]["leakage_w"] == pytest.approx(expected, rel=1e-9)


def test_dynamic_power_grows_with_the_clock_and_the_clock_alone_costs_power() -> None:
    f1, f2 = _figures(_AndTree(), 1e9), _figures(_AndTree(), 2e9)
    assert f1["power"]["dynamic_w"] > 0 and f2["power"]["dynamic_w"] > f1["power"]["dynamic_w"]
    assert f1["power"]["toggle_rate"] == synthesis.TOGGLE_RATE


@pytest.mark.slow
def test_fp32_add_area_matches_yosys_own_liberty_area() -> None:
    """The analysis sums the library's areas; Yosys's `stat -liberty` does too, independently."""
    import subprocess
    import tempfile
    from basedie import liberty
    from basedie.flow.yosys import COMMAND

    entry = synthesis.synthesize("fp32_add", BLOCKS["fp32_add"].params())
    f = entry["figures"]
    assert f["depth_levels"] > 0 and f["memory_bits"] == 0 and f["timing"]["clock_hz"] == 1e9
    _, text = verilog_of(BLOCKS["fp32_add"], BLOCKS["fp32_add"].params())
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "d.v").write_text(text)
        names = liberty.unpacked(work)
        (work / "constraints.sdc").write_text(synthesis.CONSTRAINTS)
        script = synthesis.script("fp32_add", 1000, {}, "d.v").replace(
            "write_json netlist.json", "tee -q -o area.txt stat " + " ".join(f"-liberty {n}" for n in names))
        (work / "s.ys").write_text(script)
        subprocess.run([*COMMAND, "-q", "-s", "s.ys"], cwd=work, check=True, capture_output=True)
        area = float(re.search(r"Chip area for module .*: ([0-9.]+)", (work / "area.txt").read_text()).group(1))
    assert f["area_um2"] == pytest.approx(area, abs=1e-3)
    assert entry["provenance"]["verilog_sha256"] == synthesis.verilog_digest(text)


def test_a_cell_outside_the_library_is_refused() -> None:
    design = {"modules": {"top": {"ports": {}, "netnames": {}, "cells": {
        "m": {"type": "$_MUX_", "connections": {"A": [2], "B": [3], "S": [4], "Y": [5]}}}}}}
    netlist = Netlist(design=design, instances={}, memory_bits=0, rom_bits=0, depth_levels=1, path_start="x")
    with pytest.raises(SynthesisError, match=r"\$_MUX_"):
        figures(netlist, "top", 1e9)


def test_a_module_instantiated_twice_is_synthesized_once_and_counted_twice() -> None:
    from rtl.generate import verilog_of as generate
    _, text = generate(BLOCKS["pnm_lane"], BLOCKS["pnm_lane"].params(width=4, sublane_width=2))
    assert synthesis.shared_modules(text) == {"pnm_fp16_mul_fp32": 4, "pnm_fp32_add": 3}  # a 4-input tree: 2 + 1


def test_instances_with_escaped_names_are_counted() -> None:
    # Amaranth escapes a name like `U$0`, and an escaped name ends at a space: `  sub \U$0  (`.
    verilog = "module top(a);\n  sub \\U$0  (\n  );\n  sub plain (\n  );\nendmodule\nmodule sub(a);\nendmodule\n"
    assert synthesis.shared_modules(verilog) == {"sub": 2}


def test_the_time_limit_counts_cpu_seconds_of_the_child() -> None:
    busy = subprocess.run([sys.executable, "-c", "while True: pass"], preexec_fn=synthesis._cpu_limit(1))
    assert busy.returncode == -signal.SIGXCPU


def test_full_size_configurations_come_last() -> None:
    runs = synthesis.bench_runs(["pnm_lane", "dqb"])
    assert [synthesis.full_size(*run) for run in runs] == [False, False, False, True, True]
    assert runs[-2][1].width == 1024 and runs[-1][1].interface_bits == 512


@pytest.mark.parametrize("argv", [["synth", "nope"], ["synth", "fp32_add", "--param", "width=2"],
                                  ["synth", "fp_to_fp32", "--param", "source=int3"],
                                  ["synth", "all", "--param", "source=int4"],
                                  ["synth", "fp32_add", "--timeout", "0"]])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(argv, tmp_path: Path, capsys) -> None:
    table = tmp_path / "table.json"
    assert main([*argv, "--table", str(table)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err
    assert not table.exists()


@pytest.mark.slow
def test_synth_with_a_parameter_records_that_parameter_set(tmp_path: Path) -> None:
    table = tmp_path / "table.json"
    assert main(["synth", "fp_to_fp32", "--param", "source=int8", "--table", str(table)]) == 0
    [entry] = json.loads(table.read_text())["entries"]
    assert entry["block"] == "fp_to_fp32" and entry["params"] == {"source": "int8"}
    assert entry["figures"]["flip_flops"] > 0


@pytest.mark.slow
def test_a_run_of_the_same_verilog_is_kept_and_other_verilog_runs_yosys(tmp_path: Path, monkeypatch,
                                                                        capsys) -> None:
    table = tmp_path / "table.json"
    assert main(["synth", "fp_to_fp32", "--param", "source=int8", "--table", str(table)]) == 0
    [first] = json.loads(table.read_text())["entries"]
    first["provenance"]["rtl_digest"] = "from older rtl/ sources"
    table.write_text(json.dumps({"schema": synthesis.SCHEMA, "entries": [first]}))
    runs = []
    monkeypatch.setattr(synthesis, "run_yosys", lambda *a, **k: runs.append(a) or pytest.fail("Yosys ran"))
    assert main(["synth", "fp_to_fp32", "--param", "source=int8", "--table", str(table)]) == 0
    assert "(kept: the recorded run synthesized the same Verilog)" in capsys.readouterr().out
    [kept] = json.loads(table.read_text())["entries"]
    assert kept["figures"] == first["figures"] and kept["provenance"]["rtl_digest"] != "from older rtl/ sources"
    # --again, other Verilog, or an attempt given less time than asked runs Yosys.
    with pytest.raises(pytest.fail.Exception, match="Yosys ran"):
        main(["synth", "fp_to_fp32", "--param", "source=int8", "--table", str(table), "--again"])
    first["provenance"]["verilog_sha256"] = "other"
    table.write_text(json.dumps({"schema": synthesis.SCHEMA, "entries": [first]}))
    with pytest.raises(pytest.fail.Exception, match="Yosys ran"):
        main(["synth", "fp_to_fp32", "--param", "source=int8", "--table", str(table)])
    assert synthesis._same_run({"figures": None, "provenance": {**kept["provenance"], "timed_out_after_s": 60}},
                               kept["provenance"], 60)
    assert not synthesis._same_run({"figures": None, "provenance": {**kept["provenance"], "timed_out_after_s": 60}},
                                   kept["provenance"], 600)
    # So does a run analysed under another rule for nets into many instances.
    assert not synthesis._same_run({**kept, "provenance": {**kept["provenance"], "buffer_rule": "none"}},
                                   kept["provenance"], None)


def attempted_within_budget(name: str, entry: dict) -> bool:
    """A bench configuration may stand as an attempt only if its bench states a synthesis budget and Yosys was
    given at least that long."""
    budget = BLOCKS[name].bench.synthesis_budget_s
    return budget is not None and entry["provenance"].get("timed_out_after_s", 0) >= budget


def test_an_attempt_counts_only_for_a_bench_with_a_budget_it_was_given() -> None:
    budget = BLOCKS["pnm_vector"].bench.synthesis_budget_s
    attempt = {"figures": None, "provenance": {"timed_out_after_s": budget}}
    assert attempted_within_budget("pnm_vector", attempt)
    assert not attempted_within_budget("pnm_vector", {"figures": None, "provenance": {"timed_out_after_s": budget / 5}})
    assert not attempted_within_budget("fp32_add", attempt)  # no budget: its figures are required


SMALL_RUNS = [(name, params.as_dict()) for name, params in synthesis.bench_runs(list(BLOCKS))
              if not synthesis.full_size(name, params) and (name, params) not in synthesis.paper_size_runs()]


def _committed_entry(name: str, params) -> dict | None:
    key = synthesis.entry_key(name, params.as_dict())
    return next((e for e in synthesis.load() if synthesis.entry_key(e["block"], e["params"]) == key), None)


@pytest.mark.parametrize("name,config", bench_params(SMALL_RUNS, pytest.mark.slow))
def test_the_committed_table_holds_every_pytest_configuration_synthesized_from_todays_verilog(
        name: str, config: dict, verilog_text) -> None:
    """A pytest configuration carries the digest of the Verilog it generates today, and figures unless its bench
    states a synthesis budget that the attempt (no figures) was given."""
    params = BLOCKS[name].params(**config)
    entry = _committed_entry(name, params)
    assert entry is not None, f"{name} {config}: missing; run `basedie synth all` and commit the table"
    text = (synthesis.synthesized_verilog(name, params) if synthesis.by_hierarchy(name, params)
            else verilog_text(name, params))
    assert entry["provenance"]["verilog_sha256"] == synthesis.verilog_digest(text), \
        f"{name} {config}: synthesized from other Verilog; run `basedie synth all` and commit the table"
    assert entry["figures"] is not None or attempted_within_budget(name, entry), \
        f"{name} {config}: only attempted (its bench's synthesis_budget_s: {BLOCKS[name].bench.synthesis_budget_s})"


def test_the_committed_table_holds_every_full_size_configuration_synthesized_from_todays_rtl() -> None:
    """The full-size configurations (minutes to elaborate), and the paper-size ones that are recorded, carry the
    digest of the `rtl/` sources they are built from; each may be an attempt that ran out of time (no figures)."""
    from basedie.verified import rtl_digest

    problems = []
    for name, params in synthesis.bench_runs(list(BLOCKS)):
        paper_size = (name, params) in synthesis.paper_size_runs()
        if not (synthesis.full_size(name, params) or paper_size):
            continue
        entry = _committed_entry(name, params)
        if entry is None:
            if not paper_size:   # a paper-size entry may be missing: `basedie synth all` records it
                problems.append(f"{name} {params.as_dict()}: missing")
        elif entry["provenance"]["rtl_digest"] != rtl_digest(BLOCKS[name].component.__module__):
            problems.append(f"{name} {params.as_dict()}: synthesized from other rtl/ sources")
    assert problems == [], "run `basedie synth all` and commit the table:\n" + "\n".join(problems)


def test_toggle_rates_count_the_bits_that_change_per_clock_cycle(tmp_path: Path) -> None:
    from vcd import VCDWriter
    from basedie.vcd_activity import toggle_rates

    path = tmp_path / "dump.vcd"
    with path.open("w") as out, VCDWriter(out, timescale="1 ns") as writer:
        clk = writer.register_var("TOP.top", "clk", "wire", size=1)
        data = writer.register_var("TOP.top", "data", "wire", size=4)
        other = writer.register_var("TOP.elsewhere", "data", "wire", size=4)
        values = [0b0000, 0b0011, 0b0011, 0b1111]   # bits 0, 1 toggle once; bits 2, 3 once; over 4 cycles
        for cycle, value in enumerate(values):
            writer.change(clk, 10 * cycle, 0)
            writer.change(data, 10 * cycle + 1, value)
            writer.change(other, 10 * cycle + 1, cycle % 2 * 15)
            writer.change(clk, 10 * cycle + 5, 1)
    rates = toggle_rates(path, "top")
    assert rates["clk"] == 7 / 4   # seven edges after its first value, over four rising edges
    assert [rates[f"data[{i}]"] for i in range(4)] == [0.25, 0.25, 0.25, 0.25]


def test_library_tables_interpolate_between_their_points_and_hit_them_exactly() -> None:
    from basedie.liberty import Table

    table = Table((5.0, 10.0), (1.0, 3.0), ((10.0, 30.0), (20.0, 40.0)))
    assert table.at(5.0, 1.0) == 10.0 and table.at(10.0, 3.0) == 40.0
    assert table.at(7.5, 2.0) == pytest.approx(25.0)
    assert table.at(15.0, 1.0) == pytest.approx(30.0)   # extrapolated along the transition axis


def test_identical_modules_are_merged_into_one_instantiated_by_every_user() -> None:
    same = "(a, y);\n  input a;\n  output y;\n  assign y = a;\nendmodule\n"
    text = ("module top(a, y, z);\n  \\top.b0  b0 (\n  );\n  \\top.b1  b1 (\n  );\n  \\top.c  c (\n  );\nendmodule\n"
            f"module \\top.b0 {same}module \\top.b1 {same}module \\top.c (a, y);\n  input a;\n  output y;\n"
            "  assign y = ~a;\nendmodule\n")
    merged = synthesis.deduplicated(text)
    assert "module \\top.b1" not in merged and "module \\top.b0" in merged and "module \\top.c" in merged
    assert synthesis.shared_modules(merged) == {"top.b0": 2}


class _TwoTrees(wiring.Component):
    """Two `_AndTree`s (9 flip-flops each) whose outputs are ANDed and registered here: 19 flip-flops."""
    d: In(8)
    q: Out(1)

    def elaborate(self, platform):
        m = Module()
        m.submodules.a = a = _AndTree()
        m.submodules.b = b = _AndTree()
        result = Signal(reset_less=True)
        m.d.comb += [a.d.eq(self.d), b.d.eq(~self.d), self.q.eq(result)]
        m.d.sync += result.eq(a.q & b.q)
        return m


class _TwoMemories(wiring.Component):
    """Two `_Memory`s side by side: 64 memory bits and 64 ROM bits."""
    addr: In(2)
    data: In(8)
    we: In(1)
    out: Out(8)

    def elaborate(self, platform):
        m = Module()
        m.submodules.a = a = _Memory()
        m.submodules.b = b = _Memory()
        for part in (a, b):
            m.d.comb += [part.addr.eq(self.addr), part.data.eq(self.data), part.we.eq(self.we)]
        m.d.comb += self.out.eq(a.out ^ b.out ^ a.looked_up ^ b.looked_up)
        return m


def _hierarchical(component) -> str:
    from rtl.generate import hierarchical_verilog
    return hierarchical_verilog(component, "top")


def test_the_module_tree_counts_instances_through_every_level_and_keys_ignore_names() -> None:
    from basedie.flow import synthesis_hierarchy as hierarchy

    leaf = "(a, y);\n  input a;\n  output y;\n  assign y = ~a;\nendmodule\n"
    text = ("module top(a, y);\n  input a;\n  output y;\n  mid m0 (\n  );\n  mid m1 (\n  );\n  \\leaf.x  \\U$0  (\n"
            "  );\nendmodule\n"
            "module mid(a, y);\n  input a;\n  output y;\n  leaf l0 (\n  );\n  leaf l1 (\n  );\n  leaf l2 (\n  );\n"
            f"endmodule\nmodule leaf {leaf}module \\leaf.x {leaf}")
    tree = hierarchy.module_tree(text)
    assert tree["top"].children == {"mid": 2, "\\leaf.x": 1} and tree["mid"].children == {"leaf": 3}
    assert hierarchy.instances(tree, "top") == {"mid": 2, "leaf": 6, "leaf.x": 1}
    assert hierarchy.bottom_up(tree, "top").index("leaf") < hierarchy.bottom_up(tree, "top").index("mid")
    keys = hierarchy.keys(tree, "top", "run")
    assert keys["leaf"] == keys["\\leaf.x"]   # the same text under two names: one module
    assert hierarchy.keys(tree, "top", "other run")["leaf"] != keys["leaf"]
    changed = hierarchy.module_tree(text.replace("module leaf (a, y);\n  input a;\n  output y;\n  assign y = ~a;",
                                                 "module leaf (a, y);\n  input a;\n  output y;\n  assign y = a;"))
    assert hierarchy.keys(changed, "top", "run")["mid"] != keys["mid"]   # a child's change reaches its parents
    assert hierarchy.stub(tree["mid"]) == "module mid(a, y);\n  input a;\n  output y;\nendmodule\n"


@pytest.mark.slow
def test_a_parent_is_its_glue_plus_its_submodules_counted_per_instance() -> None:
    clock = 1e9
    child = _figures(_AndTree(), clock)
    modules: dict = {}
    composed, provenance = synthesis.compose(_hierarchical(_TwoTrees()), "top", clock, modules)
    assert len(modules) == 2 and len(provenance["modules"]) == 2   # the tree synthesized once, its parent once
    assert composed["flip_flops"] == 2 * 9 + 1 and list(composed["instances"].values()) == [2]
    glue = composed["area_um2"] - 2 * child["area_um2"]
    assert 0 < glue < child["area_um2"]   # one flip-flop, one AND and the inverters of `~d`
    assert composed["depth_levels"] >= child["depth_levels"]
    assert composed["timing"]["slack_ps"] <= child["timing"]["slack_ps"]   # the worst of the parts' and the glue's
    assert composed["power"]["total_w"] > 2 * child["power"]["total_w"]


@pytest.mark.slow
def test_memories_are_counted_per_instance_and_a_recorded_module_is_not_synthesized_again(monkeypatch) -> None:
    modules: dict = {}
    composed, _ = synthesis.compose(_hierarchical(_TwoMemories()), "top", 1e9, modules)
    assert composed["memory_bits"] == 64 and composed["rom_bits"] == 64
    monkeypatch.setattr(synthesis, "run_yosys", lambda *a, **k: pytest.fail("Yosys ran"))
    again, _ = synthesis.compose(_hierarchical(_TwoMemories()), "top", 1e9, modules)
    assert again == composed


class _PassAndHold(wiring.Component):
    """`y` is `a` inverted, combinationally; `z` is `b` registered: no path from `b` to `y`."""
    a: In(4)
    b: In(4)
    y: Out(4)
    z: Out(4)

    def elaborate(self, platform):
        m = Module()
        held = Signal(4, reset_less=True)
        m.d.comb += [self.y.eq(~self.a), self.z.eq(held)]
        m.d.sync += held.eq(self.b)
        return m


class _LoopBack(wiring.Component):
    """Two `_PassAndHold`s, each one's `y` fed back into its own `b`: a loop only through a box's ports."""
    a: In(4)
    z: Out(4)

    def elaborate(self, platform):
        m = Module()
        m.submodules.p = p = _PassAndHold()
        m.submodules.q = q = _PassAndHold()
        m.d.comb += [p.a.eq(self.a), p.b.eq(p.y), q.a.eq(p.z), q.b.eq(q.y), self.z.eq(q.z)]
        return m


@pytest.mark.slow
def test_a_loop_through_a_box_but_not_through_its_bits_is_timed_not_refused() -> None:
    composed, _ = synthesis.compose(_hierarchical(_LoopBack()), "top", 1e9, {})
    assert composed["flip_flops"] == 8 and composed["timing"]["slack_ps"] < 1000


def _unit(enable_ff: float = 1.0) -> "Figures":
    """A box with an enable and a clock input, its enable required 100 ps before the edge."""
    from basedie.netlist_analysis import NEVER, Figures, Path as TimingPath

    return Figures(area_um2=1.0, cells=1, flip_flops=1, leakage_w=0.0, dynamic_energy_fj=0.0,
                   path=TimingPath(900.0, 0.0, 900.0, "en", "q"), input_to_register_ps=100.0, output_arrival_ps=0.0,
                   output_transition_ps=20.0, through_ps=NEVER, name="unit", outputs=(),
                   input_capacitance_ff={"en": enable_ff, "clk": 5.0}, cells_by_type={"DFFHQNx1_ASAP7_75t_R": 1},
                   clock_inputs=("clk",))


def _fanned_out(instances: int, enable_ff: float = 1.0):
    """The figures of a parent whose input `en` and clock `clk` go to `instances` `_unit`s."""
    from basedie import liberty
    from basedie.netlist_analysis import analyse

    module = {"ports": {"en": {"direction": "input", "bits": [2]}, "clk": {"direction": "input", "bits": [3]}},
              "cells": {f"u{i}": {"type": "unit", "connections": {"en": [2], "clk": [3]}} for i in range(instances)},
              "netnames": {"en": {"bits": [2]}, "clk": {"bits": [3]}}}
    return analyse("top", module, liberty.asap7(), 1000.0, 0.2, {"unit": _unit(enable_ff)})


@pytest.mark.parametrize("instances, depth", [(11, 1), (100, 1), (101, 2), (1000, 2), (1001, 3), (2047, 3)])
def test_a_buffer_tree_grows_a_level_each_time_the_fan_out_passes_a_power_of_ten(instances, depth) -> None:
    from basedie import liberty
    from basedie.flow import synthesis_hierarchy as hierarchy

    f = _fanned_out(instances)
    (tree,) = f.buffer_trees   # the enable's; the clock is ideal, never buffered
    assert (tree.net, tree.pins, tree.depth) == ("en", instances, depth)
    buffers = sum(-(-instances // 10 ** level) for level in range(1, depth + 1))
    assert tree.buffers == buffers and f.cells == instances + buffers
    assert f.area_um2 == pytest.approx(instances + buffers * liberty.asap7().cells[tree.cell].area_um2)
    assert f.clock_inputs == ("clk",)
    assert hierarchy.from_json(hierarchy.to_json(f), "top").buffer_trees == f.buffer_trees


def test_a_buffer_tree_delays_by_the_library_tables_at_the_load_it_drives() -> None:
    from basedie import liberty
    from basedie.netlist_analysis import INPUT_TRANSITION_PS

    library = liberty.asap7()
    f = _fanned_out(100, enable_ff=2.0)   # one level: ten buffers, each into ten 2 fF pins
    (tree,) = f.buffer_trees
    delays = {name: cell.arcs["Y"][0].delay.at(INPUT_TRANSITION_PS, 10 * 2.0)
              for name, cell in library.cells.items() if name.startswith("BUF")}
    assert tree.cell == min(delays, key=delays.get) and tree.delay_ps == pytest.approx(delays[tree.cell], abs=0.05)
    assert f.path.slack_ps == pytest.approx(1000 - 100 - delays[tree.cell], abs=0.05)
    assert f.path.start == "en" and f.path.end.endswith("(input of unit)")
    # The port drives the ten buffers, no longer the pins.
    assert f.input_capacitance_ff["en"] == pytest.approx(10 * library.cells[tree.cell].inputs["A"])


@pytest.mark.parametrize("instances", [1, 10])
def test_a_net_into_ten_pins_or_fewer_has_no_buffer_tree(instances) -> None:
    f = _fanned_out(instances)
    assert f.buffer_trees == () and f.cells == instances and f.area_um2 == pytest.approx(instances)
    assert f.path.slack_ps == 1000 - 100 and f.input_capacitance_ff["en"] == instances   # the port into the pins


class _ElevenTrees(wiring.Component):
    """Eleven `_AndTree`s on the same `d`, their outputs ANDed and registered: each bit of `d` and the clock go
    to eleven instances."""
    d: In(8)
    q: Out(1)

    def elaborate(self, platform):
        m = Module()
        trees = [_AndTree() for _ in range(11)]
        for i, tree in enumerate(trees):
            m.submodules[f"t{i}"] = tree
            m.d.comb += tree.d.eq(self.d)
        result = Signal(reset_less=True)
        m.d.sync += result.eq(Cat(*(tree.q for tree in trees)).all())
        m.d.comb += self.q.eq(result)
        return m


@pytest.mark.slow
def test_a_composition_buffers_the_nets_into_eleven_instances_but_not_the_clock() -> None:
    composed, _ = synthesis.compose(_hierarchical(_ElevenTrees()), "top", 1e9, {})
    trees = composed["timing"]["buffer_trees"]
    assert sorted(tree["net"] for tree in trees) == [f"d[{i}]" for i in range(8)]
    assert all(tree["pins"] == 11 and tree["depth"] == 1 and tree["buffers"] == 2 for tree in trees)
    buffers = sum(n for cell, n in composed["cells_by_type"].items() if cell.startswith("BUF"))
    assert buffers >= 16   # the trees' cells are counted with the glue's
