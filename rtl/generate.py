"""Elaborate a registered block into Verilog and a manifest of its ports, parameters and timing."""
import enum
import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from types import FunctionType

from amaranth.back import verilog
from amaranth.hdl import ClockSignal, Elaboratable, Fragment, Instance, Module, ResetSignal, Shape, ValueCastable
from amaranth.hdl._ir import PortDirection
from amaranth.lib import data, wiring

from .params import Params
from .registry import Block


# Yosys's `write_verilog` puts one `reg <trigger> = 0;` into the sensitivity list of every `always @*` block
# so that the block runs at time 0. Under SystemVerilog's rules (Icarus -g2012, Questa, VCS in SV mode) a
# declaration's initial value creates no event, so a block whose inputs keep their initial values stays X
# (the DQB's S/Z line lookup while no line is present: 97 % of its dequantized output was X under Icarus).
# A constant continuous assignment to a net is an update at time 0 under both standards.
_TIME_ZERO_TRIGGER = re.compile(r"^(\s*)reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ +)= 0;$", re.M)
_HEADER = re.compile(r"^module (\S+) ?\(([^)]*)\);", re.M)
_DOMAIN_PORTS = {"clk": ClockSignal, "rst": ResetSignal}  # the sync domain's, as Amaranth names them


def verilog_of(block: Block, params: Params, *, hierarchy: bool = False) -> tuple[wiring.Component, str]:
    """The component and its Verilog. `hierarchy`: each repeated submodule written once (`Hierarchy`; what
    `basedie generate` writes); otherwise every submodule as Amaranth writes it, the text whose digest the bench
    builds and the synthesis table are keyed by (the same design, `tests/rtl/test_generate_hierarchy.py`)."""
    component = block.build(params)
    text = (hierarchical_verilog(component, block.name) if hierarchy
            else verilog.convert(component, name=block.name, emit_src=False))
    # A component's `shared_modules` are the modules it instantiates by name (`Instance`), written once each.
    text += "".join(verilog.convert(module, name=name, emit_src=False)
                    for name, module in getattr(component, "shared_modules", {}).items())
    return component, runs_at_time_zero(text)


def hierarchical_verilog(component: wiring.Component, name: str) -> str:
    """`component` as the module `name`, and once each the modules of the submodules it repeats (`Hierarchy`)."""
    hierarchy = Hierarchy()
    return hierarchy.convert(component, name) + "".join(hierarchy.modules.values())


