"""Memory as tiers behind one interface: what a tier holds, how fast it moves bytes, what a byte costs,
and how concurrent users share its bandwidth.

The serving systems only ever ask a tier for `capacity_bytes`, `bandwidth`, `latency_s`, `energy_per_byte`
and `sharing.grant(...)`; a High-Bandwidth-Flash tier or a near-memory dequantization path is another
`MemoryTier` (or another `Sharing`) and slots in without touching them.
"""
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .errors import require


class Sharing(Protocol):
    """How a tier divides its bandwidth among users that want it at the same time."""

    def grant(self, offered: Mapping[str, float]) -> dict[str, float]:
        """Fractions of the tier's bandwidth each user obtains, given the fraction each one offers."""
        ...


@dataclass(frozen=True)
class FairSharing:
    """Max-min fair division (water-filling): no user gets more than it offers, the rest is split evenly.
    The default for users without an arbiter of their own (e.g. two SM partitions of one GPU). Offers may be
    arrays (one value per iteration of a block)."""

    def grant(self, offered: Mapping[str, float | np.ndarray]) -> dict[str, float | np.ndarray]:
        users = list(offered)
        loads = np.maximum(np.broadcast_arrays(*(np.asarray(offered[u]) for u in users)), 0.0)
        ordered = np.sort(loads, axis=0)
        below = np.cumsum(ordered, axis=0) - ordered       # offered by the users smaller than each one
        level = (1.0 - below) / (len(users) - np.arange(len(users))).reshape(-1, *[1] * (loads.ndim - 1))
        # The fair level is the first candidate not above the offer it stands against (inf: all satisfied).
        fits = level <= ordered
        fair = np.where(fits.any(axis=0), np.take_along_axis(level, fits.argmax(axis=0)[None], 0)[0], np.inf)
        return {u: np.minimum(loads[k], fair) for k, u in enumerate(users)}


@dataclass(frozen=True)
class MemoryTier:
    """One tier of memory attached to one compute device (all numbers per device)."""
    name: str
    capacity_bytes: float
    bandwidth: float            # bytes/s
    latency_s: float            # access latency seen by one request
    energy_per_byte: float      # J/byte moved between the tier and its user
    sharing: Sharing = field(default_factory=FairSharing)

    def __post_init__(self) -> None:
        require(self.capacity_bytes > 0, f"memory tier {self.name}: capacity_bytes must be > 0")
        require(self.bandwidth > 0, f"memory tier {self.name}: bandwidth must be > 0 bytes/s")
        require(self.capacity_bytes < math.inf and self.bandwidth < math.inf,
                f"memory tier {self.name}: capacity_bytes and bandwidth must be finite")
        require(self.latency_s >= 0 and self.energy_per_byte >= 0,
                f"memory tier {self.name}: latency_s and energy_per_byte must be >= 0")

    def scaled(self, count: int, name: str | None = None) -> "MemoryTier":
        """`count` identical units of this tier seen as one (e.g. the 8 HBM stacks of a GPU)."""
        return MemoryTier(name or f"{count}x {self.name}", self.capacity_bytes * count, self.bandwidth * count,
                          self.latency_s, self.energy_per_byte, self.sharing)

    def with_sharing(self, sharing: Sharing) -> "MemoryTier":
        return MemoryTier(self.name, self.capacity_bytes, self.bandwidth, self.latency_s, self.energy_per_byte,
                          sharing)


GB = 1e9

# HBM4, one stack. 2 TB/s: JEDEC JESD270-4 HBM4 (2,048-bit interface at 8 Gb/s), as the paper assumes
# (§6.1, [Emily Desjardins, 2025]). 48 GB: 16-high stacks of 24 Gb dies (§6.1, [Kim and Park, 2024]).
# Energy: 41.6 W per stack at full bandwidth (§6.7, [Adhinarayanan et al., 2025]) = 20.8 pJ/byte.
# Latency: 42 ns from a read command to data on a bank-row miss (tRP + tRCD + CL = 14 + 14 + 14 cycles of 1 ns)
# in DRAMSim3's HBM2 configuration (configs/HBM2_8Gb_x128.ini), the DRAM simulator the paper's own evaluation
# uses (§6.1); it only enters each operator's start-up, never its bandwidth.
HBM4_STACK = MemoryTier(
    name="HBM4 stack",
    capacity_bytes=48 * GB,
    bandwidth=2e12,
    latency_s=42e-9,
    energy_per_byte=41.6 / 2e12,
)
