"""One HBF tier shared by the servers of a package (DuoPD's GPU prefill and PNM decode, the SM partitions):
their accesses go through one frame cache in the order their iterations start, the package heats once per
wall-clock interval with their power summed, their media reads share the tier's bandwidth; hand-computed on a
two-layer model, then whole runs: an infinitely fast HBF gives the HBM-only result, runs repeat exactly, and
drawing a resident block's routing when it is settled changes nothing; then the tier's parts by hand (its
summary, what each prefetch reads ahead, cooling waits, iterations in progress, re-pricing)."""
import json
import math
import time
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest

from basedie.cli import main
from sysmodel import servers
from sysmodel.engine import EventLoop
from sysmodel.execution import Cost
from sysmodel.hardware import PAPER_HARDWARE, Hardware
from sysmodel.hbf import media
from sysmodel.hbf.layout import Layout
from sysmodel.hbf.kv import COUNTS as KV_COUNTS
from sysmodel.hbf.service import HBFOptions, HBFPort, HBFTier, PortPower, steps
from sysmodel.hbf.thermal import PACKAGE, Thermal
from sysmodel.llm import LLM
from sysmodel.operators import Shard, Work
from sysmodel.simulate import SimulationConfig, _hbf_summary, simulate
from sysmodel.workload import FixedBatch, PoissonArrivals

# Two layers of 33,554,432 B (attention 4 x 1024 x 1024 + a SwiGLU MLP 3 x 1024 x 4096, FP16): one HBF object
# each (a dense model's layer), 8,192 pages.
TINY = LLM("tiny", layers=2, hidden=1024, heads=8, kv_heads=8, head_dim=128, ffn=4096, vocab=1000, gated_mlp=True)
LAYER_BYTES, LAYER_PAGES = 33_554_432, 8192
TR, RATE = 20e-6, 384e9          # one grade-1 stack: min(384 GB/s, 2,048 x 4 KiB / 20 us = 419 GB/s)
ONE = Work(1, 1, 1, 1)
QUIET = PortPower((0.0, 0.0, 0.0), 0.0)


@dataclass(frozen=True)
class Fixed:
    """An executor whose iterations compute for `seconds` each (with the weights in HBM), moving nothing; a
    work whose tokens are an array is a block of iterations, one per element."""
    seconds: float
    hardware: Hardware = PAPER_HARDWARE

    def cost(self, work: Work, bandwidth_scale: float = 1.0, loads=None, share=None) -> Cost:
        if np.ndim(work.tokens) == 0:
            return Cost(self.seconds / bandwidth_scale, 0.0, 0.0, 0.0, 0.0)
        zeros = np.zeros(len(work.tokens))
        return Cost(zeros + self.seconds / bandwidth_scale, zeros, zeros, zeros, zeros)


def _tier(layout: Layout, *ports: tuple[str, float, PortPower], shard: Shard = Shard(TINY, 1),
          options: HBFOptions = HBFOptions()):
    loop = EventLoop()
    tier = HBFTier(loop, shard, layout, options)
    return loop, tier, [tier.port(Fixed(seconds), role, power) for role, seconds, power in ports]


def test_the_tiny_model_is_what_the_hand_counts_assume() -> None:
    _, tier, _ = _tier(Layout("t", hbm_stacks=1, hbf_stacks=1, weights="hbf", frame_cache_gib=1.0))
    assert (tier.layers, tier.slots, tier.object_bytes, tier.object_pages) == (2, 1, LAYER_BYTES, LAYER_PAGES)
    assert tier.tier.bandwidth == RATE and tier.tier.latency_s == TR and tier.lru.capacity == 32


@pytest.mark.parametrize("later", [0.0, 0.5])
def test_a_layer_one_server_read_is_a_frame_cache_hit_for_the_other(later) -> None:
    """Server a's iteration starts at 0 and misses both layers: it waits tR + 32 MiB at 384 GB/s for each.
    Server b's starts at `later` x a's time (together with it, priced after it, or during it): both layers are
    in the frame cache by then, so b reads nothing from the media."""
    layout = Layout("t", hbm_stacks=1, hbf_stacks=1, weights="hbf", frame_cache_gib=1.0)
    loop, tier, (a, b) = _tier(layout, ("a", 1e-3, QUIET), ("b", 1e-3, QUIET))
    first = a.cost(ONE)
    assert first.seconds == pytest.approx(1e-3 + 2 * (TR + LAYER_BYTES / RATE), rel=1e-12)
    loop.now = later * first.seconds
    assert b.cost(ONE).seconds == 1e-3
    tier.settle(math.inf)
    servers = tier.summary()["servers"]
    assert (servers["a"]["accesses"], servers["a"]["frame_cache_hits"]) == (2, 0)
    assert servers["a"]["media_page_reads"] == servers["a"]["media_page_reads_waited"] == 2 * LAYER_PAGES
    assert (servers["b"]["accesses"], servers["b"]["frame_cache_hits"], servers["b"]["media_page_reads"]) == (2, 2, 0)


