"""MoE routing: which experts each token picks, from a seeded model with one documented skew parameter.

Expert popularity follows a Zipf law over a per-layer random ranking: weight of the r-th most popular
expert ∝ (r + 1)^-skew (skew 0: uniform routing). A token picks `top_k` distinct experts with probability
proportional to the weights (Gumbel top-k, i.e. sampling without replacement). Requests in one batch that
pick the same expert fetch it once: the demand is the number of distinct experts per layer.
"""
from dataclasses import dataclass

import numpy as np

from ..errors import require


@dataclass(frozen=True)
class RoutingModel:
    experts: int
    top_k: int
    skew: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        require(1 <= self.top_k <= self.experts, f"routing: top_k must be in 1..{self.experts}, got {self.top_k}")
        require(self.skew >= 0, f"routing skew must be >= 0, got {self.skew}")


def unique_per_layer(choices: np.ndarray) -> np.ndarray:
    """Distinct experts per layer of `choices` (layers x tokens x top_k expert ids): the deduplicated demand."""
    layers = choices.shape[0]
    seen = np.zeros((layers, int(choices.max()) + 1), dtype=bool)
    seen[np.arange(layers)[:, None], choices.reshape(layers, -1)] = True
    return seen.sum(axis=1)


class Router:
    """Draws routing for `layers` layers. `choices(tokens)` samples every token's experts exactly;
    `touched(tokens)` draws which experts a batch touches from each expert's inclusion probability (exact
    per-expert marginals, much cheaper for the thousands of tokens of a prefill chunk)."""

    def __init__(self, model: RoutingModel, layers: int, estimate_tokens: int = 20000) -> None:
        self.model, self.layers = model, layers
        self.rng = np.random.default_rng(model.seed)
        weights = (np.arange(model.experts) + 1.0) ** -model.skew
        self.ranking = np.argsort(self.rng.random((layers, model.experts)), axis=1)   # rank -> expert
        self.log_weights = np.log(weights / weights.sum())
        if model.skew == 0:
            by_rank = np.full(model.experts, model.top_k / model.experts)
        else:
            picks = self._ranks(estimate_tokens)
            by_rank = np.bincount(picks.ravel(), minlength=model.experts) / estimate_tokens
        self._touch_probability: dict[tuple, np.ndarray] = {}
        self.inclusion = np.empty((layers, model.experts))
        np.put_along_axis(self.inclusion, self.ranking, np.broadcast_to(by_rank, (layers, model.experts)), axis=1)

    def _ranks(self, tokens: int) -> np.ndarray:
        keys = self.log_weights + self.rng.gumbel(size=(tokens, self.model.experts))
        return np.argpartition(-keys, self.model.top_k - 1, axis=1)[:, :self.model.top_k]

    def choices(self, tokens: int) -> np.ndarray:
        """layers x tokens x top_k expert ids."""
        ranks = np.stack([self._ranks(tokens) for _ in range(self.layers)])
        return np.take_along_axis(self.ranking[:, None, :], ranks, axis=2)

    def touched(self, tokens: int, experts: slice = slice(None)) -> np.ndarray:
        """layers x experts: which (of the `experts` slice) at least one of `tokens` tokens picked."""
        key = (tokens, experts.start, experts.stop)
        if key not in self._touch_probability:
            self._touch_probability[key] = 1 - (1 - self.inclusion[:, experts]) ** tokens
        probability = self._touch_probability[key]
        return self.rng.random(probability.shape) < probability

    def expected_unique(self, tokens: int) -> float:
        """Expected distinct experts per layer for a batch of `tokens` tokens."""
        return float((1 - (1 - self.inclusion) ** tokens).sum(axis=1).mean())
