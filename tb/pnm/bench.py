"""cocotb bench of the PNM top: programs run from the host's start to DONE, with every stored byte compared with
the golden model (`tb.models.pnm`), under random back-pressure and latency on the memory side; the cycles
each instruction kind takes at a few sizes; a malformed instruction, a store into protected memory and commands
the sequencers refuse, each ending as docs/pnm.md says."""
import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from rtl.pnm_controller.isa import Instruction, Opcode, act_func, vop_func
from rtl.pnm_vector.ports import Op, Reduce
from rtl.registry import BLOCKS

from .. import bench
from ..models import pnm_controller as control
from ..models import pnm as model
from . import decode, layer
from .harness import PROTECTED, Harness
from .rows import Rows

BARRIER, DONE = Instruction(Opcode.BARRIER.value), Instruction(Opcode.DONE.value)
INPUTS, OUTPUTS = 0x1000, 0x8000   # memory: operands above the protected region; results
CHECKED = {"programs_checked": 0, "bytes_checked": 0}


def _record(h: Harness, **figures) -> None:
    CHECKED["programs_checked"] += h.programs_checked
    CHECKED["bytes_checked"] += h.bytes_checked
    bench.record(**figures, **CHECKED, vectors_checked=CHECKED["bytes_checked"])


def _rows(h: Harness) -> Rows:
    return Rows(h.put, h.params.row_bytes, h.params.tile_bytes, h.params.mmu_params().max_tensor_bytes, INPUTS)


def layer_program(h: Harness, m: int, n: int, tiles: int, act: Op, vop: Op, reduce: Reduce) -> list[Instruction]:
    """The MLP and attention shapes of a decode step at the bench's size: GEMV x·Wᵀ, an activation, a VOP with
    another tensor, a reduction of each vector (of its squares, RMSNorm's first step, or its maximum, softmax's),
    a product with one scale per vector (broadcast), attention scores of one sublane's head dimension over keys
    that end in a partial tile, P·V with V transposed; every result stored."""
    p, rows = h.params, _rows(h)
    k = tiles * p.width
    x_row, program = rows.operand(h.fp16(m, k))
    w_row, loads = rows.operand(h.fp16(n, k))
    program += loads
    g_row, loads = rows.operand(h.fp32(m, n))
    program += loads
    s_row, loads = rows.operand(h.fp32(m))              # one scale per vector
    program += loads
    p_row, loads = rows.operand(h.fp16(m, k))           # probabilities of m heads over k tokens
    program += loads
    vt_row, loads = rows.operand(h.fp16(n, k))          # V transposed: n head dimensions of k tokens
    program += loads
    sublanes = p.width // p.sublane_width
    if sublanes > 1:   # queries of one sublane's head dimension and 2·sublanes + 1 keys: attention mode
        q_row, loads = rows.operand(h.fp16(m, p.sublane_width))
        program += loads
        keys_row, loads = rows.operand(h.fp16(2 * sublanes + 1, p.sublane_width))
        program += loads
    y, z, out, o, scaled, folded, scores = (rows.take(4 * m * max(n, 2 * sublanes + 1)) for _ in range(7))
    program += [BARRIER,
                Instruction(Opcode.GEMV.value, d=y, a=x_row, b=w_row, n=n, k=k, m=m),
                Instruction(Opcode.PV.value, d=o, a=p_row, b=vt_row, n=k, k=n, m=m),
                BARRIER,
                Instruction(Opcode.ACT.value, func=act_func(act), d=z, a=y, n=n, m=m),
                BARRIER,
                Instruction(Opcode.VOP.value, func=vop_func(vop), d=out, a=z, b=g_row, n=n, m=m)]
    stores = [(row, 4 * m * n) for row in (y, out, o)]
    if sublanes > 1:
        program.insert(-5, Instruction(Opcode.SCORE.value, d=scores, a=q_row, b=keys_row, n=2 * sublanes + 1,
                                       k=p.sublane_width, m=m))
        stores.append((scores, 4 * m * (2 * sublanes + 1)))
    # Broadcasts and reductions take whole rows per vector: vectors of n rounded down to the vector unit's width.
    whole = n // (p.row_bytes // 4) * (p.row_bytes // 4)
    if whole:
        program += [Instruction(Opcode.VOP.value, func=vop_func(Op.MUL, broadcast=True), d=scaled, a=z, b=s_row,
                                n=whole, m=m),
                    Instruction(Opcode.VOP.value, func=vop_func(Op.MUL if reduce == Reduce.SUM else Op.MAX, reduce),
                                d=folded, a=z, b=z, n=whole, m=m)]
        stores += [(scaled, 4 * m * whole), (folded, 4 * m)]
    program.append(BARRIER)
    for k_, (row, size) in enumerate(stores):
        program += h.store(row, OUTPUTS + 0x400 * k_, size)
    return program + [DONE]