def test_the_package_heats_once_per_interval_with_the_servers_power_summed() -> None:
    """a computes over [0, 2 s] at 1,000 W on the GPU die, b over [1 s, 2 s] at 60 W on the HBM dies: the
    package is [0, 1 s] at (1000, 0, 0) W, then [1 s, 2 s] at (1000, 60, 0) W, two seconds in all (nothing is
    read from HBF: only a shared prefix would be, and there is none)."""
    layout = Layout("cool", hbm_stacks=1, hbf_stacks=1, prefix="hbf")
    loop, tier, (a, b) = _tier(layout, ("a", 2.0, PortPower((1000.0, 0.0, 0.0), 0.0)),
                               ("b", 1.0, PortPower((0.0, 60.0, 0.0), 0.0)))
    a.cost(ONE)
    loop.now = 1.0
    b.cost(ONE)
    tier.settle(math.inf)
    expected = Thermal(PACKAGE, 45.0)
    expected.step(1.0, (1000.0, 0.0, 0.0))
    expected.step(1.0, (1000.0, 60.0, 0.0))
    package = tier.package
    assert package.thermal.temps == pytest.approx(expected.temps, abs=1e-9)
    assert sum(package.residency) == pytest.approx(2.0, rel=1e-12)
    assert package.clock == pytest.approx(2.0, rel=1e-12) and package.trace[-1][0] == pytest.approx(2.0, rel=1e-12)


def test_servers_reading_the_media_together_share_its_bandwidth_fairly() -> None:
    """No frame cache: every access reads the media. a (10 us of compute) asks for 2 x 32 MiB over
    10 us + 2 (tR + 87.4 us) = 224.8 us: 77.7 % of the tier. b, the same, starts while a's iteration is in
    progress: max-min fair sharing grants each 50 %, so b reads at 384 GB/s x 0.5 / 0.777; when a's server
    re-prices its iteration in progress (b started), a gets the same share."""
    layout = Layout("none", hbm_stacks=1, hbf_stacks=1, weights="hbf", frame_cache_gib=0.0)
    loop, tier, (a, b) = _tier(layout, ("a", 1e-5, QUIET), ("b", 1e-5, QUIET))
    alone = 1e-5 + 2 * (TR + LAYER_BYTES / RATE)
    load = 2 * LAYER_BYTES / (alone * RATE)
    shared = 1e-5 + 2 * (TR + LAYER_BYTES / (RATE * 0.5 / load))
    first = a.cost(ONE)
    assert first.seconds == pytest.approx(alone, rel=1e-12) and load == pytest.approx(0.777, abs=1e-3)
    loop.now = first.seconds / 4
    assert b.cost(ONE).seconds == pytest.approx(shared, rel=1e-12)
    a.server = SimpleNamespace(busy=True, ends=np.array([first.seconds]))
    assert a.cost(ONE).seconds == pytest.approx(shared, rel=1e-12)


# ----- whole runs ---------------------------------------------------------------------------------------
def _layout_file(tmp_path, name: str, **keys) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(keys))
    return str(path)


def _run(system: str, memory: str, requests: int = 40, **options):
    return simulate(SimulationConfig(system=system, model="Qwen3-30B-A3B",
                                     workload=PoissonArrivals(20, requests, 1024, 32, 0.1, 3),
                                     hardware=PAPER_HARDWARE, memory=memory, hbf=HBFOptions(**options)))


@pytest.mark.parametrize("system", ["duopd", "sm-7:3"])
def test_an_infinitely_fast_hbf_gives_the_hbm_only_result(tmp_path, monkeypatch, system) -> None:
    """Qwen3-30B-A3B over 8 GPUs: each holds 768 experts of 9.4 MB (6.75 GiB), all in an 8 GiB frame cache.
    With HBF reads that take no time, the first prompt's frame fills (it touches every expert) are the only
    difference from the same HBM with the weights in it: every token time is the same, and the energy
    differs by those fills' HBM writes."""
    monkeypatch.setitem(media.GRADES, 1, 1e30)
    hbf = _run(system, _layout_file(tmp_path, "hbf", hbm_stacks=2, hbf_stacks=1, weights="hbf", frame_cache_gib=8),
               read_s=1e-15)
    hbm = _run(system, _layout_file(tmp_path, "hbm", hbm_stacks=2))
    for ours, theirs in zip(hbf.requests, hbm.requests):
        assert ours.token_times == pytest.approx(theirs.token_times, rel=1e-9, abs=1e-12)
    fills = hbf.summary["hbf"]["hbm_frame_fill_bytes"]
    assert fills == pytest.approx(8 * 768 * 3 * 2048 * 768 * 2)
    servers = hbf.summary["hbf"]["servers"]
    assert sum(s["media_page_reads"] for s in servers.values()) == 8 * 768 * 2304
    prefill = next(iter(servers))             # the first prompt read every expert: decode hit all the time
    assert servers[prefill]["hbf_media_read_bytes"] == fills
    energy = hbf.summary["energy_j"]["total"] - hbm.summary["energy_j"]["total"]
    assert energy == pytest.approx(fills * PAPER_HARDWARE.gpu.stack.energy_per_byte, rel=1e-6)


