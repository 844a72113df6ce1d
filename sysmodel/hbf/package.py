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
    """The dies of one package; `rate` is the HBF service rate now (bandwidth x throttle x what refresh leaves).

    Steps run without `stop` are queued and integrated when anything reads the state (`rate`, `step`, `snapshot`,
    `trace`, `flush`): a run in which nothing reads it until the end is integrated in one pass."""

    def __init__(self, rc: PackageRC, ambient_c: float, retention: Retention, refresh: Refresh,
                 bandwidth: float) -> None:
        self.thermal, self.throttle, self.retention = Thermal(rc, ambient_c), Throttle(), retention
        self.refresh, self.bandwidth = refresh, bandwidth
        self.refresh_share = 0.0        # of the channels, taken by the last step's refresh
        self.refresh_heat_j = 0.0       # the last step's refresh energy, released in the next step
        self.clock = 0.0                # the time it has been run to (queued steps included)
        self.residency = [0.0] * len(STATES)
        self.counters = dict.fromkeys(REFRESH, 0.0)
        self._time = 0.0                # the time it has been integrated to
        self._trace: list[tuple[float, float, float, float, int]] = []   # (s, GPU, HBM, HBF C, state) per step
        self._queue: list[tuple[np.ndarray, np.ndarray]] = []

    @property
    def rate(self) -> float:
        self.flush()
        return self.bandwidth * self.throttle.service * (1.0 - self.refresh_share)

    @property
    def trace(self) -> list[tuple[float, float, float, float, int]]:
        self.flush()
        return self._trace

    def step(self, dt: float, power) -> None:
        """Hold `power` (W: GPU, HBM, HBF dies) for dt."""
        self.flush()
        self._step(dt, power)
        self.clock = self._time

    def run(self, dt: np.ndarray, power: np.ndarray, stop: bool = False) -> int:
        """Take the steps `dt` (s) at `power` (one row of W per step) in order; with `stop`, now, returning after
        the first step that changes `rate`. Returns the number of steps taken."""
        if not stop:
            if len(dt):
                self._queue.append((dt, power))
                self.clock += float(np.sum(dt))
            return len(dt)
        self.flush()
        taken = self._integrate(dt, power, stop)
        self.clock = self._time
        return taken

    def flush(self) -> None:
        if self._queue:
            queue, self._queue = self._queue, []
            self._integrate(np.concatenate([dt for dt, _ in queue]), np.concatenate([power for _, power in queue]))

    def _step(self, dt: float, power) -> None:
        """Heat, throttle, age, refresh."""
        if self.refresh_heat_j and dt > 0:
            power = (power[0], power[1], power[2] + self.refresh_heat_j / dt)
            self.refresh_heat_j = 0.0
        state = self.throttle.state
        temps = self.thermal.step(dt, power)
        self.residency[state] += dt
        self.throttle.update(float(temps[2]))
        self._time += dt
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
        self._trace.append((self._time, *map(float, temps), self.throttle.state))

    def _integrate(self, dt: np.ndarray, power: np.ndarray, stop: bool = False) -> int:
        count, i = len(dt), 0
        while i < count:
            if count - i > SCALAR_STEPS and not (self.refresh_heat_j or self.refresh_share):
                i += self._calm(dt[i:], power[i:])
                if i == count:
                    break
            before = self.throttle.service, self.refresh_share
            self._step(float(dt[i]), power[i])
            i += 1
            if stop and (self.throttle.service, self.refresh_share) != before:
                return i
        return count

    def _calm(self, dt: np.ndarray, power: np.ndarray) -> int:
        """Take the leading steps in which nothing but the temperatures changes, at once; returns how many."""
        temps = self.thermal.run(dt, power)
        calm = self.throttle.first_change(temps[:, 2])
        calm = self.retention.age(dt[:calm], temps[:calm, 2])
        if calm:
            clocks = self._time + np.cumsum(dt[:calm])
            self.thermal.temps = temps[calm - 1].copy()
            self.residency[self.throttle.state] += float(dt[:calm].sum())
            self._trace.extend(zip(clocks.tolist(), *temps[:calm].T.tolist(), [self.throttle.state] * calm))
            self._time = float(clocks[-1])
        return calm

    def snapshot(self) -> tuple:
        self.flush()
        return (self.thermal.temps.copy(), self.throttle.state, self.retention.aging, self.retention.refreshed,
                self.refresh_share, self.refresh_heat_j, self._time, list(self.residency), dict(self.counters),
                len(self._trace))

    def restore(self, state: tuple) -> None:
        (self.thermal.temps, self.throttle.state, aging, refreshed, self.refresh_share, self.refresh_heat_j,
         self._time, residency, counters, trace) = state
        self.retention.restore(aging, refreshed)
        self.residency, self.counters = list(residency), dict(counters)
        self.clock, self._queue = self._time, []
        del self._trace[trace:]
