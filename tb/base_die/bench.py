"""cocotb bench of the base die: the GPU's and the PNM's reads of quantized tensors' views return FP16, bit-exact
against the dequantization golden model; issue 16's decode layer runs on GPTQ and AWQ INT4 and INT8 checkpoints
in the DQB's layout, each output byte as the decode-layer golden model says on those FP16 values, with GPU reads
of other tensors and of the views running concurrently under random back-pressure; and the figures: decode-layer
cycles and memory bytes read with quantized and with FP16 weights, and the GPU's and the PNM's shares of the
MMU's memory requests."""
import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from rtl.dqb.ports import Kind
from rtl.pnm_controller.isa import Instruction, Opcode
from rtl.registry import BLOCKS

from .. import bench
from ..models import dqb as dqb_model
from ..models import pnm as model
from ..pnm import layer
from .harness import Harness
from .stimulus import CHECKPOINTS, store

BARRIER, DONE = Instruction(Opcode.BARRIER.value), Instruction(Opcode.DONE.value)
INPUTS = 0x1000        # the decode layer's operands, weights (their views) and KV cache
QUANTIZED = 0x10000    # the quantized weights, scales and zero points (the DQB's layout)
OUTPUTS = 0x18000      # what the view-copy programs store
VIEWS = 0x1A000        # the `views` test's views: addresses that hold nothing the DUT reads
GPU_DATA = 0x1E000     # other tensors the GPU reads (never written)
WEIGHTS = ("wq", "wk", "wv", "wo", "wg", "wu", "wd")
CHECKED = {"programs_checked": 0, "bytes_checked": 0, "gpu_reads_checked": 0}
OUTPUT_OF = {}         # the decode layer's output bytes per weight source (FP16 and GPTQ must agree)


def _record(h: Harness, **figures) -> None:
    CHECKED["programs_checked"] += h.programs_checked
    CHECKED["bytes_checked"] += h.bytes_checked
    CHECKED["gpu_reads_checked"] += h.gpu_reads_checked
    bench.record(**figures, **CHECKED, vectors_checked=CHECKED["bytes_checked"] + CHECKED["gpu_reads_checked"])


def _fits(h: Harness) -> bool:
    """The memory map above needs 128 KiB and 4-byte rows (the decode layer's program addresses FP32 per row)."""
    p = h.params
    return p.address_bits >= 17 and p.row_bytes == 4


