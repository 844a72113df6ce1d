"""Performance models: how long one operator, and one all-reduce, take on a GPU (`--perf-model`).

- `roofline`: each operator takes the longer of its FLOPs at peak and its bytes at peak bandwidth; an
  all-reduce is its ring traffic over the link. The optimistic bound.
- `measured`: per-kernel latencies measured on real GPUs (Vidur's public profiles, `data/profiles/`, see its
  README): GEMMs, norms, rotary embedding, activation and residual adds by token count, shape and tensor
  parallelism, and NCCL all-reduce by size and GPU count. Only for the GPUs profiled (A100-SXM4-80GB,
  H100-SXM5-80GB).
- `roofline-efficiency`: for any GPU (the paper's GB300 with HBM4, a B200, ...): the roofline of that GPU
  divided by the achieved efficiency (roofline time / measured time) that the nearest profiled GPU reaches on
  the nearest profiled kernel shape; an all-reduce is the profiled latency term plus ring bytes over the link.

Both profile-based models price a kernel as `roofline(this GPU) / efficiency(profile)`. On the profiled GPU
and a profiled shape that is the measured latency itself; elsewhere it carries the measured efficiency (tile
quantization at small token counts, launch floors, achieved bandwidth) over to the new shape or GPU. Vidur's
attention profiles are stored in Git LFS and were not obtainable: attention runs at the best compute and
bandwidth efficiency any profiled GEMM reached, and never below the shortest measured kernel. No
per-iteration CPU overhead is charged (no public profile was obtained). Nothing is fitted to a result.

The roofline's all-reduce (`--allreduce`) is its ring bytes over the link (`bandwidth`, the default), NCCL's
α–β cost (`alpha-beta`: a base latency and one per ring step, plus the ring bytes), or NCCL's choice between
that ring and NVLink SHARP (`nvls`: one latency, the buffer once each way; on links without SHARP, the ring). Any model
can overlap the tensor-parallel all-reduces with compute (`overlap`: a layer takes the longer of the two).
"""
import bisect
import csv
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Protocol

import numpy as np

from .errors import ConfigError
from .hardware import GPU, Link
from .llm import BYTES_PER_VALUE
from .operators import Op, Shard, ring_all_reduce_s
from .presets import GPU_PRESETS
from .registry import Registry

PROFILES = Path(__file__).parent / "data" / "profiles"
MS = 1e-3