class Hierarchy:
    """Verilog in which each distinct submodule that repeats is elaborated and written once.

    Amaranth elaborates and writes every submodule again: the paper-size PNM's 16 lanes of 1,024 multipliers
    and its buffer's 64 banks took 612 s and 2.8 GB to generate. Two submodules are the same design when both
    are `wiring.Component`s of one class with equal signatures and equal parameters, that is, every attribute
    that is not a port is a plain value (`parameters`). A component that repeats among its siblings, or was met
    before, becomes an instance of one module named after its class and a digest of its parameters (`modules`,
    written after the top). Anything else (a component holding a signal or another component, a submodule met
    once) is elaborated in place, as Amaranth does, so a design without repeats gives the same Verilog.
    """

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}  # name -> Verilog of each shared module, in the order first met
        self._names: dict[str, str] = {}  # parameters -> module name
        self._ports: dict[str, list[str]] = {}  # module name -> its Verilog ports

    def convert(self, component: wiring.Component, name: str) -> str:
        """The Verilog of `component` as the module `name`, without the shared modules it instantiates."""
        ports = {"__".join(map(str, path)): (_value(port), PortDirection.Input if member.flow == wiring.In
                                             else PortDirection.Output)
                 for path, member, port in component.signature.flatten(component)}
        text, _ = verilog.convert_fragment(self.fragment(component), ports, name=name, emit_src=False)
        return text

    def fragment(self, obj: Elaboratable) -> Fragment:
        """`Fragment.get(obj)`, with the repeated submodules of every `Module` on the way replaced by instances
        before they are elaborated. (Amaranth has no hook for this: it reads the `Module`'s submodule table.)"""
        while not isinstance(obj, Fragment):
            if isinstance(obj, Module):
                self._replace_repeats(obj)
            obj._MustUse__used = True  # what `Fragment.get` does: it is elaborated
            obj = obj.elaborate(None)
        return obj

    def _replace_repeats(self, m: Module) -> None:
        submodules = m._named_submodules
        keys = {name: parameters(submodule) for name, (submodule, _) in submodules.items()}
        repeats = Counter(key for key in keys.values() if key is not None)
        for name, (submodule, src_loc) in submodules.items():
            key = keys[name]
            if key is not None and (repeats[key] > 1 or key in self._names):
                submodules[name] = (self._instance(submodule, key), src_loc)
            else:
                submodules[name] = (_InPlace(self, submodule), src_loc)
        m._anon_submodules = [(_InPlace(self, submodule), src_loc) for submodule, src_loc in m._anon_submodules]

    def _instance(self, component: wiring.Component, key: str) -> Instance:
        """An instance of the shared module of `component`'s design (written when first met), on its ports."""
        if key not in self._names:
            name = module_name(component, key)
            self._names[key] = name
            self.modules[name] = text = self.convert(component, name)
            self._ports[name] = _HEADER.search(text).group(2).replace(" ", "").split(",")
        name = self._names[key]
        component._MustUse__used = True  # stands for its module's one elaboration
        connections = {}
        for path, member, port in component.signature.flatten(component):
            direction = "i" if member.flow == wiring.In else "o"
            connections[f"{direction}_{'__'.join(map(str, path))}"] = _value(port)
        for port in self._ports[name]:
            if port in _DOMAIN_PORTS:
                connections[f"i_{port}"] = _DOMAIN_PORTS[port]()
            elif f"i_{port}" not in connections and f"o_{port}" not in connections:
                raise ValueError(f"module {name} has a port {port!r} that is neither a port of "
                                 f"{type(component).__name__} nor the sync domain's")
        return Instance(name, **connections)


class _InPlace(Elaboratable):
    """A submodule elaborated where it stands, its own repeated submodules shared."""

    def __init__(self, hierarchy: Hierarchy, submodule) -> None:
        self._hierarchy, self._submodule = hierarchy, submodule

    def elaborate(self, platform) -> Fragment:
        return self._hierarchy.fragment(self._submodule)


def parameters(component) -> str | None:
    """What determines `component`'s design, as text: its class, signature and every attribute that is not a
    port; None when it is no `wiring.Component` or an attribute is no plain value (then it is no function of
    its parameters alone)."""
    if not isinstance(component, wiring.Component):
        return None
    values = {}
    for attribute, value in vars(component).items():
        if attribute in component.signature.members or attribute.startswith(("_MustUse__", "_Component__")):
            continue
        if not _plain(value):
            return None
        values[attribute] = _describe(value)
    return repr((_describe(type(component)), repr(component.signature), sorted(values.items())))


def module_name(component: wiring.Component, key: str) -> str:
    """`<class in snake case>_<8 hex digits of the parameters' digest>`: stable across runs and checkouts."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", type(component).__name__).lower()
    return f"{snake}_{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def _plain(value) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(_plain(item) for item in value)
    return value is None or isinstance(value, (bool, int, float, str, enum.Enum, Params, type, FunctionType))


def _describe(value) -> str:
    """`repr`, except that classes and functions are named by module and qualified name (not by address)."""
    if isinstance(value, (type, FunctionType)):
        return f"{value.__module__}.{value.__qualname__}"
    if isinstance(value, (tuple, frozenset)):
        return f"{type(value).__name__}({', '.join(map(_describe, value))})"
    return repr(value)


def _value(port):
    return port.as_value() if isinstance(port, ValueCastable) else port


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
    component, text = verilog_of(block, params, hierarchy=True)
    info = manifest(block, params, component)
    out_dir.mkdir(parents=True, exist_ok=True)
    verilog_path, manifest_path = out_dir / f"{block.name}.v", out_dir / f"{block.name}.json"
    verilog_path.write_text(text)
    manifest_path.write_text(json.dumps(info, indent=2) + "\n")
    return [verilog_path, manifest_path]
