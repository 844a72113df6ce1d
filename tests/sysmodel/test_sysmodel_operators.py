"""The operator cost model against FLOPs and bytes worked out by hand, and the presets' parameter counts
against their published sizes.

The tiny model has 2 layers, hidden 64, 8 query heads and 2 KV heads of 8, an MLP of width 128 and a vocabulary
of 100, which a GPU holds as vLLM does, padded to 128 rows (a multiple of 64) split evenly over the TP ranks;
values are FP16 (2 bytes). Every expected number below is that arithmetic written out."""
import pytest

from sysmodel.errors import ConfigError
from sysmodel.llm import GPT3_175B, LLAMA2_70B, LLM, QWEN3_235B_A22B
from sysmodel.operators import Shard, decode_work, prefill_work, ring_all_reduce_s

B = 2  # bytes per FP16 value


def tiny(gated: bool = True, **changes) -> LLM:
    fields = dict(name="tiny", layers=2, hidden=64, heads=8, kv_heads=2, head_dim=8, ffn=128, vocab=100,
                  gated_mlp=gated)
    return LLM(**{**fields, **changes})


def tiny_moe() -> LLM:
    """8 routed experts of width 32, top 2."""
    return tiny(ffn=32, experts=8, experts_per_token=2)


def as_table(ops) -> dict[str, tuple]:
    """name → (kind, flops, weight bytes, KV bytes, activation bytes); the two norms are alike."""
    table: dict[str, tuple] = {}
    for op in ops:
        row = (op.kind, op.flops, op.weight_bytes, op.kv_bytes, op.act_bytes)
        assert table.setdefault(op.name, row) == row
    return table


def assert_row(got: tuple, expected: tuple) -> None:
    assert got[0] == expected[0]
    assert got[1:] == pytest.approx(expected[1:], rel=1e-12)


def assert_ops(ops, expected: dict[str, tuple]) -> None:
    got = as_table(ops)
    assert set(got) == set(expected)
    for name, row in expected.items():
        assert_row(got[name], row)


def test_work_of_a_prefill_chunk_and_of_a_decode_iteration() -> None:
    # 10 new tokens after 6 cached ones: token i (1..10) attends to 6 + i keys → 10·6 + (1 + … + 10) = 115 pairs.
    assert prefill_work(10, 6) == (10, 10 * 6 + 55, 16, 1)
    assert prefill_work(10, 6, last_chunk=False).logits == 0
    assert prefill_work(4) == (4, 1 + 2 + 3 + 4, 4, 1)
    # 3 sequences holding 50 KV tokens in all: one new token each, every KV token read and attended once.
    assert decode_work(3, 50) == (3, 50, 50, 3)


def test_dense_gated_layer_in_prefill_at_tp2() -> None:
    # TP2: 4 query heads and 1 KV head per GPU → q = 4·8 = 32, kv = 1·8 = 8 values per token.
    ops = Shard(tiny(), 2).layer_ops(prefill_work(10, 6))
    t, h, q, kv, attended, kv_read = 10, 64, 32, 8, 115, 16
    width = 3 * 64 * 128  # gate, up, down
    assert_ops(ops, {
        "norm": ("vector", 4 * t * h, 0, 0, 2 * t * h * B),
        "qkv": ("matrix", 2 * t * h * (q + 2 * kv), h * (q + 2 * kv) * B, 2 * t * kv * B, t * (h + q) * B),
        "attention": ("attention", 4 * 4 * 8 * attended, 0, 2 * kv_read * kv * B, 2 * t * q * B),
        "o_proj": ("matrix", 2 * t * q * h, q * h * B, 0, t * (q + h) * B),
        "mlp": ("matrix", 2 * t * width / 2, width * B / 2, 0, t * (2 * h + 128 * 2 / 2) * B),
    })
    assert [op.name for op in ops] == ["norm", "qkv", "attention", "o_proj", "norm", "mlp"]


