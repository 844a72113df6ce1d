"""Static timing and power of a Yosys netlist mapped onto the ASAP7 cells (`basedie.liberty`).

Why our own: the pip Yosys has no Liberty-driven timing (`sta` reads only cells with `specify` blocks) and the
WebAssembly build loses ABC's own report (`stime -p` prints to a stdout the build cannot redirect). The analysis
here is the textbook one on NLDM tables:

- **Timing**: an ideal clock; paths start at input ports (arrival 0) and flip-flop outputs (clock-to-QN delay)
  and end at flip-flop D pins (setup from the library) and output ports (captured at the next edge). At every
  cell the arc delay and output transition are looked up at the input's transition and the net's load (sum of
  the pins it drives; no wire capacitance), the worse of rise and fall (no unateness tracked).
- **Power**: leakage is the library's mean over states. Dynamic power is vectorless: every net toggles with the
  same probability `toggle_rate` per cycle (the global-activity rule of OpenSTA's `set_power_activity -global`,
  StreamDQ's 20 % input toggle rate applied to every net, no glitches) and the clock twice per cycle; each toggle
  costs the pin's internal energy from the library plus ½·C·V² on the net it drives.
- **Hierarchy**: a module instantiated many times (a lane's FP units) is analysed once and enters its parent as a
  box: its area, leakage and energy are counted per instance; its input pins are path ends required
  `input_to_register_ps` before the clock edge, its outputs path starts at `output_arrival_ps`, and a
  combinational path through it adds `through_ps`, each the worst over its bits.
- **Buffer trees**: ABC buffers the nets of the module it maps, but a box's input pin is one output of that mapping
  whatever the box holds behind it, so a net into many boxes (a pipeline's `advance` into every FP unit) would be one
  driver into all their pins. Such a net drives its box pins through a tree of the library's buffers (`BufferTree`),
  inserted before timing, so its delay, area, leakage and energy are those of the cells.
"""
import math
from collections import defaultdict, deque
from collections.abc import Iterator
from itertools import count
from dataclasses import dataclass, field

from .liberty import Cell, Library

# An ideal clock and input ports reach their pins with a 20 ps transition (one of the library's index points, that
# of a small buffer's output under a few fF); output ports drive one flip-flop's D pin of the receiving block.
CLOCK_TRANSITION_PS = 20.0
INPUT_TRANSITION_PS = 20.0
OUTPUT_LOAD_FF = 0.56  # DFFHQNx1's D pin (SEQ library)
NEVER = -math.inf
# A buffer tree's rule is ABC's own, the buffering the flow applies inside every module: at most 10 fan-outs per
# node or buffer (`buffer`, src/map/scl/scl.c of berkeley-abc: `-N`, "the maximum fanout count", default 10; Yosys's
# `abc -constr` script runs it after mapping).
MAX_FANOUT = 10
BUFFERS = "BUF"
"""The library's buffer cells are those whose name starts so (ASAP7: BUFx2 ... BUFx24)."""


@dataclass(frozen=True)
class Path:
    """The worst path: its slack at the clock, the arrival at its end, and its start and end points by net name."""
    slack_ps: float
    arrival_ps: float
    required_ps: float
    start: str
    end: str


@dataclass(frozen=True)
class BufferTree:
    """A net's buffer tree into `pins` box pins: `depth` levels of `cell`, each buffer driving at most `MAX_FANOUT`
    pins or buffers, `buffers` cells in all; `delay_ps` sums each level's worst buffer delay at its input's
    transition and the load it drives."""
    net: str
    pins: int
    cell: str
    depth: int
    buffers: int
    delay_ps: float


@dataclass(frozen=True)
class Figures:
    """A module's figures at one clock and toggle rate (sub-modules included by instance)."""
    area_um2: float
    cells: int
    flip_flops: int
    leakage_w: float
    dynamic_energy_fj: float
    """Per clock cycle."""
    path: Path
    input_to_register_ps: float
    output_arrival_ps: float
    output_transition_ps: float
    through_ps: float
    name: str
    outputs: tuple[str, ...]
    input_capacitance_ff: dict[str, float] = field(compare=False)
    """Port name -> capacitance of one of its bits (the worst bit)."""
    cells_by_type: dict[str, int] = field(compare=False)
    clock_inputs: tuple[str, ...] = ()
    """Input ports that reach a clock pin: the ideal clock, never given a buffer tree."""
    buffer_trees: tuple[BufferTree, ...] = ()
    """The module's own buffer trees (its boxes' are in their figures)."""

    @property
    def clock(self) -> None:
        """A box has no clock pin of its own (the `Cell` attribute the analysis asks)."""
        return None


