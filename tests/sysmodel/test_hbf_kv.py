"""The KV cache and a shared prefix in HBF (issue 14): blocks through the frame region, dirty write-back in
whole pages, the prefix stored once and read by every request; all counts worked by hand."""
from types import SimpleNamespace as NS

import pytest

from basedie.cli import main
from sysmodel.hardware import PAPER_HARDWARE, with_overrides
from sysmodel.errors import ConfigError
from sysmodel.hbf.kv import PREFIX, KVFrames, kv_block_bytes
from sysmodel.hbf.layout import GIB, Layout
from sysmodel.hbf.service import HBFPort
from sysmodel.llm import LLM
from sysmodel.operators import Shard
from sysmodel.servers import DecodeServer, MixedServer, PrefillServer
from sysmodel.simulate import SimulationConfig, simulate
from sysmodel.workload import FixedBatch

ONE_GPU = with_overrides(PAPER_HARDWARE, {"gpus": "1"})
# Qwen3-30B-A3B on one GPU: 48 layers x 2 (K, V) x 4 KV heads x 128 x 2 B = 2,048 B per token and layer, so a
# 16-token block is 8 pages per layer, 384 pages (1.5 MiB) in all; a block holding one token is 48 pages.
BLOCK_PAGES, ONE_TOKEN_PAGES, BLOCK_MIB = 384, 48, 1.5


def test_write_back_programs_whole_dirty_pages() -> None:
    """2 layers of 1 KiB per token (4 tokens a page): a full block is 2 x 4 = 8 pages; a region of 1 block."""
    kv = KVFrames(layers=2, layer_token_bytes=1024, capacity=1, prefix_tokens=0, own_in_hbf=True,
                  prefix_in_hbf=False)
    kv.iteration([(1, 0, 16)], {1})       # prompt: block 0 written (allocated, dirty), nothing read
    assert kv.counts["programmed_pages"] == 0 and kv.counts["media_read_pages"] == 0
    kv.iteration([(1, 16, 1)], {1})       # block 0 read (hit); token 16 allocates block 1, evicting dirty block 0
    assert kv.counts["programmed_pages"] == 8 and kv.counts["write_backs"] == 1
    kv.iteration([(1, 17, 1)], {1})
    # block 0 read back (8 pages) evicts block 1 holding one token: a whole page per layer is programmed (2);
    # block 1 read back (2 pages) evicts clean block 0 (no program); token 17 is written into block 1 (a hit).
    assert kv.counts["programmed_pages"] == 8 + 2 and kv.counts["write_backs"] == 2
    assert kv.counts["media_read_pages"] == 8 + 2
    assert (kv.counts["hits"], kv.counts["misses"]) == (2, 4)
    assert kv.frames[(1, 1)] == (2, 1)    # two tokens, dirty from token 1
    kv.iteration([], set())               # the sequence finished: its dirty block is dropped, never programmed
    assert not kv.frames and kv.counts["programmed_pages"] == 10


def test_a_shared_prefix_is_one_set_of_blocks() -> None:
    """32 prefix tokens = 2 blocks of 8 pages; 3 requests each read them once; their own KV is in HBM."""
    uncached = KVFrames(2, 1024, capacity=0, prefix_tokens=32, own_in_hbf=False, prefix_in_hbf=True)
    for request in range(3):
        uncached.iteration([(request, 32, 8)], {request})
    assert uncached.counts["media_read_pages"] == 3 * 2 * 8
    assert uncached.counts["hbm_write_bytes"] == 3 * 8 * 2 * 1024 and uncached.counts["programmed_pages"] == 0
    cached = KVFrames(2, 1024, capacity=4, prefix_tokens=32, own_in_hbf=False, prefix_in_hbf=True)
    for request in range(3):
        cached.iteration([(request, 32, 8)], {request})
    assert cached.counts["media_read_pages"] == 2 * 8 and cached.counts["hits"] == 2 * 2


def _layout(**keys) -> Layout:
    # 2 x 36 GiB of HBM hold Qwen3-30B-A3B's 61 GB of weights; one HBF stack holds the KV.
    return Layout("kv", hbm_stacks=2, hbf_stacks=1, **keys)


