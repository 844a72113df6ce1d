"""Build the PNM top under Verilator at the bench's small size and run its bench; and the planted bugs that must
make the bench fail, run under Icarus (a Verilator build of the top is dominated by the vector unit's: 8.5 minutes
on the loaded 2-core machine, per variant; Icarus compiles the same Verilog in seconds)."""

import pytest

from rtl.fp.convert import FP32NarrowParams
from rtl.pnm import dot, elementwise, top
from rtl.pnm_vector.ports import Op
from rtl.registry import BLOCKS
from basedie.flow.runner import run_bench

from tests.tb.bench_runs import each_run, measure
from tests.tb.planted import failed_tests, needs_icarus

pytestmark = pytest.mark.verilator   # every test here runs a cocotb bench (minutes)


@each_run("tb.pnm.bench")
def test_bench(block_name: str, config: dict) -> None:
    params, figures = measure(block_name, config)
    stated = BLOCKS[block_name].build(params)
    assert (figures["latency_cycles"], figures["initiation_interval"]) == (stated.latency, 1)
    assert figures["layer_programs"] == 7 and figures["stop_programs"] == 5
    rows = params.mmu_params().max_tensor_bytes // params.row_bytes
    # A LOAD or STORE moves one row per cycle once started: 3/4 of the rows more cost 3/4 of the rows more cycles.
    for kind in ("load", "store"):
        small, large = (figures[f"{kind}_{n}_bytes_cycles"] for n in (rows // 4 * params.row_bytes,
                                                                     rows * params.row_bytes))
        assert large - small == rows - rows // 4, (kind, small, large)
    # One-tile GEMVs keep the lanes' operands: one tile read per output row, one cycle per row for one vector.
    assert figures["gemv_m1_n8_k8_cycles"] - figures["gemv_m1_n4_k8_cycles"] == 4
    # Attention-mode scores are written one FP32 per cycle: 12 keys more cost 12 writes per lane.
    sublanes = params.width // params.sublane_width
    scores = [figures[f"score_m{params.lanes}_n{n}_k{params.sublane_width}_cycles"] for n in (2 * sublanes,
                                                                                             8 * sublanes)]
    assert scores[1] - scores[0] == params.lanes * 6 * sublanes
    # Element-wise VOPs read a and b through one 32-bit port: two cycles per element at this size.
    assert figures["vop_n64_cycles"] - figures["vop_n16_cycles"] == 2 * 48
    # `narrow` adds the FP32Narrow's two stages and nothing per element.
    assert all(figures[f"vop_narrow_n{n}_cycles"] - figures[f"vop_n{n}_cycles"] == 2 for n in (4, 16, 64))
    # Per vector, SOFTMAX reads the scores three times (max, P, sum), NORM its rows five times (a twice for the
    # squares, a once, d and the gains once each), MERGE four (c, d, then d and c): one row per cycle.
    width = params.row_bytes // 4
    for name, size, reads in (("softmax", "n", 3), ("norm", "n", 5), ("merge", "k", 4)):
        one = {n: figures[f"{name}_m1_{size}{n * width}_cycles"] for n in (4, 16, 64)}
        assert one[64] - one[16] == one[16] - one[4] + 36 * reads == 48 * reads, (name, one)
        # Vector after vector: a second one costs what the first did, and only the command's last cycle is shared.
        assert figures[f"{name}_m2_{size}{16 * width}_cycles"] - one[16] == one[16] - 1, name


def _planted_fails(monkeypatch, tmp_path, module, name: str, change) -> None:
    """`module.name` (a sequencer) with `change(self, m)` applied after its own elaboration: the bench's programs
    must fail under Icarus."""
    original = getattr(module, name)

    class Planted(original):
        def elaborate(self, platform):
            m = super().elaborate(platform)
            change(self, m)
            return m

    monkeypatch.setattr(top, name, Planted)
    _only_programs_fail(monkeypatch, tmp_path)


def _only_programs_fail(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("COCOTB_TEST_FILTER", "programs")
    params = BLOCKS["pnm"].params(**BLOCKS["pnm"].bench.configs[0])
    assert failed_tests("pnm", "tb.pnm.bench", params, tmp_path) == {"programs"}


@needs_icarus
def test_a_dot_product_that_never_clears_fails_the_bench(monkeypatch, tmp_path) -> None:
    """Every beat folds into the accumulator: each output row adds the rows before it."""
    _planted_fails(monkeypatch, tmp_path, dot, "DotSequencer",
                   lambda self, m: m.d.comb.__iadd__(self.beat.payload.clear.eq(0)))


@needs_icarus
def test_a_vector_op_that_drops_its_second_operand_fails_the_bench(monkeypatch, tmp_path) -> None:
    """VOP computes op(a, +0) as ACT does."""
    def change(self, m):
        for k in range(self.params.vector_params().width):
            m.d.comb += self.beat.payload.lanes[k].b.eq(0)
    _planted_fails(monkeypatch, tmp_path, elementwise, "ElementwiseSequencer", change)


@needs_icarus
def test_a_scalar_step_that_drops_its_fourth_operand_fails_the_bench(monkeypatch, tmp_path) -> None:
    """SOFTMAX's scalar beat (the state update) takes d = +0: the sum of P is lost, l' = l·α."""
    def change(self, m):
        for k in range(self.params.vector_params().width):
            with m.If(self.beat.payload.op == Op.SOFTMAX):
                m.d.comb += self.beat.payload.lanes[k].d.eq(0)
    _planted_fails(monkeypatch, tmp_path, elementwise, "ElementwiseSequencer", change)


@needs_icarus
def test_a_narrowing_that_rounds_toward_zero_fails_the_bench(monkeypatch, tmp_path) -> None:
    """FP16 results (SOFTMAX's P, VOP's `narrow`) rounded toward zero instead of to nearest even."""
    monkeypatch.setattr(elementwise, "FP32NarrowParams",
                        lambda **_: FP32NarrowParams(target="fp16", rounding="toward_zero_ftz"))
    _only_programs_fail(monkeypatch, tmp_path)


@needs_icarus
def test_the_programs_pass_under_icarus_at_another_size(monkeypatch, tmp_path) -> None:
    """4 lanes of 16 FP16 in sublanes of 4 at 8-byte rows: a vector unit of 2 lanes, where rows hold several
    elements (the last row of an odd count partly written, a broadcast scalar picked out of its row, reductions
    over several lanes), and 32-byte tiles spanning 4 rows; too slow to build under Verilator in a test. The
    programs only (the other tests' timing relations are the bench size's; a whole bench at 16-byte rows ran for
    over 25 minutes under Icarus): 200 s of CPU, where 8-byte rows at the bench's lanes and 4 × 16 at 4-byte rows,
    run separately until 2026-12-01, took 223 s. 16-byte rows (4 vector lanes), 266 s of CPU, are left to
    `basedie verify pnm --simulator icarus --param data_bits=128 …` (docs/design/pnm.md). The control for the
    planted bugs, the whole bench at the bench's size under Icarus, is `tests/tb/test_icarus_benches.py`'s."""
    monkeypatch.setenv("COCOTB_TEST_FILTER", "programs")
    params = BLOCKS["pnm"].params(**(BLOCKS["pnm"].bench.configs[0] | {"lanes": 4, "width": 16, "sublane_width": 4,
                                                                   "data_bits": 64}))
    run_bench("pnm", "tb.pnm.bench", params, runs=tmp_path, simulator="icarus")