def analyse_design(design: dict, top: str, library: Library, period_ps: float, toggle_rate: float,
                   activity: dict[str, float] | None = None) -> dict[str, Figures]:
    """Every module of a Yosys JSON design reachable from `top`, children first. `activity` (toggles per cycle
    by net name, `name[i]`) replaces `toggle_rate` on the nets of `top` it names; the other nets of `top` toggle
    at the mean of those rates. It applies to a flat design only."""
    modules = design["modules"]
    done: dict[str, Figures] = {}

    def visit(name: str) -> None:
        for cell in modules[name]["cells"].values():
            if cell["type"] in modules and cell["type"] not in done:
                visit(cell["type"])
        rates = None
        if name == top and activity is not None:
            if done:
                raise ValueError(f"measured activity applies to a flat design; {top} instantiates {', '.join(done)}")
            rates = _bit_rates(modules[name], activity)
        done[name] = analyse(name, modules[name], library, period_ps, toggle_rate, done, rates)

    visit(top)
    return done


def _bit_rates(module: dict, activity: dict[str, float]) -> dict:
    """Bit -> toggles per cycle for the nets `activity` names; None -> the mean of those (every other net)."""
    rates = {}
    for name, net in module["netnames"].items():
        for i, bit in enumerate(net["bits"]):
            key = f"{name}[{i}]" if len(net["bits"]) > 1 else name
            if isinstance(bit, int) and key in activity:
                rates[bit] = activity[key]
    if not rates:
        raise ValueError("no net of the netlist is named in the measured activity")
    rates[None] = sum(rates.values()) / len(rates)
    return rates


