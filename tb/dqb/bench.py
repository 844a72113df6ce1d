"""cocotb bench of the DQB: bit-exact against the golden model `tb.models.dqb` under random memory latency
and back-pressure, errors, reset mid-traffic, checkpoint formats end to end, and the measured figures."""
import random
from dataclasses import replace

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from rtl.dqb.dqb import DQB
from rtl.dqb.ports import Kind

from .. import bench
from ..memory import MemoryController
from basedie.weights import checkpoints, pc_layout
from ..models import dqb as golden
from ..models.dqb import LayerEntry, Response
from .harness import MODE_NAMES, Harness, count_checked, params
from .stimulus import Operation, Scenario, expected_responses, random_operations, random_scenario

def _scenario(seed: int, layers: int = 4, decoys: bool = True) -> Scenario:
    return random_scenario(np.random.default_rng(seed), params().beat_bytes, layers, decoys)


@cocotb.test()
async def every_mode_and_error(dut):
    """Every tag (7 modes, bypass, reserved) on every layer, plus tagged reads outside every layer."""
    await bench.start(dut)
    p = params()
    scenario = _scenario(1)
    h = Harness(dut, scenario.image, random.Random(1))
    await h.program(scenario.table, scenario.enabled)
    ops = [Operation(e.weight_base + beat * p.beat_bytes, tag) for tag in range(8) for e in scenario.entries
           for beat in (0, 1, e.weight_size // p.beat_bytes - 1)]
    ops += [Operation(scenario.scratch, tag) for tag in range(8)]
    expected, _ = expected_responses(scenario, ops, p.rounding, p.interface_bits)
    checked = await h.checked(ops, expected)
    await h.idle()
    assert [r["address"] for r in h.memory.reads(kind=Kind.GPU.value)] == [op.address for op in ops], \
        "reads not forwarded"
    bench.record(directed_vectors=checked)


async def _under_back_pressure(dut, seed: int) -> tuple[Harness, Scenario, np.random.Generator]:
    """Six random layers programmed into a started DQB, random memory latency and stalls on every port; and the
    generator of the operations to send."""
    await bench.start(dut)
    rng = np.random.default_rng(seed)
    scenario = _scenario(seed, layers=6)
    h = Harness(dut, scenario.image, random.Random(seed), latency=(1, 40), memory_stalls=0.2, request_gaps=0.2,
                response_stalls=0.4)
    await h.program(scenario.table, scenario.enabled)
    return h, scenario, rng


@cocotb.test()
async def random_traffic_under_back_pressure(dut):
    """Mixed reads (all tags), byte-masked stores to scratch and to S/Z, layer switches and table misses, with
    random memory latency and stalls on every port: bit-exact, in order, stores reach memory unchanged with their
    masks, and each store's one acknowledgement comes after the memory answered it (the store is in memory)."""
    p = params()
    h, scenario, rng = await _under_back_pressure(dut, seed=2)
    answered, delivered = bench.HandshakeProbe(dut, "mc_resp"), bench.HandshakeProbe(dut, "gpu_resp")
    ops = random_operations(rng, scenario, p.beat_bytes, 600, store_probability=0.3)
    expected, final_image = expected_responses(scenario, ops, p.rounding, p.interface_bits)
    checked = await h.checked(ops, expected)
    await h.idle()
    for probe in (answered, delivered):
        probe.stop()
    stores = [(op.address, op.store, op.byte_mask(p.beat_bytes)) for op in ops if op.store is not None]
    assert [(r["address"], r["data"], r["mask"]) for r in h.memory.requests if r["is_write"]] == stores, \
        "stores changed or lost"
    # The memory answers every request in order: answer j is request j's. The k-th acknowledgement on gpu_resp
    # must follow the k-th store's answer.
    store_answers = [cycle for cycle, r in zip(answered.cycles, h.memory.requests, strict=True) if r["is_write"]]
    acks = [cycle for cycle, (_, beat) in zip(delivered.cycles, h.board.log["gpu_resp"], strict=True) if beat[2]]
    assert len(acks) == len(stores) and all(a > s for a, s in zip(acks, store_answers)), \
        "a store was acknowledged before the memory answered it"
    assert h.memory.overtaken == 0, "a memory answer overtook an older one: the DQB needs them in order"
    assert all(r["kind"] == Kind.GPU.value for r in h.memory.requests if r["is_write"])
    assert all(data == golden.beat_to_int(final_image[address:address + p.beat_bytes])
               for address, data in h.memory.contents.written.items()), "memory differs after the stores"
    bench.record(random_vectors=checked, random_reads=len(ops) - len(stores), random_stores=len(stores))


@cocotb.test()
async def table_update_under_traffic(dut):
    """The whole layer table rewritten, again and again, while reads and byte-masked stores are in flight under
    random back-pressure (config beats paced at random too): each update alternates between the layers' entries
    and the same ones with groups twice as wide, which every dequantized read can tell apart. Each read must see
    one whole version, the one `golden.table_versions` gives from the cycles the read and each update's last beat
    were taken; a read that saw a half-written table (some entries new, some old) fails."""
    p = params()
    h, scenario, rng = await _under_back_pressure(dut, seed=11)
    coarse = [replace(e, log2_group_width=e.log2_group_width + 1) for e in scenario.table]
    tables = [scenario.table, coarse]
    accepted, configured = bench.HandshakeProbe(dut, "gpu_req"), bench.HandshakeProbe(dut, "config", payloads=True)
    h.config.set_pause_generator(bench.random_pauses(random.Random(11), 0.5))
    ops = random_operations(rng, scenario, p.beat_bytes, 500)
    h.expect(ops, None)
    cocotb.start_soon(h.send(ops))
    updates = 0
    while len(accepted.cycles) < len(ops):
        await ClockCycles(dut.clk, int(rng.integers(5, 40)))
        updates += 1
        await h.program(tables[updates % 2], scenario.enabled)
    await h.board.drained()
    await h.idle()
    for probe in (accepted, configured):
        probe.stop()
    last = [cycle for cycle, payload in zip(configured.cycles, configured.payloads, strict=True)
            if h.config_fields.unpack(payload)["last"]]
    versions = golden.table_versions(accepted.cycles, last)
    enabled = [[e for e, on in zip(table, scenario.enabled, strict=True) if on] for table in tables]
    expected, _ = expected_responses(scenario, ops, p.rounding, p.interface_bits, enabled,
                                     [v % 2 for v in versions])
    want = [(beat, r.error, r.is_write) for r in expected for beat in r.beats]
    got = [beat for _, beat in h.board.log["gpu_resp"]]
    assert len(got) == len(want)
    wrong = [k for k, (a, b) in enumerate(zip(got, want)) if a != b]
    assert not wrong, f"{len(wrong)} beats differ from the golden model's; the first is beat {wrong[0]}"
    assert len(set(versions)) > 4, f"the traffic saw only table versions {sorted(set(versions))}"
    count_checked(sum(len(r.beats) for r in expected if not r.is_write) * p.lanes)
    bench.record(table_updates=updates)


@cocotb.test()
async def reset_mid_traffic(dut):
    """A reset with reads in flight empties the block (and the request table); traffic after it is exact."""
    await bench.start(dut)
    p = params()
    scenario = _scenario(3)
    h = Harness(dut, scenario.image, random.Random(3), latency=(5, 30), response_stalls=0.3)
    await h.program(scenario.table, scenario.enabled)
    ops = random_operations(np.random.default_rng(3), scenario, p.beat_bytes, 200, store_probability=0)
    h.expect(ops, expected_responses(scenario, ops, p.rounding, p.interface_bits)[0])  # those before the reset
    cocotb.start_soon(h.send(ops))
    await ClockCycles(dut.clk, 60)
    await h.restart(scenario.image)
    assert dut.gpu_resp__valid.value == 0 and dut.mc_req__valid.value == 0, "not idle after reset"
    table_miss = [Operation(scenario.entries[0].weight_base, 0b101)]
    await h.checked(table_miss, [Response((0, 0), True)])  # the table was cleared too
    await h.program(scenario.table, scenario.enabled)
    ops = random_operations(np.random.default_rng(4), scenario, p.beat_bytes, 200, store_probability=0)
    expected, _ = expected_responses(scenario, ops, p.rounding, p.interface_bits)
    await h.checked(ops, expected)
    await h.idle()


@cocotb.test()
async def unusable_entry_is_a_table_miss(dut):
    """An entry the datapath cannot serve (S/Z base not beat-aligned, or 1-byte groups) answers tagged reads
    with the table-miss error response; untagged reads there are unaffected."""
    await bench.start(dut)
    p = params()
    scenario = _scenario(5, layers=2, decoys=False)
    first, second = scenario.entries
    entries = [LayerEntry(first.weight_base, first.weight_size, first.scale_base + 2, first.zero_base,
                          first.log2_group_width),
               LayerEntry(second.weight_base, second.weight_size, second.scale_base, second.zero_base, 0)]
    h = Harness(dut, scenario.image, random.Random(5))
    await h.program(entries)
    ops = [Operation(e.weight_base, tag) for e in entries for tag in (0b001, 0b010, 0b110, 0b000)]
    data = [golden.beat_to_int(scenario.image[op.address:op.address + p.beat_bytes]) for op in ops]
    expected = [Response((d,), False) if op.tag == 0 else Response((0,) * golden.MODES[op.tag].expansion, True)
                for op, d in zip(ops, data)]
    await h.checked(ops, expected)


@cocotb.test()
async def checkpoints_end_to_end(dut):
    """GPTQ v1, v2, act-order and AWQ INT4 checkpoints laid out PC-aware over 2 PCs, read through the RTL
    (FP16 out), reassembled, equal to each format's own numpy dequantization."""
    p = params()
    if p.rounding != "nearest_even":
        return  # the checkpoints' references round to nearest even
    rng = np.random.default_rng(6)
    in_features, out_features, group_size, num_pcs, ig = 256, 16, 64, 2, max(64, p.beat_bytes)
    cases = {}
    for name, version, act_order in (("gptq_v1", 1, False), ("gptq_v2", 2, False), ("gptq_act_order", 2, True)):
        q = rng.integers(0, 16, (in_features, out_features))
        z = rng.integers(int(version == 1), 16, (in_features // group_size, out_features))
        scales = rng.uniform(1e-3, 0.1, z.shape).astype(np.float16)
        g_idx = (rng.permutation(np.arange(in_features) // group_size) if act_order
                 else np.arange(in_features) // group_size).astype(np.int32)
        checkpoint = checkpoints.pack_gptq(q, z, scales, g_idx, version)
        layer, perm = checkpoints.gptq_to_dqb(checkpoint)
        cases[name] = (layer, checkpoints.dequantize_gptq(checkpoint)[perm].T)
    q = rng.integers(0, 16, (in_features, out_features))
    z = rng.integers(0, 16, (in_features // group_size, out_features))
    awq = checkpoints.pack_awq(q, z, rng.uniform(1e-3, 0.1, z.shape).astype(np.float16), group_size)
    cases["awq"] = (checkpoints.awq_to_dqb(awq), checkpoints.dequantize_awq(awq).T)

    checked = 0
    await bench.start(dut)
    h = Harness(dut, np.zeros(0, np.uint8), random.Random(6), latency=(2, 20), response_stalls=0.2)
    for name, (layer, reference) in cases.items():
        layout = pc_layout.build_layout([layer], ig, num_pcs, global_base=ig * num_pcs, beat_bytes=p.beat_bytes)
        responses = []
        for pc in range(num_pcs):
            await h.restart(layout.images[pc])
            await h.program(layout.entries(pc))
            reads = layout.reads(pc, 0)
            tag = golden.tag_of("int4", "fp16")
            # Checked after reassembly against the format's own reference, not beat by beat.
            got = await h.run([Operation(a, tag) for a in reads], None)
            assert not any(error for _, error, _ in got), f"{name}: error responses"
            responses.append([data for data, _, _ in got])
        out = layout.reassemble(0, responses, p.interface_bits)
        bad = np.flatnonzero(out != reference.view(np.uint16))
        assert not len(bad), f"{name}: {len(bad)} of {out.size} weights differ from the checkpoint's reference"
        checked += count_checked(out.size)
    bench.record(checkpoint_vectors=checked)


async def _isolated_read(h: Harness, scenario: Scenario, op: Operation, accepted, data_in,
                         delivered) -> tuple[int, int]:
    """(memory answer in → first beat out, GPU request accepted → first beat out) of one read (or a store and its
    acknowledgement) on an idle DQB."""
    expected, _ = expected_responses(scenario, [op], h.params.rounding, h.params.interface_bits)
    await h.run([op], expected)  # checked, not counted: vectors_checked counts the timed streams
    await ClockCycles(h.dut.clk, 4)
    first_out = delivered.cycles[-len(expected[0].beats)]
    return first_out - data_in.cycles[-1], first_out - accepted.cycles[-1]


@cocotb.test()
async def timing_figures(dut):
    """Read latency per mode (memory data in → first beat, and GPU request accepted → first beat: the memory's
    latency and the DQB's), S/Z miss penalty, and the response rate of a stream of S/Z hits without
    back-pressure (target: one beat per cycle in every mode), with the rate the memory side is consumed at
    meanwhile (a dequantizing read turns one memory beat into 16/bits response beats)."""
    await bench.start(dut)
    p = params()
    rng = np.random.default_rng(7)
    beats = 64  # one group per beat: 64 groups, whose S/Z fit in the buffer
    size = beats * p.beat_bytes
    groups = beats
    image = np.zeros(3 * size, dtype=np.uint8)
    image[:size] = rng.integers(0, 256, size, dtype=np.uint8)
    image[size:size + 2 * groups] = rng.uniform(0.5, 2, groups).astype(np.float16).view(np.uint8)
    image[2 * size:2 * size + groups] = rng.integers(0, 256, groups, dtype=np.uint8)
    entry = LayerEntry(0, size, size, 2 * size, p.beat_bytes.bit_length() - 1)
    scenario = Scenario(image, [entry], 3 * size)
    h = Harness(dut, image, random.Random(7), latency=(8, 8))
    accepted, data_in = bench.HandshakeProbe(dut, "gpu_req"), bench.HandshakeProbe(dut, "mc_resp")
    delivered = bench.HandshakeProbe(dut, "gpu_resp")
    await h.program([entry])

    latency, request_latency, rates, memory_rates, gaps, checked = {}, {}, {}, {}, {}, 0
    for tag in range(8):
        latency[MODE_NAMES[tag]], request_latency[MODE_NAMES[tag]] = await _isolated_read(
            h, scenario, Operation(0, tag), accepted, data_in, delivered)
        ops = [Operation(b * p.beat_bytes, tag) for b in range(beats)]
        expected, _ = expected_responses(scenario, ops, p.rounding, p.interface_bits)
        checked += await h.checked(ops, expected)  # warms the S/Z buffer
        start, memory_start = len(delivered.cycles), len(data_in.cycles)
        checked += await h.checked(ops, expected)  # every S/Z access hits
        cycles = delivered.cycles[start:]
        rates[MODE_NAMES[tag]] = round((len(cycles) - 1) / (cycles[-1] - cycles[0]), 4)
        # Memory beats taken per cycle over the same stream: its beats over the response beats' span.
        assert len(data_in.cycles) - memory_start == beats, "every S/Z access should hit"
        memory_rates[MODE_NAMES[tag]] = round(beats * rates[MODE_NAMES[tag]] / len(cycles), 4)
        gaps[MODE_NAMES[tag]] = np.diff(cycles)
    # The block's statement: pass-through beats take the short path on an empty datapath, the rest the lanes.
    stated = {name: DQB.latency if golden.MODES.get(tag) else DQB.bypass_latency for tag, name in MODE_NAMES.items()}
    assert latency == stated, f"read latency per mode {latency}, stated {stated}"
    # A store's acknowledgement: the memory's answer → its beat on gpu_resp.
    store_latency, _ = await _isolated_read(h, scenario, Operation(3 * size - p.beat_bytes, store=1, mask=1),
                                            accepted, data_in, delivered)

    # S/Z miss penalty: the same isolated INT8 read with its scale and zero beats cold, then cached.
    await h.program([entry])  # any configuration write empties the S/Z buffer
    miss_reads = len(h.memory.reads())
    _, cold = await _isolated_read(h, scenario, Operation(0, 0b101), accepted, data_in, delivered)
    assert len(h.memory.reads()) - miss_reads == 3, "a cold read should fetch one scale and one zero beat"
    _, warm = await _isolated_read(h, scenario, Operation(0, 0b101), accepted, data_in, delivered)
    for probe in (accepted, data_in, delivered):
        probe.stop()
    # Behind a DRAM model a refresh or a row miss may hold a stream up: measured there, not required.
    if isinstance(h.memory, MemoryController):
        assert min(rates.values()) == 1.0, f"response beats per cycle with S/Z hits: {rates}"
    bench.record(read_latency_cycles=latency, latency_cycles=latency["int4_fp16"],
                 bypass_latency_cycles=latency["bypass"], store_ack_latency_cycles=store_latency,
                 beats_per_cycle=min(rates.values()),
                 request_latency_cycles=request_latency, beats_per_cycle_by_mode=rates,
                 memory_beats_per_cycle_by_mode=memory_rates,
                 # The II, the slowest mode's shortest gap between response beats (the DQB's own rate behind any
                 # memory); the longest gap is what the memory's stalls (a refresh, a row miss) cost it.
                 initiation_interval=max(int(g.min()) for g in gaps.values()),
                 longest_gap_cycles=max(int(g.max()) for g in gaps.values()),
                 sz_miss_penalty_cycles=cold - warm, timing_vectors=checked)


@cocotb.test()
async def sz_traffic_of_streaming_layers(dut):
    """A layer laid out PC-aware (one PC) streamed through the DQB for G ∈ {64, 128, 256} × {4, 8}-bit: the S/Z
    share of memory reads (StreamDQ Table 3) and the S/Z buffer hit rate, counted from the memory traffic."""
    p = params()
    rng = np.random.default_rng(8)
    rows = p.beat_bytes // 2  # × 4 groups per row: whole S/Z lines for INT4 and INT8
    fractions, checked, hit_rate = [], 0, None
    await bench.start(dut)
    h = Harness(dut, np.zeros(0, np.uint8), random.Random(8), latency=(8, 8))
    for bits, weight in ((4, "int4"), (8, "int8")):
        for group_size in (64, 128, 256):
            codes = rng.integers(-(1 << bits - 1), 1 << bits - 1, (rows, 4 * group_size))
            zeros = rng.integers(-(1 << bits - 1), 1 << bits - 1, (rows, 4))
            scales = rng.uniform(1e-3, 0.1, (rows, 4)).astype(np.float16).view(np.uint16)
            layer = pc_layout.QuantizedLayer(codes, zeros, scales, weight, group_size)
            layout = pc_layout.build_layout([layer], 256, 1, beat_bytes=p.beat_bytes)
            await h.restart(layout.images[0])
            await h.program(layout.entries(0))
            tag = golden.tag_of(weight, "fp16")
            ops = [Operation(a, tag) for a in layout.reads(0, 0)]
            scenario = Scenario(layout.images[0], layout.entries(0), 0)
            expected, _ = expected_responses(scenario, ops, p.rounding, p.interface_bits)
            checked += await h.checked(ops, expected)
            weight_reads = len(h.memory.reads(kind=Kind.GPU.value))
            fills = len(h.memory.reads(kind=Kind.SCALE.value)) + len(h.memory.reads(kind=Kind.ZERO.value))
            fraction = fills / (fills + weight_reads)
            expected_fraction = pc_layout.sz_read_fraction(bits, group_size)
            assert abs(fraction - expected_fraction) < 1e-9, \
                f"{bits}-bit G={group_size}: S/Z reads {fraction:.4%}, contiguous S/Z gives {expected_fraction:.4%}"
            rate = 1 - fills / (2 * weight_reads)
            fractions.append({"weight_bits": bits, "group_size": group_size, "fraction": round(fraction, 6),
                              "sz_buffer_hit_rate": round(rate, 6)})
            if (bits, group_size) == (4, 128):
                hit_rate = rate
    bench.record(sz_read_fraction=fractions, sz_buffer_hit_rate=round(hit_rate, 6), streaming_vectors=checked)


@cocotb.test(skip=not bench.soak_beats())
async def soak(dut):
    """`basedie verify dqb --soak N`: N operations (mixed reads of all tags, stores to scratch and to S/Z, layer
    switches and table misses) with random memory latency and stalls on every port, every response beat checked
    on arrival, a chunk at a time; each chunk's expectations start from the image the stores before it left."""
    p = params()
    h, scenario, rng = await _under_back_pressure(dut, seed=10)
    start, beats = bench.cycles_simulated(), {"gpu_req": 0, "gpu_resp": 0}
    for size in bench.soak_chunks(bench.soak_beats()):
        ops = random_operations(rng, scenario, p.beat_bytes, size)
        expected, scenario.image = expected_responses(scenario, ops, p.rounding, p.interface_bits)
        await h.checked(ops, expected)
        beats["gpu_req"] += len(ops)
        beats["gpu_resp"] += len(h.board.log["gpu_resp"])
        h.board.clear()
    await h.idle()
    bench.record_soak(beats, bench.cycles_simulated() - start)
