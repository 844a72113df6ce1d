"""DuoPD's HBM sharing between GPU and PNM, taken from the MMU arbiter's verified figures (paper §4.3).

The MMU bench measured, for each policy, at requested loads of 0.25/0.5/1.0 requests per cycle per source:
the load each source actually offered, the share of the request slots it obtained and its median wait.
Here those points are the whole model. What is interpolated is the fraction of its offered load each source
is served (share / actually offered): bilinearly between the measured points, held constant beyond them,
and 1 for a source whose co-runner offers nothing (it has the memory to itself). A source is granted its
offered load times that fraction. Nothing is fitted.

The servers speak in fractions of the stack's bandwidth, the measurement in requests per MC cycle per
arbitration port; `MemoryController.requests_per_cycle` converts one into the other (with the paper's
numbers 100 % of a 2 TB/s stack is 0.977 requests per cycle on each of 64 ports).
"""
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, cached_property

import numpy as np

from .errors import ConfigError
from .hardware import Hardware
from .memo import Memo
from basedie.verified import VerifiedBlocks

POLICIES = {"prefill-first": "prefill_first", "decode-first": "decode_first", "mixed": "mixed"}
SOURCES = ("gpu", "pnm")


def _bilinear(xs: tuple[float, ...], ys: tuple[float, ...], grid: np.ndarray, x, y):
    """Bilinear interpolation of grid[xs index, ys index], clamped to the axes; x and y may be arrays (a block
    of iterations). Scalars take a plain-Python path: it runs for every iteration that shares a stack."""
    if not isinstance(x, np.ndarray) and not isinstance(y, np.ndarray):
        x, y = min(max(float(x), xs[0]), xs[-1]), min(max(float(y), ys[0]), ys[-1])
        i = min(bisect_right(xs, x) - 1, len(xs) - 2)
        j = min(bisect_right(ys, y) - 1, len(ys) - 2)
        u = (x - xs[i]) / (xs[i + 1] - xs[i])
        v = (y - ys[j]) / (ys[j + 1] - ys[j])
        g = grid.item
        return ((1 - u) * ((1 - v) * g(i, j) + v * g(i, j + 1)) + u * ((1 - v) * g(i + 1, j) + v * g(i + 1, j + 1)))
    # A block's loads: one axis is usually a scalar (the co-runner's load), located once in plain Python; the
    # elementwise arithmetic is the scalar path's, so each element equals what the scalar path gives.
    i, u = _cell(xs, x)
    j, v = _cell(ys, y)
    return ((1 - u) * ((1 - v) * grid[i, j] + v * grid[i, j + 1])
            + u * ((1 - v) * grid[i + 1, j] + v * grid[i + 1, j + 1]))


def _cell(axis: tuple[float, ...], value):
    """The cell of `axis` holding `value` (clamped to the axis) and the fraction of the way across it: scalars in
    plain Python, arrays elementwise."""
    if not isinstance(value, np.ndarray):
        value = min(max(float(value), axis[0]), axis[-1])
        k = min(bisect_right(axis, value) - 1, len(axis) - 2)
        return k, (value - axis[k]) / (axis[k + 1] - axis[k])
    points = _axis(axis)
    # np.minimum/np.maximum rather than np.clip: the same values, without np.clip's overhead on short blocks.
    value = np.minimum(np.maximum(value, points[0]), points[-1])
    k = np.minimum(np.maximum(np.searchsorted(points, value, side="right") - 1, 0), len(points) - 2)
    low = points[k]
    return k, (value - low) / (points[k + 1] - low)


@cache
def _axis(values: tuple[float, ...]) -> np.ndarray:
    return np.asarray(values)


def _clip01(value):
    return np.minimum(np.maximum(value, 0.0), 1.0) if isinstance(value, np.ndarray) else min(max(float(value), 0.0), 1.0)


