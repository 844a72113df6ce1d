"""Address mapping: which SID, bank group, bank, row and column a burst address (bytes / burst_bytes) falls in.

A mapping names the fields from the most significant bits to the least, `row:sid:bank:bankgroup:column` by
default: consecutive bursts stay in one row (a sequential stream is a run of row hits), and consecutive rows go
to other bank groups, then other banks, then the other SID before a bank sees its next row. Row-high like
DRAMSim3's HBM2 mapping (`rorabgbachco`, [DS3] in `tb.dram.timing`), with the bank group below the bank so that
a stream crossing a row boundary changes bank group. Each field is log2(its count) bits wide."""
from dataclasses import dataclass

from .timing import DramTiming

FIELDS = ("row", "sid", "bank", "bankgroup", "column")
DEFAULT_MAPPING = "row:sid:bank:bankgroup:column"


@dataclass(frozen=True)
class Location:
    sid: int
    bankgroup: int
    bank: int
    """Bank within its bank group."""
    row: int
    column: int


def field_order(mapping: str) -> tuple[str, ...]:
    """The fields of `mapping`, most significant first; a mapping names each of `FIELDS` once."""
    order = tuple(mapping.split(":"))
    if sorted(order) != sorted(FIELDS):
        raise ValueError(f"mapping={mapping!r} must name each of {', '.join(FIELDS)} once, separated by ':'")
    return order


def decode(address: int, timing: DramTiming, mapping: str = DEFAULT_MAPPING) -> Location:
    """Split a burst address; one beyond the pseudo channel's capacity is an error, not silently folded."""
    if not 0 <= address * timing.burst_bytes < timing.bytes:
        raise ValueError(f"burst address {address:#x} is outside the {timing.bytes} bytes of a {timing.name} "
                         f"pseudo channel")
    counts = {"row": timing.rows, "sid": timing.sids, "bank": timing.banks_per_group,
              "bankgroup": timing.bankgroups, "column": timing.columns}
    values = {}
    for name in reversed(field_order(mapping)):
        address, values[name] = divmod(address, counts[name])
    return Location(**values)