def test_dense_plain_mlp_in_decode_at_tp1() -> None:
    # TP1: all 8 query heads (q = 64) and both KV heads (kv = 16); batch of 3 holding 50 KV tokens.
    ops = Shard(tiny(gated=False), 1).layer_ops(decode_work(3, 50))
    t, h, q, kv = 3, 64, 64, 16
    width = 2 * 64 * 128  # up, down
    assert_ops(ops, {
        "norm": ("vector", 4 * t * h, 0, 0, 2 * t * h * B),
        "qkv": ("matrix", 2 * t * h * (q + 2 * kv), h * (q + 2 * kv) * B, 2 * t * kv * B, t * (h + q) * B),
        "attention": ("attention", 4 * 8 * 8 * 50, 0, 2 * 50 * kv * B, 2 * t * q * B),
        "o_proj": ("matrix", 2 * t * q * h, q * h * B, 0, t * (q + h) * B),
        "mlp": ("matrix", 2 * t * width, width * B, 0, t * (2 * h + 128) * B),
    })


def test_lm_head_and_final_norm_only_for_sequences_that_emit_a_token() -> None:
    shard = Shard(tiny(), 2)
    assert_ops(shard.head_ops(decode_work(3, 50)), {
        "final_norm": ("vector", 4 * 3 * 64, 0, 0, 2 * 3 * 64 * B),
        "lm_head": ("matrix", 2 * 3 * 64 * 64, 64 * 64 * B, 0, 3 * (64 + 64) * B),   # 128 padded rows / 2
    })
    assert shard.head_ops(prefill_work(10, 0, last_chunk=False)) == []


