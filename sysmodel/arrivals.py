"""Synthetic arrivals with a chosen burstiness and a length distribution per field (`--arrival-cv`,
`--input-dist`, `--output-dist`, `--input-range`, `--output-range`).

Inter-arrival times are Gamma-distributed with mean 1/qps and coefficient of variation `arrival_cv` (1 is
Poisson; above 1 burstier, below 1 more regular). Each length is drawn from its own distribution with the
given mean and coefficient of variation, rounded, and clipped to [low, high]."""
import math
from dataclasses import dataclass

import numpy as np

from .engine import Request
from .errors import require

KINDS = ("fixed", "normal", "lognormal", "uniform", "exponential")


@dataclass(frozen=True)
class Lengths:
    mean: int
    kind: str = "normal"
    cv: float = 0.1
    low: int = 1
    high: int | None = None

    def __post_init__(self) -> None:
        require(self.kind in KINDS, f"workload: length distribution {self.kind!r} is not one of {', '.join(KINDS)}")
        require(self.mean >= 1, f"workload: mean length must be >= 1, got {self.mean}")
        require(math.isfinite(self.cv) and self.cv >= 0, f"workload: length cv must be >= 0, got {self.cv}")
        require(self.low >= 1 and (self.high is None or self.high >= self.low),
                f"workload: length range must have 1 <= low <= high, got {self.low}..{self.high}")
        require(self.kind != "uniform" or self.cv <= 1 / math.sqrt(3),
                f"workload: a uniform length distribution has cv <= 0.577, got {self.cv}")

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        mean, cv = float(self.mean), self.cv
        if self.kind == "fixed":
            values = np.full(count, mean)
        elif self.kind == "normal":
            values = rng.normal(mean, cv * mean, count)
        elif self.kind == "lognormal":
            sigma2 = math.log1p(cv * cv)             # a lognormal with this mean and cv
            values = rng.lognormal(math.log(mean) - sigma2 / 2, math.sqrt(sigma2), count)
        elif self.kind == "uniform":
            half = math.sqrt(3) * cv * mean          # the half-width that gives this cv
            values = rng.uniform(mean - half, mean + half, count)
        else:
            values = rng.exponential(mean, count)
        return np.clip(np.rint(values), self.low, self.high if self.high is not None else np.inf).astype(int)


@dataclass(frozen=True)
class GammaArrivals:
    qps: float
    requests: int
    input: Lengths
    output: Lengths
    arrival_cv: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        require(math.isfinite(self.qps) and self.qps > 0, f"workload: qps must be > 0 and finite, got {self.qps}")
        require(math.isfinite(self.arrival_cv) and self.arrival_cv > 0,
                f"workload: arrival cv must be > 0, got {self.arrival_cv}")
        require(self.requests >= 1, f"workload: requests must be >= 1, got {self.requests}")
        require(self.seed >= 0, f"workload: seed must be >= 0, got {self.seed}")

    @property
    def input_len(self) -> int:
        return self.input.mean

    @property
    def output_len(self) -> int:
        return self.output.mean

    def generate(self) -> list[Request]:
        rng = np.random.default_rng(self.seed)
        shape = 1 / self.arrival_cv ** 2
        arrivals = np.cumsum(rng.gamma(shape, 1 / (self.qps * shape), self.requests))
        inputs, outputs = self.input.draw(rng, self.requests), self.output.draw(rng, self.requests)
        return [Request(i, float(t), int(n), int(m)) for i, (t, n, m) in enumerate(zip(arrivals, inputs, outputs))]