def _run(layout: Layout, workload: FixedBatch, prefix: int = 0, system: str = "chunked",
         hardware=ONE_GPU) -> dict:
    return simulate(SimulationConfig(system=system, model="Qwen3-30B-A3B", workload=workload, hardware=hardware,
                                     memory=layout,
                                     shared_prefix_tokens=prefix)).summary["hbf"]


@pytest.mark.parametrize("system", ["chunked", "duopd", "sm-7:3"])
def test_decode_writes_back_dirty_kv_blocks_during_serving(system) -> None:
    """One request, 32-token prompt, 3 output tokens, a region of 2 blocks (3 MiB). Prefill writes blocks 0
    and 1. Decode 1 reads them (hits) and writes token 32 into block 2, evicting dirty block 0 (384 pages).
    Decode 2 reads blocks 0, 1, 2: block 0 (384 pages read) evicts dirty block 1 (384 programmed), block 1
    (384 read) evicts block 2 with one token (48 programmed), block 2 (48 read) evicts clean block 0; token 33
    goes into block 2 (a hit). On duopd (GPU prefill, PNM decode) and sm-7:3 the prefill and decode servers share
    the package's region: the decode's first reads hit the blocks the prefill wrote."""
    hbf = _run(_layout(kv="hbf", kv_frame_cache_gib=2 * BLOCK_MIB / 1024), FixedBatch(1, 32, 3), system=system)
    assert hbf["kv_programmed_pages"] == 2 * BLOCK_PAGES + ONE_TOKEN_PAGES
    assert hbf["kv_write_backs"] == 3
    assert hbf["kv_media_read_pages"] == 2 * BLOCK_PAGES + ONE_TOKEN_PAGES
    assert hbf["kv_written_tokens"] == 34
    assert hbf["kv_hits"] == 3
    assert hbf["hbf_programmed_bytes"] == (2 * BLOCK_PAGES + ONE_TOKEN_PAGES) * 4096
    assert hbf["kv_pe_cycles_per_block"] == pytest.approx(
        (2 * BLOCK_PAGES + ONE_TOKEN_PAGES) / 256 / (512 * GIB / (256 * 4096)))


# One HBF stack (sysmodel/hbf/media.py): 384 GB/s, tR 20 us per read, tPROG 100 us over 2,048 outstanding operations.
HBF_RATE, T_READ, T_PROGRAM_PAGE = 384e9, 20e-6, 100e-6 / 2048


def _media_s(read_pages: int, programmed_pages: int, layers: int = 48) -> float:
    """A waited-for iteration's media time: each layer waits tR for its KV blocks, then the bytes stream; the
    write-backs add their bytes and tPROG over the outstanding operations."""
    return (layers * T_READ if read_pages else 0.0) + (read_pages + programmed_pages) * 4096 / HBF_RATE \
        + programmed_pages * T_PROGRAM_PAGE


@pytest.mark.parametrize("system, decoder", [("duopd", "pnm"), ("sm-7:3", "decode")])
def test_without_a_region_the_decode_server_reads_its_whole_context_from_flash(system, decoder) -> None:
    """One request of 32 prompt tokens and 3 output tokens, no KV region: the prefill server writes blocks 0 and
    1 straight through (2 x 384 pages programmed, nothing read). Decode 1 reads them (768 pages) and programs
    token 32 (one page per layer, 48); decode 2 reads blocks 0 and 1 and token 32 (816), reads that page again
    before appending token 33 to it (48), and programs it (48). The decode server (DuoPD's PNMs, through the base
    die's HBM frames) waits for every one of them at the HBF rate."""
    hbf = _run(_layout(kv="hbf"), FixedBatch(1, 32, 3), system=system)
    decode_1, decode_2 = (2 * BLOCK_PAGES, ONE_TOKEN_PAGES), (2 * BLOCK_PAGES + 2 * ONE_TOKEN_PAGES, ONE_TOKEN_PAGES)
    assert hbf["kv_media_read_pages"] == decode_1[0] + decode_2[0]
    assert hbf["kv_programmed_pages"] == 2 * BLOCK_PAGES + decode_1[1] + decode_2[1]
    servers = hbf["servers"]
    assert servers[decoder]["stall_s"] == pytest.approx(_media_s(*decode_1) + _media_s(*decode_2), rel=1e-9)
    prefill = next(role for role in servers if role != decoder)
    assert servers[prefill]["stall_s"] == pytest.approx(_media_s(0, 2 * BLOCK_PAGES), rel=1e-9)


