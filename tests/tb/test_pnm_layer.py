"""Issue 16's decode-layer proof on the golden model (`tb.pnm.layer`): a whole decoder layer's decode step
runs from its program, in parts, with no command refused, and equals the float64 mirror within the derived
bound, at the bench's size and at the issue's shapes; and the FlashDecoding split over two PNM runs, merged on a
third, equals the unsplit run within its bound and docs/reference/pnm-isa.md's MERGE of the partials bit for bit. The
bench's `decode_layer` runs the small layer and a split on the RTL, byte for byte against this model."""
import numpy as np
import pytest

from tb.models import pnm_controller as control
from tb.models import pnm as model
from tb.pnm import layer

BENCH = (model.Shape(row_bytes=4, width=8, lanes=2, sublane_width=4),
         control.Config(depth=64, buffer_rows=1024, address_bits=16, row_bytes=4, max_tensor_bytes=128, id_bits=8))
# The issue's shapes need 1.8 MB of memory and batch 4 in the lanes: 4 lanes of 16, 256 KiB of buffer (the row
# fields' 2^16 rows of 4 bytes), a 1,024-word instruction buffer.
LARGE = (model.Shape(row_bytes=4, width=16, lanes=4, sublane_width=4),
         control.Config(depth=1024, buffer_rows=1 << 16, address_bits=22, row_bytes=4, max_tensor_bytes=128, id_bits=8))
SIZES = [pytest.param(layer.SMALL, *BENCH, id="bench-size"), pytest.param(layer.ISSUE, *LARGE, id="issue-shapes")]


def _machine(config: control.Config):
    memory = np.zeros(1 << config.address_bits, np.uint8)

    def put(address, values):
        memory[address:address + values.nbytes] = np.frombuffer(values.tobytes(), np.uint8)

    def run(parts: list, shape: model.Shape) -> None:
        """One PNM run, part after part on one buffer (zeroed: a fresh PNM)."""
        buffer = np.zeros(config.buffer_rows * config.row_bytes, np.uint8)
        for part in parts:
            assert len(part) <= config.depth
            words = [0] * config.depth
            words[:len(part)] = [i.encode() for i in part]
            result = model.run(words, 0, config, shape, memory, buffer)
            assert (result.outcome.state, result.outcome.error, result.unit_error) == \
                ("done", control.NONE, model.UNIT_NONE)
    return memory, put, run


@pytest.mark.parametrize("lay,shape,config", SIZES)
def test_a_decode_layer_runs_and_equals_its_float64_mirror(lay, shape, config) -> None:
    memory, put, run = _machine(config)
    decode = layer.decode_layer(np.random.default_rng(16), lay, shape, config, put, 0x1000)
    run(decode.parts, shape)
    got = memory[decode.out_address:decode.out_address + 4 * lay.batch * lay.hidden].view(np.float32)
    exact = decode.exact
    error = np.abs(got.reshape(lay.batch, -1) - exact.out)
    # The bound (6 standard deviations of the FP16 roundings' error, x 1.25; `layer.mirror`) is 4-11 x 2^-11 on
    # outputs of magnitude up to 3.7; the error seen is at most 0.27 of it (1.9 and 1.4 x 2^-11 at most).
    assert (error <= exact.bound).all(), (error / exact.bound).max()
    assert exact.bound.max() < 16 * layer.U
    # A test that can fail: an error of 0.01 (20 x 2^-11) in every output would be outside the bound.
    assert not (np.abs(got.reshape(lay.batch, -1) - exact.out + 0.01) <= exact.bound).all()

    # The cache for the next step: the decode token's key and value appended (row / column `context`), the rest
    # of K and V (cached tokens and padding) unchanged bit for bit.
    inputs = layer.tensors(np.random.default_rng(16), lay)
    keys, values = layer.read_cache(memory, decode.cache, lay)
    for stored, cached, new, bound in ((keys, inputs.keys, exact.key, exact.kv_bound[0]),
                                       (values, inputs.values, exact.value, exact.kv_bound[1])):
        before = np.zeros_like(stored)
        before[:, :, :lay.context] = cached
        rest = np.arange(stored.shape[2]) != lay.context
        assert stored[:, :, rest].tobytes() == before[:, :, rest].tobytes()
        appended = stored[:, :, lay.context].astype(np.float64).reshape(lay.batch, -1)
        # The value's FP16 rounding is the cache's own (the attention used it in FP32): 2^-11 relative more.
        assert (np.abs(appended - new) <= bound + layer.U * np.abs(new)).all()


def test_the_bench_size_program_is_what_the_docs_say() -> None:
    """docs/design/pnm.md's figures for the small layer: instructions and parts of the 64-word instruction
    buffer."""
    _, put, _ = _machine(BENCH[1])
    decode = layer.decode_layer(np.random.default_rng(16), layer.SMALL, *BENCH, put, 0x1000)
    assert (decode.instructions, len(decode.parts)) == (978, 16)


@pytest.mark.parametrize("lay,shape,config", SIZES)
def test_flash_decoding_split_over_two_pnms_merges_to_the_unsplit_attention(lay, shape, config) -> None:
    memory, put, run = _machine(config)
    pairs = tuple((b, g) for b in range(lay.batch) for g in range(lay.groups))
    split = layer.flash_split(np.random.default_rng(7), lay, shape, config, put, 0x1000, pairs)
    for parts in split.runs:   # PNM 1's half, PNM 2's half, the merge, the unsplit run
        run(parts, shape)
    heads, dim = split.heads, split.head_dim
    for pair in pairs:
        state, out = split.merged[pair]
        merged = memory[state:state + 8 * heads].tobytes() + memory[out:out + 4 * heads * dim].tobytes()
        assert merged == layer.merge_mirror(memory, split, pair).tobytes()
        unsplit = memory[split.unsplit[pair]:split.unsplit[pair] + 4 * heads * dim].view(np.float32)
        # Each run's o is Σ_t FP16(P_t)·v_t / l with l the FP32 P's sum: FP16's rounding moves it by at most
        # 2^-11 · max|v| (P ≥ 0, Σ P / l = 1); the merge weighs two such partials with w1 + w2 = 1. Two runs
        # differ by at most 2 · 2^-11 · max|v|; FP32 arithmetic and exp/recip (≤ 3 ulps) add under 2^-16 · max|v|.
        bound = (2 * layer.U + 2 ** -16) * np.abs(split.values[pair]).max()
        assert np.abs(np.frombuffer(merged[8 * heads:], np.float32) - unsplit).max() <= bound
