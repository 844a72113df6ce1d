"""GPTQ/AWQ INT4 checkpoints: unpackers against hand-worked words, and every format end to end through the
PC-aware layout and the golden DQB, bit-exact against the format's own reference dequantization."""
import math
import warnings

import numpy as np
import pytest

from basedie.weights import checkpoints as ck
from tb.models import dqb
from basedie.weights import pc_layout as pl

WORD_7 = np.uint32(0xF0000000).view(np.int32)  # nibble 7 set: a negative int32
COUNT_UP = 0x76543210  # nibble j holds j


def test_gptq_unpack_by_hand() -> None:
    qweight = np.zeros((1, 8), np.int32)
    qweight[0, 0], qweight[0, 7] = COUNT_UP, WORD_7
    scales = np.full((1, 8), 0.5, np.float16)
    for version, zero in [(1, 8), (2, 7)]:  # 0x7 stored: v1 means z = 8 (symmetric), v2 means z = 7
        checkpoint = ck.GPTQCheckpoint(qweight, np.array([[0x77777777]], np.int32), scales, np.zeros(8, np.int32),
                                       version)
        q, z = ck.unpack_gptq(checkpoint)
        assert list(q[:, 0]) == list(range(8)) and list(q[:, 7]) == [0] * 7 + [15] and not q[:, 1:7].any()
        assert (z == zero).all() and z.shape == (1, 8)
        weights = ck.dequantize_gptq(checkpoint)
        assert list(weights[:, 0]) == [0.5 * (k - zero) for k in range(8)]
        assert weights[7, 7] == 0.5 * (15 - zero) and weights[0, 3] == 0.5 * -zero


def test_gptq_zero_points_pack_along_the_output_dimension_by_hand() -> None:
    # v2 zeros 0..7 in columns 0..7 of group 0 and 15 in column 8 of group 1
    qzeros = np.array([[COUNT_UP, 0], [0, 0xF]], np.int32)
    checkpoint = ck.GPTQCheckpoint(np.zeros((1, 16), np.int32), qzeros, np.ones((2, 16), np.float16),
                                   np.zeros(8, np.int32), 2)
    _, z = ck.unpack_gptq(checkpoint)
    assert list(z[0]) == list(range(8)) + [0] * 8 and list(z[1]) == [0] * 8 + [15] + [0] * 7


def test_awq_unpack_by_hand() -> None:
    # nibble i holds i, so columns 0..7 read [0, 4, 1, 5, 2, 6, 3, 7]; nibble 7 (the sign bit) = 8 -> column 7
    qweight = np.array([[COUNT_UP], [np.uint32(0x80000000).view(np.int32)]], np.int32)
    checkpoint = ck.AWQCheckpoint(qweight, np.array([[0x11111111]], np.int32), np.full((1, 8), 2, np.float16), 2)
    q, z = ck.unpack_awq(checkpoint)
    assert list(q[0]) == [0, 4, 1, 5, 2, 6, 3, 7] and list(q[1]) == [0] * 7 + [8]
    assert (z == 1).all()
    assert list(ck.dequantize_awq(checkpoint)[0]) == [2.0 * (v - 1) for v in (0, 4, 1, 5, 2, 6, 3, 7)]


def test_packers_write_the_hand_worked_words() -> None:
    q = np.zeros((8, 8), np.int64)
    q[:, 0], q[7, 7] = range(8), 15
    checkpoint = ck.pack_gptq(q, np.full((1, 8), 8), np.ones((1, 8)), np.zeros(8), version=1)
    assert checkpoint.qweight[0, 0] == COUNT_UP and checkpoint.qweight[0, 7] == WORD_7
    assert checkpoint.qzeros[0, 0] == 0x77777777
    awq = ck.pack_awq(np.array([[0, 4, 1, 5, 2, 6, 3, 7]]), np.ones((1, 8)), np.ones((1, 8)), 1)
    assert awq.qweight[0, 0] == COUNT_UP and awq.qzeros[0, 0] == 0x11111111