@pytest.mark.parametrize("prefix, read, programmed", [
    # Prefill programs blocks 0 and 1 (2 x 96 pages). The decode instance writes the 32 tokens that arrived
    # with token 32 (96 + 96 + 48 programmed, nothing read: they came over the link into HBM), then reads them
    # back (240) and block 2's page before appending token 33 (48), and programs that page (48).
    (0, 240 + 48, 2 * 96 + 240 + 48),
    # A 16-token prefix in HBF (block 0) on every instance: prefill reads it (96) and programs blocks 1 and 2;
    # the decode instance reads it on both iterations (2 x 96) and writes only the 32 tokens that moved.
    (16, 96 + 2 * 96 + 240 + 48, 2 * 96 + 240 + 48),
])
def test_pd_lands_the_moved_kv_in_the_decode_instances_hbf(prefix, read, programmed) -> None:
    """PD 1:1 (TP4 + TP4) with the KV in HBF and no region, one request of 32 tokens after the prefix, 3 output
    tokens: 512 B per token and layer on a GPU, so a full block is 2 pages per layer (96), a block of one token 1
    (48). Each instance writes its KV into its own package's HBF; the counts are per GPU, times 4 GPUs."""
    layout = _layout(kv="hbf", prefix="hbf" if prefix else "hbm")
    hbf = _run(layout, FixedBatch(1, prefix + 32, 3), prefix=prefix, system="pd-1:1", hardware=PAPER_HARDWARE)
    assert (hbf["kv_media_read_pages"], hbf["kv_programmed_pages"]) == (4 * read, 4 * programmed)
    assert hbf["kv_written_tokens"] == 4 * (32 + 33 + 1)


@pytest.mark.parametrize("prefix_tier", ["hbm", "hbf"])
def test_the_shared_prefix_is_read_once_per_request_from_its_tier(prefix_tier) -> None:
    """4 requests of 1,024 prompt tokens, 512 of them a shared prefix, one output token (no decode): each
    request's prefill reads the prefix once (32 blocks) and writes its own 512 tokens (32 blocks), straight
    through to HBF (no KV region)."""
    hbf = _run(_layout(kv="hbf", prefix=prefix_tier), FixedBatch(4, 1024, 1), prefix=512)
    prefix_pages = 4 * 32 * BLOCK_PAGES
    assert hbf["kv_media_read_pages"] == (prefix_pages if prefix_tier == "hbf" else 0)
    assert hbf["kv_hbm_read_bytes"] == (4 * 512 * 48 * 2048 if prefix_tier == "hbm" else 0)
    assert hbf["kv_programmed_pages"] == 4 * 32 * BLOCK_PAGES
    assert hbf["kv_written_tokens"] == 4 * 512


def test_a_kv_region_keeps_the_prefix_after_its_first_read() -> None:
    """With a region of 64 blocks (96 MiB) the 32 prefix blocks are read from the media by the first request
    only; the other three hit."""
    hbf = _run(_layout(prefix="hbf", kv_frame_cache_gib=64 * BLOCK_MIB / 1024), FixedBatch(4, 1024, 1), prefix=512)
    assert hbf["kv_media_read_pages"] == 32 * BLOCK_PAGES
    assert hbf["kv_hits"] == 3 * 32 and hbf["kv_programmed_pages"] == 0


BASE = ["simulate", "--model", "Qwen3-30B-A3B", "--hw", "gpus=1", "--input-len", "256", "--output-len", "4",
        "--requests", "2", "--no-plots"]