def analyse(name: str, module: dict, library: Library, period_ps: float, toggle_rate: float,
            boxes: dict[str, Figures], rates: dict | None = None) -> Figures:
    """One module: `boxes` are the figures of the modules it instantiates; `rates` the measured toggles per cycle
    of its nets (`_bit_rates`), else every net toggles at `toggle_rate`."""
    names = _net_names(module)
    out_bits = {b for p in module["ports"].values() if p["direction"] == "output" for b in p["bits"]}
    in_bits = {b for p in module["ports"].values() if p["direction"] == "input" for b in p["bits"]}
    load: dict = defaultdict(float)
    for bit in out_bits:
        load[bit] += OUTPUT_LOAD_FF
    cells, drivers, readers = [], {}, {}
    cell_names = []
    for cell_name, cell in module["cells"].items():
        kind = library.cells.get(cell["type"]) or boxes.get(cell["type"])
        if kind is None:
            raise ValueError(f"cell type {cell['type']} is neither an ASAP7 cell nor a module of the design")
        outs = {p: bits for p, bits in cell["connections"].items() if p in kind.outputs}
        ins = {p: list(bits) for p, bits in cell["connections"].items() if p not in kind.outputs}
        for pin, bits in ins.items():
            cap = kind.inputs[pin] if isinstance(kind, Cell) else kind.input_capacitance_ff.get(pin, 0.0)
            for bit in bits:
                load[bit] += cap
                readers.setdefault(bit, len(cells))
        for pin, bits in outs.items():
            for bit in bits:
                drivers[bit] = len(cells)
        cells.append((kind, ins, outs))
        cell_names.append(cell_name)
    clocks = _clock_bits(cells)
    trees = _insert_buffer_trees(cells, cell_names, load, drivers, clocks, library, _unused_bits(module))

    arrival_in: dict = defaultdict(lambda: NEVER)   # from input ports
    arrival_reg: dict = defaultdict(lambda: NEVER)  # from registers (and boxes' outputs)
    transition: dict = defaultdict(lambda: INPUT_TRANSITION_PS)
    previous: dict = {}
    for bit in in_bits:
        arrival_in[bit] = 0.0
    ends = []  # (bit, required time, index of the cell it enters or None for an output port)
    comb = []
    for index, (kind, ins, outs) in enumerate(cells):
        if isinstance(kind, Figures):
            for pin, bits in ins.items():
                ends.extend((b, period_ps - kind.input_to_register_ps, index) for b in bits)
            for bits in outs.values():
                for b in bits:
                    arrival_reg[b], transition[b] = kind.output_arrival_ps, kind.output_transition_ps
            if kind.through_ps > NEVER:
                comb.append(index)
        elif kind.clock is not None:
            for pin, bits in outs.items():
                arc = next(a for a in kind.arcs[pin] if a.kind == "rising_edge")
                for b in bits:
                    arrival_reg[b] = arc.delay.at(CLOCK_TRANSITION_PS, load[b])
                    transition[b] = arc.transition.at(CLOCK_TRANSITION_PS, load[b])
        else:
            comb.append(index)

    # Combinational cells in topological order: a cell is ready once every input driven by a combinational cell is.
    # A box's path through it joins every input to every output, so a parent may close a loop through a box that
    # its bits do not close (a table's address in, its data out, a write enable back in): the boxes left on such a
    # loop are cut, timed to their inputs and from their outputs only, and the rest ordered again.
    comb_set = set(comb)
    while comb_set:
        comb_set -= _in_order(comb_set, cells, drivers, load, arrival_in, arrival_reg, transition, previous)
        cut = {i for i in comb_set if isinstance(cells[i][0], Figures)}
        if comb_set and not cut:
            raise ValueError(f"combinational loop: {len(comb_set)} cells never became ready")
        comb_set -= cut

    for index, (kind, ins, _) in enumerate(cells):
        if isinstance(kind, Cell) and kind.clock is not None:
            for pin, bits in ins.items():
                setup = next((a for a in kind.arcs[pin] if a.kind == "setup_rising"), None)
                if setup is not None:
                    ends.extend((b, period_ps - setup.delay.at(transition[b], CLOCK_TRANSITION_PS), index)
                                for b in bits)
    ends.extend((b, period_ps, None) for b in out_bits)

    def arrival(b) -> float:
        return max(arrival_in[b], arrival_reg[b])

    timed = [(required - arrival(b), b, required, into) for b, required, into in ends
             if isinstance(b, int) and arrival(b) > NEVER]
    slack, end, required, into = min(timed, key=lambda t: t[0]) if timed else (period_ps, None, period_ps, None)
    start = end
    while start in previous:
        start = previous[start]

    def label(bit, cell, pin: str) -> str:
        """A register by the name of the net it holds (its QN, or the inverter after it); a box by its input."""
        if cell is None:
            return names.get(bit, "none")
        kind, _, outs = cells[cell]
        if isinstance(kind, Figures):
            return f"{cell_names[cell]} (input of {kind.name})"
        q = next(iter(outs.values()))[0]
        name = names.get(q, "")
        if name.startswith("$") and q in readers:
            name = names.get(next(iter(cells[readers[q]][2].values()))[0], name)
        return f"{name}{pin}"

    source = drivers.get(start)
    path = Path(slack_ps=round(slack, 1), arrival_ps=round(required - slack, 1), required_ps=round(required, 1),
                start=label(start, source, "") if source is not None and cells[source][0].clock is not None
                else names.get(start, "constant"),
                end=label(end, into, " (D)"))
    register_ends = [(b, r) for b, r, into in ends if into is not None and isinstance(b, int)]
    outputs = [b for b in out_bits if isinstance(b, int)]
    rate = (lambda b: rates.get(b, rates[None])) if rates is not None else (lambda b: toggle_rate)
    area, count, flops, leakage, energy, by_type = _totals(cells, load, transition, library, rate)
    return Figures(
        name=name, area_um2=area, cells=count, flip_flops=flops, leakage_w=leakage, dynamic_energy_fj=energy, path=path,
        input_to_register_ps=max((arrival_in[b] + period_ps - r for b, r in register_ends), default=0.0),
        output_arrival_ps=max((arrival_reg[b] for b in outputs), default=0.0),
        output_transition_ps=max((transition[b] for b in outputs), default=INPUT_TRANSITION_PS),
        through_ps=max((arrival_in[b] for b in outputs), default=NEVER),
        outputs=tuple(p for p, port in module["ports"].items() if port["direction"] == "output"),
        input_capacitance_ff={p: max((load[b] for b in port["bits"]), default=0.0)
                              for p, port in module["ports"].items() if port["direction"] == "input"},
        cells_by_type=by_type,
        clock_inputs=tuple(p for p, port in module["ports"].items()
                           if port["direction"] == "input" and clocks.intersection(port["bits"])),
        buffer_trees=tuple(BufferTree(net=names.get(bit, str(bit)), pins=len(caps), cell=cell.name,
                                      depth=len(_levels(len(caps))), buffers=sum(_levels(len(caps))),
                                      delay_ps=round(tree_delay_ps(cell, caps, transition[bit]), 1))
                           for bit, cell, caps in trees))