@pytest.mark.parametrize("system, model, prefetch, ambient", [
    ("duopd", "Qwen3-30B-A3B", "none", 45.0),               # resident: one prompt fills the frame cache
    ("duopd", "Qwen3-235B-A22B", "moe-speculative", 45.0),  # thrashing: both servers read the media
    ("sm-5:5", "Qwen3-235B-A22B", "moe-speculative", 45.0),  # ... and share it (their loads add up to over 1)
    ("sm-7:3", "Qwen3-235B-A22B", "none", 79.0),            # ... their fills change the HBM shares; throttled
    ("sm-9:1", "Qwen3-235B-A22B", "none", 45.0),
])
def test_blocks_of_iterations_give_what_one_iteration_at_a_time_gives(monkeypatch, system, model, prefetch,
                                                                      ambient) -> None:
    """Decode blocks cut to one iteration each: every iteration is then priced, settled and re-prices its
    co-runner on its own. Token times must agree to the servers' block tolerance (1e-5: a co-runner is
    re-priced at block boundaries, not as decode's offered load grows within a block; with the MMU's shares
    measured behind HBM4 the GPU's share moves more with the PNM's load, and DuoPD's token times differed by up
    to 3.4e-6, where the shares measured behind the ideal memory had kept them within 1e-6) and the tier's
    counts exactly. (Without the rule that ends a block where its
    media traffic changes, token times here differed by 6.5 % (sm-5:5), 229 % (sm-7:3, throttled) and 0.23 %
    (sm-9:1); with it, a randomised search over 100 configurations of system, model, layout, grade, tR, prefetch,
    skew, frame cache, coolant and workload found no difference.)"""
    def run():
        return simulate(SimulationConfig(system=system, model=model,
                                         workload=PoissonArrivals(20, 20, 1024, 32, 0.1, 3), hardware=PAPER_HARDWARE,
                                         memory="C", hbf=HBFOptions(prefetch=prefetch, ambient_c=ambient)))
    blocks = run()
    whole = servers.decode_work
    monkeypatch.setattr(servers, "decode_work", lambda sequences, context: whole(sequences, np.asarray(context)[:1]))
    single = run()
    for ours, theirs in zip(blocks.requests, single.requests):
        assert ours.token_times == pytest.approx(theirs.token_times, rel=1e-5)
    keys = ("accesses", "frame_cache_hits", "media_page_reads", "media_page_reads_waited")
    # (A prefetch partly in time counts its objects in fractions: sums in another order, within 1e-12.)
    assert [blocks.summary["hbf"][k] for k in keys] == pytest.approx([single.summary["hbf"][k] for k in keys],
                                                                      rel=1e-12)
    assert blocks.summary["hbf"]["max_temperature_c"] == pytest.approx(single.summary["hbf"]["max_temperature_c"],
                                                                       abs=1e-4)  # the token times' 1e-5, in °C


def test_a_block_cut_by_an_arriving_request_ends_at_its_cut() -> None:
    """A decode block cut short when a request could join (not re-priced, so the tier's copy still lists the
    iterations after the cut) while prefill reads the media and asks for the decode server's media load at the
    cut: the decode server is idle from the cut on. Found by a randomised search; the run must finish, with the
    package run once to the last token and the servers' accesses adding up."""
    result = simulate(SimulationConfig(system="sm-9:1", model="Qwen3-30B-A3B", workload=FixedBatch(12, 512, 16),
                                       hardware=PAPER_HARDWARE, memory="B",
                                       hbf=HBFOptions(grade=2, frame_cache_gib=0.0, prefetch="next-layer",
                                                      routing_skew=2.0)))
    hbf, end = result.summary["hbf"], max(r.finish for r in result.requests)
    assert sum(hbf["throttle_residency_s"].values()) == pytest.approx(end, rel=1e-12)
    assert hbf["accesses"] == sum(s["accesses"] for s in hbf["servers"].values()) > 0


def test_runs_repeat_exactly() -> None:
    first, second = (_run("duopd", "C", prefetch="moe-speculative", routing_skew=1.0) for _ in range(2))
    assert json.dumps(first.summary) == json.dumps(second.summary) and first.rows == second.rows
    assert first.temperatures == second.temperatures
    # The package ran once through the run, to the last token (not once per server).
    end = max(r.finish for r in first.requests)
    assert sum(first.summary["hbf"]["throttle_residency_s"].values()) == pytest.approx(end, rel=1e-12)
    assert first.temperatures[-1][0] == pytest.approx(end, rel=1e-12)


@pytest.mark.parametrize("system", ["duopd", "sm-5:5"])
def test_drawing_a_resident_blocks_routing_when_settled_changes_nothing(monkeypatch, system) -> None:
    """Layout C's 8 GiB frame cache holds every expert of a GPU: after the first prompt each block is priced
    without its routing, which is drawn for the iterations that ran. Drawing every block's routing when
    it is priced (and replaying the part that ran) must give the same run."""
    lazy = _run(system, "C")
    monkeypatch.setattr(HBFTier, "resident", property(lambda self: False))
    eager = _run(system, "C")
    assert json.dumps(lazy.summary) == json.dumps(eager.summary) and lazy.rows == eager.rows


