"""The ASAP7 standard cells as the synthesis flow needs them: area, leakage, pin capacitances, NLDM delay and
transition tables, setup constraints and internal energy, read from the vendored Liberty files (`cells/asap7/`)
with the `liberty-parser` package.

Liberty units of these files (their headers): time ps, capacitance fF, leakage pW, voltage V; internal power
tables are energies per transition in fJ (capacitance × voltage²). Every table is a 7 × 7 NLDM lookup indexed by
the input transition (ps) and the output load (fF), or a 7-entry table indexed by the input transition.
"""
import bisect
import functools
import gzip
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from liberty.parser import parse_liberty

CELLS_DIR = Path(__file__).resolve().parent.parent / "cells" / "asap7"
# The groups the flow maps onto: complex gates (AO/OA, 20 MB each) are left out to keep ABC's library small.
SIMPLE = "asap7sc7p5t_SIMPLE_RVT_TT_nldm_211120.lib"
INVBUF = "asap7sc7p5t_INVBUF_RVT_TT_nldm_220122.lib"
SEQ = "asap7sc7p5t_SEQ_RVT_TT_nldm_220123.lib"
LOGIC_FILES = (SIMPLE, INVBUF)
FILES = (SIMPLE, INVBUF, SEQ)
# The supply pin whose internal-power groups count: the energy a transition draws from the supply (the VSS groups
# describe the same charge returning).
SUPPLY_PIN = "VDD"


@dataclass(frozen=True)
class Table:
    """An NLDM lookup table: bilinear interpolation inside, linear extrapolation outside (as STA tools do)."""
    transitions: tuple[float, ...]
    loads: tuple[float, ...]
    values: tuple[tuple[float, ...], ...]

    def at(self, transition: float, load: float = 0.0) -> float:
        i, u = _locate(self.transitions, transition)
        j, v = _locate(self.loads, load)
        rows, i1, j1 = self.values, min(i + 1, len(self.transitions) - 1), min(j + 1, len(self.loads) - 1)
        a, b, c, d = rows[i][j], rows[i][j1], rows[i1][j], rows[i1][j1]
        return a + (b - a) * v + (c - a) * u + (a - b - c + d) * u * v


def _locate(xs: tuple[float, ...], x: float) -> tuple[int, float]:
    """The index of the segment of `xs` that holds `x` (the first or last one outside) and x's fraction of it."""
    if len(xs) == 1:
        return 0, 0.0
    i = min(max(bisect.bisect_left(xs, x) - 1, 0), len(xs) - 2)
    return i, (x - xs[i]) / (xs[i + 1] - xs[i])


@dataclass(frozen=True)
class Arc:
    """A timing arc from `related` to the pin that holds it: a delay (`rising_edge` for a flip-flop's clock to
    output, `combinational` otherwise) or a setup constraint (`setup_rising`, tables indexed by the data and clock
    transitions). Rise and fall are kept as the worse of the two: no unateness is tracked."""
    related: str
    kind: str
    delay: "Combined"
    transition: "Combined | None"


@dataclass(frozen=True)
class Cell:
    name: str
    area_um2: float
    leakage_pw: float
    """Mean over the states the library lists (each equally likely)."""
    inputs: dict[str, float]
    """Input pin -> capacitance (fF)."""
    outputs: tuple[str, ...]
    clock: str | None
    arcs: dict[str, tuple[Arc, ...]]
    """Pin -> the arcs that end at it."""
    energy: dict[str, "Combined"]
    """Pin -> internal energy per transition of that pin (fJ; the mean of rise and fall, and of related pins)."""


@dataclass(frozen=True)
class Library:
    cells: dict[str, Cell]
    voltage_v: float
    temperature_c: float
    process: str

    @property
    def corner(self) -> str:
        return f"{self.process}, {self.voltage_v:g} V, {self.temperature_c:g} °C"


def unpacked(folder: Path, files: tuple[str, ...] = FILES) -> list[str]:
    """Decompress the vendored files into `folder` (Yosys reads plain text by relative path); their names."""
    for name in files:
        with gzip.open(CELLS_DIR / f"{name}.gz", "rb") as packed, (folder / name).open("wb") as plain:
            shutil.copyfileobj(packed, plain)
    return list(files)


