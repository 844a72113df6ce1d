"""The operator cost model: FLOPs and bytes of every operator of one transformer layer on one GPU's shard.

An iteration's work is four counts (`Work`), whatever mix of prefill chunks and decode tokens it holds, and
every operator's cost is a function of them. Costs are per GPU under tensor parallelism of degree `tp`
(expert parallelism of the same degree for MoE experts, paper §5.1).
"""
from dataclasses import dataclass
from typing import NamedTuple

from .errors import require
from .llm import BYTES_PER_VALUE, LLM

# vLLM pads the vocabulary to a multiple of 64 rows and gives each TP rank an equal share of the padded rows,
# for the embedding and the LM head alike (vllm/model_executor/layers/vocab_parallel_embedding.py:
# DEFAULT_VOCAB_PADDING_SIZE = 64, pad_vocab_size, num_embeddings_per_partition = divide(num_embeddings_padded,
# tp_size); ParallelLMHead subclasses VocabParallelEmbedding). Its linear layers split the MLP width with the same
# `divide`, which refuses a width TP does not divide (vllm/distributed/utils.py, ensure_divisibility).
VOCAB_PADDING = 64


class Work(NamedTuple):
    """What one iteration computes, summed over the sequences in it."""
    tokens: int          # new tokens (prompt tokens of prefill chunks + one per decoding sequence)
    attended: int        # (query token, key token) pairs of causal attention
    kv_read: int         # tokens of KV cache read (each sequence's whole context, once)
    logits: int          # sequences that produce a token at the end of the iteration