@pytest.mark.slow
def test_duopd_and_sm_run_with_hbf_from_the_command_line(tmp_path, capsys) -> None:
    common = ["simulate", "--model", "Qwen3-30B-A3B", "--requests", "12", "--input-len", "512", "--output-len", "16"]
    for system, layout in (("duopd", "C"), ("sm-7:3", "B")):
        out = tmp_path / system.replace(":", "_")
        assert main([*common, "--system", system, "--memory", layout, "--prefetch", "moe-speculative",
                     "--out", str(out)]) == 0
        assert "hits by server" in capsys.readouterr().out
        summary = json.loads((out / "summary.json").read_text())["hbf"]
        assert set(summary["servers"]) == ({"gpu", "pnm"} if system == "duopd" else {"prefill", "decode"})
        assert summary["accesses"] == sum(s["accesses"] for s in summary["servers"].values())
        assert (out / "temperature.png").stat().st_size > 0


@pytest.mark.slow
def test_the_tier_costs_duopd_less_than_the_run_itself() -> None:
    """Speed guard (docs/design/hbf.md, "Speed"): DuoPD on layout C with HBF against the same system on C's HBM alone.
    Both run here, one after the other, so load on the machine scales both; measured 1.8x."""
    def cpu(memory: str) -> float:
        config = SimulationConfig(system="duopd", model="Qwen3-30B-A3B",
                                  workload=PoissonArrivals(20, 200, 1024, 128, 0.1, 0),
                                  hardware=PAPER_HARDWARE, memory=memory)
        simulate(config)
        started = time.process_time()
        simulate(config)
        return time.process_time() - started
    assert cpu("C") < 2.5 * cpu(Layout("C's HBM", hbm_stacks=1))


class PlantedGrant:
    """A sharing that grants the asking port the bandwidth fractions it was built with."""

    def __init__(self, granted) -> None:
        self.granted, self.offered = np.asarray(granted), []

    def grant(self, offered):
        self.offered.append(offered)
        return {"gpu": self.granted}


def test_a_ports_media_share_is_granted_over_offered_in_1e_9_to_1_and_whole_alone_or_idle() -> None:
    """Iterations offering 0, 0.5, 0.5 and 0.5 of the media beside a co-runner's 0.7, granted 0, 0.25, 0.9 and
    1e-12: shares 1 (an iteration that reads nothing is not slowed), 0.5, 1 (never above what it asked for) and
    1e-9 (the floor). Alone on the media, or asking for nothing, a port keeps its whole share unasked."""
    sharing = PlantedGrant([0.0, 0.25, 0.9, 1e-12])
    port = SimpleNamespace(role="gpu", tier=SimpleNamespace(tier=SimpleNamespace(sharing=sharing)))
    load = np.array([0.0, 0.5, 0.5, 0.5])
    np.testing.assert_array_equal(HBFPort._media_share(port, load, {"pnm": 0.7}), [1.0, 0.5, 1.0, 1e-9])
    assert list(sharing.offered[0]) == ["pnm", "gpu"] and sharing.offered[0]["gpu"] is load
    np.testing.assert_array_equal(HBFPort._media_share(port, np.array([2.0]), {}), [1.0])
    np.testing.assert_array_equal(HBFPort._media_share(port, np.zeros(2), {"pnm": 0.7}), [1.0, 1.0])
    assert len(sharing.offered) == 1


# ----- the tier's parts, by hand -------------------------------------------------------------------------
# Two layers of 8 experts of 3 x 1024 x 1024 FP16 values (6,291,456 B = 1,536 pages = 6 erase blocks of 256
# pages each); at TP 2 each GPU holds 4 experts per layer.
TINY_MOE = LLM("tiny-moe", layers=2, hidden=1024, heads=8, kv_heads=8, head_dim=128, ffn=1024, vocab=1000,
               gated_mlp=True, experts=8, experts_per_token=2)
EXPERT_BYTES = 6_291_456


class FirstExperts:
    """A planted router: a batch of t tokens is routed to experts 0 .. t-1 of every layer."""

    def __init__(self, layers: int, experts: int) -> None:
        self.layers, self.experts = layers, experts

    def touched_block(self, tokens, experts=slice(None)):
        masks = np.arange(self.experts)[None, None, :] < np.asarray(tokens)[:, None, None]
        return np.broadcast_to(masks, (len(tokens), self.layers, self.experts))[:, :, experts].copy()

    def state(self):
        return None

    def restore(self, state) -> None:
        pass


def _moe_tier(*ports, frame_cache_gib: float = 0.0, prefetch: str = "none"):
    layout = Layout("moe", hbm_stacks=1, hbf_stacks=1, hbf_stack_gib=1.0, weights="hbf",
                    frame_cache_gib=frame_cache_gib)
    loop, tier, made = _tier(layout, *ports, shard=Shard(TINY_MOE, 2), options=HBFOptions(prefetch=prefetch))
    tier.router = FirstExperts(2, 8)
    return loop, tier, made


