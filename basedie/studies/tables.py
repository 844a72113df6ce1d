"""What every study writes: its headline claims (the paper's value, ours, how they compare) and its CSV tables."""
import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# A claim agrees with the paper when ours is within this fraction of the paper's value (issue 34).
TOLERANCE = 0.20


@dataclass(frozen=True)
class Claim:
    """One headline claim: the paper's value, ours, and where ours comes from. `kind` says how they compare:
    "ratio" (ours / paper) or "points" (ours − paper, both in %)."""
    figure: str
    claim: str
    paper: float
    ours: float
    kind: str
    simulation: str
    relation: str = "="      # how the paper states it: "=", "<" (at most), ">" (more than), "≈" (comparable)
    mechanism: str = ""      # why ours differs, with the sensitivity run that shows it (`explain`)

    @property
    def deviation(self) -> float:
        return self.ours / self.paper if self.kind == "ratio" else self.ours - self.paper

    @property
    def agrees(self) -> bool:
        """Ours meets the paper's bound ("<", ">"), or is within `TOLERANCE` of its value ("=", "≈")."""
        if self.relation == "<":
            return self.ours < self.paper
        if self.relation == ">":
            return self.ours > self.paper
        return abs(self.ours / self.paper - 1) <= TOLERANCE


def write_csv(path: Path, rows: Sequence[dict]) -> None:
    """Columns are the union of the rows' keys (a figure's parts may use different metrics); gaps stay empty."""
    fields = list(dict.fromkeys(key for r in rows for key in r))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("|", "\\|")


def replace_section(text: str, begin: str, end: str, body: str) -> str:
    """`text` (a README) with what lies between its `begin` and `end` marker lines replaced by `body`: a study's
    generated section, the rest untouched. ValueError unless each marker is there once, `begin` first."""
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise ValueError(f"the README needs one {begin!r} line and, after it, one {end!r} line")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    return f"{head}{begin}\n{body}{end}{tail}"