def online_program(h: Harness, m: int, n: int, k: int) -> list[Instruction]:
    """The vector unit's multi-step commands: two online-softmax steps over two blocks of n scores per head (from
    the empty state), RMSNorm of m vectors of n, and the FlashDecoding merge of two partials of k per head; every
    state, P (FP16), α, output and the merge's scratch stored. And a GEMV of normalised activations: NORM of one
    tile's length, converted to FP16 (VOP MAX(x, x) with `narrow`), times three weight rows."""
    rows = _rows(h)
    empty = np.tile(np.array([-np.inf, 0], np.float32), m)
    partials = [np.stack([h.fp32(m), np.abs(h.fp32(m)) + 0.5], axis=1).reshape(-1) for _ in range(2)]
    program = []

    def operand(values):
        row, loads = rows.operand(values)
        program.extend(loads)
        return row

    scores = [operand(h.fp32(m, n)) for _ in range(2)]
    state, x, gains = operand(empty), operand(h.fp32(m, n)), operand(h.fp32(n))
    constants = operand(np.array([1 / n, 1e-5], np.float32))
    first, second = operand(partials[0]), operand(partials[1])
    o1, o2 = operand(h.fp32(m, k)), operand(h.fp32(m, k))
    p = [rows.take(2 * m * n) for _ in range(2)]
    alpha = [rows.take(4 * m) for _ in range(2)]
    y = rows.take(4 * m * n)
    heads, tile = min(m, h.params.lanes), h.params.width
    x_tile, gains_tile = operand(h.fp32(heads, tile)), operand(h.fp32(tile))
    constants_tile, weights = operand(np.array([1 / tile, 1e-5], np.float32)), operand(h.fp16(3, tile))
    normed, normed16, projected = rows.take(4 * heads * tile), rows.take(2 * heads * tile), rows.take(12 * heads)
    program += [BARRIER,
                Instruction(Opcode.SOFTMAX.value, d=state, a=scores[0], b=p[0], c=alpha[0], n=n, m=m),
                Instruction(Opcode.NORM.value, d=y, a=x, b=gains, c=constants, n=n, m=m),
                Instruction(Opcode.MERGE.value, d=o1, a=first, b=second, c=o2, k=k, m=m),
                BARRIER,
                Instruction(Opcode.SOFTMAX.value, d=state, a=scores[1], b=p[1], c=alpha[1], n=n, m=m),
                Instruction(Opcode.NORM.value, d=normed, a=x_tile, b=gains_tile, c=constants_tile, n=tile, m=heads),
                BARRIER,
                Instruction(Opcode.VOP.value, func=vop_func(Op.MAX, narrow=True), d=normed16, a=normed, b=normed,
                            n=tile, m=heads),
                BARRIER,
                Instruction(Opcode.GEMV.value, d=projected, a=normed16, b=weights, n=3, k=tile, m=heads),
                BARRIER]
    stores = [(state, 8 * m), (p[0], 2 * m * n), (p[1], 2 * m * n), (alpha[0], 4 * m), (alpha[1], 4 * m),
              (y, 4 * m * n), (o1, 4 * m * k), (o2, 4 * m * k), (first, 8 * m), (normed16, 2 * heads * tile),
              (projected, 12 * heads)]
    for k_, (row, size) in enumerate(stores):
        program += h.store(row, OUTPUTS + 0x400 * k_, size)
    return program + [DONE]


