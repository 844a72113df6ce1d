"""The arbitration grid's address streams (`tb.mmu.streams`): sequential runs of whole DRAM rows, the GPU's runs
interleaved, the stated KV mix, and the un-merging of the two sources' requests, against sequences by hand."""
import random

import pytest

from tb.mmu.streams import Cursor, GpuPrefill, PnmDecode, Region, StreamModel, unmerge

WEIGHTS = Region(1000, 1000 + 4 * 32)   # four rows of 32 bursts
KV = Region(5000, 5000 + 3 * 32)        # three rows


def test_the_mix_is_llama2_70b_arithmetic() -> None:
    """The default KV fractions, recomputed from LLaMA2-70B's config (hidden 8192, MLP 28672, 8 KV heads of 128)."""
    hidden, mlp, kv_width = 8192, 28672, 8 * 128
    weights = 2 * (2 * hidden * hidden + 2 * hidden * kv_width + 3 * hidden * mlp)   # bytes per layer, FP16
    kv_per_token = 2 * kv_width * 2
    prefill_kv, decode_kv = 16384 * kv_per_token, 16 * (16384 + 64) * kv_per_token
    model = StreamModel()
    assert model.gpu_kv_write_fraction == pytest.approx(prefill_kv / (weights + prefill_kv), abs=5e-5)
    assert model.pnm_kv_fraction == pytest.approx(decode_kv / (weights + decode_kv), abs=5e-4)


def test_a_cursor_walks_rows_in_order_and_wraps() -> None:
    cursor = Cursor(WEIGHTS, 32, row=6)  # row 6 of 4 is row 2
    assert [cursor.next() for _ in range(4)] == [1064, 1096, 1000, 1032]


def test_one_gpu_stream_reads_the_weights_row_after_row() -> None:
    gpu = GpuPrefill(StreamModel(gpu_streams=1, gpu_kv_write_fraction=0.0), random.Random(1), WEIGHTS, KV)
    requests = [gpu.next() for _ in range(5 * 32)]
    first = requests[0][0]
    assert (first - 1000) % 32 == 0 and not any(write for _, write in requests)
    expected = [1000 + (first - 1000 + k) % 128 for k in range(5 * 32)]  # wraps after the fourth row
    assert [address for address, _ in requests] == expected


def test_gpu_streams_interleave_consecutive_rows_request_by_request() -> None:
    gpu = GpuPrefill(StreamModel(gpu_streams=2, gpu_kv_write_fraction=0.0), random.Random(2), WEIGHTS, KV)
    a, b = (gpu.next()[0] for _ in range(2))
    assert b == 1000 + (a - 1000 + 32) % 128                   # the next row of the tensor
    assert [gpu.next()[0] for _ in range(4)] == [a + 1, b + 1, a + 2, b + 2]


def test_kv_writes_append_to_the_cache_in_order() -> None:
    gpu = GpuPrefill(StreamModel(gpu_streams=1, gpu_kv_write_fraction=1.0), random.Random(3), WEIGHTS, KV)
    assert [gpu.next() for _ in range(4 * 32)] == [(5000 + k % 96, True) for k in range(4 * 32)]


def test_gpu_write_runs_come_at_the_stated_fraction() -> None:
    """Each new run is a KV write run with probability 0.0377: over 20,000 runs, within five standard deviations."""
    model = StreamModel(gpu_streams=1)
    gpu = GpuPrefill(model, random.Random(4), Region(0, 32 * 1024), Region(32 * 1024, 64 * 1024))
    runs = 20_000
    writes = sum(gpu.next()[1] for _ in range(runs * 32)) / 32
    p = 0.0377
    assert abs(writes - runs * p) < 5 * (runs * p * (1 - p)) ** 0.5


def test_pnm_loads_weights_in_order_and_kv_rows_at_random() -> None:
    only_weights = PnmDecode(StreamModel(pnm_kv_fraction=0.0), random.Random(5), WEIGHTS, KV, max_sub_requests=32)
    firsts = [only_weights.next() for _ in range(5)]
    assert all(bursts == 32 for _, bursts in firsts)
    assert [(f - 1000) // 32 for f, _ in firsts] == [((firsts[0][0] - 1000) // 32 + k) % 4 for k in range(5)]
    only_kv = PnmDecode(StreamModel(pnm_kv_fraction=1.0), random.Random(6), WEIGHTS, KV, max_sub_requests=8)
    loads = [only_kv.next() for _ in range(200)]
    assert {first for first, _ in loads} == {5000, 5032, 5064} and {bursts for _, bursts in loads} == {8}


def test_invalid_stream_models_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="pnm_kv_fraction"):
        StreamModel(pnm_kv_fraction=1.5)
    with pytest.raises(ValueError, match="gpu_streams"):
        StreamModel(gpu_streams=0)


def _pairs(items: list[str]) -> list[tuple[str, str]]:
    return [(item, item) for item in items]


def test_unmerge_follows_both_splits_of_identical_items() -> None:
    # A is the head of both sequences; only taking the first A as the PNM's lets C follow.
    assert unmerge(_pairs(["A", "C", "A", "B"]), ["A", "B"], ["A", "C"]) == [False, False, True, True]
    assert unmerge(_pairs(["A", "B", "A", "C"]), ["A", "B"], ["A", "C"]) == [True, True, False, False]
    assert sorted(unmerge(_pairs(["A", "A"]), ["A"], ["A"])) == [False, True]
    assert unmerge([], [], []) == []


def test_unmerge_reads_each_item_as_each_source_sees_it() -> None:
    """A read's data field means nothing to the second source: it compares its own view."""
    seen = [(("x", 0), ("x", None)), (("y", 7), ("y", None))]
    assert unmerge(seen, [("y", 7)], [("x", None)]) == [False, True]


@pytest.mark.parametrize("seen, message", [
    (["A", "D"], "item 1"),                 # an invented request
    (["B", "A"], "item 0"),                 # the GPU's requests out of order
    (["A", "A", "B"], "3 items seen"),      # the PNM's C never came
    (["A", "A", "B", "C", "C"], "item 4"),  # a duplicate
])
def test_unmerge_refuses_what_is_no_merge(seen: list[str], message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        unmerge(_pairs(seen), ["A", "B"], ["A", "C"])
