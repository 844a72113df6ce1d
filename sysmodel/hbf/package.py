"""One GPU package over wall-clock time: its die temperatures, the HBF throttle, retention ageing and the refresh
it causes, driven by the power its servers draw.

Time advances in steps of constant power (`run`), each integrated exactly. Most steps change no state but the
temperatures: runs of them (no throttle transition, no retention deadline, no refresh in its wake) are taken at
once with numpy, the step that changes something alone, so a long block of decode iterations costs a few array
operations. A step's refresh takes its channel time from the service of the next step and heats the HBF dies
during it.
"""
from dataclasses import dataclass

import numpy as np

from .retention import Retention
from .thermal import STATES, PackageRC, Thermal, Throttle

REFRESH = ("refresh_read_bytes", "programmed_bytes", "pe_block_cycles", "refreshed_zones")
SCALAR_STEPS = 8         # runs this short are stepped one by one: numpy's overhead would exceed the work


@dataclass(frozen=True)
class Refresh:
    """What refreshing one zone (an HBF-resident object) moves, wears and costs."""
    zone_bytes: float
    zone_blocks: float             # erase blocks per zone: one P/E cycle each
    zone_program_s: float          # channel time of its pages' tPROG over the outstanding operations
    energy_per_byte: float         # read + program


class Package:
    """The dies of one package; `rate` is the HBF service rate now (bandwidth x throttle x what refresh leaves)."""

    def __init__(self, rc: PackageRC, ambient_c: float, retention: Retention, refresh: Refresh,
                 bandwidth: float) -> None:
        self.thermal, self.throttle, self.retention = Thermal(rc, ambient_c), Throttle(), retention
        self.refresh, self.bandwidth = refresh, bandwidth
        self.refresh_share = 0.0        # of the channels, taken by the last step's refresh
        self.refresh_heat_j = 0.0       # the last step's refresh energy, released in the next step
        self.clock = 0.0
        self.residency = [0.0] * len(STATES)
        self.counters = dict.fromkeys(REFRESH, 0.0)
        self.trace: list[tuple[float, float, float, float, int]] = []   # (s, GPU, HBM, HBF C, state) per step

    @property
    def rate(self) -> float:
        return self.bandwidth * self.throttle.service * (1.0 - self.refresh_share)

    def step(self, dt: float, power) -> None:
        """Hold `power` (W: GPU, HBM, HBF dies) for dt: heat, throttle, age, refresh."""
        if self.refresh_heat_j and dt > 0:
            power = (power[0], power[1], power[2] + self.refresh_heat_j / dt)
            self.refresh_heat_j = 0.0
        state = self.throttle.state
        temps = self.thermal.step(dt, power)
        self.residency[state] += dt
        self.throttle.update(float(temps[2]))
        self.clock += dt
        refreshed = self.retention.advance(dt, float(temps[2]))
        if refreshed:
            r, c = self.refresh, self.counters
            nbytes = refreshed * r.zone_bytes
            c["refresh_read_bytes"] += nbytes
            c["programmed_bytes"] += nbytes
            c["pe_block_cycles"] += refreshed * r.zone_blocks
            c["refreshed_zones"] += refreshed
            busy = nbytes / self.bandwidth + refreshed * r.zone_program_s
            self.refresh_share = min(0.99, busy / dt) if dt > 0 else 0.0
            self.refresh_heat_j = nbytes * r.energy_per_byte
        else:
            self.refresh_share = 0.0
        self.trace.append((self.clock, *map(float, temps), self.throttle.state))

    def run(self, dt: np.ndarray, power: np.ndarray, stop: bool = False) -> int:
        """Take the steps `dt` (s) at `power` (one row of W per step) in order; with `stop`, return after the
        first step that changes `rate`. Returns the number of steps taken."""
        count, i = len(dt), 0
        while i < count:
            if count - i > SCALAR_STEPS and not (self.refresh_heat_j or self.refresh_share):
                i += self._calm(dt[i:], power[i:])
                if i == count:
                    break
            before = self.rate
            self.step(float(dt[i]), power[i])
            i += 1
            if stop and self.rate != before:
                return i
        return count

    def _calm(self, dt: np.ndarray, power: np.ndarray) -> int:
        """Take the leading steps in which nothing but the temperatures changes, at once; returns how many."""
        temps = self.thermal.run(dt, power)
        calm = self.throttle.first_change(temps[:, 2])
        calm = self.retention.age(dt[:calm], temps[:calm, 2])
        if calm:
            clocks = self.clock + np.cumsum(dt[:calm])
            self.thermal.temps = temps[calm - 1].copy()
            self.residency[self.throttle.state] += float(dt[:calm].sum())
            self.trace.extend(zip(clocks.tolist(), *temps[:calm].T.tolist(), [self.throttle.state] * calm))
            self.clock = float(clocks[-1])
        return calm

    def snapshot(self) -> tuple:
        return (self.thermal.temps.copy(), self.throttle.state, self.retention.aging, self.retention.refreshed,
                self.refresh_share, self.refresh_heat_j, self.clock, list(self.residency), dict(self.counters),
                len(self.trace))

    def restore(self, state: tuple) -> None:
        (self.thermal.temps, self.throttle.state, aging, refreshed, self.refresh_share, self.refresh_heat_j,
         self.clock, residency, counters, trace) = state
        self.retention.restore(aging, refreshed)
        self.residency, self.counters = list(residency), dict(counters)
        del self.trace[trace:]
