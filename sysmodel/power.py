"""Power of the base-die logic (PNM, DQB) from the synthesis table (`basedie synth`, docs/results/ppa.md), as the
latencies come from the verified table: the papers' own synthesis results are kept only for comparison. The
comparison tables and the thermal check of docs/results/ppa.md read it; the serving simulation still takes the papers'
figures (sysmodel/hardware.py, sysmodel/quantized.py) until the paper-size entries are in the table.

Each figure is the synthesized block's leakage plus its vectorless dynamic power at its design clock and the
table's toggle rate (ASAP7, the corner recorded with the entry). A table entry synthesized from other `rtl/`
sources than the current ones is refused, naming the `basedie synth` command that refreshes it.
"""
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from basedie.verified import StaleTableError, rtl_digest

TABLE_PATH = Path(__file__).resolve().parent / "data" / "synthesized_blocks.json"
SCHEMA = 2

# The papers' own figures, for comparison only: DuoPD §6.7 (one PNM per HBM4 stack, 7 nm after scaling from
# 28 nm) and StreamDQ §6.1 Table 5 (one DQB, 12 nm, 20 % input toggle rate, 328 MHz).
PAPER_PNM_POWER_W = 6.45
PAPER_DQB_POWER_W = 0.355

# The synthesized parameter sets the system model reads: the paper-size lane, buffer and DQB (Table 5), the vector
# unit at its synthesized width (scaled per lane below), and the controller and MMU at their defaults.
LANE = "pnm_lane"
VECTOR = ("pnm_vector", {"width": 2})
PNM_PARTS = {"pnm_buffer": {"total_bytes": 65536}, "pnm_controller": {}, "mmu": {"out_of_order": False}}
DQB = ("dqb", {"interface_bits": 512, "rounding": "nearest_even"})


@dataclass(frozen=True)
class SynthesizedPower:
    """One block's synthesized power and where it comes from."""
    block: str
    params: dict
    total_w: float
    leakage_w: float
    dynamic_w: float
    toggle_rate: float
    clock_hz: float


@cache
def load(path: Path = TABLE_PATH) -> tuple[dict, ...]:
    """The table's entries with figures, refusing a missing, unreadable or stale table."""
    try:
        table = json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError) as error:
        raise StaleTableError(f"{path}: cannot read the synthesis table ({error}); run `basedie synth all`") from None
    if table.get("schema") != SCHEMA:
        raise StaleTableError(f"{path} has schema {table.get('schema')!r}, expected {SCHEMA}: run `basedie synth all`")
    digests: dict[str, str] = {}
    stale = set()
    for entry in table["entries"]:
        module = entry["provenance"]["rtl_module"]
        digests.setdefault(module, rtl_digest(module))
        if entry["provenance"]["rtl_digest"] != digests[module]:
            stale.add(entry["block"])
    if stale:
        names = " ".join(sorted(stale))
        raise StaleTableError(f"{path} is stale: {', '.join(sorted(stale))} synthesized from other rtl/ sources than "
                              f"the current ones; run `basedie synth {names}` (each) to refresh it")
    return tuple(e for e in table["entries"] if e["figures"] is not None)


def block_power(block: str, path: Path = TABLE_PATH, **params) -> SynthesizedPower:
    """The synthesized power of the one entry of `block` whose parameters include `params`."""
    found = [e for e in load(path) if e["block"] == block and all(e["params"].get(k) == v for k, v in params.items())]
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        raise KeyError(f"{what} synthesized entries of {block} with {params or 'any parameters'}; "
                       f"run `basedie synth {block}`" + (" --param ..." if params else ""))
    entry = found[0]
    power = entry["figures"]["power"]
    return SynthesizedPower(block=block, params=entry["params"], total_w=power["total_w"],
                            leakage_w=power["leakage_w"], dynamic_w=power["dynamic_w"],
                            toggle_rate=power["toggle_rate"], clock_hz=power["clock_hz"])


def pnm_power_w(lanes: int, lane_width: int, vector_width: int, clock_hz: float, path: Path = TABLE_PATH) -> float:
    """One PNM (one HBM stack): `lanes` synthesized lanes of `lane_width`, the vector unit scaled from its
    synthesized width to `vector_width` lanes, the buffer, the controller and the MMU, all at `clock_hz`."""
    lane = block_power(LANE, path, width=lane_width, design_clock_hz=clock_hz)
    vector = block_power(VECTOR[0], path, **VECTOR[1])
    parts = [block_power(name, path, design_clock_hz=clock_hz, **params) for name, params in PNM_PARTS.items()]
    return (lanes * lane.total_w + vector.total_w * vector_width / vector.params["width"]
            + sum(p.total_w for p in parts))


def dqb_power_w(path: Path = TABLE_PATH) -> float:
    """One DQB at StreamDQ's Table 5 configuration and design clock."""
    name, params = DQB
    return block_power(name, path, **params).total_w
