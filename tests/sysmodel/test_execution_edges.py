"""The executors' prices checked against numbers worked out by hand (issue 19's mutation testing found these
unchecked): the PNM's tensor-parallel exchanges (two inter-PNM all-reduces and two NVLink all-reduces per layer)
and their link bytes, its FLOPs and HBM bytes over GPUs and stacks, its offered load and bandwidth scale, and the
verified pnm_array entry the PNM's figures come from."""
from dataclasses import replace

import numpy as np
import pytest

from basedie.verified import VerifiedBlocks, VerifiedEntry
from sysmodel.arbitration import MMUArbitration
from sysmodel.execution import PNMExecution, PNMFigures, pnm_entries
from sysmodel.hardware import PAPER_HARDWARE, Link
from sysmodel.llm import LLM
from sysmodel.memory import MemoryTier
from sysmodel.operators import Shard, decode_work

# One layer of two heads of 4 (two KV heads), MLP 8 → 16 → 8 (2 matrices), a 4-token vocabulary: every operator's
# elements and FLOPs are small enough to count by hand, at TP1 and at TP2 (one head per GPU).
PAIR = LLM("pair", layers=1, hidden=8, heads=2, kv_heads=2, head_dim=4, ffn=16, vocab=4, gated_mlp=False)
FREE_MMU = MMUArbitration("prefill-first", 1.0, (0.5, 1.0), {"gpu": np.ones((2, 3)), "pnm": np.ones((3, 2))},
                          {"gpu": np.zeros((3, 3)), "pnm": np.zeros((3, 3))}, {"gpu": 0, "pnm": 0}, 1e9)


def pnm(tp: int, stacks: int = 1, stack_bandwidth: float = 1e18, macs: float = 1.0, all_reduce_s: float = 0.0,
        link_bandwidth: float = 1e30) -> PNMExecution:
    """PAIR on `tp` GPUs of `stacks` stacks (one PNM each) of no latency: 8 lanes of `macs` MACs per cycle at
    1 GHz, an MMU that serves everything at once."""
    stack = MemoryTier("stack", 1e12, stack_bandwidth, 0.0, 0.0)
    gpu = replace(PAPER_HARDWARE.gpu, stacks=stacks, stack=stack)
    hardware = replace(PAPER_HARDWARE, gpu=gpu, gpus=tp, link=Link("link", link_bandwidth, 0.0),
                       pnm=replace(PAPER_HARDWARE.pnm, lanes=8, clock_hz=1e9, all_reduce_s=all_reduce_s))
    return PNMExecution(hardware, Shard(PAIR, tp), PNMFigures(8, 1e9, 0, macs), FREE_MMU)


# Decode of 4 sequences holding 10 KV tokens in all. Elements streamed at TP1: qkv weights 8 × (8 + 2·8) = 192,
# the new tokens' K and V 2 × 4 × 8 = 64, cached K and V 2 × 10 × 8 = 160, o_proj 8 × 8 = 64, MLP 2 × 8 × 16 = 256,
# LM head 8 × 4 = 32: 768 values, 1,536 bytes. At TP2 each GPU streams half of each (384 values).
WORK = decode_work(4, 10)
BYTES = 1536


@pytest.mark.parametrize(("tp", "stacks"), [(1, 1), (1, 2), (2, 1), (2, 2)])
def test_a_pnm_iteration_moves_every_value_once_over_its_gpus_and_stacks(tp: int, stacks: int) -> None:
    cost = pnm(tp, stacks).cost(WORK)
    assert cost.hbm_bytes == BYTES
    # FLOPs: qkv 2·4·8·24 = 1,536, attention 4·2·4·10 = 320, o_proj 2·4·8·8 = 512, MLP 2·4·256 = 2,048, LM head
    # 2·4·8·4 = 256; the norms (2 × 4·4·8 per layer, 4·4·8 final = 384) run on every GPU, once per GPU.
    assert cost.flops == 1536 + 320 + 512 + 2048 + 256 + tp * 384


def test_a_memory_bound_pnm_asks_for_the_whole_stack_and_a_halved_share_doubles_its_time() -> None:
    # 1e6 MACs per lane-cycle: the lanes never wait; 1 GB/s: 1,536 bytes take 1.536 µs.
    fast_lanes = pnm(1, stack_bandwidth=1e9, macs=1e6)
    cost = fast_lanes.cost(WORK)
    assert cost.seconds == pytest.approx(BYTES / 1e9, rel=1e-9)
    assert cost.offered == pytest.approx(1.0, rel=1e-9)
    assert fast_lanes.cost(WORK, bandwidth_scale=0.5).seconds == pytest.approx(2 * BYTES / 1e9, rel=1e-9)


def test_tensor_parallel_pnms_pay_two_inter_pnm_and_two_link_all_reduces_per_layer() -> None:
    # TP2: each layer all-reduces the 4 tokens' 8 activations (64 B) after attention and after the MLP, between
    # the GPU's PNMs (0.5 µs each) and over NVLink (a ring of 2 sends 2 · ½ · 64 B per GPU: 64 ns at 1 GB/s).
    base = pnm(2).cost(WORK)
    assert pnm(2, all_reduce_s=0.5e-6).cost(WORK).seconds - base.seconds == pytest.approx(2 * 0.5e-6, rel=1e-9)
    assert pnm(2, link_bandwidth=1e9).cost(WORK).seconds - base.seconds == pytest.approx(2 * 64e-9, rel=1e-9)
    # Link bytes: 2 all-reduces × 64 B per GPU, 2 GPUs; none at TP1.
    assert base.link_bytes == 2 * 64 * 2 and pnm(1).cost(WORK).link_bytes == 0


PROVENANCE = {"sources_digest": "-", "bench": "tb.pnm.bench", "rtl_module": "rtl.pnm.lane"}


def lane(width: int) -> VerifiedEntry:
    return VerifiedEntry("pnm_lane", {"width": width, "sublane_width": min(width, 128), "design_clock_hz": 1e9},
                         {"latency_cycles": 10, "operand_pairs_per_cycle": 1.0, "macs_per_cycle": float(width)},
                         PROVENANCE)


def array(width: int) -> VerifiedEntry:
    return VerifiedEntry("pnm_array", {"width": width, "sublane_width": 4, "lanes": 16, "design_clock_hz": 1e9},
                         {"latency_cycles": 15, "operand_pairs_per_cycle": 1.0, "macs_per_cycle": 16.0 * width},
                         PROVENANCE)


@pytest.mark.parametrize(("lane_width", "chosen"), [(64, 64), (1024, 1024), (2048, 1024)])
def test_the_array_entry_is_the_lanes_width_else_the_widest(lane_width: int, chosen: int) -> None:
    # Arrays of 16 lanes verified at widths 16, 1,024 and 64: the lane's own width when there is one, else the
    # widest (the closest to a full-width array).
    table = VerifiedBlocks([lane(lane_width), array(16), array(1024), array(64)])
    hardware_pnm = replace(PAPER_HARDWARE.pnm, lane_width=lane_width)
    found_lane, found_array = pnm_entries(table, hardware_pnm)
    assert found_lane.params["width"] == lane_width and found_array.params["width"] == chosen
