"""Memory as tiers behind one interface: what a tier holds, how fast it moves bytes, what a byte costs,
and how concurrent users share its bandwidth.

The serving systems only ever ask a tier for `capacity_bytes`, `bandwidth`, `latency_s`, `energy_per_byte`
and `sharing.grant(...)`; a High-Bandwidth-Flash tier or a near-memory dequantization path is another
`MemoryTier` (or another `Sharing`) and slots in without touching them.
"""
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from .errors import require


class Sharing(Protocol):
    """How a tier divides its bandwidth among users that want it at the same time."""

    def grant(self, offered: Mapping[str, float]) -> dict[str, float]:
        """Fractions of the tier's bandwidth each user obtains, given the fraction each one offers."""
        ...


@dataclass(frozen=True)
class FairSharing:
    """Max-min fair division (water-filling): no user gets more than it offers, the rest is split evenly.
    The default for users without an arbiter of their own (e.g. two SM partitions of one GPU)."""

    def grant(self, offered: Mapping[str, float]) -> dict[str, float]:
        granted: dict[str, float] = {}
        left, users = 1.0, sorted(offered, key=offered.get)
        for index, user in enumerate(users):
            granted[user] = min(max(offered[user], 0.0), left / (len(users) - index))
            left -= granted[user]
        return granted


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
# Latency: 48 ns, the row cycle time tRC of HBM3 (JEDEC JESD238 speed bins); it only enters each operator's
# start-up, never its bandwidth.
HBM4_STACK = MemoryTier(
    name="HBM4 stack",
    capacity_bytes=48 * GB,
    bandwidth=2e12,
    latency_s=48e-9,
    energy_per_byte=41.6 / 2e12,
)