def _larger(a, b):
    return np.maximum(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else max(a, b)


class PerfModel(Protocol):
    name: str

    def op_seconds(self, op: Op, tokens: int, shard: Shard, flop_rate: float, byte_rate: float) -> float: ...

    def layer_extra_seconds(self, tokens: int, shard: Shard, byte_rate: float) -> float:
        """Kernels of a layer that the operator list leaves out (rotary embedding, residual adds)."""

    def all_reduce_seconds(self, nbytes: float, calls: int, parties: int, link_bandwidth: float) -> float: ...

    overlap: bool          # all-reduces overlap the layer's compute: a layer takes the longer of the two


def layer_seconds(perf: PerfModel, compute_s, reduce_s):
    """One layer: its kernels and its all-reduces, one after the other or overlapped."""
    return _larger(compute_s, reduce_s) if perf.overlap else compute_s + reduce_s


# NCCL's cost model (src/graph/tuning.cc of NCCL 2.19–2.23, the version with NVLS): an all-reduce takes
# latency + bytes / algorithm bandwidth. Ring (protocol LL): baseLat 6.6 µs + 2 (n − 1) steps × hwLat (the
# link's `hop_latency_s`); NVLS (protocol Simple): baseLat 0 + hwLat NVLink 25 µs, and each GPU sends its
# buffer into the switch once and receives the reduced buffer once. NCCL runs the faster of the two.
RING_BASE_LATENCY_S = 6.6e-6
NVLS_LATENCY_S = 25e-6
ALL_REDUCE_MODELS = ("bandwidth", "alpha-beta", "nvls")


def _smaller(a, b):
    return np.minimum(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else min(a, b)


@dataclass(frozen=True)
class AlphaBeta:
    """An all-reduce over `link` as NCCL prices it: the α–β ring, or with `nvls` the faster of ring and NVLS."""
    link: Link
    nvls: bool = False

    def seconds(self, nbytes, parties: int, link_bandwidth: float):
        if parties <= 1:
            return 0.0
        ring = (RING_BASE_LATENCY_S + 2 * (parties - 1) * self.link.hop_latency_s
                + ring_all_reduce_s(nbytes, parties, link_bandwidth))
        return _smaller(ring, NVLS_LATENCY_S + nbytes / link_bandwidth) if self.nvls else ring


@dataclass(frozen=True)
class Roofline:
    name: str = "roofline"
    all_reduce: AlphaBeta | None = None     # None: ring bytes over the link, no latency
    overlap: bool = False

    def op_seconds(self, op: Op, tokens: int, shard: Shard, flop_rate: float, byte_rate: float) -> float:
        return _larger(op.flops / flop_rate, op.bytes / byte_rate)

    def layer_extra_seconds(self, tokens: int, shard: Shard, byte_rate: float) -> float:
        return 0.0

    def all_reduce_seconds(self, nbytes: float, calls: int, parties: int, link_bandwidth: float) -> float:
        if self.all_reduce is not None:
            return calls * self.all_reduce.seconds(nbytes, parties, link_bandwidth)
        return ring_all_reduce_s(calls * nbytes, parties, link_bandwidth)


ROOFLINE = Roofline()


class Curve:
    """Efficiency against token count for one kernel shape, interpolated in log(tokens), held at the ends."""

    def __init__(self, tokens: list[int], efficiency: list[float]) -> None:
        order = np.argsort(tokens)
        self.log_tokens = np.log(np.asarray(tokens, float)[order])
        self.efficiency = np.asarray(efficiency, float)[order]
        self._xs, self._ys = self.log_tokens.tolist(), self.efficiency.tolist()

    def __call__(self, tokens):
        if isinstance(tokens, (int, float, np.integer, np.floating)):
            # one point, as np.interp computes it, without numpy's per-call cost (the simulator's hot path)
            x, xs, ys = float(np.log(max(tokens, 1))), self._xs, self._ys
            if x <= xs[0]:
                return ys[0]
            if x >= xs[-1]:
                return ys[-1]
            i = bisect.bisect_right(xs, x)
            return (ys[i] - ys[i - 1]) / (xs[i] - xs[i - 1]) * (x - xs[i - 1]) + ys[i - 1]
        return np.interp(np.log(np.maximum(tokens, 1)), self.log_tokens, self.efficiency)


@dataclass(frozen=True)
class Profile:
    """One GPU's measured kernels, as efficiencies: `gemms[(K, N)]`, `vectors[kind][bytes per token]`."""
    name: str
    gpu: GPU
    gemms: dict[tuple[int, int], Curve]
    vectors: dict[str, dict[float, Curve]]
    all_reduce: dict[int, tuple[np.ndarray, np.ndarray]]     # GPUs → (sizes in bytes, seconds)
    floor_s: float                    # the shortest kernel measured
    best_flop_efficiency: float       # achieved / peak FLOP/s, best over the GEMMs
    best_byte_efficiency: float       # achieved / peak bytes/s, best over the GEMMs

    def gemm(self, k: float, n: float, tokens):
        """Efficiency of an m × K × N GEMM: the curve of the profiled shape nearest in log K, log N."""
        return self.gemms[_nearest_shape(self.name, round(k), round(n))](tokens)

    def vector(self, kind: str, bytes_per_token: float, tokens):
        return _nearest_vector(self.name, kind, bytes_per_token)(tokens)

    def all_reduce_latency_s(self, parties: int) -> float:
        """The measured time of the smallest all-reduce among the nearest GPU count profiled."""
        nearest = min(self.all_reduce, key=lambda p: abs(p - parties))
        return float(self.all_reduce[nearest][1][0])

    def all_reduce_s(self, nbytes, parties: int):
        """Interpolated in size between measurements, extrapolated along the last segment above them."""
        sizes, seconds = self.all_reduce[parties]
        slope = (seconds[-1] - seconds[-2]) / (sizes[-1] - sizes[-2])
        beyond = seconds[-1] + slope * (np.asarray(nbytes) - sizes[-1])
        inside = np.interp(nbytes, sizes, seconds)
        result = np.where(np.asarray(nbytes) > sizes[-1], beyond, inside)
        return result if isinstance(nbytes, np.ndarray) else float(result)


def _gemm_roofline(gpu: GPU, m: float, k: float, n: float) -> float:
    b = BYTES_PER_VALUE
    return max(2 * m * k * n / gpu.flops, (k * n + m * k + m * n) * b / gpu.memory.bandwidth)


def _vector_bytes(kind: str, row: dict) -> float:
    """Bytes per token a vector kernel of a profiled layer reads and writes (FP16)."""
    h, tp, heads, kv = int(row["n_embd"]), int(row["tp"]), int(row["n_head"]), int(row["n_kv_head"])
    head_dim, ffn = h // heads, int(row["n_expanded_embd"]) // tp
    per_token = {
        "layernorm": 2 * h,                                              # read, write
        "rope": 2 * (heads // tp + max(1, kv // tp)) * head_dim,          # q and k, read and write
        "act": (3 if row["gated_mlp"] == "True" else 2) * ffn,            # (gate, up) → out
        "add": 3 * h,                                                     # two inputs, one output
    }[kind]
    return per_token * BYTES_PER_VALUE


VECTOR_COLUMNS = {"layernorm": "input_layernorm_ms", "rope": "attn_rope_ms", "act": "mlp_act_ms", "add": "add_ms"}


@cache
def load_profile(name: str) -> Profile:
    """Read `vidur_<name>_mlp.csv` and `vidur_<name>_dgx_all_reduce.csv` (name: a100, h100)."""
    gpu = GPU_PRESETS[PROFILED_GPUS[name]]
    with open(PROFILES / f"vidur_{name}_mlp.csv", newline="") as stream:
        rows = list(csv.DictReader(stream))
    gemm_points: dict[tuple[int, int], tuple[list, list]] = {}
    vector_points: dict[str, dict[float, tuple[list, list]]] = {kind: {} for kind in VECTOR_COLUMNS}
    best_flops = best_bytes = 0.0
    floor = math.inf
    for row in rows:
        m, h, tp = int(row["num_tokens"]), int(row["n_embd"]), int(row["tp"])
        heads, kv, ffn = int(row["n_head"]), int(row["n_kv_head"]), int(row["n_expanded_embd"]) // tp
        head_dim = h // heads
        up = (2 if row["gated_mlp"] == "True" else 1) * ffn
        shapes = {"attn_pre_proj_ms": (h, (heads // tp + 2 * max(1, kv // tp)) * head_dim),
                  "attn_post_proj_ms": (heads // tp * head_dim, h), "mlp_up_proj_ms": (h, up),
                  "mlp_down_proj_ms": (ffn, h)}
        for column, (k, n) in shapes.items():
            seconds = float(row[column]) * MS
            floor = min(floor, seconds)
            tokens, efficiency = gemm_points.setdefault((k, n), ([], []))
            if m not in tokens:
                tokens.append(m)
                efficiency.append(_gemm_roofline(gpu, m, k, n) / seconds)
            best_flops = max(best_flops, 2 * m * k * n / seconds / gpu.flops)
            best_bytes = max(best_bytes, (k * n + m * k + m * n) * BYTES_PER_VALUE / seconds / gpu.memory.bandwidth)
        for kind, column in VECTOR_COLUMNS.items():
            per_token = _vector_bytes(kind, row)
            seconds = float(row[column]) * MS
            floor = min(floor, seconds)
            tokens, efficiency = vector_points[kind].setdefault(per_token, ([], []))
            if m not in tokens:
                tokens.append(m)
                efficiency.append(m * per_token / gpu.memory.bandwidth / seconds)
    with open(PROFILES / f"vidur_{name}_dgx_all_reduce.csv", newline="") as stream:
        reduce_rows = list(csv.DictReader(stream))
    all_reduce = {}
    for parties in sorted({int(r["num_workers"]) for r in reduce_rows}):
        points = sorted({int(r["size_bytes"]): float(r["median_ms"]) * MS
                         for r in reduce_rows if int(r["num_workers"]) == parties}.items())
        all_reduce[parties] = (np.array([p[0] for p in points], float), np.array([p[1] for p in points]))
    return Profile(name, gpu, {shape: Curve(*points) for shape, points in gemm_points.items()},
                   {kind: {b: Curve(*points) for b, points in table.items()} for kind, table in vector_points.items()},
                   all_reduce, floor, best_flops, best_bytes)


@cache
def _nearest_shape(profile: str, k: int, n: int) -> tuple[int, int]:
    shapes = load_profile(profile).gemms
    return min(shapes, key=lambda s: math.log(s[0] / k) ** 2 + math.log(s[1] / n) ** 2)


@cache
def _nearest_vector(profile: str, kind: str, bytes_per_token: float) -> Curve:
    """The curve of the profiled vector kernel of `kind` nearest in log(bytes per token)."""
    table = load_profile(profile).vectors[kind]
    return table[min(table, key=lambda b: abs(math.log(b / bytes_per_token)))]


# The profiles and the preset each was measured on (Vidur: DGX A100 80 GB and DGX H100).
PROFILED_GPUS = {"a100": "a100-sxm4-80gb", "h100": "h100-sxm5-80gb"}


@dataclass(frozen=True)
class Profiled:
    """`measured` (`exact`: this GPU was profiled, all-reduces from its table) or `roofline-efficiency`
    (the nearest profiled GPU's efficiencies; all-reduce = its latency term + ring bytes over this link)."""
    profile: Profile
    exact: bool
    name: str = field(default="measured")
    overlap: bool = False
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def op_seconds(self, op: Op, tokens: int, shard: Shard, flop_rate: float, byte_rate: float):
        if op.kind == "attention":
            p = self.profile
            seconds = _larger(op.flops / (flop_rate * p.best_flop_efficiency),
                              op.bytes / (byte_rate * p.best_byte_efficiency))
            return _larger(seconds, p.floor_s)
        larger = max
        if isinstance(op.flops, np.ndarray):
            kernels, larger = self._kernels(op, tokens, shard), _larger
        else:
            # The kernels of weights × activations and vector operators depend on the operator and its token
            # count alone: the same few recur in every iteration of a run, so each is interpolated once (the
            # simulator's hot path). The rates, which follow the bandwidth share iteration by iteration, are
            # no part of the key, so the memo holds one entry per operator shape, however long the run.
            # (Keyed by the model's identity, the model kept alive beside its entries: hashing an LLM costs more.)
            memo = self._memo.get(id(shard.model))
            if memo is None:
                memo = self._memo[id(shard.model)] = (shard.model, {})
            key = (op, tokens, shard.tp)
            kernels = memo[1].get(key)
            if kernels is None:
                kernels = memo[1][key] = self._kernels(op, tokens, shard)
        seconds = 0.0
        for flops, nbytes, efficiency in kernels:
            seconds += larger(flops / flop_rate, nbytes / byte_rate) / efficiency
        return seconds

    def _kernels(self, op: Op, tokens: int, shard: Shard) -> tuple:
        """The kernels `op` runs as (FLOPs, bytes, achieved efficiency): each takes its roofline time at the
        rates offered divided by its efficiency."""
        m, b, p = shard.model, BYTES_PER_VALUE, self.profile
        if op.kind == "vector":
            return ((0.0, op.bytes, p.vector("layernorm", 2 * m.hidden * b, tokens)),)
        if op.name == "mlp":     # a dense MLP: up (gate and up) projection, activation, down projection
            ffn = shard.ffn
            up = (m.mlp_matrices - 1) * ffn
            act = (m.mlp_matrices * ffn) * b
            return (*((2 * tokens * k * n, (k * n + tokens * (k + n)) * b, p.gemm(k, n, tokens))
                      for k, n in ((m.hidden, up), (ffn, m.hidden))),
                    (0.0, tokens * act, p.vector("act", act, tokens)))
        elements = op.weight_bytes / b
        if not isinstance(elements, np.ndarray) and elements == 0:
            return ((op.flops, op.bytes, 1.0),)
        rows = op.flops / (2 * elements)             # tokens each weight serves
        k, n = (elements / m.hidden, m.hidden) if op.name == "o_proj" else (m.hidden, elements / m.hidden)
        return ((op.flops, op.bytes, p.gemm(k, n, rows)),)

    def layer_extra_seconds(self, tokens: int, shard: Shard, byte_rate: float):
        m, b, p = shard.model, BYTES_PER_VALUE, self.profile
        rope = 2 * (shard.heads + shard.kv_heads) * m.head_dim * b
        add = 3 * m.hidden * b
        return (tokens * rope / byte_rate / p.vector("rope", rope, tokens)
                + 2 * tokens * add / byte_rate / p.vector("add", add, tokens))

    def all_reduce_seconds(self, nbytes: float, calls: int, parties: int, link_bandwidth: float):
        if parties <= 1:
            return 0.0
        if self.exact and parties in self.profile.all_reduce:
            return calls * self.profile.all_reduce_s(nbytes, parties)
        return calls * (self.profile.all_reduce_latency_s(parties)
                        + ring_all_reduce_s(nbytes, parties, link_bandwidth))


def _roofline(gpu: GPU, all_reduce: str, link: Link | None, overlap: bool) -> PerfModel:
    if all_reduce == "bandwidth":
        return Roofline(overlap=overlap) if overlap else ROOFLINE
    return Roofline(all_reduce=AlphaBeta(link, nvls=all_reduce == "nvls" and link.nvls), overlap=overlap)


def _profiled() -> dict[str, str]:
    """GPU name → the profile measured on it."""
    return {GPU_PRESETS[preset].name: profile for profile, preset in PROFILED_GPUS.items()}


def _measured(gpu: GPU, all_reduce: str, link: Link | None, overlap: bool) -> PerfModel:
    profiled = _profiled()
    if gpu.name not in profiled:
        raise ConfigError(f"no measured profile for {gpu.name} (measured: {', '.join(profiled)}); "
                          f"use --perf-model roofline-efficiency")
    return Profiled(load_profile(profiled[gpu.name]), exact=True, overlap=overlap)


def _roofline_efficiency(gpu: GPU, all_reduce: str, link: Link | None, overlap: bool) -> PerfModel:
    nearest = _profiled().get(gpu.name) or ("a100" if gpu.name.startswith("A100") else "h100")
    return Profiled(load_profile(nearest), exact=False, name="roofline-efficiency", overlap=overlap)


# A performance model is a factory (gpu, all-reduce model, link, overlap) -> PerfModel, registered by name.
PERF_MODELS: Registry[Callable[[GPU, str, Link | None, bool], PerfModel]] = Registry("performance model")
PERF_MODELS.register("roofline", _roofline, "each operator at the larger of its compute and memory time")
PERF_MODELS.register("measured", _measured, "interpolated public kernel profiles of the GPU (A100, H100)")
PERF_MODELS.register("roofline-efficiency", _roofline_efficiency,
                     "the roofline scaled by the nearest profiled GPU's achieved efficiencies")


def perf_model(name: str, gpu: GPU, all_reduce: str = "bandwidth", link: Link | None = None,
               overlap: bool = False) -> PerfModel:
    """The performance model `name` for `gpu` (measured only where that GPU was profiled), its all-reduces over
    `link` priced by `all_reduce` (roofline only: the profiles measured theirs) and overlapped with `overlap`."""
    if all_reduce not in ALL_REDUCE_MODELS:
        raise ConfigError(f"unknown all-reduce model {all_reduce!r}; choose one of {', '.join(ALL_REDUCE_MODELS)}")
    if all_reduce != "bandwidth" and name != "roofline":
        raise ConfigError(f"--allreduce {all_reduce} applies to --perf-model roofline; {name} takes its "
                          f"all-reduces from the measured profiles")
    return PERF_MODELS.lookup(name)(gpu, all_reduce, link, overlap)
