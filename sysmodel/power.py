"""Power of the base-die logic (PNM, DQB) from the synthesis table (`basedie synth`, docs/results/ppa.md), as the
latencies come from the verified table, and the serving simulation takes them by default: the papers' own
synthesis results are kept for comparison (`--power-source paper`). The serving simulation, the comparison tables and the thermal check of
docs/results/ppa.md read it.

Each figure is the synthesized block's leakage plus its vectorless dynamic power at its design clock and the
table's toggle rate (ASAP7, the corner recorded with the entry). A table entry synthesized from other `rtl/`
sources than the current ones is refused, naming the `basedie synth` command that refreshes it.
"""
import json
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from basedie.verified import StaleTableError, rtl_digest

TABLE_PATH = Path(__file__).resolve().parent / "data" / "synthesized_blocks.json"
SCHEMA = 2

# The papers' own figures, for comparison only: DuoPD §6.7 (one PNM per HBM4 stack, 7 nm after scaling from
# 28 nm) and StreamDQ §6.1 Table 5 (one DQB, 12 nm, 20 % input toggle rate, 328 MHz).
PAPER_PNM_POWER_W = 6.45
PAPER_DQB_POWER_W = 0.355

# Where a run takes the base die's power from (`SimulationConfig.power_source`).
POWER_SOURCES = ("synthesized", "paper")

# The synthesized parameter sets the system model reads: the paper-size lane and buffer, the vector unit at its
# synthesized width (scaled per lane below), the controller and MMU at their defaults, and the DQB (below).
LANE = "pnm_lane"
VECTOR = ("pnm_vector", {"width": 2})
PNM_PARTS = {"pnm_buffer": {"total_bytes": 65536}, "pnm_controller": {}, "mmu": {"out_of_order": False}}
# StreamDQ Table 5's DQB (512-bit interface, 32 lanes) synthesizes flat: its lanes are not modules of their own
# (rtl/dqb/processing.py), and Yosys does not finish it within the hour on 2 cores (the 2-lane DQB alone takes minutes
# of CPU). Until it does, the synthesized 32-bit DQB (2 lanes) counts 512 / 32 = 16 times, all of it scaled with
# the lanes: an indication, since Table 5's request table and S/Z buffer grow 32x and 16x, its outstanding reads 4x.
DQB = ("dqb", {"interface_bits": 32, "rounding": "nearest_even"})
DQB_COUNT = 512 / 32


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
    verilog_sha256: str
    rtl_digest: str


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


def block_entry(block: str, path: Path = TABLE_PATH, **params) -> dict:
    """The one synthesized entry of `block` whose parameters include `params`."""
    found = [e for e in load(path) if e["block"] == block and all(e["params"].get(k) == v for k, v in params.items())]
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        given = "".join(f" --param {k}={v}" for k, v in params.items())
        raise StaleTableError(f"{path}: {what} synthesized entries of {block} with {params or 'any parameters'}; "
                              f"run `basedie synth {block}{given}`")
    return found[0]


def block_power(block: str, path: Path = TABLE_PATH, **params) -> SynthesizedPower:
    """The synthesized power of the one entry of `block` whose parameters include `params`."""
    entry = block_entry(block, path, **params)
    power = entry["figures"]["power"]
    return SynthesizedPower(block=block, params=entry["params"], total_w=power["total_w"],
                            leakage_w=power["leakage_w"], dynamic_w=power["dynamic_w"],
                            toggle_rate=power["toggle_rate"], clock_hz=power["clock_hz"],
                            verilog_sha256=entry["provenance"]["verilog_sha256"],
                            rtl_digest=entry["provenance"]["rtl_digest"])


def pnm_parts(lanes: int, lane_width: int, vector_width: int, clock_hz: float,
              path: Path = TABLE_PATH) -> list[tuple[float, SynthesizedPower]]:
    """One PNM (one HBM stack) as (count, synthesized block): `lanes` lanes of `lane_width`, the vector unit
    scaled from its synthesized width to `vector_width` lanes, the buffer, the controller and the MMU, all at
    `clock_hz`."""
    lane = block_power(LANE, path, width=lane_width, design_clock_hz=clock_hz)
    vector = block_power(VECTOR[0], path, **VECTOR[1])
    parts = [block_power(name, path, design_clock_hz=clock_hz, **params) for name, params in PNM_PARTS.items()]
    return [(lanes, lane), (vector_width / vector.params["width"], vector), *((1, p) for p in parts)]


def pnm_power_w(lanes: int, lane_width: int, vector_width: int, clock_hz: float, path: Path = TABLE_PATH) -> float:
    """One PNM's synthesized power (`pnm_parts`)."""
    return sum(count * part.total_w for count, part in pnm_parts(lanes, lane_width, vector_width, clock_hz, path))


def dqb_power_w(path: Path = TABLE_PATH) -> float:
    """One DQB at StreamDQ's Table 5 configuration and design clock (scaled: `DQB`)."""
    return dqb_power("synthesized", path).watts


@dataclass(frozen=True)
class BaseDiePower:
    """Watts of one unit of base-die logic (one stack's PNM, or one DQB) from a power source, and what they rest
    on: the synthesized entries (with their digests and instance counts), or the paper's figure."""
    watts: float
    source: str
    provenance: tuple[dict, ...]

    def as_dict(self) -> dict:
        return {"watts": self.watts, "source": self.source, "provenance": list(self.provenance)}


def _synthesized(parts: list[tuple[float, SynthesizedPower]]) -> BaseDiePower:
    provenance = tuple({"count": count, **asdict(part)} for count, part in parts)
    return BaseDiePower(sum(count * part.total_w for count, part in parts), "synthesized", provenance)


def pnm_power(source: str, pnm, path: Path = TABLE_PATH) -> BaseDiePower:
    """One stack's PNM (`hardware.PNMArray`): synthesized (`pnm_parts`, its `lanes` lanes), or `pnm.power_w` (the
    paper's, DuoPD §6.7, unless overridden); either plus the TSV I/O of a what-if PNM that reads at a multiple of
    the stack's bandwidth (`pnm.tsv_power_w`, Duplex's)."""
    tsv = ({"hardware": "pnm.tsv_power_w", "watts": pnm.tsv_power_w},) if pnm.tsv_power_w else ()
    if source == "paper":
        return BaseDiePower(pnm.power_w + pnm.tsv_power_w, source,
                            ({"hardware": "pnm.power_w", "paper": "DuoPD §6.7"}, *tsv))
    logic = _synthesized(pnm_parts(pnm.lanes, pnm.lane_width, pnm.vector_width, pnm.clock_hz, path))
    return BaseDiePower(logic.watts + pnm.tsv_power_w, source, logic.provenance + tsv)


def dqb_power(source: str, path: Path = TABLE_PATH) -> BaseDiePower:
    """One DQB at Table 5's configuration: synthesized (scaled from a smaller one: `DQB`), or the paper's 0.355 W
    (StreamDQ Table 5, 12 nm)."""
    if source == "paper":
        return BaseDiePower(PAPER_DQB_POWER_W, source, ({"paper": "StreamDQ Table 5"},))
    name, params = DQB
    return _synthesized([(DQB_COUNT, block_power(name, path, **params))])
