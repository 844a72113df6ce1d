"""DuoPD's HBM sharing between GPU and PNM, taken from the MMU arbiter's verified figures (paper §4.3).

The MMU bench measured, for each policy, the share of the memory-request slots each source obtained and its
wait in cycles, at offered loads of 0.25/0.5/1.0 requests per cycle per source. Here those points are the
whole model: shares and waits at other loads are bilinear interpolations between them, with the obvious
edge that a source alone gets what it offers (up to the measured saturated rate). Nothing is fitted.
"""
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError
from .verified import VerifiedBlocks

POLICIES = {"prefill-first": "prefill_first", "decode-first": "decode_first", "mixed": "mixed"}
SOURCES = ("gpu", "pnm")


def _bilinear(axis: np.ndarray, grid: np.ndarray, x: float, y: float) -> float:
    """Bilinear interpolation on a square grid over `axis` × `axis` (x, y inside the axis)."""
    i = min(max(int(np.searchsorted(axis, x, side="right")) - 1, 0), len(axis) - 2)
    j = min(max(int(np.searchsorted(axis, y, side="right")) - 1, 0), len(axis) - 2)
    u = (x - axis[i]) / (axis[i + 1] - axis[i])
    v = (y - axis[j]) / (axis[j + 1] - axis[j])
    return float((1 - u) * ((1 - v) * grid[i, j] + v * grid[i, j + 1])
                 + u * ((1 - v) * grid[i + 1, j] + v * grid[i + 1, j + 1]))


@dataclass(frozen=True)
class MMUArbitration:
    """A `Sharing` for one HBM stack whose users are named "gpu" and "pnm"."""
    policy: str
    axis: np.ndarray                     # offered loads, with 0 prepended
    shares: dict[str, np.ndarray]        # source → grid[gpu_offered index, pnm_offered index]
    waits_p50: dict[str, np.ndarray]     # cycles, same grid
    latency_cycles: dict[str, int]       # request to memory, unloaded
    clock_hz: float

    @classmethod
    def from_verified(cls, table: VerifiedBlocks, policy: str) -> "MMUArbitration":
        if policy not in POLICIES:
            raise ConfigError(f"unknown MMU policy {policy!r}; choose one of {', '.join(POLICIES)}")
        try:
            entry = table.entry("mmu", out_of_order=False)
        except KeyError as error:
            raise ConfigError(str(error).strip('"')) from None
        points = [p for p in entry.figures["arbitration"] if p["policy"] == POLICIES[policy]]
        loads = sorted({p["gpu_offered"] for p in points} | {p["pnm_offered"] for p in points})
        axis = np.array([0.0, *loads])
        saturated = float(entry.figures["requests_per_cycle_saturated"])
        shares = {s: np.zeros((len(axis), len(axis))) for s in SOURCES}
        waits = {s: np.zeros((len(axis), len(axis))) for s in SOURCES}
        for i, load in enumerate(axis):   # a source alone gets what it offers
            shares["gpu"][i, 0] = shares["pnm"][0, i] = min(load, saturated)
        for p in points:
            i, j = loads.index(p["gpu_offered"]) + 1, loads.index(p["pnm_offered"]) + 1
            for s in SOURCES:
                shares[s][i, j] = p[f"{s}_share"]
                waits[s][i, j] = p[f"{s}_wait_p50"]
        latency = {s: int(entry.figures[f"latency_cycles_{s}"]) for s in SOURCES}
        return cls(policy, axis, shares, waits, latency, float(entry.provenance["clock_hz"]))

    def grant(self, offered: Mapping[str, float]) -> dict[str, float]:
        x, y = (min(max(offered.get(s, 0.0), 0.0), 1.0) for s in SOURCES)
        return {s: _bilinear(self.axis, self.shares[s], x, y) for s in SOURCES}

    def access_latency_s(self, source: str, offered: Mapping[str, float]) -> float:
        """Unloaded MMU latency plus the median wait at these loads."""
        x, y = (min(max(offered.get(s, 0.0), 0.0), 1.0) for s in SOURCES)
        return (self.latency_cycles[source] + _bilinear(self.axis, self.waits_p50[source], x, y)) / self.clock_hz