def random_tensors(rng: np.random.Generator, in_features: int, out_features: int, group_size: int,
                   lowest_zero: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    groups = in_features // group_size
    q = rng.integers(0, 16, (in_features, out_features))
    z = rng.integers(lowest_zero, 16, (groups, out_features))
    scales = rng.uniform(1e-3, 0.1, (groups, out_features)).astype(np.float16)
    scales[0, 0] = 65504.0  # a product that overflows FP16 (q - z up to 15)
    return q, z, scales


def act_order_g_idx(rng: np.random.Generator, in_features: int, group_size: int) -> np.ndarray:
    return rng.permutation(np.arange(in_features) // group_size).astype(np.int32)


def through_the_dqb(layer: pl.QuantizedLayer, ig: int, num_pcs: int = 4) -> np.ndarray:
    """The layer placed in PCs, streamed through the golden DQB (INT4 -> FP16), reassembled `[N, K]`."""
    layout = pl.build_layout([layer], ig, num_pcs, global_base=2 * ig * num_pcs)
    responses = []
    for pc in range(num_pcs):
        reads = layout.reads(pc, 0)
        answers = dqb.dequantize_reads(layout.images[pc], layout.entries(pc), reads,
                                       [dqb.tag_of("int4", "fp16")] * len(reads))
        assert not any(answer.error for answer in answers)
        responses.append([beat for answer in answers for beat in answer.beats])
    return layout.reassemble(0, responses)


@pytest.mark.parametrize("ig", [64, 256])
@pytest.mark.parametrize("version,act_order", [(1, False), (2, False), (1, True), (2, True)])
def test_gptq_end_to_end(version: int, act_order: bool, ig: int) -> None:
    rng = np.random.default_rng([version, act_order, ig])
    in_features, out_features, group_size = 512, 64, 128
    q, z, scales = random_tensors(rng, in_features, out_features, group_size, lowest_zero=int(version == 1))
    g_idx = act_order_g_idx(rng, in_features, group_size) if act_order else np.arange(in_features) // group_size
    checkpoint = ck.pack_gptq(q, z, scales, g_idx, version)
    assert [(a == b).all() for a, b in zip(ck.unpack_gptq(checkpoint), (q, z))] == [True, True]
    layer, perm = ck.gptq_to_dqb(checkpoint)
    assert act_order or (perm == np.arange(in_features)).all()
    reference = ck.dequantize_gptq(checkpoint)  # [K, N] in the checkpoint's input order
    assert (through_the_dqb(layer, ig) == reference[perm].T.view(np.uint16)).all()


@pytest.mark.parametrize("ig", [64, 256])
@pytest.mark.parametrize("group_size", [64, 128])
def test_awq_end_to_end(group_size: int, ig: int) -> None:
    rng = np.random.default_rng([group_size, ig])
    q, z, scales = random_tensors(rng, 512, 64, group_size)
    checkpoint = ck.pack_awq(q, z, scales, group_size)
    assert [(a == b).all() for a, b in zip(ck.unpack_awq(checkpoint), (q, z))] == [True, True]
    layer = ck.awq_to_dqb(checkpoint)
    assert (through_the_dqb(layer, ig) == ck.dequantize_awq(checkpoint).T.view(np.uint16)).all()


def test_act_order_permutation_keeps_every_product() -> None:
    rng = np.random.default_rng(5)
    q, z, scales = random_tensors(rng, 256, 8, 64)
    scales[0, 0] = 0.01  # keep every product finite for the dot products
    g_idx = act_order_g_idx(rng, 256, 64)
    checkpoint = ck.pack_gptq(q, z, scales, g_idx, version=2)
    layer, perm = ck.gptq_to_dqb(checkpoint)
    assert (g_idx[perm] == np.arange(256) // 64).all()  # stored groups are contiguous and keep their index
    stored = np.asarray(layer.dequantize("fp16")).view(np.float16).astype(np.float64)  # [N, K] in stored order
    weights = ck.dequantize_gptq(checkpoint).astype(np.float64)  # [K, N] in checkpoint order
    x = rng.standard_normal(256).astype(np.float16).astype(np.float64)
    for n in range(8):  # fp16 x fp16 products are exact in float64, and fsum is exactly rounded
        assert math.fsum(weights[:, n] * x) == math.fsum(stored[n] * x[perm])


def test_unrepresentable_and_malformed_inputs_are_refused() -> None:
    q, z, scales = random_tensors(np.random.default_rng(0), 64, 8, 32)
    z[0, 0] = 0  # v1 stores 0 - 1 = 0xF, which every v1 reader takes for 16
    with pytest.raises(ValueError, match="z outside 0..15"):
        ck.gptq_to_dqb(ck.pack_gptq(q, z, scales, np.arange(64) // 32, version=1))
    with pytest.raises(ValueError, match="group_size=32"):
        ck.gptq_to_dqb(ck.pack_gptq(q, z, scales, np.r_[np.zeros(40), np.ones(24)].astype(int), version=2))
    with pytest.raises(ValueError, match="version=3"):
        ck.pack_gptq(q, z, scales, np.arange(64) // 32, version=3)


def test_the_dqb_codes_and_zeros_are_the_unsigned_ones_less_eight() -> None:
    """Two's-complement INT4 for the DQB: q - 8 and z - 8, so that (q - z) is unchanged (docs/formats.md)."""
    q, z, scales = random_tensors(np.random.default_rng(1), 64, 8, 32)
    awq = ck.awq_to_dqb(ck.pack_awq(q, z, scales, 32))
    gptq, perm = ck.gptq_to_dqb(ck.pack_gptq(q, z, scales, np.arange(64) // 32, version=2))
    for layer in (awq, gptq):
        assert (np.asarray(layer.codes) == q.T - 8).all() and (np.asarray(layer.zeros) == z.T - 8).all()
    assert (perm == np.arange(64)).all()


def test_the_packers_store_each_formats_dtypes_and_gptq_defaults_to_v1() -> None:
    q, z, scales = random_tensors(np.random.default_rng(2), 64, 8, 32, lowest_zero=1)   # v1 cannot store 0
    gptq = ck.pack_gptq(q, z, scales.astype(np.float32), np.arange(64) // 32)
    assert gptq.version == 1 and (ck.unpack_gptq(gptq)[1] == z).all()   # AutoGPTQ's "gptq" format
    assert gptq.scales.dtype == np.float16 and gptq.g_idx.dtype == np.int32
    assert ck.pack_awq(q, z, scales.astype(np.float32), 32).scales.dtype == np.float16


def test_the_unpackers_return_integer_codes() -> None:
    q, z, scales = random_tensors(np.random.default_rng(3), 64, 8, 32)
    unpacked = [*ck.unpack_gptq(ck.pack_gptq(q, z, scales, np.arange(64) // 32, version=2)),
                *ck.unpack_awq(ck.pack_awq(q, z, scales, 32))]
    assert [a.dtype.kind for a in unpacked] == ["i"] * 4


def test_a_product_beyond_fp16_dequantizes_to_inf_without_a_warning() -> None:
    q, z, scales = random_tensors(np.random.default_rng(4), 64, 8, 32)
    q[0, 0], z[0, 0] = 15, 0   # 15 x 65504 (scales[0, 0]) overflows FP16
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights = ck.dequantize_awq(ck.pack_awq(q, z, scales, 32))
    assert weights[0, 0] == np.inf


def test_act_order_keeps_the_checkpoints_row_order_within_each_group() -> None:
    """The stable order (docs/formats.md): within a group, stored columns follow the input rows, here checked
    against Python's stable sort on a permutation long enough that numpy's default sort is not stable."""
    g_idx = act_order_g_idx(np.random.default_rng(6), 4096, 128)
    expected = sorted(range(4096), key=lambda row: g_idx[row])
    assert list(ck.act_order_permutation(g_idx, 128)) == expected
