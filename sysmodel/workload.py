"""Workloads: a fixed batch of identical requests (throughput studies) or Poisson arrivals with Gaussian
lengths (latency studies, paper §6.3). Seeded: the same arguments give the same requests."""
from dataclasses import dataclass

import numpy as np

from .engine import Request
from .errors import require

# Spread of the Poisson workload's lengths. The paper says only that lengths "follow a Gaussian distribution"
# (§6.3), not how wide; 0.1 of the mean is our choice, an option (`length_cv`, `--length-cv`), not a measurement.
DEFAULT_LENGTH_CV = 0.1


@dataclass(frozen=True)
class FixedBatch:
    """`requests` requests of the same lengths, all arriving at time 0."""
    requests: int
    input_len: int
    output_len: int

    def __post_init__(self) -> None:
        require(self.requests >= 1, f"workload: requests must be >= 1, got {self.requests}")
        require(self.input_len >= 1, f"workload: input length must be >= 1, got {self.input_len}")
        require(self.output_len >= 1, f"workload: output length must be >= 1, got {self.output_len}")

    def generate(self) -> list[Request]:
        return [Request(i, 0.0, self.input_len, self.output_len) for i in range(self.requests)]


@dataclass(frozen=True)
class PoissonArrivals:
    """Exponential inter-arrival times at `qps`; input and output lengths drawn from normal distributions
    (mean, `length_cv` × mean), rounded and clipped to at least one token."""
    qps: float
    requests: int
    input_len: int
    output_len: int
    length_cv: float = DEFAULT_LENGTH_CV
    seed: int = 0

    def __post_init__(self) -> None:
        require(self.qps > 0, f"workload: qps must be > 0, got {self.qps}")
        require(self.qps < float("inf"), f"workload: qps must be finite, got {self.qps}")
        require(self.seed >= 0, f"workload: seed must be >= 0, got {self.seed}")
        require(self.requests >= 1, f"workload: requests must be >= 1, got {self.requests}")
        require(self.input_len >= 1, f"workload: input length must be >= 1, got {self.input_len}")
        require(self.output_len >= 1, f"workload: output length must be >= 1, got {self.output_len}")
        require(self.length_cv >= 0, f"workload: length_cv must be >= 0, got {self.length_cv}")

    def generate(self) -> list[Request]:
        rng = np.random.default_rng(self.seed)
        arrivals = np.cumsum(rng.exponential(1.0 / self.qps, self.requests))
        inputs = self._lengths(rng, self.input_len)
        outputs = self._lengths(rng, self.output_len)
        return [Request(i, float(t), int(n), int(m)) for i, (t, n, m) in enumerate(zip(arrivals, inputs, outputs))]

    def _lengths(self, rng: np.random.Generator, mean: int) -> np.ndarray:
        return np.maximum(1, np.rint(rng.normal(mean, self.length_cv * mean, self.requests))).astype(int)
