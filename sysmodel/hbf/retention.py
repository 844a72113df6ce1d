"""Retention by Arrhenius and the refresh and wear it causes.

Retention time at temperature T is 24 h at 85 C (OCP, powered) scaled by exp(Ea/k (1/T - 1/T85)) with
Ea = 1.04 eV (HBFSim §8). Each zone (an object written to HBF) accumulates damage dt / retention(T); at 1
it is refreshed: read and rewritten in page steps (traffic that competes with foreground reads) and its
blocks gain one P/E cycle.
"""
import math

import numpy as np

from ..errors import require

BOLTZMANN_EV = 8.617333262e-5     # eV/K (CODATA 2018)
REFERENCE_C = 85.0
REFERENCE_S = 24 * 3600.0
ACTIVATION_EV = 1.04


def retention_s(temp_c: float, activation_ev: float = ACTIVATION_EV) -> float:
    require(temp_c > -273.15, f"temperature must be above absolute zero, got {temp_c} C")
    return REFERENCE_S * math.exp(activation_ev / BOLTZMANN_EV * (1 / (temp_c + 273.15)
                                                                  - 1 / (REFERENCE_C + 273.15)))


class Retention:
    """Damage per zone; `initial` spreads the zones' ages (a device in steady use was written at all
    times, so refresh work arrives evenly rather than all at once). Every zone sits at the same (lumped HBF)
    temperature, so one number, the damage added since the start, describes them all: a zone is refreshed
    each time its damage crosses a whole number, and rewritten at zero damage."""

    def __init__(self, zones: int, initial: np.ndarray | None = None, activation_ev: float = ACTIVATION_EV) -> None:
        start = np.zeros(zones) if initial is None else np.asarray(initial, dtype=float)
        require(start.shape == (zones,) and bool(np.all((start >= 0) & (start < 1))),
                "retention: initial damage must be one value in [0, 1) per zone")
        self.initial = np.sort(start)
        self.activation_ev = activation_ev
        self.aging = 0.0
        self.refreshed = 0
        self._rate_temp = self._rate = math.nan        # 1 / retention at the last temperature asked
        self._deadline = self._next(0.0)

    def _crossed(self, aging: float) -> int:
        """Deadlines met by all zones together once `aging` has been added (floor(initial + aging), summed)."""
        whole, part = divmod(aging, 1.0)
        return int(whole) * self.initial.size + self.initial.size - int(np.searchsorted(self.initial, 1.0 - part))

    def _next(self, aging: float) -> float:
        """The damage added at which the first deadline after `aging` is met: the zone with the largest start
        below 1 - frac(aging) reaches the next whole number first (or, if none, the largest start one later)."""
        if not self.initial.size:
            return math.inf
        whole, part = divmod(aging, 1.0)
        index = int(np.searchsorted(self.initial, 1.0 - part, side="left"))
        return whole + (1.0 - self.initial[index - 1] if index else 2.0 - self.initial[-1])

    def restore(self, aging: float, refreshed: int) -> None:
        self.aging, self.refreshed = aging, refreshed
        self._deadline = self._next(aging)

    @property
    def damage(self) -> np.ndarray:
        return (self.initial + self.aging) % 1.0

    def age(self, dt: np.ndarray, temp_c: np.ndarray) -> int:
        """`advance` over many steps at once up to the first one that meets a deadline: ages every zone by the
        steps before it and returns their count (that step is left to `advance`, which counts the refresh)."""
        if not self.initial.size:
            return len(dt)
        per_kelvin = self.activation_ev / BOLTZMANN_EV
        aged = dt * np.exp(per_kelvin / (REFERENCE_C + 273.15) - np.log(REFERENCE_S) - per_kelvin / (temp_c + 273.15))
        aging = self.aging + np.cumsum(aged)
        steps = int(np.searchsorted(aging, self._deadline - 1e-12, side="left"))
        if steps:
            self.aging = float(aging[steps - 1])
        return steps

    def advance(self, dt: float, temp_c: float) -> int:
        """Age every zone by dt at temp_c; returns how many deadlines were met (each one a refresh)."""
        if temp_c != self._rate_temp:
            self._rate_temp, self._rate = temp_c, 1.0 / retention_s(temp_c, self.activation_ev)
        aging = self.aging + dt * self._rate
        if aging < self._deadline - 1e-12:         # no deadline met (the usual step): nothing to count
            self.aging = aging
            return 0
        before = self._crossed(self.aging)
        self.aging = aging
        self._deadline = self._next(aging)
        count = self._crossed(self.aging) - before
        self.refreshed += count
        return count


def lifetime_years(endurance_cycles: int, capacity_bytes: float, write_bytes_per_s: float) -> float:
    """Years until every block has used its P/E budget, writes spread evenly (write amplification 1)."""
    require(write_bytes_per_s > 0, "write rate must be > 0 bytes/s")
    return endurance_cycles * capacity_bytes / write_bytes_per_s / (365.25 * 24 * 3600)