def copy_program(h: Harness) -> list[Instruction]:
    """Memory traffic at the MMU's rate: FP16 operands of random lengths loaded into the buffer, then stored back in
    another order to fresh addresses (up to the instruction buffer's depth); every stored byte compared."""
    rows, room = _rows(h), h.params.depth - 2                     # BARRIER and DONE
    placed, program, stored = [], [], 0
    while True:
        values = h.fp16(h.rng.randint(1, 256))
        row, loads = rows.operand(values)
        stores = len(h.store(row, 0, values.nbytes))
        if len(program) + len(loads) + stored + stores > room:
            break
        program += loads
        stored += stores
        placed.append((row, values.nbytes))
    h.rng.shuffle(placed)
    program.append(BARRIER)
    address = OUTPUTS
    for row, size in placed:
        program += h.store(row, address, size)
        address += -(-size // 64) * 64
    return program + [DONE]


@cocotb.test()
async def programs(dut):
    """Decode-step programs of several shapes (one tile and several, one vector and every lane) under random
    back-pressure and latency on the memory side: every stored byte as the model says."""
    h = Harness(dut, seed=1)
    await bench.start(dut)
    lanes = h.params.lanes
    shapes = [(lanes, 4, 2, Op.SILU, Op.MUL, Reduce.SUM), (1, 3, 1, Op.GELU, Op.ADD, Reduce.MAX),
              (lanes, 5, 1, Op.SILU, Op.EXP, Reduce.MAX), (min(2, lanes), 2, 3, Op.GELU, Op.MAX, Reduce.SUM)]
    for k, (m, n, tiles, act, vop, reduce) in enumerate(shapes):
        h.surroundings((0.0, 0.3, 0.6, 0.3)[k], ((4, 4), (2, 30), (1, 60), (10, 12))[k])
        await h.run(layer_program(h, m, n, tiles, act, vop, reduce), start=3 * k)
    width = h.params.row_bytes // 4   # SOFTMAX, NORM and MERGE take whole rows per vector
    for k, (m, n, k_) in enumerate([(lanes, 4, 2), (1, 3, 1), (3, 1, 3)]):
        h.surroundings((0.6, 0.3, 0.0)[k], ((1, 60), (2, 30), (4, 4))[k])
        await h.run(online_program(h, m, n * width, k_ * width), start=5 * k)
    _record(h, layer_programs=h.programs_checked)


@cocotb.test(skip=not bench.soak_beats())
async def soak(dut):
    """`basedie verify pnm --soak N`: copy programs (`copy_program`) and, one in four, decode-step programs
    (`layer_program`, `online_program`) of random shapes, each under its own memory back-pressure and latency,
    until the memory controller has taken and answered N requests; every program's end state and every byte it
    stored compared with the model (a lost, duplicated or reordered memory answer changes a stored byte or keeps a
    program from finishing)."""
    h = Harness(dut, seed=8)
    await bench.start(dut)
    answers = bench.HandshakeProbe(dut, "mc_resp")
    lanes, width, start = h.params.lanes, h.params.row_bytes // 4, bench.cycles_simulated()
    counts = {"mc_req": 0, "mc_req_reads": 0, "mc_resp": 0, "write": 0, "start": 0}
    while counts["mc_req"] < bench.soak_beats():
        h.surroundings(h.rng.choice((0.0, 0.3, 0.6)), h.rng.choice(((4, 4), (2, 30), (1, 60), (10, 12))))
        kind = h.rng.randrange(8)
        if kind > 1:
            program = copy_program(h)
        elif kind:
            program = layer_program(h, h.rng.randint(1, lanes), h.rng.randint(1, 5), h.rng.randint(1, 3),
                                    h.rng.choice((Op.SILU, Op.GELU)), h.rng.choice((Op.MUL, Op.ADD, Op.EXP, Op.MAX)),
                                    h.rng.choice((Reduce.SUM, Reduce.MAX)))
        else:
            program = online_program(h, h.rng.randint(1, 3), h.rng.randint(1, 4) * width, h.rng.randint(1, 3) * width)
        await h.run(program, start=h.rng.randint(0, max(0, h.params.depth - len(program))))
        # The program stopped: nothing is in flight. Count what the memory side carried and forget its log.
        requests = h.memory.requests
        counts["mc_req"] += len(requests)
        counts["mc_req_reads"] += sum(not r["is_write"] for r in requests)
        counts["mc_resp"] += len(answers.cycles)
        counts["write"] += len(program)
        counts["start"] += 1
        for log in (requests, answers.cycles, h.mc_probe.cycles):
            log.clear()
    bench.record_soak(counts | {"programs": h.programs_checked, "bytes_checked": h.bytes_checked},
                      bench.cycles_simulated() - start)


async def _cycles(h: Harness, body: list[Instruction], setup: list[Instruction] = ()) -> int:
    """Cycles from start to DONE of `body` + DONE, less those of DONE alone: what `body` adds (after `setup` ran)."""
    if setup:
        await h.run([*setup, DONE])
    alone = (await h.run([DONE]))["cycles"]
    return (await h.run([*body, DONE]))["cycles"] - alone


@cocotb.test()
async def timing(dut):
    """Memory always ready with a fixed 4-cycle latency: start to the first memory request, the gap between a
    LOAD's requests, and the cycles each instruction kind adds to a program at two or three sizes."""
    h = Harness(dut, seed=2)
    await bench.start(dut)
    h.surroundings(0.0, (4, 4))
    stated = BLOCKS["pnm"].build(h.params)
    p, rows = h.params, _rows(h)
    tensor = p.mmu_params().max_tensor_bytes
    mark = len(h.mc_probe.cycles)
    await h.run(h.load(0, INPUTS, tensor) + [DONE])
    requests = h.mc_probe.cycles[mark:]
    latency = requests[0] - h.start_probe.cycles[-1]
    interval = min(b - a for a, b in zip(requests, requests[1:]))
    assert latency == stated.latency and interval == stated.initiation_interval, (latency, interval)

    figures = {}
    for size in (tensor // 4, tensor):
        figures[f"load_{size}_bytes_cycles"] = await _cycles(h, h.load(0, INPUTS, size))
        figures[f"store_{size}_bytes_cycles"] = await _cycles(h, h.store(0, OUTPUTS, size))
    x_row, loads = rows.operand(h.fp16(p.lanes, 2 * p.width))
    w_row, more = rows.operand(h.fp16(8, 2 * p.width))
    d = rows.take(4 * 64 * p.lanes)    # room for every result below
    await h.run([*loads, *more, DONE])
    for m, n, tiles in ((1, 4, 1), (1, 8, 1), (p.lanes, 8, 1), (p.lanes, 8, 2)):
        gemv = Instruction(Opcode.GEMV.value, d=d, a=x_row, b=w_row, n=n, k=tiles * p.width, m=m)
        figures[f"gemv_m{m}_n{n}_k{tiles * p.width}_cycles"] = await _cycles(h, [gemv])
    sublanes = p.width // p.sublane_width
    if sublanes > 1:
        for n in (2 * sublanes, 8 * sublanes):
            score = Instruction(Opcode.SCORE.value, d=d, a=x_row, b=w_row, n=n, k=p.sublane_width, m=p.lanes)
            figures[f"score_m{p.lanes}_n{n}_k{p.sublane_width}_cycles"] = await _cycles(h, [score])
    for n in (4, 16, 64):
        vop = Instruction(Opcode.VOP.value, func=vop_func(Op.ADD), d=d, a=x_row, b=w_row, n=n, m=1)
        figures[f"vop_n{n}_cycles"] = await _cycles(h, [vop])
        folded = Instruction(Opcode.VOP.value, func=vop_func(Op.MUL, Reduce.SUM), d=d, a=x_row, b=x_row, n=n, m=1)
        figures[f"vop_sum_n{n}_cycles"] = await _cycles(h, [folded])
        narrowed = Instruction(Opcode.VOP.value, func=vop_func(Op.ADD, narrow=True), d=d, a=x_row, b=w_row, n=n, m=1)
        figures[f"vop_narrow_n{n}_cycles"] = await _cycles(h, [narrowed])
    width = p.row_bytes // 4
    for m, n in ((1, 4), (1, 16), (1, 64), (2, 16)):
        n *= width
        figures[f"softmax_m{m}_n{n}_cycles"] = await _cycles(
            h, [Instruction(Opcode.SOFTMAX.value, d=d, a=x_row, b=d + 8, c=d + 4, n=n, m=m)])
        figures[f"norm_m{m}_n{n}_cycles"] = await _cycles(
            h, [Instruction(Opcode.NORM.value, d=d, a=x_row, b=w_row, c=x_row, n=n, m=m)])
        figures[f"merge_m{m}_k{n}_cycles"] = await _cycles(
            h, [Instruction(Opcode.MERGE.value, d=d, a=x_row, b=w_row, c=d + 64, k=n, m=m)])
    _record(h, latency_cycles=latency, initiation_interval=interval, **figures)


@cocotb.test()
async def stops(dut):
    """A malformed instruction stops the program with its code at its address, after what came before it ran; a
    STORE into protected memory stops it with MMU_PROTECTED and the STORE's address; refused commands complete,
    the program runs to DONE and `unit_error`/`unit_id` name the first refused one."""
    h = Harness(dut, seed=3)
    await bench.start(dut)
    p, rows = h.params, _rows(h)
    x_row, loads = rows.operand(h.fp32(1, 8))
    y = rows.take(32)
    good = [*loads, BARRIER, Instruction(Opcode.ACT.value, func=act_func(Op.SILU), d=y, a=x_row, n=8, m=1), BARRIER,
            *h.store(y, OUTPUTS, 32)]
    reserved = Instruction(Opcode.VOP.value, func=vop_func(Op.ADD), d=y, a=x_row, b=x_row, n=8, m=1, reserved=1)
    result = await h.run([*good, reserved, DONE], start=5)
    assert (result["status"]["error"], result["status"]["pc"]) == (control.RESERVED, 5 + len(good))
    result = await h.run([*good, Instruction(0), DONE])
    assert result["status"]["error"] == control.OPCODE

    await h.protect(*PROTECTED)
    bad_store = h.store(y, PROTECTED[0] + 64, 32)
    result = await h.run([*good, BARRIER, *bad_store, DONE])
    assert (result["status"]["error"], result["status"]["pc"]) == (control.MMU_PROTECTED, len(good) + 1)

    # SOFTMAX whose scores are not whole rows is refused (a 1-lane vector unit runs every n); GEMV of 9 is not
    # whole tiles.
    width = p.row_bytes // 4
    refused = [Instruction(Opcode.SOFTMAX.value, d=y + 8, a=x_row, b=y + 16, c=y + 24, n=width + 1 if width > 1 else 4,
                           m=1),
               Instruction(Opcode.GEMV.value, d=y, a=x_row, b=x_row, n=1, k=p.width + 1, m=1)]
    first = (model.UNIT_VECTOR, len(good)) if width > 1 else (model.UNIT_ARRAY, len(good) + 1)
    result = await h.run([*good, *refused, DONE])
    assert (result["status"]["state"], result["status"]["unit_error"], result["status"]["unit_id"]) == (2, *first)
    result = await h.run([*good, refused[1], refused[0], DONE])
    assert (result["status"]["unit_error"], result["status"]["unit_id"]) == (model.UNIT_ARRAY, len(good))
    _record(h, stop_programs=h.programs_checked)


@cocotb.test()
async def reset_mid_program(dut):
    """A reset while a program runs: afterwards the program, still in the instruction buffer, runs again exactly."""
    h = Harness(dut, seed=4)
    await bench.start(dut)
    h.surroundings(0.3, (2, 20))
    program = layer_program(h, h.params.lanes, 4, 1, Op.SILU, Op.MUL, Reduce.SUM)
    await h.run(program)
    words_start = h.start_probe.cycles[-1]
    h.start.send_nowait(h.packers["start"].pack(pc=0))
    await ClockCycles(dut.clk, h.rng.randint(20, 80))
    await h.reset()
    await h.run(program)
    assert h.start_probe.cycles[-1] > words_start
    _record(h)


@cocotb.test()
async def decode_attention(dut):
    """The start of the decode-layer proof (`tb.pnm.decode`): one GQA group's attention for a decode token,
    from its program, under memory back-pressure; the output stored and compared with the model byte for byte.
    At the bench's size only (4-byte rows, lanes of 8): the program is written for it."""
    h = Harness(dut, seed=6)
    await bench.start(dut)
    p = h.params
    if (p.row_bytes, p.width) != (decode.ROW, decode.TILE) or p.lanes < decode.HEADS:
        return
    h.surroundings(0.3, (2, 30))
    attention = decode.attention(np.random.default_rng(16), h.put, INPUTS, p.mmu_params().max_tensor_bytes)
    result = await h.run([*attention.program, *h.store(attention.out_row, OUTPUTS, 4 * decode.HEADS * decode.HEAD_DIM),
                          DONE])
    assert result["status"]["unit_error"] == model.UNIT_NONE


@cocotb.test()
async def decode_layer(dut):
    """Issue 16's decode-layer proof on the RTL (`tb.pnm.layer`, docs/pnm.md): one transformer layer's
    decode step for a batch of 2 (hidden 64, 4 query heads in 2 GQA groups of head_dim 16, 27 cached tokens, the
    SiLU-gated MLP), its weights and KV cache streamed through the 4 KiB buffer, run part after part under 30 %
    memory back-pressure, its output and the cache with the decode token appended stored and compared with the
    model byte for byte; then one GQA group's
    attention split over two PNM runs, merged on a third and run unsplit on a fourth: every partial and result
    as the model says, and the merge as docs/pnm-isa.md's MERGE applied in numpy to the stored partials. At
    4-byte rows (the bench's size; the program addresses one FP32 per row), and not under Icarus: its 98,000 cycles
    would cost about 4 minutes of CPU there (the rest of the bench: 115 s for 46,000 cycles), and `programs` runs
    every command kind the layer uses."""
    h = Harness(dut, seed=7)
    await bench.start(dut)
    p, small = h.params, layer.SMALL
    if bench.under_icarus() or p.row_bytes != 4 or p.lanes < small.per_group or small.head_dim % p.width \
            or small.block % p.width:
        return
    h.surroundings(0.3, (2, 30))
    figures = {}

    async def run(name: str, parts: list) -> None:
        cycles = 0
        for part in parts:
            result = await h.run(part, patience=200_000)
            assert result["status"]["unit_error"] == model.UNIT_NONE
            cycles += result["cycles"]
        figures[f"{name}_cycles"] = cycles

    decode_step = layer.decode_layer(np.random.default_rng(16), small, h.shape, h.control, h.put, INPUTS)
    await run("decode_layer", decode_step.parts)
    split = layer.flash_split(np.random.default_rng(7), small, h.shape, h.control, h.put, INPUTS, ((1, 1),))
    await run("flash_split", [part for parts in split.runs for part in parts])
    for pair in split.pairs:
        state, out = split.merged[pair]
        got = np.concatenate([h.memory_bytes[state:state + 8 * split.heads],
                              h.memory_bytes[out:out + 4 * split.heads * split.head_dim]])
        assert (got == layer.merge_mirror(h.memory_bytes, split, pair)).all(), "MERGE is not its numpy mirror"
    _record(h, decode_layer_instructions=decode_step.instructions, **figures)
