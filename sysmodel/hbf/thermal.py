"""Package heating and the HBF throttle: a lumped RC network of the GPU, HBM and HBF dies of one package,
and the four hysteretic service states of the open HBFSim's controller.

The network is linear, so a step of constant power is integrated exactly (eigen-decomposition of the
conductance matrix, computed once): a long quiet stretch costs one step, and the result is the
closed-form response the tests check.
"""
import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import require

NODES = ("gpu", "hbm", "hbf")


@dataclass(frozen=True)
class PackageRC:
    """Thermal resistances (K/W) and capacitances (J/K). No public figure exists for an HBF package, and the
    HBFSim paper states none: §6.3 (paper 001, line 136) gives only results of its reconstructed operator (the
    power at which each die reaches its limit, the 44.4 K span of its eight HBF layers), line 137 one measured
    air-cooled board (46-52 C over 315-431 W), line 138 the accuracy of its 224-state reduced model against its
    full-order one. These are assumptions for a liquid-cooled package in which the paper's 1.4 kW GPU stays
    below 90 C, not fitted to HBFSim's Fig. 3 (the study compares them, and shows what the paper's limits
    imply). Node order: gpu, hbm, hbf."""
    to_coolant: tuple[float, float, float] = (0.03, 0.15, 0.6)
    capacitance: tuple[float, float, float] = (60.0, 10.0, 5.0)
    coupling: tuple[float, float, float] = (0.2, 0.4, 0.5)       # gpu-hbm, gpu-hbf, hbm-hbf
    limits_c: tuple[float, float, float] = (90.0, 95.0, 85.0)    # compute die (HBFSim §6.3), JEDEC HBM
    #                                                              extended range, OCP retention reference

    def __post_init__(self) -> None:
        require(min(self.to_coolant + self.capacitance + self.coupling) > 0,
                "thermal resistances and capacitances must be > 0")

    def conductance(self) -> np.ndarray:
        g = np.diag(1.0 / np.asarray(self.to_coolant))
        for (a, b), r in zip(((0, 1), (0, 2), (1, 2)), self.coupling):
            g[a, a] += 1 / r
            g[b, b] += 1 / r
            g[a, b] -= 1 / r
            g[b, a] -= 1 / r
        return g


PACKAGE = PackageRC()


class Thermal:
    """Die temperatures driven by per-die power; `step(dt, power)` holds `power` (W, node order) for dt."""

    def __init__(self, rc: PackageRC, ambient_c: float) -> None:
        self.rc, self.ambient = rc, ambient_c
        self._g = rc.conductance()
        self._resistance = np.linalg.inv(self._g)         # K per W of each node's power, at steady state
        rate = -np.diag(1 / np.asarray(rc.capacitance)) @ self._g
        # C^-1 G is similar to a symmetric matrix: real eigenvalues and vectors.
        self._lambda, self._v = (np.real(x) for x in np.linalg.eig(rate))
        self._v_inv = np.linalg.inv(self._v)
        self._power_modes = self._v_inv @ self._resistance     # W -> steady rise in the eigenbasis
        self._fastest = int(np.argmin(self._lambda))
        # `step` runs once per simulated iteration: unrolled 3 x 3 float arithmetic is ~4x faster than numpy.
        self._terms = (self._lambda.tolist(), self._v.tolist(), self._v_inv.tolist(), self._power_modes.tolist())
        self.temps = np.full(len(NODES), float(ambient_c))

    def steady(self, power) -> np.ndarray:
        return self.ambient + self._resistance @ np.asarray(power, dtype=float)

    def step(self, dt: float, power) -> np.ndarray:
        """Exact: in the eigenbasis each mode relaxes to its target as exp(lambda dt)."""
        rates, v, v_inv, power_modes = self._terms
        a = self.ambient
        r0, r1, r2 = (t - a for t in self.temps.tolist())
        p0, p1, p2 = (float(p) for p in power)
        m = []
        for rate, (i0, i1, i2), (w0, w1, w2) in zip(rates, v_inv, power_modes):
            target = w0 * p0 + w1 * p1 + w2 * p2
            m.append(target + math.exp(rate * dt) * (i0 * r0 + i1 * r1 + i2 * r2 - target))
        self.temps = np.array([a + row[0] * m[0] + row[1] * m[1] + row[2] * m[2] for row in v])
        return self.temps

    def run(self, dt: np.ndarray, power: np.ndarray) -> np.ndarray:
        """The temperatures after each of many steps (`dt`, `power` one row per step) from `temps`, without
        changing `temps`: the same exact solution as `step`, each mode's recurrence m' = a m + (1 - a) target
        solved at once by cumulative sums (m_j = A_j (m_0 + sum_k (1 - a_k) target_k / A_k), A the running
        product of the a). A_k underflows after ~700 time constants: the steps are taken in runs shorter
        than 600 of the fastest mode's."""
        decay = np.asarray(dt)[:, None] * self._lambda
        targets = np.asarray(power, dtype=float) @ self._power_modes.T
        modes = self._v_inv @ (self.temps - self.ambient)
        log_a = np.cumsum(decay, axis=0)
        if -log_a[-1, self._fastest] <= 600.0:        # the usual case: one run
            out = self._modes(modes, decay, log_a, targets)
        else:
            out, start = np.empty_like(decay), 0
            while start < len(dt):
                log_a = np.cumsum(decay[start:], axis=0)
                end = start + max(1, int(np.searchsorted(-log_a[:, self._fastest], 600.0, side="right")))
                out[start:end] = self._modes(modes, decay[start:end], log_a[:end - start], targets[start:end])
                modes, start = out[end - 1], end
        return self.ambient + out @ self._v.T

    @staticmethod
    def _modes(modes: np.ndarray, decay: np.ndarray, log_a: np.ndarray, targets: np.ndarray) -> np.ndarray:
        if len(decay) == 1:             # one step, however long: the plain recurrence
            a = np.exp(decay[0])
            return (targets[0] + a * (modes - targets[0]))[None]
        a = np.exp(log_a)
        return a * (modes + np.cumsum(-np.expm1(decay) * targets / a, axis=0))