def test_the_tiny_moe_model_is_what_the_hand_counts_assume() -> None:
    _, tier, _ = _moe_tier(("a", 1e-5, QUIET))
    assert (tier.layers, tier.slots, tier.object_bytes, tier.object_pages) == (2, 4, EXPERT_BYTES, 1536)
    assert tier.blocks_per_object == 6 and tier.lru.capacity == 0


# Per iteration and layer: objects prefetched, fetched on demand, prefetched and used; per iteration: objects
# fetched and accessed. Batches of 2, 3 and 1 tokens touch experts {0, 1}, {0, 1, 2}, {0} of each layer (no frame
# cache: every touched object is read). `moe-speculative` predicts each iteration's experts as the previous
# iteration's (none before the first): it reads {0, 1} (2 waited for), then {0, 1} ahead (both used) and {2} on
# demand, then {0, 1, 2} ahead ({0} used) and nothing on demand. Without it an MoE model waits for every expert
# (`next-layer` cannot know them ahead: its router runs first); a dense model's two layers are known ahead, and
# `next-layer` prefetches them, all used.
MOE_WAITED = ([[0, 0], [0, 0], [0, 0]], [[2, 2], [3, 3], [1, 1]], [[0, 0], [0, 0], [0, 0]], [4, 6, 2], [4, 6, 2])
DENSE_WAITED = ([[0, 0]] * 3, [[1, 1]] * 3, [[0, 0]] * 3, [2, 2, 2], [2, 2, 2])


@pytest.mark.parametrize("moe, prefetch, expected", [
    (True, "moe-speculative", ([[0, 0], [2, 2], [3, 3]], [[2, 2], [1, 1], [0, 0]], [[0, 0], [2, 2], [1, 1]],
                               [4, 6, 6], [4, 6, 2])),
    (True, "none", MOE_WAITED), (True, "next-layer", MOE_WAITED),
    (False, "next-layer", ([[1, 1]] * 3, [[0, 0]] * 3, [[1, 1]] * 3, [2, 2, 2], [2, 2, 2])),
    (False, "moe-speculative", DENSE_WAITED), (False, "none", DENSE_WAITED)])
def test_each_prefetch_reads_ahead_only_what_it_can_know(moe, prefetch, expected) -> None:
    if moe:
        _, tier, (port,) = _moe_tier(("a", 1e-5, QUIET), prefetch=prefetch)
    else:
        layout = Layout("none", hbm_stacks=1, hbf_stacks=1, weights="hbf", frame_cache_gib=0.0)
        _, tier, (port,) = _tier(layout, ("a", 1e-5, QUIET), options=HBFOptions(prefetch=prefetch))
    _, demand, counts = tier.objects(port, np.array([2, 3, 1]))
    for got, want in zip(counts, (*expected, [0, 0, 0])):       # ... and no frame-cache hit
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(port.previous, demand[-1])   # what the next block predicts from


def _planted_tier() -> HBFTier:
    """Two servers at TP 2 with planted counts, KV counts and package."""
    _, tier, (gpu, pnm) = _moe_tier(("gpu", 1e-5, QUIET), ("pnm", 1e-5, QUIET), frame_cache_gib=0.5)
    tier.layout = Layout("kv", hbm_stacks=1, hbf_stacks=1, hbf_stack_gib=1.0, weights="hbf", kv="hbf",
                         frame_cache_gib=0.5)
    gpu.counts = np.array([100, 60, 15, 7, 3, 1000, 200, 5000, 0.25, 0.5])      # ACCESS, in its order
    pnm.counts = np.array([40, 10, 5, 11, 2, 300, 50, 700, 0.125, 1.5])
    tier.kv = SimpleNamespace(counts=dict(zip(KV_COUNTS, [6, 8, 10, 749_568, 14, 16, 18, 20])))    # both servers'
    tier.package = SimpleNamespace(
        flush=lambda: None, residency=[1.5, 0.25, 0.125, 0.0],
        counters={"refresh_read_bytes": 1e6, "programmed_bytes": 3e6, "pe_block_cycles": 96.0, "refreshed_zones": 4.0},
        trace=[(0.5, 50.0, 70.0, 40.0, 0), (1.0, 60.0, 55.0, 45.0, 1), (1.5, 55.0, 60.0, 80.0, 2)])
    return tier


