"""Issue 16's decode-layer proof: one transformer layer's decode step for a batch, written in today's ISA, with its
weights and KV cache streamed through the buffer from memory; and the FlashDecoding split of its attention over
two PNM runs, merged on one. The program comes in parts that each fit the instruction buffer (`start.pc` 0,
each ending in DONE, which drains like a BARRIER), run one after another on one PNM whose buffer keeps its
contents. The attention is `tb.pnm.decode`'s (its blocks, the new token's V, the division by l); the float64
mirror here is written from the layer's math, not from the ISA."""
from dataclasses import dataclass

import numpy as np

from rtl.pnm_controller.isa import Instruction, Opcode, act_func
from rtl.pnm_vector.ports import Op

from ..models import pnm_controller as control
from ..models import pnm as model
from ..models import pnm_vector as vector_model
from .decode import BARRIER, KeyBlock, Scratch, _vop, block_step, divide, new_value
from .rows import Rows

DONE = Instruction(Opcode.DONE.value)
EPS = 1e-5


@dataclass(frozen=True)
class Layer:
    """A decoder layer's shapes: `context` cached tokens (the decode token is token `context`), keys and values in
    blocks of `block` tokens (a multiple of the array's tile), the SiLU-gated MLP `ffn` wide."""
    hidden: int
    heads: int
    groups: int
    head_dim: int
    ffn: int
    context: int
    batch: int
    block: int

    @property
    def per_group(self) -> int:
        return self.heads // self.groups

    @property
    def blocks(self) -> int:
        """Blocks holding the cached tokens and the new one, the last one padded."""
        return -(-(self.context + 1) // self.block)


# The bench's size (lanes of 8 FP16, 4 KiB of buffer, 64 KiB of memory of which the first 4 KiB protected):
# the issue's structure (4 query heads in 2 GQA groups, batch, a context that is no multiple of the tile,
# RMSNorm, SiLU-gated MLP) at hidden 64 = 4 × 16; the ffn equal to hidden and batch 2 so that 48 KiB of weights and
# 8 KiB of KV cache (27 cached tokens and the new one in 2 blocks of 16, 4 padding) fit the 60 KiB of
# unprotected memory.
SMALL = Layer(hidden=64, heads=4, groups=2, head_dim=16, ffn=64, context=27, batch=2, block=16)
# The issue's shapes (golden model only): 1.15 MB of weights, 300 cached tokens in blocks of 64.
ISSUE = Layer(hidden=256, heads=4, groups=2, head_dim=64, ffn=512, context=300, batch=4, block=64)


@dataclass(frozen=True)
class Tensors:
    """The layer's inputs (FP32 activations and gains, FP16 weights and KV cache)."""
    x: np.ndarray        # batch × hidden FP32
    gains: tuple         # the two RMSNorms' gains, hidden FP32 each
    wq: np.ndarray       # heads·head_dim × hidden FP16
    wk: np.ndarray       # groups·head_dim × hidden
    wv: np.ndarray
    wo: np.ndarray       # hidden × heads·head_dim
    wg: np.ndarray       # ffn × hidden
    wu: np.ndarray
    wd: np.ndarray       # hidden × ffn
    keys: np.ndarray     # batch × groups × context × head_dim FP16
    values: np.ndarray


def tensors(rng: np.random.Generator, layer: Layer) -> Tensors:
    """Activations of RMS 1, weights N(0, 1/k) (so each projection keeps RMS about 1), keys and values N(0, 1)."""
    def weight(n: int, k: int) -> np.ndarray:
        return (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float16)

    lay = layer
    kv = (lay.batch, lay.groups, lay.context, lay.head_dim)
    return Tensors(x=rng.standard_normal((lay.batch, lay.hidden)).astype(np.float32),
                   gains=tuple((1 + 0.1 * rng.standard_normal(lay.hidden)).astype(np.float32) for _ in range(2)),
                   wq=weight(lay.heads * lay.head_dim, lay.hidden), wk=weight(lay.groups * lay.head_dim, lay.hidden),
                   wv=weight(lay.groups * lay.head_dim, lay.hidden), wo=weight(lay.hidden, lay.heads * lay.head_dim),
                   wg=weight(lay.ffn, lay.hidden), wu=weight(lay.ffn, lay.hidden), wd=weight(lay.hidden, lay.ffn),
                   keys=rng.standard_normal(kv).astype(np.float16), values=rng.standard_normal(kv).astype(np.float16))


U = 2.0 ** -11   # FP16's unit roundoff (nearest even)
SIGMAS = 6       # the bound in standard deviations of the rounding error (`mirror`)


@dataclass(frozen=True)
class Exact:
    """The float64 mirror's results, each with its bound (`mirror`)."""
    out: np.ndarray      # batch × hidden
    bound: np.ndarray
    key: np.ndarray      # the decode token's key and value, batch × groups·head_dim, before FP16
    value: np.ndarray
    kv_bound: tuple      # the key's and the value's bounds, the key's including its FP16 rounding


def mirror(t: Tensors, layer: Layer) -> Exact:
    """The layer in float64 from its definition: x + Wo·attention(RMSNorm(x)), then + the SiLU-gated MLP of the
    RMSNorm of that; attention per head over the cached keys and values and the decode token's own.

    And, per output, the bound on the program's error: its seven FP16 roundings (RMSNorm's output, the scaled
    queries, the new key, P of the cached keys, the attention output, the second RMSNorm's output, the gated
    product) are modelled as independent errors uniform in ±U·|value| (variance (U·value)²/3: the probabilistic
    rounding-error analysis of Higham and Mary, SIAM J. Sci. Comput. 2019), propagated to first order through
    each later stage (W²·var for a projection, the softmax's, RMSNorm's and SiLU's derivatives); the bound is
    SIGMAS = 6 standard deviations times 1.25. The quarter covers the FP32 roundings (≤ k·2⁻²⁴ of Σ|w||v| for a
    sum of k ≤ 512 terms: U/16 relative), the vector unit's exp, recip, rsqrt and SiLU (≤ 3 FP32 ulps,
    docs/pnm-vector.md) and second-order terms. (A worst-case |W|·|e| propagation gives 2·10⁴·U at `SMALL`: four
    projections in a row, each Σ_j|W_ij| ≈ 0.8·√k, make it vacuous.)"""
    lay, f = layer, lambda a: np.asarray(a, np.float64)  # noqa: E731
    group = np.arange(lay.heads) // lay.per_group

    def rounding(v):
        return (U * v) ** 2 / 3

    def rmsnorm(v, gains, var):
        """RMSNorm, and the variance of its output for input errors of variance var (dv_i → g_i·r·(dv_i −
        v_i·r²·mean(v·dv)))."""
        r = 1 / np.sqrt(np.mean(v ** 2, axis=-1, keepdims=True) + EPS)
        n = v.shape[-1]
        spread = v ** 2 * r ** 4 * np.sum(v ** 2 * var, -1, keepdims=True) / n ** 2
        return v * r * gains, (gains * r) ** 2 * (var + spread)

    def project(w, v, var):
        return v @ f(w).T, var @ (f(w) ** 2).T

    x = f(t.x)
    h, var_h = rmsnorm(x, f(t.gains[0]), 0)
    var_h = var_h + rounding(h)
    (q, var_q), (k, var_k), (v, var_v) = (project(w, h, var_h) for w in (t.wq, t.wk, t.wv))
    shape = (lay.batch, lay.heads, lay.head_dim)
    q, var_q = q.reshape(shape) / np.sqrt(lay.head_dim), var_q.reshape(shape) / lay.head_dim
    kv_bound = (1.25 * SIGMAS * np.sqrt(var_k) + U * np.abs(k), 1.25 * SIGMAS * np.sqrt(var_v))
    var_q, var_k = var_q + rounding(q), var_k + rounding(k)

    def with_new(cached, new):   # the cached tokens and the decode token's, per head
        return np.concatenate([cached, new.reshape(lay.batch, lay.groups, 1, lay.head_dim)], axis=2)[:, group]

    keys, values = with_new(f(t.keys), k), with_new(f(t.values), v)
    var_keys, var_values = with_new(0 * f(t.keys), var_k), with_new(0 * f(t.values), var_v)
    logits = np.einsum("bhd,bhtd->bht", q, keys)
    var_s = np.einsum("bhd,bhtd->bht", var_q, keys ** 2) + np.einsum("bhd,bhtd->bht", q ** 2, var_keys)
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    var_p = p ** 2 * (var_s + np.sum(p ** 2 * var_s, axis=-1, keepdims=True))
    var_p[..., :-1] += rounding(p[..., :-1])     # P of the cached keys in FP16; the decode token's stays FP32
    o = np.einsum("bht,bhtd->bhd", p, values).reshape(lay.batch, -1)
    var_o = (np.einsum("bht,bhtd->bhd", var_p, values ** 2) + np.einsum("bht,bhtd->bhd", p ** 2, var_values)).reshape(
        lay.batch, -1) + rounding(o)
    y, var_y = project(t.wo, o, var_o)
    x1 = x + y
    h2, var_h2 = rmsnorm(x1, f(t.gains[1]), var_y)
    var_h2 = var_h2 + rounding(h2)
    (gate, var_gate), (up, var_up) = project(t.wg, h2, var_h2), project(t.wu, h2, var_h2)
    sigmoid = 1 / (1 + np.exp(-gate))
    silu = gate * sigmoid
    a = silu * up
    var_a = (sigmoid * (1 + gate * (1 - sigmoid)) * up) ** 2 * var_gate + silu ** 2 * var_up + rounding(a)
    down, var_down = project(t.wd, a, var_a)
    # x1 and down are correlated: their bounds add.
    return Exact(x1 + down, 1.25 * SIGMAS * (np.sqrt(var_y) + np.sqrt(var_down)), k, v, kv_bound)


class Program:
    """A program being written: its instructions (`code`), buffer rows and memory (`rows`), and the machine it is
    for."""
    def __init__(self, shape: model.Shape, config: control.Config, put, address: int) -> None:
        assert shape.row_bytes == 4, "the attention's per-head scalars are addressed one FP32 per row"
        self.rows = Rows(put, shape.row_bytes, shape.tile_bytes, config.max_tensor_bytes, address)
        self.shape, self.config, self.code = shape, config, []

    def at(self, row: int, nbytes: int) -> int:
        """The row `nbytes` into the operand at `row`."""
        assert nbytes % self.shape.row_bytes == 0
        return row + nbytes // self.shape.row_bytes

    def operand(self, values: np.ndarray) -> int:
        row, loads = self.rows.operand(values)
        self.code += loads
        return row

    def gemv(self, d: int, a: int, weights: int, n: int, k: int, batch: int) -> None:
        """d = a·Wᵀ for `batch` FP16 vectors a of k and the n × k FP16 weights at memory address `weights`,
        streamed through the free buffer in chunks of rows; all vectors in one GEMV (one per lane) when the
        weights fit at once, else one GEMV per vector and chunk (d's rows of one vector are contiguous)."""
        mark = self.rows.next_row
        free = (self.config.buffer_rows - mark) * self.shape.row_bytes
        chunk = min(n, free // (2 * k))
        assert chunk > 0, "no room for one chunk of weight rows"
        area = self.rows.take(2 * k * chunk)
        for first in range(0, n, chunk):
            rows = min(chunk, n - first)
            self.code += [*self.rows.load(area, weights + 2 * k * first, 2 * k * rows), BARRIER]
            if rows == n and batch <= self.shape.lanes:
                self.code.append(Instruction(Opcode.GEMV.value, d=d, a=a, b=area, n=n, k=k, m=batch))
            else:
                self.code += [Instruction(Opcode.GEMV.value, d=self.at(d, 4 * (j * n + first)), a=self.at(a, 2 * j * k),
                                          b=area, n=rows, k=k, m=1) for j in range(batch)]
            self.code.append(BARRIER)
        self.rows.release(mark)

    def norm16(self, x: int, gains: np.ndarray, constants: int, batch: int, hidden: int) -> int:
        """RMSNorm of the batch's x, narrowed to FP16 for the array: the FP16 rows (the FP32 ones are freed)."""
        out = self.rows.take(2 * batch * hidden)
        mark = self.rows.next_row
        gains_row, normed = self.operand(gains), self.rows.take(4 * batch * hidden)
        self.code += [BARRIER, Instruction(Opcode.NORM.value, d=normed, a=x, b=gains_row, c=constants, n=hidden,
                                           m=batch), BARRIER,
                      _vop(Op.MAX, out, normed, normed, batch * hidden, narrow=True), BARRIER]
        self.rows.release(mark)
        return out

    def parts(self) -> list[list[Instruction]]:
        """The program cut into pieces of at most `depth` − 1 instructions, each ending in DONE."""
        size = self.config.depth - 1
        return [[*self.code[k:k + size], DONE] for k in range(0, len(self.code), size)]


@dataclass(frozen=True)
class Cache:
    """Where a layer's KV cache is in memory: per (batch, group), K token-major over `blocks · block` tokens (the
    new token's row and the padding zero), V transposed block by block; the mask of the last block's padding and
    the empty online-softmax state."""
    keys: dict
    values_t: dict
    mask: int
    empty: int


def read_cache(memory: np.ndarray, cache: Cache, layer: Layer) -> tuple[np.ndarray, np.ndarray]:
    """The keys and values in `memory`, batch × groups × tokens (padded) × head_dim FP16 (V read back from its
    transposed blocks)."""
    lay, tokens = layer, layer.blocks * layer.block
    size = 2 * tokens * lay.head_dim
    keys, values = (np.stack([np.stack([memory[where[b, g]:where[b, g] + size].view(np.float16) for g in range(lay.groups)])
                              for b in range(lay.batch)]) for where in (cache.keys, cache.values_t))
    values = values.reshape(lay.batch, lay.groups, lay.blocks, lay.head_dim, lay.block).transpose(0, 1, 2, 4, 3)
    return keys.reshape(lay.batch, lay.groups, tokens, -1), values.reshape(lay.batch, lay.groups, tokens, -1)


def place_cache(p: Program, t: Tensors, layer: Layer) -> Cache:
    lay, tokens = layer, layer.blocks * layer.block
    keys, values_t = {}, {}
    for b in range(lay.batch):
        for g in range(lay.groups):
            k = np.zeros((tokens, lay.head_dim), np.float16)
            v = np.zeros((tokens, lay.head_dim), np.float16)
            k[:lay.context], v[:lay.context] = t.keys[b, g], t.values[b, g]
            keys[b, g] = p.rows.place(k)
            values_t[b, g] = p.rows.place(np.ascontiguousarray(
                v.reshape(lay.blocks, lay.block, lay.head_dim).transpose(0, 2, 1)))
    last = np.arange((lay.blocks - 1) * lay.block, tokens)
    mask = np.tile(np.where(last <= lay.context, 0, -np.inf).astype(np.float32), lay.per_group)
    empty = np.tile(np.array([-np.inf, 0], np.float32), lay.per_group)
    return Cache(keys, values_t, p.rows.place(mask), p.rows.place(empty))


def group_attention(p: Program, layer: Layer, cache: Cache, b: int, g: int, queries: int, out: int,
                    blocks: range, new: tuple[int, int] | None) -> int:
    """One GQA group's attention over `blocks` of its cache, o unnormalised into `out` (per_group × head_dim FP32),
    the state (m, l per head) in fresh rows, returned. `new` = the rows of the decode token's key and value (FP32):
    its key narrowed into its row of the last block, its value as its own one-key block. Rows taken here beyond the
    state are freed."""
    lay, rb = layer, p.shape.row_bytes
    heads, dim, size = lay.per_group, lay.head_dim, lay.block
    state = p.rows.take(8 * heads)
    mark = p.rows.next_row
    keys, values_t = p.rows.take(2 * size * dim), p.rows.take(2 * size * dim)
    mask = p.rows.take(4 * heads * size)
    s = Scratch(state, *(p.rows.take(n) for n in (4 * heads * size, 2 * heads * size, 4 * heads)), out,
                *(p.rows.take(4 * heads * dim) for _ in range(2)))
    p.code += [*p.rows.load(state, cache.empty, 8 * heads), *p.rows.load(mask, cache.mask, 4 * heads * size)]
    for i in blocks:
        last = i == lay.blocks - 1
        p.code += [*p.rows.load(keys, cache.keys[b, g] + 2 * size * dim * i, 2 * size * dim),
                   *p.rows.load(values_t, cache.values_t[b, g] + 2 * size * dim * i, 2 * size * dim), BARRIER]
        if new and last:   # the decode token's key into its row of the block
            row = p.at(keys, 2 * dim * (lay.context - i * size))
            p.code += [_vop(Op.MAX, row, new[0], new[0], dim, narrow=True), BARRIER]
        p.code += block_step(KeyBlock(queries, keys, values_t, mask if last else 0, size), s, heads, dim,
                             first=i == blocks[0])
    if new:
        p.code += new_value(s.scores + 4 * (lay.context - (lay.blocks - 1) * size) // rb, 4 * size // rb, new[1], s,
                            heads, dim)
    p.rows.release(mark)
    return state


def append_token(p: Program, layer: Layer, cache: Cache, pair: tuple, key: int, value: int, identity: int) -> None:
    """The decode token into the cache in memory (docs/pnm.md: the strided store's alternative): its key
    narrowed and STOREd as row `context` of K; its value as column `context` of the last transposed V block: the
    block LOADed, widened to FP32 exactly by GEMVs with the identity (FP16 products by 1 and 0, sums with one
    non-zero term), the column's head_dim elements copied in one by one (VOP MAX(v, v), n = 1: one FP32 per row),
    the block narrowed back (FP16 → FP32 → FP16 is exact, the column rounded to nearest even) and STOREd."""
    lay, dim, size, lanes = layer, layer.head_dim, layer.block, p.shape.lanes
    mark = p.rows.next_row
    key16, block, eye, wide = (p.rows.take(n) for n in (2 * dim, 2 * dim * size, 2 * size * size, 4 * dim * size))
    last = lay.blocks - 1
    address, column = cache.values_t[pair] + 2 * size * dim * last, lay.context - last * size
    p.code += [_vop(Op.MAX, key16, key, key, dim, narrow=True), *p.rows.load(block, address, 2 * dim * size),
               *p.rows.load(eye, identity, 2 * size * size), BARRIER,
               *p.rows.store(key16, cache.keys[pair] + 2 * dim * lay.context, 2 * dim),
               *(Instruction(Opcode.GEMV.value, d=p.at(wide, 4 * size * e), a=p.at(block, 2 * size * e), b=eye, n=size,
                             k=size, m=min(lanes, dim - e)) for e in range(0, dim, lanes)), BARRIER,
               *(_vop(Op.MAX, p.at(wide, 4 * (e * size + column)), p.at(value, 4 * e), p.at(value, 4 * e), 1)
                 for e in range(dim)), BARRIER,
               _vop(Op.MAX, block, wide, wide, dim * size, narrow=True), BARRIER,
               *p.rows.store(block, address, 2 * dim * size), BARRIER]
    p.rows.release(mark)


@dataclass(frozen=True)
class Decode:
    parts: list          # the program's pieces, each ending in DONE
    out_address: int     # the layer's output in memory, batch × hidden FP32 (stored over its input x)
    cache: Cache         # where the KV cache is, the decode token's key and value appended by the program
    exact: Exact         # the float64 mirror and its bounds
    instructions: int    # without the parts' DONEs


def decode_layer(rng: np.random.Generator, layer: Layer, shape: model.Shape, config: control.Config, put,
                 address: int) -> Decode:
    """The layer's program: RMSNorm → Q/K/V GEMVs → scaled FP16 queries → per (request, GQA group) the attention
    over the cache's blocks with the new key in its row and the new value as its own block, divided by l → the
    output projection → residual → RMSNorm → gate/up GEMVs → SiLU → product → down GEMV → residual."""
    lay, t = layer, tensors(rng, layer)
    p = Program(shape, config, put, address)
    w = {name: p.rows.place(getattr(t, name)) for name in ("wq", "wk", "wv", "wo", "wg", "wu", "wd")}
    cache = place_cache(p, t, lay)
    qd, kvd, batch = lay.heads * lay.head_dim, lay.groups * lay.head_dim, lay.batch
    x_address = p.rows.next_address
    x = p.operand(t.x)
    constants = p.operand(np.array([1 / lay.hidden, EPS], np.float32))
    scale = p.operand(np.full(batch * lay.heads, 1 / np.sqrt(lay.head_dim), np.float32))   # exact: a power of 2
    base = p.rows.next_row
    q16, k_new, v_new, o = p.rows.take(2 * batch * qd), p.rows.take(4 * batch * kvd), p.rows.take(4 * batch * kvd), \
        p.rows.take(4 * batch * qd)
    h16 = p.norm16(x, t.gains[0], constants, batch, lay.hidden)
    q = p.rows.take(4 * batch * qd)
    for d, name, n in ((q, "wq", qd), (k_new, "wk", kvd), (v_new, "wv", kvd)):
        p.gemv(d, h16, w[name], n, lay.hidden, batch)
    p.code += [_vop(Op.MUL, q16, q, scale, lay.head_dim, m=batch * lay.heads, broadcast=True, narrow=True), BARRIER]
    p.rows.release(h16)
    for b in range(batch):
        for g in range(lay.groups):
            first = b * lay.heads + g * lay.per_group
            out = p.at(o, 4 * lay.head_dim * first)
            new = (p.at(k_new, 4 * lay.head_dim * (b * lay.groups + g)),
                   p.at(v_new, 4 * lay.head_dim * (b * lay.groups + g)))
            state = group_attention(p, lay, cache, b, g, p.at(q16, 2 * lay.head_dim * first), out,
                                    range(lay.blocks), new)
            p.code += divide(out, state, p.rows.take(4), lay.per_group, lay.head_dim)
            p.rows.release(state)
    identity = p.rows.place(np.eye(lay.block, dtype=np.float16))
    for b in range(batch):
        for g in range(lay.groups):
            offset = 4 * lay.head_dim * (b * lay.groups + g)
            append_token(p, lay, cache, (b, g), p.at(k_new, offset), p.at(v_new, offset), identity)
    o16, y = p.rows.take(2 * batch * qd), p.rows.take(4 * batch * lay.hidden)
    p.code += [_vop(Op.MAX, o16, o, o, batch * qd, narrow=True), BARRIER]
    p.gemv(y, o16, w["wo"], lay.hidden, qd, batch)
    p.code += [_vop(Op.ADD, x, x, y, batch * lay.hidden), BARRIER]
    p.rows.release(base)
    h16 = p.norm16(x, t.gains[1], constants, batch, lay.hidden)
    gate, up = p.rows.take(4 * batch * lay.ffn), p.rows.take(4 * batch * lay.ffn)
    g16, y = p.rows.take(2 * batch * lay.ffn), p.rows.take(4 * batch * lay.hidden)
    p.gemv(gate, h16, w["wg"], lay.ffn, lay.hidden, batch)
    p.gemv(up, h16, w["wu"], lay.ffn, lay.hidden, batch)
    p.code += [Instruction(Opcode.ACT.value, func=act_func(Op.SILU), d=gate, a=gate, n=batch * lay.ffn,
                           m=1), BARRIER,
               _vop(Op.MUL, gate, gate, up, batch * lay.ffn), BARRIER,
               _vop(Op.MAX, g16, gate, gate, batch * lay.ffn, narrow=True), BARRIER]
    p.gemv(y, g16, w["wd"], lay.hidden, lay.ffn, batch)
    p.code += [_vop(Op.ADD, x, x, y, batch * lay.hidden), BARRIER, *p.rows.store(x, x_address, t.x.nbytes)]
    return Decode(p.parts(), x_address, cache, mirror(t, lay), len(p.code))


@dataclass(frozen=True)
class Split:
    """FlashDecoding over two PNMs: `runs` are four programs (each a list of parts), each run on a buffer it
    loads everything it reads into: the first half of the blocks, the second half (with the decode token), the
    MERGE of the two partials, and the unsplit attention. Per (request, group) pair, memory holds each run's
    results."""
    runs: tuple
    pairs: tuple
    heads: int           # per pair: the GQA group's query heads
    head_dim: int
    partials: tuple      # per half: pair → (state address, o address): (m, l) per head and o normalised by l
    merged: dict         # pair → (state address, o address)
    unsplit: dict        # pair → normalised o address
    values: dict         # pair → the values its o weights: every cached V and the decode token's (FP32)


def flash_split(rng: np.random.Generator, layer: Layer, shape: model.Shape, config: control.Config, put,
                address: int, pairs: tuple) -> Split:
    """Each listed (request, group)'s attention with given FP16 queries and decode-token key and value, split at
    the middle block: run 1 (PNM 1) the first half, run 2 (PNM 2) the second half and the decode token, each
    storing its partial (m, l per head and o divided by l: the vector unit's MERGE weighs normalised partials,
    w_i = l_i·e^(m_i − m) / l); run 3 loads both partials and MERGEs them; run 4 is the unsplit attention."""
    lay, t = layer, tensors(rng, layer)
    p = Program(shape, config, put, address)
    cache = place_cache(p, t, lay)
    heads, dim = lay.per_group, lay.head_dim
    decode_token = {pair: rng.standard_normal((2, dim)).astype(np.float32) for pair in pairs}   # its k and v
    queries = {pair: p.rows.place((rng.standard_normal((heads, dim)) / np.sqrt(dim)).astype(np.float16))
               for pair in pairs}
    new = {pair: (p.rows.place(decode_token[pair][0]), p.rows.place(decode_token[pair][1])) for pair in pairs}
    state_bytes, o_bytes = 8 * heads, 4 * heads * dim

    def results(*sizes) -> dict:
        """Fresh memory for each pair's results of these sizes (bytes)."""
        return {pair: tuple(p.rows.place(np.zeros(size // 4, np.float32)) for size in sizes) for pair in pairs}

    partials = [results(state_bytes, o_bytes) for _ in range(2)]
    merged, unsplit = results(state_bytes, o_bytes), {pair: address for pair, (address,) in results(o_bytes).items()}
    middle = lay.blocks // 2
    runs = []

    def attend(pair, blocks, with_new) -> tuple[int, int]:
        """LOAD the pair's queries (and decode token), its attention over `blocks`: the rows of state and o."""
        q, out = p.rows.take(2 * heads * dim), p.rows.take(o_bytes)
        kv = (p.rows.take(4 * dim), p.rows.take(4 * dim)) if with_new else None
        p.code += p.rows.load(q, queries[pair], 2 * heads * dim)
        if kv:
            p.code += [*p.rows.load(kv[0], new[pair][0], 4 * dim), *p.rows.load(kv[1], new[pair][1], 4 * dim)]
        return group_attention(p, lay, cache, *pair, q, out, blocks, kv), out

    for half, blocks in enumerate((range(middle), range(middle, lay.blocks))):
        for pair in pairs:
            state, out = attend(pair, blocks, half == 1)
            p.code += [*divide(out, state, p.rows.take(4), heads, dim),
                       *p.rows.store(state, partials[half][pair][0], state_bytes),
                       *p.rows.store(out, partials[half][pair][1], o_bytes), BARRIER]
            p.rows.release(0)
        runs.append(p.parts())
        p.code = []
    for pair in pairs:   # PNM 1 merges: partial 1 in (a, d), partial 2 in (b, c)
        first, second = p.rows.take(state_bytes), p.rows.take(state_bytes)
        o1, o2 = p.rows.take(o_bytes), p.rows.take(o_bytes)
        p.code += [*p.rows.load(first, partials[0][pair][0], state_bytes),
                   *p.rows.load(o1, partials[0][pair][1], o_bytes),
                   *p.rows.load(second, partials[1][pair][0], state_bytes),
                   *p.rows.load(o2, partials[1][pair][1], o_bytes), BARRIER,
                   Instruction(Opcode.MERGE.value, d=o1, a=first, b=second, c=o2, k=dim, m=heads), BARRIER,
                   *p.rows.store(first, merged[pair][0], state_bytes), *p.rows.store(o1, merged[pair][1], o_bytes),
                   BARRIER]
        p.rows.release(0)
    runs.append(p.parts())
    p.code = []
    for pair in pairs:
        state, out = attend(pair, range(lay.blocks), True)
        p.code += [*divide(out, state, p.rows.take(4), heads, dim), *p.rows.store(out, unsplit[pair], o_bytes),
                   BARRIER]
        p.rows.release(0)
    runs.append(p.parts())
    values = {pair: np.vstack([t.values[pair].astype(np.float32), decode_token[pair][1:]]) for pair in pairs}
    return Split(tuple(runs), pairs, heads, dim, tuple(partials), merged, unsplit, values)


def merge_mirror(memory: np.ndarray, split: Split, pair: tuple) -> np.ndarray:
    """docs/pnm-isa.md's MERGE applied in numpy to the two partials in `memory`: (m, l, w₁, w₂) by the vector
    unit's MERGE op, o = w₁·o₁ + w₂·o₂ in FP32 (nearest even); the bytes of the merged state then o."""
    heads, dim = split.heads, split.head_dim

    def f32(address: int, count: int) -> np.ndarray:
        return memory[address:address + 4 * count].view(np.float32).reshape(heads, -1)

    (s1, o1), (s2, o2) = ((f32(half[pair][0], 2 * heads), f32(half[pair][1], heads * dim))
                          for half in split.partials)
    m, l, w1, w2 = (np.asarray(v, np.uint32).view(np.float32)[:, None]
                    for v in vector_model.merge(*(s.view(np.uint32)[:, k] for s in (s1, s2) for k in (0, 1))))
    return np.concatenate([np.hstack([m, l]).reshape(-1), (w1 * o1 + w2 * o2).reshape(-1)]).view(np.uint8)