@pytest.mark.parametrize("extra, message", [
    (["--system", "chunked", "--shared-prefix-tokens", "256"], "shorter than every prompt"),
    (["--system", "chunked", "--shared-prefix-tokens", "-1"], "must be >= 0"),
])
def test_bad_shared_prefix_is_one_line_exit_2_nothing_written(tmp_path, capsys, extra, message) -> None:
    out = tmp_path / "out"
    assert main([*BASE, *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


# ----- counted by hand on 2 layers of 1 KiB per token (4 tokens a page, a 16-token block 8 pages) ------------
def _frames(capacity: int = 4, prefix: int = 0, prefix_in_hbf: bool = False) -> KVFrames:
    return KVFrames(layers=2, layer_token_bytes=1024, capacity=capacity, prefix_tokens=prefix, own_in_hbf=True,
                    prefix_in_hbf=prefix_in_hbf)


@pytest.mark.parametrize(("first", "last", "pages"), [
    (5, 5, 0), (9, 5, 0),          # no token
    (5, 9, 2 * 2),                 # bytes 5,120..9,215: pages 1 and 2 of each layer
    (0, 1, 2 * 1), (4, 8, 2 * 1),  # one page, from its start
    (0, 16, 2 * 4),
])
def test_the_pages_holding_tokens_of_a_block_are_whole_pages_per_layer(first: int, last: int, pages: int) -> None:
    assert _frames().pages(first, last) == pages


def test_a_region_of_fewer_than_no_blocks_is_refused() -> None:
    with pytest.raises(ConfigError) as error:
        _frames(capacity=-1)
    assert str(error.value) == "KV frame region must hold >= 0 blocks, got -1"


@pytest.mark.parametrize(("past", "prefix_in_hbf"), [(17, False), (18, False), (17, True)])
def test_appending_to_a_block_not_in_the_region_reads_its_older_tokens_first(past: int, prefix_in_hbf: bool) -> None:
    """A 17-token prefix; the sequence's own tokens start at token 17 (block 1). A chunk of 4 new tokens after
    `past` tokens: with past = 17 nothing of its own is read before (its first own token is new); with 18, token
    17 of block 1 is read (a miss) and the new tokens are written into it (a hit). Either way the block's older
    tokens (17 or 18 of them, one page per layer) come from the media once, after the prefix's: from HBM, or
    from HBF (block 0 whole, 8 pages, and block 1's one token, 2 pages: two more misses)."""
    kv = _frames(prefix=17, prefix_in_hbf=prefix_in_hbf)
    kv.iteration([(1, past, 4)], {1})
    prefix_pages = 8 + 2 if prefix_in_hbf else 0
    assert kv.counts["hbm_read_bytes"] == (0 if prefix_in_hbf else 17 * 2 * 1024)
    assert kv.counts["media_read_pages"] == prefix_pages + 2 * 1    # + page 0 of block 1, each layer
    misses, hits = (1, 0) if past == 17 else (1, 1)
    assert (kv.counts["misses"], kv.counts["hits"]) == (misses + (2 if prefix_in_hbf else 0), hits)
    assert kv.counts["written_tokens"] == 4
    assert kv.frames[(1, 1)] == (past - 16 + 4, past - 16)       # filled, dirty from the first new token
    assert (1, 0) not in kv.frames                               # block 0 is all prefix: never the sequence's


def test_a_block_written_again_while_in_the_region_stays_dirty_from_its_first_write() -> None:
    kv = _frames()
    kv.iteration([(1, 0, 17)], {1})        # blocks 0 and 1 written (misses); block 1 dirty from its token 0
    kv.iteration([(1, 17, 1)], {1})        # blocks 0 and 1 read (hits), token 17 into block 1 (a hit)
    assert kv.frames[(1, 1)] == (2, 0)
    assert (kv.counts["hits"], kv.counts["misses"]) == (3, 2)


def test_the_prefix_blocks_are_kept_under_the_prefix_id_and_read_from_their_first() -> None:
    kv = _frames(prefix=32, prefix_in_hbf=True)
    kv.iteration([(1, 48, 1)], {1})        # prefix blocks 0, 1; own block 2 read (16 tokens), token 48 into block 3
    assert list(kv.frames) == [(PREFIX, 0), (PREFIX, 1), (1, 2), (1, 3)]
    assert kv.counts["media_read_pages"] == 3 * 8


def test_a_kv_block_spans_whole_pages_per_layer() -> None:
    # 1 KV head of 80 values, FP16: 2 x 80 x 2 B = 320 B per token and layer, 5,120 B per 16-token block: two
    # 4 KiB pages per layer.
    model = LLM("kv80", layers=3, hidden=80, heads=1, kv_heads=1, head_dim=80, ffn=64, vocab=10, gated_mlp=True)
    assert kv_block_bytes(Shard(model, 1)) == 3 * 2 * 4096


class PlantedKV:
    """KV frames that record each iteration they are given and read 3 and program 2 more pages each time."""

    def __init__(self) -> None:
        self.counts = {"media_read_pages": 5, "programmed_pages": 7}
        self.calls = []

    def iteration(self, sequences, live) -> None:
        self.calls.append((sequences, live))
        self.counts["media_read_pages"] += 3
        self.counts["programmed_pages"] += 2


def _as(cls, **fields) -> NS:
    """A stand-in server with `fields` whose KV methods are `cls`'s."""
    server = NS(**fields)
    server.kv_sequences = lambda iteration: cls.kv_sequences(server, iteration)
    server.kv_live = lambda: cls.kv_live(server)
    return server


@pytest.mark.parametrize("decoding", [True, False])
def test_an_iteration_gives_the_kv_frames_its_chunks_and_decoding_sequences_and_returns_their_pages(decoding) -> None:
    """A chunked server's iteration: request 1's prompt chunk of 16 tokens after 32 prefilled, and requests 2 and
    3 decoding from contexts of 100 and 7 tokens (each one further per iteration of the block): the KV frames see
    the chunk and, while the server decodes, one new token of each decoding request at its context; the sequences
    kept are those running or prefilling on every server of the package (request 9 decodes on the other). The
    iteration's media bytes are the pages it added, 4 KiB each."""
    one, two, three = NS(id=1, prefilled=32), NS(id=2, context=100), NS(id=3, context=7)
    server = _as(MixedServer, chunks=[(one, 16)], running=[two, three], prefilling=[one], _decoding=decoding)
    other = _as(DecodeServer, running=[], waiting=[NS(id=9)])
    tier = NS(kv=PlantedKV())
    port = NS(server=server, tier=tier)
    tier.ports = [port, NS(server=other), NS(server=None)]
    assert HBFPort._kv_iteration(port, 2) == (3 * 4096, 2 * 4096)
    decode = [(2, 102, 1), (3, 9, 1)] if decoding else []
    assert tier.kv.calls == [([(1, 32, 16), *decode], {1, 2, 3, 9})]


@pytest.mark.parametrize("reserved, iteration, expected", [
    (False, 0, [(4, 0, 33), (5, 40, 1)]),     # request 4's 32 prompt tokens arrived (PD): written with its token
    (False, 1, [(4, 33, 1), (5, 41, 1)]),
    (True, 0, [(4, 32, 1), (5, 40, 1)]),      # its prefill wrote them on this package (duopd, sm-*)
])
def test_a_decode_server_writes_the_kv_that_arrived_on_its_first_iteration(reserved, iteration, expected) -> None:
    """Request 4 decodes its first token after a 32-token prompt, request 5 its third after 38."""
    server = _as(DecodeServer, kv_reserved=reserved, running=[NS(id=4, tokens=1, context=32),
                                                              NS(id=5, tokens=3, context=40)], waiting=[])
    assert server.kv_sequences(iteration) == expected


def test_a_prefill_server_writes_each_prompt_after_its_cached_prefix() -> None:
    server = _as(PrefillServer, batch=[NS(id=6, prefilled=256, input_len=512), NS(id=7, prefilled=0, input_len=9)])
    assert server.kv_sequences(0) == [(6, 256, 256), (7, 0, 9)]
    assert server.kv_live() == {6, 7}