def test_weight_and_kv_bytes_split_over_tp() -> None:
    model = tiny()
    # Whole model: attention 64·(2·8 + 2·2)·8 = 10,240 and MLP 3·64·128 = 24,576 per layer; embedding and
    # LM head 2·100·64 = 12,800.
    params = 2 * (10_240 + 24_576) + 12_800
    assert model.params == params
    assert model.weight_bytes == params * B
    # A GPU holds the embedding and the LM head padded to 128 rows: 2·128·64 = 16,384.
    assert Shard(model, 1).weight_bytes == (2 * (10_240 + 24_576) + 16_384) * B
    # TP2: 4 query heads and 1 KV head per GPU, half the MLP, half the padded embedding and head.
    assert Shard(model, 2).weight_bytes == (2 * (64 * (2 * 4 + 2 * 1) * 8 + 24_576 // 2) + 16_384 // 2) * B
    # KV: K and V of every layer, per KV head held.
    assert model.kv_bytes_per_token == 2 * 2 * 2 * 8 * B
    assert Shard(model, 1).kv_bytes_per_token == 2 * 2 * 2 * 8 * B
    assert Shard(model, 2).kv_bytes_per_token == 2 * 2 * 1 * 8 * B


def test_kv_heads_are_replicated_when_tp_exceeds_them() -> None:
    # TP4 over 2 KV heads: every GPU holds one KV head (a copy) serving its 2 query heads.
    shard = Shard(tiny(), 4)
    assert (shard.heads, shard.kv_heads) == (2, 1)
    assert shard.kv_bytes_per_token == 2 * 2 * 1 * 8 * B          # not halved again: replicated
    attention = 64 * (2 * 2 + 2 * 1) * 8
    assert shard.weight_bytes == (2 * (attention + 24_576 // 4) + 16_384 // 4) * B
    qkv = as_table(shard.layer_ops(decode_work(1, 20)))["qkv"]
    assert qkv[2] == 64 * (2 * 8 + 2 * 8) * B                     # q: 2 heads of 8, k and v: one head of 8 each
    shard8 = Shard(tiny(), 8)
    assert (shard8.heads, shard8.kv_heads) == (1, 1)


def test_all_reduce_bytes_and_ring_time() -> None:
    assert Shard(tiny(), 1).all_reduce_bytes(prefill_work(10)) == 0
    # Two all-reduces per layer (after attention, after the MLP) of the tokens' hidden states.
    assert Shard(tiny(), 2).all_reduce_bytes(prefill_work(10)) == 2 * 10 * 64 * B
    assert Shard(tiny(), 4).all_reduce_bytes(decode_work(3, 50)) == 2 * 3 * 64 * B
    # A ring over n parties sends 2 (n − 1) / n of the buffer over each link.
    assert ring_all_reduce_s(1000.0, 4, 10.0) == pytest.approx(2 * 3 / 4 * 1000 / 10)
    assert ring_all_reduce_s(1000.0, 1, 10.0) == 0


def test_moe_layer_touches_the_expected_number_of_experts() -> None:
    shard = Shard(tiny_moe(), 2)                 # EP2: 4 of the 8 experts per GPU
    width = 3 * 64 * 32                          # one expert's gate, up and down
    t = 3
    touched = 8 / 2 * (1 - (1 - 2 / 8) ** t)     # 4 · (1 − 0.75³) = 2.3125
    assert touched == pytest.approx(2.3125)
    table = as_table(shard.layer_ops(decode_work(t, 50)))
    assert_row(table["router"], ("matrix", 2 * t * 64 * 8, 64 * 8 * B, 0, t * 64 * B))
    assert_row(table["experts"], ("matrix", 2 * t * 2 * width / 2, touched * width * B, 0, 2 * t * 2 * 64 * B / 2))
    assert "mlp" not in table
    # One token reaches 2 experts, on average 1 on each GPU; many tokens reach all 4 local experts.
    assert as_table(shard.layer_ops(decode_work(1, 50)))["experts"][2] == pytest.approx(1 * width * B)
    assert as_table(shard.layer_ops(prefill_work(4096)))["experts"][2] == pytest.approx(4 * width * B)
    # Weights: every expert once over the GPUs, the router on each.
    per_layer = 64 * (2 * 4 + 2 * 1) * 8 + 8 * width // 2 + 64 * 8
    assert shard.weight_bytes == (2 * per_layer + 16_384 // 2) * B


@pytest.mark.parametrize(("changes", "tp", "message"), [
    ({}, 3, "tiny: 8 attention heads cannot be split over TP=3"),
    ({"heads": 12, "kv_heads": 6}, 4, "tiny: 6 KV heads cannot be split or replicated over TP=4"),
    ({"ffn": 32, "experts": 6, "experts_per_token": 2}, 4, "tiny: 6 experts cannot be split over EP=4"),
    ({}, 0, "tensor parallelism must be >= 1"),
    ({"ffn": 100}, 8, "tiny: an MLP of width 100 cannot be split over TP=8"),         # vLLM's `divide` refuses it
    ({"heads": 12, "kv_heads": 12, "ffn": 96}, 3, r"tiny: 128 vocabulary rows \(padded\) cannot be split over TP=3"),
])
def test_shards_that_cannot_be_built_name_the_model(changes: dict, tp: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Shard(tiny(**changes), tp)


def active_params(model: LLM) -> int:
    """Parameters one token uses: attention, the router and top-k experts of every layer, embedding and head."""
    mlp = model.hidden * model.experts + model.experts_per_token * model.expert_params
    return model.layers * (model.attention_params + mlp) + 2 * model.vocab * model.hidden


@pytest.mark.parametrize(("model", "published"), [
    (GPT3_175B, 175e9),           # Brown et al., 2020
    (LLAMA2_70B, 69e9),           # Touvron et al., 2023 (68.98 B in the released checkpoint)
    (QWEN3_235B_A22B, 235e9),     # Qwen3 technical report, Table 2
])
def test_preset_parameter_counts_match_the_published_sizes(model: LLM, published: float) -> None:
    assert model.params == pytest.approx(published, rel=0.01)


def test_qwen3_moe_activates_about_22b_parameters() -> None:
    assert active_params(QWEN3_235B_A22B) == pytest.approx(22e9, rel=0.02)