def _gpu_rows(h: Harness, views: list[tuple[int, int]], count: int) -> list[int]:
    """`count` random rows: half from the plain tensors at GPU_DATA, half from the views (address, bytes)."""
    rb, rows = h.params.row_bytes, []
    for _ in range(count):
        if h.rng.random() < 0.5:
            rows.append((GPU_DATA + h.rng.randrange(0x2000)) // rb)
        else:
            address, size = h.rng.choice(views)
            rows.append((address + h.rng.randrange(size)) // rb)
    return rows


async def _gpu_traffic(h: Harness, views: list[tuple[int, int]], running: list[bool]) -> None:
    """Bursts of GPU reads while `running[0]`, each answer checked."""
    while running[0]:
        rows = _gpu_rows(h, views, h.rng.randint(1, 24))
        await h.gpu_reads(rows, [h.row_value(row) for row in rows])
        await ClockCycles(h.dut.clk, h.rng.randint(0, 40))


def _view_copy(h: Harness, views: list[tuple[int, int]]) -> list[Instruction]:
    """LOAD each view into the buffer and STORE it to OUTPUTS: every stored byte is the view's FP16."""
    program, address = [], OUTPUTS
    for view, size in views:
        program += [*h.load(0, view, size), BARRIER, *h.store(0, address, size), BARRIER]
        address += size
    return program + [DONE]


async def _views_round(h: Harness, kind: str, seed: int, gpu_reads: int) -> None:
    """`kind` weights of 3 random 8 × 64 FP16 matrices behind views at VIEWS (a copy program that fits the small
    instruction buffer): the PNM copies every view out while
    the GPU reads random rows of the views and of plain tensors; all as the golden model says."""
    rng = np.random.default_rng(seed)
    weights = [(rng.standard_normal((8, 64)) / 8).astype(np.float16) for _ in range(3)]
    stored = store(weights, kind, QUANTIZED, h.params.row_bytes, h.params.rounding)
    h.place(stored, QUANTIZED)
    views, address = [], VIEWS
    for view in stored.views:
        h.golden_view(address, view)
        views.append((address, view.size))
        address += view.size
    await h.configure(stored, [a for a, _ in views])
    running = [True]
    gpu = cocotb.start_soon(_gpu_traffic(h, views, running))
    await h.run(_view_copy(h, views))
    running[0] = False
    await gpu
    rows = _gpu_rows(h, views, gpu_reads)
    await h.gpu_reads(rows, [h.row_value(row) for row in rows])


@cocotb.test()
async def views(dut):
    """Every checkpoint kind in turn behind the same views (the DQB's table rewritten, so its S/Z buffer must
    refill): PNM copies of the views and GPU reads under random back-pressure, as the dequantization golden model
    says; then a view under the reserved tag and one whose weights no DQB entry holds set `dq_error`."""
    h = Harness(dut, seed=1)
    await bench.start(dut)
    if not _fits(h):
        return
    h.gpu_resp.set_pause_generator(bench.random_pauses(h.rng, 0.3))
    for k, kind in enumerate(CHECKPOINTS):
        h.surroundings((0.3, 0.0, 0.6)[k], ((2, 30), (4, 4), (1, 20))[k])
        await _views_round(h, kind, seed=k, gpu_reads=64)
        assert dut.dq_error.value == 0
    # The reserved tag: the stored bytes unchanged (one beat per row) and the error bit.
    rng = np.random.default_rng(9)
    stored = store([(rng.standard_normal((16, 64)) / 8).astype(np.float16)], "gptq", QUANTIZED, h.params.row_bytes,
                   h.params.rounding)
    h.place(stored, QUANTIZED)
    await h.configure(stored, [VIEWS], tags=[dqb_model.RESERVED_TAG])
    rb, base = h.params.row_bytes, stored.entries[0].weight_base
    rows = [VIEWS // rb + k for k in range(8)]
    await h.gpu_reads(rows, [h.row_value(base // rb + k) for k in range(8)])
    assert dut.dq_error.value == 1
    _record(h, view_rounds=len(CHECKPOINTS))


async def _decode(dut, kind: str, gpu: bool) -> dict:
    """Issue 16's decode layer (`tb.pnm.layer.SMALL`) with its seven weight matrices stored as `kind` (or, for
    "fp16", their GPTQ dequantization stored as FP16): the figures of the run."""
    h = Harness(dut, seed=7)
    await bench.start(dut)
    if bench.under_icarus() or not _fits(h) or h.params.lanes < layer.SMALL.per_group \
            or layer.SMALL.head_dim % h.params.width or layer.SMALL.block % h.params.width:
        return {}
    t = layer.tensors(np.random.default_rng(16), layer.SMALL)
    weights = [getattr(t, name) for name in WEIGHTS]
    stored = store(weights, "gptq" if kind == "fp16" else kind, QUANTIZED, h.params.row_bytes, h.params.rounding)
    found = {}

    def put(address: int, values: np.ndarray) -> None:
        """The decode layer's operands into memory; a weight matrix as its view (quantized) or its FP16 values."""
        for i, w in enumerate(weights):
            if values.dtype == np.float16 and values.shape == w.shape and (values.view(np.uint16)
                                                                           == w.view(np.uint16)).all():
                found[i] = address
                (h.put if kind == "fp16" else h.golden_view)(address, stored.views[i])
                return
        h.put(address, values)

    step = layer.decode_layer(np.random.default_rng(16), layer.SMALL, h.shape, h.control, put, INPUTS)
    assert sorted(found) == list(range(len(weights))), "the decode layer did not place every weight matrix"
    if kind != "fp16":
        h.place(stored, QUANTIZED)
        await h.configure(stored, [found[i] for i in range(len(weights))])
    views = [(found[i], stored.views[i].size) for i in range(len(weights))]
    running = [gpu]
    if gpu:
        h.surroundings(0.3, (2, 30))
        h.gpu_resp.set_pause_generator(bench.random_pauses(h.rng, 0.3))
        traffic = cocotb.start_soon(_gpu_traffic(h, views, running))
    else:
        h.surroundings(0.0, (4, 4))
    h.memory.requests.clear()
    gpu_before = len(h.gpu_probe.cycles)
    cycles = 0
    for part in step.parts:
        result = await h.run(part, patience=400_000)
        assert result["status"]["unit_error"] == model.UNIT_NONE
        cycles += result["cycles"]
    running[0] = False
    if gpu:
        await traffic
    OUTPUT_OF[kind] = h.memory_bytes[step.out_address:step.out_address + t.x.nbytes].copy()
    reads = [r for r in h.memory.requests if not r["is_write"]]
    rb = h.params.row_bytes
    figures = {f"decode_layer_cycles_{kind}": cycles,
               f"memory_read_bytes_{kind}": rb * len(reads),
               f"sz_read_bytes_{kind}": rb * sum(r["kind"] != Kind.GPU.value for r in reads)}
    if gpu:
        pnm_requests = sum(-(-i.n // rb) for part in step.parts for i in part
                           if i.opcode in (Opcode.LOAD.value, Opcode.STORE.value))
        gpu_requests = len(h.gpu_probe.cycles) - gpu_before
        figures |= {"gpu_mmu_requests": gpu_requests, "pnm_mmu_requests": pnm_requests,
                    "gpu_share_of_mmu_requests": round(gpu_requests / (gpu_requests + pnm_requests), 4)}
    _record(h, **figures)
    return figures


@cocotb.test()
async def decode_fp16(dut):
    """The decode layer with FP16 weights (the GPTQ checkpoint's dequantization, stored as it is), the GPU idle and
    the memory answering in 4 cycles: the baseline cycles and bytes."""
    await _decode(dut, "fp16", gpu=False)


@cocotb.test()
async def decode_gptq(dut):
    """The same layer from its GPTQ INT4 checkpoint through the views: the output byte for byte the FP16 run's (the
    same FP16 values reach the PNM), in fewer bytes read."""
    figures = await _decode(dut, "gptq", gpu=False)
    if figures and "fp16" in OUTPUT_OF:
        assert (OUTPUT_OF["gptq"] == OUTPUT_OF["fp16"]).all(), "the GPTQ run's output differs from the FP16 run's"


@cocotb.test()
async def decode_int8(dut):
    """The layer from an INT8 checkpoint through the views."""
    await _decode(dut, "int8", gpu=False)


@cocotb.test()
async def decode_awq_with_gpu(dut):
    """The layer from its AWQ INT4 checkpoint while the GPU reads other tensors and the views, under random
    back-pressure on the memory and on the GPU's answers: the GPU's and the PNM's shares of the MMU's requests."""
    await _decode(dut, "awq", gpu=True)


@cocotb.test()
async def timing(dut):
    """Memory always ready in 4 cycles: start to the first memory request of a LOAD, from plain memory and from an
    INT4 view (its S/Z fills first), and the gap between a plain LOAD's requests."""
    h = Harness(dut, seed=2)
    await bench.start(dut)
    if not _fits(h):
        return
    h.surroundings(0.0, (4, 4))
    rng = np.random.default_rng(3)
    stored = store([(rng.standard_normal((16, 64)) / 8).astype(np.float16)], "gptq", QUANTIZED, h.params.row_bytes,
                   h.params.rounding)
    h.place(stored, QUANTIZED)
    h.golden_view(VIEWS, stored.views[0])
    await h.configure(stored, [VIEWS])
    figures = {}
    tensor = h.params.mmu_params().max_tensor_bytes
    for name, address in (("plain", GPU_DATA), ("int4_view", VIEWS)):
        mark = len(h.mc_probe.cycles)
        await h.run(h.load(0, address, tensor) + [DONE])
        requests = h.mc_probe.cycles[mark:]
        figures[f"latency_cycles_{name}"] = requests[0] - h.start_probe.cycles[-1]
        figures[f"load_{tensor}_bytes_memory_requests_{name}"] = len(requests)
        if name == "plain":
            figures["initiation_interval"] = min(b - a for a, b in zip(requests, requests[1:]))
    stated = BLOCKS["base_die"].build(h.params)
    dut_latency = figures["latency_cycles_plain"]
    assert (dut_latency, figures["initiation_interval"]) == (stated.latency, stated.initiation_interval), figures
    _record(h, latency_cycles=dut_latency, **figures)


@cocotb.test(skip=not bench.soak_beats())
async def soak(dut):
    """`basedie verify base_die --soak N`: rounds of the `views` test (a random checkpoint kind, PNM copies of its
    views and GPU reads, under random back-pressure and latency) until the memory has taken N requests."""
    h = Harness(dut, seed=8)
    await bench.start(dut)
    answers = bench.HandshakeProbe(dut, "mc_resp")
    start = bench.cycles_simulated()
    counts = {"mc_req": 0, "mc_req_reads": 0, "mc_resp": 0, "gpu_req": 0, "start": 0}
    h.gpu_resp.set_pause_generator(bench.random_pauses(h.rng, 0.3))
    round_ = 0
    while counts["mc_req"] < bench.soak_beats():
        h.surroundings(h.rng.choice((0.0, 0.3, 0.6)), h.rng.choice(((4, 4), (2, 30), (1, 60))))
        gpu_before = len(h.gpu_probe.cycles)
        await _views_round(h, h.rng.choice(CHECKPOINTS), seed=100 + round_, gpu_reads=h.rng.randint(8, 64))
        await ClockCycles(dut.clk, 20)
        requests = h.memory.requests
        counts["mc_req"] += len(requests)
        counts["mc_req_reads"] += sum(not r["is_write"] for r in requests)
        counts["mc_resp"] += len(answers.cycles)
        counts["gpu_req"] += len(h.gpu_probe.cycles) - gpu_before
        counts["start"] += 1
        for log in (requests, answers.cycles, h.mc_probe.cycles):
            log.clear()
        round_ += 1
    bench.record_soak(counts | {"programs": h.programs_checked, "gpu_reads": h.gpu_reads_checked},
                      bench.cycles_simulated() - start)