def limit_powers(thermal: Thermal, shares=None) -> dict[str, float]:
    """The power at which each die reaches its limit at steady state: heated alone (`shares` None), or, with
    `shares` (one per node, summing to 1), the package power, split in those shares, at which it does. HBFSim's
    §6.3 sentence (paper 001, line 136) reads either way: three single-die sweeps, or one sweep of a package
    power shared by the dies."""
    require(shares is None or (len(shares) == len(NODES) and min(shares) >= 0 and math.isclose(sum(shares), 1.0)),
            f"limit powers: shares must be {len(NODES)} non-negative fractions summing to 1")
    at_limit = {}
    for node, name in enumerate(NODES):
        power = np.eye(len(NODES))[node] if shares is None else np.asarray(shares, dtype=float)
        rise = thermal.steady(power)[node] - thermal.ambient
        at_limit[name] = (thermal.rc.limits_c[node] - thermal.ambient) / rise
    return at_limit


STATES = ("normal", "light", "severe", "shutdown")


@dataclass(frozen=True)
class ThrottlePolicy:
    """The open HBFSim's defaults (issue 14): enter Light / Severe / Shutdown at 80 / 90 / 100 C, leave Severe
    at <= 80 C and Light at <= 78 C; service 100 / 90 / 0 / 0 %. Shutdown clears like Severe (assumption)."""
    enter_c: tuple[float, float, float] = (80.0, 90.0, 100.0)
    leave_light_c: float = 78.0
    leave_severe_c: float = 80.0
    service: tuple[float, float, float, float] = (1.0, 0.9, 0.0, 0.0)


@dataclass
class Throttle:
    policy: ThrottlePolicy = field(default_factory=ThrottlePolicy)
    state: int = 0

    def update(self, temp_c: float) -> int:
        p = self.policy
        entered = sum(temp_c >= t for t in p.enter_c)
        if entered > self.state:
            self.state = entered
        elif self.state >= 2 and temp_c <= p.leave_severe_c:
            self.state = 0 if temp_c <= p.leave_light_c else 1
        elif self.state == 1 and temp_c <= p.leave_light_c:
            self.state = 0
        return self.state

    def first_change(self, temp_c: np.ndarray) -> int:
        """The index of the first of these successive temperatures at which `update` would leave the present
        state (len(temp_c) if none does)."""
        p, state = self.policy, self.state
        leaves = temp_c >= p.enter_c[state] if state < len(p.enter_c) else np.zeros(len(temp_c), dtype=bool)
        if state >= 2:
            leaves |= temp_c <= p.leave_severe_c
        elif state == 1:
            leaves |= temp_c <= p.leave_light_c
        return int(np.argmax(leaves)) if leaves.any() else len(temp_c)

    @property
    def service(self) -> float:
        return self.policy.service[self.state]


def first_order_step(r: float, c: float, power: float, ambient: float, t: float) -> float:
    """Closed-form temperature of one RC node under a power step from ambient."""
    return ambient + power * r * (1 - math.exp(-t / (r * c)))
