"""MoE routing: which experts each token picks, from a seeded model with one documented skew parameter.

Expert popularity follows a Zipf law over a per-layer random ranking: weight of the r-th most popular
expert ∝ (r + 1)^-skew (skew 0: uniform routing). A token picks `top_k` distinct experts with probability
proportional to the weights (Gumbel top-k, i.e. sampling without replacement). Requests in one batch that
pick the same expert fetch it once: the demand is the number of distinct experts per layer.

`TraceRouter` replays a routing-trace file instead (docs/design/hbf.md, "Routing traces"): JSON Lines, one token
per line, each line a list with one list per layer of the `top_k` distinct expert ids the token picked.
"""
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError, require


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
        probability = self._probability(tokens, experts)
        return self.rng.random(probability.shape) < probability

    def _probability(self, tokens: int, experts: slice) -> np.ndarray:
        key = (tokens, experts.start, experts.stop)
        if key not in self._touch_probability:
            self._touch_probability[key] = 1 - (1 - self.inclusion[:, experts]) ** tokens
        return self._touch_probability[key]

    def touched_block(self, tokens: np.ndarray, experts: slice = slice(None)) -> np.ndarray:
        """`touched` for consecutive batches (iterations x layers x experts); one draw when all are alike
        (the same random numbers as batch by batch)."""
        if len(tokens) and (tokens == tokens[0]).all():
            probability = self._probability(int(tokens[0]), experts)
            return self.rng.random((len(tokens), *probability.shape)) < probability
        return np.stack([self.touched(int(n), experts) for n in tokens]) if len(tokens) else \
            np.zeros((0, self.layers, len(range(self.model.experts)[experts])), dtype=bool)

    def expected_unique(self, tokens: int) -> float:
        """Expected distinct experts per layer for a batch of `tokens` tokens."""
        return float((1 - (1 - self.inclusion) ** tokens).sum(axis=1).mean())

    def state(self):
        return self.rng.bit_generator.state          # a fresh dict

    def restore(self, state) -> None:
        self.rng.bit_generator.state = state


def load_trace(path: str | Path, layers: int, experts: int, top_k: int) -> np.ndarray:
    """A routing-trace file as tokens x layers x experts booleans (which experts each token picked in each
    layer); any deviation from the format or from the model's shape is a ConfigError naming the line."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: routing trace cannot be read ({getattr(error, 'strerror', None) or error})") \
            from None
    tokens = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            token = json.loads(line)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{where}: malformed routing trace line ({error.msg})") from None
        require(isinstance(token, list) and len(token) == layers,
                f"{where}: a trace line lists the experts of each of the model's {layers} layers")
        picks = np.zeros((layers, experts), dtype=bool)
        for layer, ids in enumerate(token):
            require(isinstance(ids, list) and len(ids) == top_k and len(set(map(repr, ids))) == top_k
                    and all(isinstance(e, int) and not isinstance(e, bool) and 0 <= e < experts for e in ids),
                    f"{where}: layer {layer} must list {top_k} distinct expert ids in 0..{experts - 1}, got {ids!r}")
            picks[layer, ids] = True
        tokens.append(picks)
    require(bool(tokens), f"{path}: routing trace holds no token")
    return np.stack(tokens)


class TraceRouter:
    """Replays a trace (tokens x layers x experts): a batch of n tokens takes the trace's next n tokens,
    from where the previous batch stopped, wrapping around at the end (a trace shorter than a batch is
    replayed whole: fewer distinct experts than a longer trace of the same routing would give)."""

    def __init__(self, picks: np.ndarray) -> None:
        self.picks, self.cursor = picks, 0
        self.every = picks.any(axis=0)

    def touched(self, tokens: int, experts: slice = slice(None)) -> np.ndarray:
        count = len(self.picks)
        window = self.every if tokens >= count else \
            self.picks[(self.cursor + np.arange(tokens)) % count].any(axis=0)
        self.cursor = (self.cursor + tokens) % count
        return window[:, experts]

    def touched_block(self, tokens: np.ndarray, experts: slice = slice(None)) -> np.ndarray:
        return np.stack([self.touched(int(n), experts) for n in tokens]) if len(tokens) else \
            np.zeros((0, *self.every[:, experts].shape), dtype=bool)

    def state(self) -> int:
        return self.cursor

    def restore(self, state: int) -> None:
        self.cursor = state