def test_the_summary_is_the_per_gpu_counts_times_tp_under_these_names() -> None:
    """The planted tier: the weights are 2 layers x 4 experts x 6 erase blocks = 48 blocks (96 P/E block cycles:
    2 each); the KV region is the 1 GiB stack less the 48 MiB of weights, 976 erase blocks of 1 MiB: 749,568 KV
    pages programmed are 3 cycles each. Temperatures: the highest of each die over the trace (each in another
    step)."""
    assert _planted_tier().summary() == {
        "gpus": 2, "frame_cache_objects": 85, "object_bytes": EXPERT_BYTES,      # 512 MiB / 6 MiB
        "accesses": 280, "frame_cache_hits": 140, "served_without_media_read": 180, "media_page_reads": 36,
        "media_page_reads_waited": 10, "hbf_media_read_bytes": 2600, "hbf_wasted_prefetch_bytes": 500,
        "hbm_frame_fill_bytes": 11_400, "hbf_refresh_read_bytes": 2e6,
        "hbf_programmed_bytes": 2 * (3e6 + 749_568 * 4096), "refreshed_zones": 8, "pe_cycles_per_block": 2.0,
        "kv_hits": 12, "kv_misses": 16, "kv_media_read_pages": 20, "kv_programmed_pages": 1_499_136,
        "kv_write_backs": 28, "kv_written_tokens": 32, "kv_hbm_read_bytes": 36, "kv_hbm_write_bytes": 40,
        "kv_pe_cycles_per_block": 3.0, "stall_s": 2.0, "cooling_wait_s": 0.375,
        "throttle_residency_s": {"normal": 1.5, "light": 0.25, "severe": 0.125, "shutdown": 0.0},
        "max_temperature_c": {"gpu": 60.0, "hbm": 70.0, "hbf": 80.0},
        "servers": {
            "gpu": {"accesses": 200, "frame_cache_hits": 120, "served_without_media_read": 150,
                    "media_page_reads": 14, "media_page_reads_waited": 6, "hbf_media_read_bytes": 2000,
                    "hbf_wasted_prefetch_bytes": 400, "stall_s": 0.5},
            "pnm": {"accesses": 80, "frame_cache_hits": 20, "served_without_media_read": 30,
                    "media_page_reads": 22, "media_page_reads_waited": 4, "hbf_media_read_bytes": 600,
                    "hbf_wasted_prefetch_bytes": 100, "stall_s": 1.5}}}


def test_a_runs_summary_sums_the_instances_gpus_and_keeps_their_frame_cache_and_object_size() -> None:
    """Two instances of the planted tier (TP 2 each): 4 GPUs, 85 objects of one expert per GPU's frame cache,
    traffic summed."""
    summary = _hbf_summary([_planted_tier().summary(), _planted_tier().summary()])
    assert (summary["gpus"], summary["frame_cache_objects"], summary["object_bytes"]) == (4, 85, EXPERT_BYTES)
    assert (summary["instances"], summary["accesses"], summary["frame_cache_hit_rate"]) == (2, 560, 0.5)


def test_a_fresh_single_server_tier_without_hbf_weights_or_kv_has_no_wear_temperatures_or_servers() -> None:
    _, tier, _ = _tier(Layout("prefix", hbm_stacks=1, hbf_stacks=1, prefix="hbf"), ("a", 1e-3, QUIET))
    summary = tier.summary()
    assert summary["pe_cycles_per_block"] == summary["kv_pe_cycles_per_block"] == 0.0
    assert summary["max_temperature_c"] == {} and "servers" not in summary


def test_an_iteration_is_in_progress_from_its_start_until_its_end_after_its_cooling_wait() -> None:
    """Iterations over [1, 2) and [2, 3) s, the first waiting 0.25 s for the package to cool, the second 0.5 s:
    each draws its power from its start plus its wait to its end; none before 1 s or from 3 s on, nor after a
    cut (its server ended the block with the first)."""
    _, _, (port,) = _tier(Layout("none", hbm_stacks=1, hbf_stacks=1, weights="hbf"), ("a", 1e-3, QUIET))
    power = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    port.block = SimpleNamespace(starts=np.array([1.0, 2.0]), ends=np.array([2.0, 3.0]), waits=np.array([0.25, 0.5]),
                                 power=power)
    assert [port.current(t) for t in (0.5, 1.0, 1.999, 2.0, 2.999, 3.0, 4.0)] == [None, 0, 0, 1, 1, None, None]
    start, end, watts = port.segment(2.0)
    assert (start, end) == (2.5, 3.0)
    np.testing.assert_array_equal(watts, power[1])
    assert port.segment(1.0)[:2] == (1.25, 2.0) and port.segment(3.0) is None
    port.server = SimpleNamespace(ends=np.array([2.0]))
    assert [port.current(t) for t in (1.5, 2.0, 2.5)] == [0, None, None]


class Scripted:
    """A planted package whose service rate is `rates[k]` once it has taken k steps (the last rate from then on),
    recording each step (s, W per die); `run` with `stop` returns after a step that changes the rate."""

    def __init__(self, rates, clock: float = 0.0) -> None:
        self.rates, self.clock, self.taken, self.restored = list(rates), clock, [], []

    @property
    def rate(self) -> float:
        return self.rates[min(len(self.taken), len(self.rates) - 1)]

    def step(self, dt: float, power) -> None:
        self.taken.append((float(dt), [float(w) for w in power]))
        self.clock += dt

    def run(self, dt, power, stop: bool = False) -> int:
        for k, (step_s, watts) in enumerate(zip(dt, power)):
            before = self.rate
            self.step(step_s, watts)
            if stop and self.rate != before:
                return k + 1
        return len(dt)

    def snapshot(self) -> float:
        return self.clock

    def restore(self, clock: float) -> None:
        self.restored.append(clock)
        self.clock = clock

    def flush(self) -> None:
        pass