def _clock_bits(cells) -> set:
    """The bits that reach a flip-flop's clock pin or a box's clock input."""
    return {b for kind, ins, _ in cells
            for pin in ((kind.clock,) if isinstance(kind, Cell) else kind.clock_inputs) if pin in ins
            for b in ins[pin]}


def _unused_bits(module: dict) -> Iterator[int]:
    """Bit numbers the module does not use: the nets of its buffer trees."""
    used = [b for cell in module["cells"].values() for bits in cell["connections"].values() for b in bits]
    used += [b for port in module["ports"].values() for b in port["bits"]]
    return count(1 + max((b for b in used if isinstance(b, int)), default=0))


def _levels(pins: int) -> list[int]:
    """The buffers of each level of a tree into `pins` pins, the leaves' level first: each buffer drives at most
    `MAX_FANOUT` pins or buffers, and so does the net's driver (no tree at all for `MAX_FANOUT` pins or fewer)."""
    levels = []
    while pins > MAX_FANOUT:
        pins = math.ceil(pins / MAX_FANOUT)
        levels.append(pins)
    return levels


def tree_delay_ps(cell: Cell, caps: list[float], transition_ps: float) -> float:
    """The delay through a tree of `cell` into pins of capacitances `caps` (fF, in the order the leaves take them,
    `MAX_FANOUT` to a leaf), its root's input at `transition_ps`: each level's worst buffer, the one that drives
    the most, at the transition of the level above."""
    (pin,), (arc,) = cell.inputs, cell.arcs[cell.outputs[0]]
    leaf_load = max(sum(caps[i:i + MAX_FANOUT]) for i in range(0, len(caps), MAX_FANOUT))
    levels = _levels(len(caps))
    loads = [leaf_load, *(min(MAX_FANOUT, below) * cell.inputs[pin] for below in levels[:-1])]
    delay = 0.0
    for load in reversed(loads):
        delay += arc.delay.at(transition_ps, load)
        transition_ps = arc.transition.at(transition_ps, load)
    return delay


def buffer_cell(caps: list[float], library: Library) -> Cell:
    """The library buffer whose tree into pins of capacitances `caps` is the fastest (the smaller of equals), its
    root's input at the ports' transition."""
    candidates = [cell for name, cell in sorted(library.cells.items()) if name.startswith(BUFFERS)]
    return min(candidates, key=lambda cell: (tree_delay_ps(cell, caps, INPUT_TRANSITION_PS), cell.area_um2))


def _insert_buffer_trees(cells, cell_names, load, drivers, clocks: set, library: Library, fresh: Iterator[int]):
    """Drive every net into more than `MAX_FANOUT` box pins (its clock excepted; a pin the box leaves unused loads
    nothing and counts none) through a tree of one buffer cell (`buffer_cell`), appended to `cells`: the leaves
    take the pins in order, `MAX_FANOUT` each. The net keeps its other pins. Returns (net, cell, the pins'
    capacitances) per tree."""
    sinks: dict = defaultdict(list)
    for index, (kind, ins, _) in enumerate(cells):
        if isinstance(kind, Figures):
            for pin, bits in ins.items():
                cap = kind.input_capacitance_ff.get(pin, 0.0)
                for position, bit in enumerate(bits):
                    if isinstance(bit, int) and bit not in clocks and cap > 0:
                        sinks[bit].append((index, pin, position, cap))
    trees = []
    for net, pins in sinks.items():
        if len(pins) <= MAX_FANOUT:
            continue
        caps = [cap for *_, cap in pins]
        cell = buffer_cell(caps, library)
        (buffer_in,), buffer_out = cell.inputs, cell.outputs[0]
        load[net] -= sum(caps)

        def connect(receiver, bit: int) -> None:
            if isinstance(receiver, int):   # a buffer of the level below
                cells[receiver][1][buffer_in][0] = bit
                load[bit] += cell.inputs[buffer_in]
            else:
                index, pin, position, cap = receiver
                cells[index][1][pin][position] = bit
                load[bit] += cap

        below: list = pins
        while len(below) > MAX_FANOUT:
            level = []
            for start in range(0, len(below), MAX_FANOUT):
                out = next(fresh)
                for receiver in below[start:start + MAX_FANOUT]:
                    connect(receiver, out)
                drivers[out] = len(cells)
                level.append(len(cells))
                cells.append((cell, {buffer_in: [None]}, {buffer_out: [out]}))
                cell_names.append(f"$buffer{len(cells)}")
            below = level
        for receiver in below:
            connect(receiver, net)
        trees.append((net, cell, caps))
    return trees