_TEMPLATES: dict = {}
"""The table templates of the file being read (a table without its own index takes its template's)."""


@functools.cache
def asap7() -> Library:
    cells, header = {}, {}
    for name in FILES:
        with gzip.open(CELLS_DIR / f"{name}.gz", "rt") as text:
            library = parse_liberty(text.read())
        _TEMPLATES.clear()
        _TEMPLATES.update({str(t.args[0]): t for kind in ("lu_table_template", "power_lut_template")
                           for t in library.get_groups(kind)})
        header = {"voltage_v": float(library["nom_voltage"]), "temperature_c": float(library["nom_temperature"])}
        for group in library.get_groups("cell"):
            cell = _cell(group)
            cells[cell.name] = cell
    return Library(cells=cells, process="ASAP7 RVT TT", **header)


def _index(group, templates: dict, key: str) -> tuple[float, ...]:
    """A table's own index, else its template's; a scalar table has neither."""
    for source in (group, templates.get(str(group.args[0]))):
        if source is not None and source[key] is not None:
            return tuple(float(x) for x in np.ravel(source.get_array(key)))
    return (0.0,)


def _table(group) -> Table:
    values = np.atleast_2d(group.get_array("values"))
    transitions, loads = (_index(group, _TEMPLATES, key) for key in ("index_1", "index_2"))
    if values.shape[0] == 1 and len(transitions) > 1 and len(loads) == 1:
        values = values.T
    return Table(transitions, loads, tuple(tuple(float(v) for v in row) for row in values))


@dataclass(frozen=True)
class Combined:
    """Several tables read as one: the worse (max) or the mean of their values at a point (their indices may
    differ, so the values are combined after the lookup)."""
    tables: tuple[Table, ...]
    worst: bool

    def at(self, transition: float, load: float = 0.0) -> float:
        values = [t.at(transition, load) for t in self.tables]
        return max(values) if self.worst else sum(values) / len(values)


def _worse(*groups) -> Combined:
    return Combined(tuple(_table(g) for g in groups), worst=True)


def _mean(tables) -> Combined:
    return Combined(tuple(tables), worst=False)


def _cell(group) -> Cell:
    states: dict[str, float] = {}
    for leak in group.get_groups("leakage_power"):
        states[str(leak["when"])] = states.get(str(leak["when"]), 0.0) + float(leak["value"])
    inputs, outputs, clock, arcs, energy = {}, [], None, {}, {}
    for pin in group.get_groups("pin"):
        name = str(pin.args[0]).strip('"')
        if str(pin["direction"]) == "input":
            inputs[name] = float(pin["capacitance"])
            if str(pin["clock"]) == "true":
                clock = name
        else:
            outputs.append(name)
        arcs[name] = tuple(a for a in (_arc(t) for t in pin.get_groups("timing")) if a is not None)
        tables = [_table(ip.get_group(k)) for ip in pin.get_groups("internal_power") if str(ip["related_pg_pin"]) == SUPPLY_PIN
                  for k in ("rise_power", "fall_power")]
        if tables:
            energy[name] = _mean(tables)
    return Cell(name=str(group.args[0]).strip('"'), area_um2=float(group["area"]),
                leakage_pw=float(np.mean(list(states.values()))) if states else 0.0,
                inputs=inputs, outputs=tuple(outputs), clock=clock, arcs=arcs, energy=energy)


def _arc(timing) -> Arc | None:
    kind = str(timing["timing_type"] or "combinational")
    related = str(timing["related_pin"]).strip('"')
    if kind in ("combinational", "rising_edge"):
        return Arc(related, kind, _worse(timing.get_group("cell_rise"), timing.get_group("cell_fall")),
                   _worse(timing.get_group("rise_transition"), timing.get_group("fall_transition")))
    if kind == "setup_rising":
        return Arc(related, kind, _worse(timing.get_group("rise_constraint"), timing.get_group("fall_constraint")),
                   None)
    return None
