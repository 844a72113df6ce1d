"""`basedie prove`: each property of a block as its own SymbiYosys job, k-induction with its basecase to a depth."""
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tb.formal import dqb, fp, mmu
from tb.formal.harness import Property

from . import sby

PROPERTIES = {"mmu": mmu.PROPERTIES, "dqb": dqb.PROPERTIES, "fp32_narrow": fp.PROPERTIES}
"""The blocks with formal properties, and theirs."""


@dataclass(frozen=True)
class Proof:
    block: str
    name: str
    variant: str
    outcome: sby.Outcome

    def verdict(self) -> str:
        """One line: what was shown, to what depth."""
        o = self.outcome
        if o.status == "PASS" and o.mode == "prove":
            return f"PROVED  k-induction closed (k={o.induction}); basecase {o.depth} steps"
        if o.status in ("PASS", "UNKNOWN"):
            unclosed = "; induction did not close" if o.status == "UNKNOWN" else ""
            return f"PASS    no counterexample in {o.depth} steps (BMC){unclosed}"
        if o.status == "FAIL":
            trace = f" (trace {o.trace})" if o.trace else ""
            return f"FAIL    counterexample at step {o.failed_step}: {', '.join(o.failed_assertions) or '?'}{trace}"
        return f"ERROR   SBY did not finish: {o.log.strip().splitlines()[-1] if o.log.strip() else 'no log'}"


def planned(block: str, names: list[str] | None = None) -> list[tuple[Property, str]]:
    """(property, variant) pairs of `block`, all or those `names` selects; ValueError on an unknown name."""
    properties = PROPERTIES[block]
    known = [p.name for p in properties]
    unknown = sorted(set(names or ()) - set(known))
    if unknown:
        raise ValueError(f"{block} has no property {unknown[0]!r} (known: {', '.join(known)})")
    return [(p, variant) for p in properties if not names or p.name in names for variant in p.variants]


def prove(block: str, names: list[str] | None = None, depth: int | None = None, mode: str = "prove",
          keep: Path | None = None) -> Iterator[Proof]:
    """Run the planned properties one after another (each job is already two solver processes in prove mode)."""
    for prop, variant in planned(block, names):
        folder = keep / block / f"{prop.name}-{variant}" if keep else None
        outcome = sby.run(prop.harness(variant), mode, depth or prop.depth, folder)
        yield Proof(block, prop.name, variant, outcome)