def _in_order(comb_set: set, cells, drivers, load, arrival_in, arrival_reg, transition, previous) -> set:
    """Propagate arrivals through the cells `comb_set` in topological order; the cells it reached."""
    waiting = {i: sum(1 for bits in cells[i][1].values() for b in bits if drivers.get(b) in comb_set)
               for i in comb_set}
    fanout = defaultdict(list)
    for i in sorted(comb_set):
        for bits in cells[i][1].values():
            for b in bits:
                if drivers.get(b) in comb_set:
                    fanout[drivers[b]].append(i)
    queue = deque(sorted(i for i in comb_set if waiting[i] == 0))
    reached = set()
    while queue:
        index = queue.popleft()
        reached.add(index)
        _propagate(cells[index], load, arrival_in, arrival_reg, transition, previous)
        for after in fanout[index]:
            waiting[after] -= 1
            if waiting[after] == 0:
                queue.append(after)
    return reached


def _propagate(cell, load, arrival_in, arrival_reg, transition, previous) -> None:
    kind, ins, outs = cell
    if isinstance(kind, Figures):  # a box with a combinational path through it
        worst = max((b for bits in ins.values() for b in bits), key=lambda b: max(arrival_in[b], arrival_reg[b]))
        for bits in outs.values():
            for b in bits:
                arrival_in[b] = max(arrival_in[b], arrival_in[worst] + kind.through_ps)
                arrival_reg[b] = max(arrival_reg[b], arrival_reg[worst] + kind.through_ps)
                previous[b] = worst
        return
    for pin, bits in outs.items():
        for out in bits:
            worst, worst_slew = NEVER, 0.0
            for arc in kind.arcs[pin]:
                for b in ins[arc.related]:
                    delay = arc.delay.at(transition[b], load[out])
                    arrival_in[out] = max(arrival_in[out], arrival_in[b] + delay)
                    arrival_reg[out] = max(arrival_reg[out], arrival_reg[b] + delay)
                    late = max(arrival_in[b], arrival_reg[b]) + delay
                    if late > worst:
                        worst, previous[out] = late, b
                    worst_slew = max(worst_slew, arc.transition.at(transition[b], load[out]))
            transition[out] = worst_slew


def _totals(cells, load, transition, library: Library, rate):
    """Area, cells, flip-flops, leakage (W) and dynamic energy per cycle (fJ) of the cells and boxes."""
    area = leakage_pw = energy = 0.0
    count = flops = 0
    by_type: dict[str, int] = defaultdict(int)
    volts2 = library.voltage_v ** 2
    for kind, ins, outs in cells:
        if isinstance(kind, Figures):
            area += kind.area_um2
            count += kind.cells
            flops += kind.flip_flops
            leakage_pw += kind.leakage_w * 1e12
            energy += kind.dynamic_energy_fj
            for name, n in kind.cells_by_type.items():
                by_type[name] += n
            continue
        area += kind.area_um2
        count += 1
        by_type[kind.name] += 1
        leakage_pw += kind.leakage_pw
        slew_in = max((transition[b] for bits in ins.values() for b in bits), default=INPUT_TRANSITION_PS)
        for pin, bits in outs.items():
            table = kind.energy.get(pin)
            for b in bits:
                internal = table.at(slew_in, load[b]) if table is not None else 0.0
                energy += rate(b) * (internal + 0.5 * load[b] * volts2)
        for pin, bits in ins.items():
            table = kind.energy.get(pin)
            if pin == kind.clock:  # rises and falls every cycle; its pin is charged once per cycle
                flops += 1
                energy += 2 * table.at(CLOCK_TRANSITION_PS) + kind.inputs[pin] * volts2
            elif table is not None:
                energy += sum(rate(b) * table.at(transition[b]) for b in bits)
    return area, count, flops, leakage_pw * 1e-12, energy, dict(sorted(by_type.items()))


def _net_names(module: dict) -> dict:
    """Bit -> the most readable name of its net (a public name before Yosys's `$` names)."""
    names = {}
    for name, net in sorted(module["netnames"].items(), key=lambda item: (item[1].get("hide_name", 0), len(item[0]))):
        for i, bit in enumerate(net["bits"]):
            if isinstance(bit, int) and bit not in names:
                names[bit] = f"{name}[{i}]" if len(net["bits"]) > 1 else name
    return names
