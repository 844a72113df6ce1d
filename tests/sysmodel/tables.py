"""Verified tables for the tests of the 4× compute systems (DuoPD §6.4), whose PNM is the 64-lane array: a loaded
table with a scratch 64-lane `pnm_array` entry in place of any recorded one, so that these tests do not depend on
whether `basedie verify pnm_array --param lanes=64 --param width=16 --param sublane_width=4` has recorded it."""
from basedie.verified import VerifiedBlocks, VerifiedEntry


def _other_arrays(table: VerifiedBlocks, lanes: int) -> list[VerifiedEntry]:
    return [e for e in table.entries if not (e.block == "pnm_array" and e.params["lanes"] == lanes)]


def without_array(table: VerifiedBlocks, lanes: int = 64) -> VerifiedBlocks:
    """`table` without a `pnm_array` entry of `lanes` lanes."""
    return VerifiedBlocks(_other_arrays(table, lanes))


def with_array(table: VerifiedBlocks, lanes: int = 64) -> VerifiedBlocks:
    """`table` whose `pnm_array` entry of `lanes` lanes is a scratch one: its 16-lane entry with `lanes` lanes (the
    model reads an array entry's lane count and clock), marked as scratch in its provenance."""
    base = next(e for e in table.entries if e.block == "pnm_array" and e.params["lanes"] == 16)
    provenance = {"bench": base.provenance["bench"], "rtl_module": base.provenance["rtl_module"],
                  "sources_digest": "scratch (tests/sysmodel/tables.py)"}
    scratch = VerifiedEntry("pnm_array", {**base.params, "lanes": lanes}, base.figures, provenance)
    return VerifiedBlocks(_other_arrays(table, lanes) + [scratch])
