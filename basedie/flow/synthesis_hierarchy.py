"""The module tree of a block's Verilog, for synthesis by hierarchy (`basedie.flow.synthesis.synthesize_by_hierarchy`).

A paper-size block is too large to map flat on this machine, but it is made of few distinct modules: the lane's
FP units, the array's lanes, the buffer's banks. Each distinct module is synthesized once, on its own, its
submodules standing as black boxes (`stub`: their ports only); the netlist analysis then enters each submodule
as a box carrying its own figures (`basedie.netlist_analysis`), so a parent's figures are its own glue plus its
submodules counted per instance, and its paths cross into them at their boundaries.

A module's record is keyed by `key`: the digest of its Verilog with each submodule named by its own key (not by
the name Amaranth gave it in this block), and of the run's settings. The same FP unit in a lane, an array and
the PNM top therefore has one key and is synthesized once for all of them.
"""
import hashlib
import re
from collections import Counter
from dataclasses import asdict, dataclass

from basedie.netlist_analysis import NEVER, BufferTree, Figures, Path

MODULE = re.compile(r"^module (\S+?) ?\((.*?)^endmodule\n", re.M | re.S)
# An instance line is `  <module> <name> (`; an escaped name (`\U$0`) ends at a space, so two may follow it.
INSTANCE = re.compile(r"^  (\S+)\s+\S+\s+\($", re.M)
PORT = re.compile(r"^\s*(?:input|output|inout)\b[^;]*;$", re.M)


@dataclass(frozen=True)
class VerilogModule:
    """One module of a Verilog text: its name, its whole text and its submodules with their instance counts."""
    name: str
    text: str
    children: dict[str, int]


def module_tree(verilog: str) -> dict[str, VerilogModule]:
    """Every module of `verilog` by name, with the modules of the same text it instantiates."""
    found = {match.group(1): match for match in MODULE.finditer(verilog)}
    tree = {}
    for name, match in found.items():
        counts = Counter(m.group(1) for m in INSTANCE.finditer(match.group(2)) if m.group(1) in found)
        tree[name] = VerilogModule(name, match.group(0), dict(counts))
    return tree


def bottom_up(tree: dict[str, VerilogModule], top: str) -> list[str]:
    """The modules `top` reaches, each after every module it instantiates."""
    order: list[str] = []

    def visit(name: str) -> None:
        for child in tree[name].children:
            if child not in order:
                visit(child)
        order.append(name)

    visit(top)
    return order


def keys(tree: dict[str, VerilogModule], top: str, settings: str) -> dict[str, str]:
    """Each module's key: SHA-256 of `settings` and of its text less its own name, with every submodule's name
    replaced by that submodule's key."""
    found: dict[str, str] = {}
    for name in bottom_up(tree, top):
        module = tree[name]
        body = module.text.split("(", 1)[1]
        body = INSTANCE.sub(lambda m: m.group(0).replace(m.group(1), found.get(m.group(1), m.group(1)), 1), body)
        found[name] = hashlib.sha256(f"{settings}\0{body}".encode()).hexdigest()
    return found


def stub(module: VerilogModule) -> str:
    """The module's ports only: what its parent's synthesis reads of it (`read_verilog -lib`)."""
    header = module.text.split(";", 1)[0]
    return header + ";\n" + "\n".join(PORT.findall(module.text)) + "\nendmodule\n"


def instances(tree: dict[str, VerilogModule], top: str) -> dict[str, int]:
    """How many times the block `top` holds each module below it, through every level."""
    total: Counter = Counter()

    def count(name: str, times: int) -> None:
        for child, n in tree[name].children.items():
            total[child.lstrip("\\")] += times * n
            count(child, times * n)

    count(top, 1)
    return dict(total)


def to_json(figures: Figures) -> dict:
    """A module's analysed figures as JSON (a box without a combinational path through it: `through_ps` None)."""
    out = asdict(figures)
    out["through_ps"] = None if figures.through_ps == NEVER else figures.through_ps
    return out


def from_json(data: dict, name: str) -> Figures:
    """The figures `to_json` wrote, as the box of the module `name` in a parent's netlist."""
    through = NEVER if data["through_ps"] is None else data["through_ps"]
    return Figures(**{**data, "path": Path(**data["path"]), "outputs": tuple(data["outputs"]),
                      "clock_inputs": tuple(data["clock_inputs"]),
                      "buffer_trees": tuple(BufferTree(**tree) for tree in data["buffer_trees"]),
                      "through_ps": through, "name": name})