@dataclass(frozen=True)
class MMUArbitration:
    """A `Sharing` for one HBM stack whose users are named "gpu" and "pnm"."""
    policy: str
    full_rate: float                     # requests per cycle per port that move 100 % of the stack's bandwidth
    loads: tuple[float, ...]             # the requested loads of the measurement, ascending
    served_grid: dict[str, np.ndarray]   # source → fraction served, grid[gpu load index, pnm load index];
                                         # the co-runner's axis starts with an extra 0 (alone: 1.0)
    waits_p50: dict[str, np.ndarray]     # cycles, grid over (0, *loads) × (0, *loads)
    latency_cycles: dict[str, int]       # request to memory, unloaded
    clock_hz: float                      # the MMU's design clock (`design_clock_hz`, recorded with the entry)

    @classmethod
    def from_verified(cls, table: VerifiedBlocks, policy: str, hardware: Hardware) -> "MMUArbitration":
        if policy not in POLICIES:
            raise ConfigError(f"unknown MMU policy {policy!r}; choose one of {', '.join(POLICIES)}")
        try:
            entry = table.entry("mmu", out_of_order=False)
        except KeyError as error:
            raise ConfigError(str(error).strip('"')) from None
        if "design_clock_hz" not in entry.params:
            raise ConfigError("the verified mmu entry records no design clock; re-measure it with `basedie verify mmu`")
        points = [p for p in entry.figures["arbitration"] if p["policy"] == POLICIES[policy]]
        loads = sorted({p["gpu_offered"] for p in points} | {p["pnm_offered"] for p in points})
        n = len(loads)
        served = {"gpu": np.ones((n, n + 1)), "pnm": np.ones((n + 1, n))}
        waits = {s: np.zeros((n + 1, n + 1)) for s in SOURCES}
        for p in points:
            i, j = loads.index(p["gpu_offered"]), loads.index(p["pnm_offered"])
            served["gpu"][i, j + 1] = p["gpu_share"] / p["gpu_offered_actual"]
            served["pnm"][i + 1, j] = p["pnm_share"] / p["pnm_offered_actual"]
            for s in SOURCES:
                waits[s][i + 1, j + 1] = p[f"{s}_wait_p50"]
        latency = {s: int(entry.figures[f"latency_cycles_{s}"]) for s in SOURCES}
        clock_hz = float(entry.params["design_clock_hz"])
        return cls(policy, hardware.mc.requests_per_cycle(hardware.gpu.stack.bandwidth, clock_hz), tuple(loads),
                   served, waits, latency, clock_hz)

    @cached_property
    def _with_zero(self) -> tuple[float, ...]:
        """The measured loads after 0 (a source alone): the co-runner's axis of `served_grid`, both of `waits_p50`."""
        return (0.0, *self.loads)

    def _axes(self, source: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
        return (self.loads, self._with_zero) if source == "gpu" else (self._with_zero, self.loads)

    def served(self, source: str, gpu_rate, pnm_rate):
        """The fraction of its requests `source` is served at these request rates (the measured grid's units)."""
        return _bilinear(*self._axes(source), self.served_grid[source], gpu_rate, pnm_rate)

    def wait_cycles(self, source: str, gpu_rate, pnm_rate):
        """The median wait of `source` at these request rates."""
        return _bilinear(self._with_zero, self._with_zero, self.waits_p50[source], gpu_rate, pnm_rate)

    def grant(self, offered: Mapping[str, float | np.ndarray]) -> dict[str, float | np.ndarray]:
        return {s: self.granted(s, offered) for s in SOURCES}

    @cached_property
    def _memo(self) -> Memo:
        """Scalar lookups by (what, source, gpu load, pnm load): the grids never change, so those are all they
        depend on."""
        return Memo()

    def _scalar(self, what: str, source: str, offered: Mapping[str, float | np.ndarray], compute):
        """`compute(source, gpu load, pnm load)`, memoised when both loads are scalars. A block's loads that are the
        same at every iteration (a memory-bound operator offers 1.0 throughout) are looked up once and broadcast:
        the array arithmetic is elementwise the scalar one, so every element is what the array would have given."""
        gpu, pnm = offered.get("gpu", 0.0), offered.get("pnm", 0.0)
        if not isinstance(gpu, np.ndarray) and not isinstance(pnm, np.ndarray):
            return self._memo((what, source, gpu, pnm), compute, source, gpu, pnm)
        blocks = [v for v in (gpu, pnm) if isinstance(v, np.ndarray)]
        if not all(v.size and v.min() == v.max() for v in blocks):
            return compute(source, gpu, pnm)
        shape = np.broadcast_shapes(*(v.shape for v in blocks))
        gpu, pnm = (float(v.flat[0]) if isinstance(v, np.ndarray) else v for v in (gpu, pnm))
        return np.full(shape, self._memo((what, source, gpu, pnm), compute, source, gpu, pnm))

    def granted(self, source: str, offered: Mapping[str, float | np.ndarray]) -> float | np.ndarray:
        """`grant(offered)[source]`, without interpolating the other source's grid."""
        return self._scalar("granted", source, offered, self._granted)

    def _granted(self, source: str, gpu, pnm) -> float | np.ndarray:
        gpu, pnm = _clip01(gpu), _clip01(pnm)
        return (gpu if source == "gpu" else pnm) * self.served(source, gpu * self.full_rate, pnm * self.full_rate)

    def access_latency_s(self, source: str, offered: Mapping[str, float | np.ndarray]) -> float | np.ndarray:
        """Unloaded MMU latency plus the median wait at these offered fractions (arrays: one per iteration)."""
        return self._scalar("latency", source, offered, self._access_latency_s)

    def _access_latency_s(self, source: str, gpu, pnm) -> float | np.ndarray:
        gpu, pnm = _clip01(gpu), _clip01(pnm)
        return (self.latency_cycles[source] + self.wait_cycles(source, gpu * self.full_rate, pnm * self.full_rate)) \
            / self.clock_hz