def test_a_port_waits_in_10_ms_steps_while_the_package_cools_heated_by_the_others_drawing_power() -> None:
    """The asking port's own iteration (drawing 100 W on HBF from 0 s) does not heat the package while it
    waits; the other port's does once it draws power, from 10 ms (after its own wait): three steps, the
    last two at its 1 W (the planted package serves again after those three steps)."""
    asking = SimpleNamespace(segment=lambda now: (0.0, 1.0, np.array([0.0, 0.0, 100.0])))
    other = SimpleNamespace(segment=lambda now: (0.01, 1.0, np.array([1.0, 0.0, 0.0])))
    tier = SimpleNamespace(package=Scripted([0.0, 0.0, 0.0, 1.0]), ports=[asking, other])
    tier.others = lambda port, now: HBFTier.others(tier, port, now)
    assert HBFTier.cool(tier, asking) == pytest.approx(0.03, rel=1e-12)
    assert tier.package.taken == [(0.01, [0.0, 0.0, 0.0]), (0.01, [1.0, 0.0, 0.0]), (0.01, [1.0, 0.0, 0.0])]
    assert HBFTier.cool(tier, asking) == 0.0 and len(tier.package.taken) == 3     # served: no wait


def test_a_cut_scheduled_for_a_block_since_replaced_leaves_the_new_block_alone() -> None:
    old, new, interrupted = object(), object(), []
    port = SimpleNamespace(block=new, server=SimpleNamespace(busy=True, interrupt=lambda: interrupted.append(1)))
    HBFPort._cut(port, old)
    assert not interrupted
    HBFPort._cut(port, new)
    assert interrupted == [1]


def _alone(compute: float, per_layer: float) -> float:
    """One iteration alone on one grade-1 stack: compute, then tR + `per_layer` bytes for each of 2 layers."""
    return compute + 2 * (TR + per_layer / RATE)


def test_a_reprice_when_the_co_runner_stops_gives_the_iteration_its_own_traffic_alone() -> None:
    """b reads 4 experts a layer (load L4 = 8 experts / (T4 x 384 GB/s)) over [0, T4]. a starts at T4 / 8 a block
    of 1, 4 and 1 experts a layer: beside b, its first and last iterations (load 0.40) obtain all they ask, its
    second shares fairly (0.5 each: rate x 0.5 / L4). b stops during a's second iteration: a's server re-prices
    it, and it takes its own time alone, T4 (not its first iteration's); the tier's copy of a's block ends
    with it, as the server's does."""
    compute = 1e-5
    loop, tier, (a, b) = _moe_tier(("a", compute, QUIET), ("b", compute, QUIET))
    t1, t4 = _alone(compute, EXPERT_BYTES), _alone(compute, 4 * EXPERT_BYTES)
    load4 = 8 * EXPERT_BYTES / (t4 * RATE)
    assert b.cost(Work(4, 1, 1, 1)).seconds == pytest.approx(t4, rel=1e-12)
    loop.now = t4 / 8
    priced = a.cost(Work(np.array([1, 4, 1]), 1, 1, 1)).seconds
    shared = compute + 2 * (TR + 4 * EXPERT_BYTES / (RATE * 0.5 / load4))
    np.testing.assert_allclose(priced, [t1, shared, t1], rtol=1e-12)
    assert loop.now + t1 < t4 < loop.now + t1 + shared        # b stops during a's second iteration
    loop.now = t4
    a.server = SimpleNamespace(busy=True, ends=a.block.ends.copy())
    assert a.cost(Work(4, 1, 1, 1)).seconds == pytest.approx(t4, rel=1e-12)
    assert len(a.block.starts) == 2


def test_a_reprice_of_an_iteration_that_reads_nothing_from_the_media_keeps_its_compute_time() -> None:
    """a's block: its first iteration reads both layers into the frame cache, its second hits both. b starts
    during the second (hitting both too): a's server re-prices it, and it still takes only its compute."""
    layout = Layout("t", hbm_stacks=1, hbf_stacks=1, weights="hbf", frame_cache_gib=1.0)
    loop, tier, (a, b) = _tier(layout, ("a", 1e-3, QUIET), ("b", 1e-3, QUIET))
    first = _alone(1e-3, LAYER_BYTES)
    np.testing.assert_allclose(a.cost(Work(np.array([1, 1]), 1, 1, 1)).seconds, [first, 1e-3], rtol=1e-12)
    loop.now = first + 5e-4
    assert b.cost(ONE).seconds == 1e-3
    a.server = SimpleNamespace(busy=True, ends=a.block.ends.copy())
    assert a.cost(ONE).seconds == 1e-3


