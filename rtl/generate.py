"""Elaborate a registered block into Verilog and a manifest of its ports, parameters and timing."""
import json
import re
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Shape
from amaranth.lib import data, wiring

from .params import Params
from .registry import Block


# Yosys's `write_verilog` puts one `reg <trigger> = 0;` into the sensitivity list of every `always @*` block
# so that the block runs at time 0. Under SystemVerilog's rules (Icarus -g2012, Questa, VCS in SV mode) a
# declaration's initial value creates no event, so a block whose inputs keep their initial values stays X
# (the DQB's S/Z line lookup while no line is present: 97 % of its dequantized output was X under Icarus).
# A constant continuous assignment to a net is an update at time 0 under both standards.
_TIME_ZERO_TRIGGER = re.compile(r"^(\s*)reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ +)= 0;$", re.M)


def verilog_of(block: Block, params: Params) -> tuple[wiring.Component, str]:
    component = block.build(params)
    modules = {block.name: component, **getattr(component, "shared_modules", {})}
    # A component's `shared_modules` are the modules it instantiates by name (`Instance`), written once each.
    text = "".join(verilog.convert(module, name=name, emit_src=False) for name, module in modules.items())
    return component, runs_at_time_zero(text)


def runs_at_time_zero(text: str) -> str:
    """Yosys Verilog whose `always @*` blocks all run at time 0 under SystemVerilog rules too."""
    return _TIME_ZERO_TRIGGER.sub(r"\1wire \2= 1'h0;", text)


def manifest(block: Block, params: Params, component: wiring.Component) -> dict:
    """What a user of the Verilog needs: port names as emitted, widths, directions, parameters, timing."""
    ports = [{"name": "clk", "direction": "input", "width": 1},
             {"name": "rst", "direction": "input", "width": 1}]
    for path, member in component.signature.members.flatten():
        if member.is_port:
            port = {
                "name": "__".join(str(part) for part in path),
                "direction": "input" if member.flow == wiring.In else "output",
                "width": Shape.cast(member.shape).width,
            }
            if isinstance(member.shape, data.Layout):
                port["fields"] = {name: {"offset": field.offset, "width": field.width}
                                  for name, field in member.shape}
            ports.append(port)
    return {
        "block": block.name,
        "summary": block.summary,
        "parameters": params.as_dict(),
        "ports": ports,
        "latency_cycles": getattr(component, "latency", None),
        "initiation_interval": getattr(component, "initiation_interval", None),
    }


def write(block: Block, params: Params, out_dir: Path) -> list[Path]:
    """Write `<block>.v` and `<block>.json` into `out_dir`; elaborates fully before writing anything."""
    component, text = verilog_of(block, params)
    info = manifest(block, params, component)
    out_dir.mkdir(parents=True, exist_ok=True)
    verilog_path, manifest_path = out_dir / f"{block.name}.v", out_dir / f"{block.name}.json"
    verilog_path.write_text(text)
    manifest_path.write_text(json.dumps(info, indent=2) + "\n")
    return [verilog_path, manifest_path]