def prefill_work(tokens: int, past: int = 0, last_chunk: bool = True) -> Work:
    """A prompt chunk of `tokens` tokens after `past` already-cached ones."""
    return Work(tokens, tokens * past + tokens * (tokens + 1) // 2, past + tokens, int(last_chunk))


def decode_work(sequences: int, context_tokens: int) -> Work:
    """One token for each of `sequences` sequences holding `context_tokens` tokens of KV in all (the new
    tokens included)."""
    return Work(sequences, context_tokens, context_tokens, sequences)


class Op(NamedTuple):
    name: str
    kind: str            # "matrix" (weights × activations), "attention" (queries × KV cache), "vector"
    flops: float
    weight_bytes: float
    kv_bytes: float
    act_bytes: float     # activations read and written

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes + self.act_bytes


@dataclass(frozen=True)
class Shard:
    """One GPU's part of a model under tensor (and expert) parallelism of degree `tp`."""
    model: LLM
    tp: int

    def __post_init__(self) -> None:
        m = self.model
        require(self.tp >= 1, f"tensor parallelism must be >= 1, got {self.tp}")
        require(m.heads % self.tp == 0, f"{m.name}: {m.heads} attention heads cannot be split over TP={self.tp}")
        require(m.kv_heads % self.tp == 0 or self.tp % m.kv_heads == 0,
                f"{m.name}: {m.kv_heads} KV heads cannot be split or replicated over TP={self.tp}")
        require(not m.moe or m.experts % self.tp == 0,
                f"{m.name}: {m.experts} experts cannot be split over EP={self.tp}")
        require(m.moe or m.ffn % self.tp == 0, f"{m.name}: an MLP of width {m.ffn} cannot be split over TP={self.tp}")
        require(self.padded_vocab % self.tp == 0,
                f"{m.name}: {self.padded_vocab} vocabulary rows (padded) cannot be split over TP={self.tp}")

    @property
    def heads(self) -> int:
        return self.model.heads // self.tp

    @property
    def kv_heads(self) -> int:
        """KV heads held per GPU: split when there are enough, else replicated (one per GPU)."""
        return max(1, self.model.kv_heads // self.tp)

    @property
    def padded_vocab(self) -> int:
        """The vocabulary rounded up to a multiple of `VOCAB_PADDING` rows, as vLLM allocates it."""
        return -(-self.model.vocab // VOCAB_PADDING) * VOCAB_PADDING

    @property
    def vocab(self) -> int:
        """Vocabulary rows of the embedding and of the LM head on one GPU (padding included: it is computed)."""
        return self.padded_vocab // self.tp

    @property
    def ffn(self) -> int:
        """MLP width on one GPU (a dense model's; TP divides it)."""
        return self.model.ffn // self.tp

    @property
    def embedding_bytes(self) -> int:
        """One GPU's embedding and LM head (one matrix when they are tied)."""
        return self.model.embedding_matrices * self.vocab * self.model.hidden * BYTES_PER_VALUE

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.model.layers * self.kv_heads * self.model.head_dim * BYTES_PER_VALUE

    @property
    def router_bytes(self) -> int:
        """One layer's MoE router (every GPU holds it whole); 0 for a dense model."""
        return self.model.hidden * self.model.experts * BYTES_PER_VALUE

    @property
    def weight_bytes(self) -> float:
        m = self.model
        attention = m.hidden * (self.heads * 2 + self.kv_heads * 2) * m.head_dim
        mlp = m.experts * m.expert_params // self.tp if m.moe else m.expert_params // self.tp
        return m.layers * ((attention + mlp) * BYTES_PER_VALUE + self.router_bytes) + self.embedding_bytes

    def layer_ops(self, work: Work) -> list[Op]:
        """The operators of one layer (all layers are alike)."""
        m, b = self.model, BYTES_PER_VALUE
        t = work.tokens
        q, kv = self.heads * m.head_dim, self.kv_heads * m.head_dim
        norm = Op("norm", "vector", 4 * t * m.hidden, 0, 0, 2 * t * m.hidden * b)
        ops = [
            norm,
            Op("qkv", "matrix", 2 * t * m.hidden * (q + 2 * kv), m.hidden * (q + 2 * kv) * b, 2 * t * kv * b,
               t * (m.hidden + q) * b),
            Op("attention", "attention", 4 * self.heads * m.head_dim * work.attended, 0,
               2 * work.kv_read * kv * b, 2 * t * q * b),
            Op("o_proj", "matrix", 2 * t * q * m.hidden, q * m.hidden * b, 0, t * (q + m.hidden) * b),
            norm,
        ]
        width = m.mlp_matrices * m.hidden * m.ffn
        if m.moe:
            local = m.experts // self.tp
            touched = local * (1 - (1 - m.experts_per_token / m.experts) ** t)  # expected, uniform routing
            ops += [
                Op("router", "matrix", 2 * t * m.hidden * m.experts, m.hidden * m.experts * b, 0, t * m.hidden * b),
                Op("experts", "matrix", 2 * t * m.experts_per_token * width / self.tp, touched * width * b, 0,
                   2 * t * m.experts_per_token * m.hidden * b / self.tp),
            ]
        else:
            ops.append(Op("mlp", "matrix", 2 * t * width / self.tp, width * b / self.tp, 0,
                          t * (2 * m.hidden + self.ffn * (m.mlp_matrices - 1)) * b))
        return ops

    def head_ops(self, work: Work) -> list[Op]:
        """The final norm and the LM head, for the sequences that produce a token."""
        m, b, n = self.model, BYTES_PER_VALUE, work.logits
        if n == 0:
            return []
        return [Op("final_norm", "vector", 4 * n * m.hidden, 0, 0, 2 * n * m.hidden * b),
                Op("lm_head", "matrix", 2 * n * m.hidden * self.vocab, m.hidden * self.vocab * b, 0,
                   n * (m.hidden + self.vocab) * b)]

    def all_reduce_bytes(self, work: Work) -> float:
        """Bytes of one layer's tensor-parallel all-reduces (after attention and after the MLP)."""
        return 0.0 if self.tp == 1 else 2 * work.tokens * self.model.hidden * BYTES_PER_VALUE


def ring_all_reduce_s(nbytes: float, parties: int, link_bandwidth: float) -> float:
    """A ring all-reduce sends 2 (n − 1) / n of the buffer over each GPU's link."""
    return 0.0 if parties <= 1 else 2 * (parties - 1) / parties * nbytes / link_bandwidth