def test_media_times_add_each_layers_latency_and_transfer_the_late_prefetch_and_the_write_backs() -> None:
    """By hand, latency 10 us, 2 stacks x 4 outstanding operations, tPROG 100 us, 1 and 2 GB/s in two iterations
    of two layers. Waited-for bytes: 1 B (10 us + 1 ns) and 2 MB (10 us + 1 ms). Prefetched: 1 B, overlapping
    nothing (late by 10 us + 1 ns: none of it arrived in time), and 4 MB (10 us + 2 ms) overlapping 1 ms (late by
    10 us + 1 ms; (1 ms - 10 us) x 2 GB/s = 1.98 MB of it, 49.5 %, arrived in time); a layer prefetching nothing
    has all of it in time, even overlapping nothing. Two pages written back in the second iteration: 8,192 B at
    2 GB/s (4.096 us) + 2 x 100 us over 8 operations at once (25 us). Without prefetch or write-backs only the
    waits count, and no layer has a prefetch to arrive."""
    _, tier, _ = _tier(Layout("w", hbm_stacks=1, hbf_stacks=1, weights="hbf", frame_cache_gib=0.0), ("a", 1e-3, QUIET))
    tier.tier = SimpleNamespace(latency_s=1e-5)
    tier.stack = SimpleNamespace(program_s=1e-4, outstanding_reads=4)
    tier.layout = SimpleNamespace(hbf_stacks=2)
    rate, demand = [1e9, 2e9], np.array([[0.0, 1.0], [2e6, 0.0]])
    stall, arrived = tier.media_times(rate, np.array([[1.0, 0.0], [4e6, 0.0]]), demand,
                                   np.array([[0.0, 0.0], [1e-3, 0.0]]), np.array([0.0, 8192.0]))
    assert stall == pytest.approx([2 * (1e-5 + 1e-9), 2 * (1e-5 + 1e-3) + 4.096e-6 + 2.5e-5], rel=1e-12)
    np.testing.assert_allclose(arrived, [[0.0, 1.0], [0.495, 1.0]], rtol=1e-12)
    stall, arrived = tier.media_times(rate, None, demand, None, np.zeros(2))
    assert stall == pytest.approx([1e-5 + 1e-9, 1e-5 + 1e-3], rel=1e-12) and arrived is None


def test_an_iteration_stretched_by_the_media_offers_its_hbm_bytes_over_its_longer_time_plus_its_fills() -> None:
    """TP 2: an iteration of 2 s offering half the HBM bandwidth, stretched to 4 s with 1 GB of frame fills per GPU,
    offers a quarter plus 1 GB over 4 s of one GPU's bandwidth, and moves 2 x 1 GB more HBM bytes; unstretched
    and without fills it is unchanged. Its FLOPs and link bytes stand, per iteration."""
    _, _, (port,) = _tier(Layout("w", hbm_stacks=1, hbf_stacks=1, weights="hbf"), ("a", 1e-3, QUIET),
                          shard=Shard(TINY, 2))
    bandwidth = PAPER_HARDWARE.gpu.memory.bandwidth
    base = Cost(2.0, 5.0, 1e9, 7.0, 0.5)
    block = port._cost(base, np.array([4.0, 2.0]), np.array([1e9, 0.0]), False)
    want = ([4.0, 2.0], [5.0, 5.0], [3e9, 1e9], [7.0, 7.0], [0.25 + 1e9 / (4 * bandwidth), 0.5])
    for got, expected in zip(block, want):
        assert got.tolist() == pytest.approx(expected, rel=1e-15, abs=0)
    one = port._cost(base, np.array([4.0]), np.array([1e9]), True)
    assert one == pytest.approx((4.0, 5.0, 3e9, 7.0, 0.25 + 1e9 / (4 * bandwidth)), rel=1e-15, abs=0)


def test_the_package_steps_of_a_port_split_where_others_start_and_end_and_cut_at_until_with_their_power() -> None:
    """By hand. No iteration, 1 s to 5 s: steps split at the others' ends inside (1.5, 2, 3, 4 s), each other
    port's power over the part it overlaps. Iterations (no wait then 2 s at [1, 2, 3] W; 1 s wait then 2 s at
    [4, 5, 6] W) from 10 s cut at 14 s: the last runs 13–14 s, where another port draws 100 W on the GPU (and
    one drawing from 14 s adds nothing); the empty wait is dropped."""
    others = [(2.0, 3.0, (10.0, 0.0, 0.0)), (0.0, 1.5, (0.0, 20.0, 0.0)), (4.0, 9.0, (0.0, 0.0, 30.0))]
    dt, drawn, iteration = steps(1.0, np.zeros(0), np.zeros(0), np.zeros((0, 3)), others, until=5.0)
    assert dt.tolist() == [0.5, 0.5, 1.0, 1.0, 1.0] and iteration.tolist() == [0] * 5
    assert drawn.tolist() == [[0, 20, 0], [0, 0, 0], [10, 0, 0], [0, 0, 0], [0, 0, 30]]
    power = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    for other in [(13.0, 14.0, (100.0, 0.0, 0.0)), (14.0, 15.0, (100.0, 0.0, 0.0))]:
        dt, drawn, iteration = steps(10.0, np.array([0.0, 1.0]), np.array([2.0, 2.0]), power, [other], until=14.0)
        assert dt.tolist() == [2.0, 1.0, 1.0] and iteration.tolist() == [0, 1, 1]
        last = [104.0, 5.0, 6.0] if other[0] == 13.0 else [4.0, 5.0, 6.0]
        assert drawn.tolist() == [[1, 2, 3], [0, 0, 0], last]
