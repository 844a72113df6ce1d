"""Build the base die under Verilator at the bench's small size and run its bench; and the planted bugs that must
make it fail, run under Icarus on the `views` test (a Verilator build of the die is dominated by the PNM's vector
unit: minutes per variant)."""
import pytest
from amaranth.hdl import Signal

from rtl.dqb import dqb as rtl_dqb
from rtl.dqb import processing, sz_requests
from rtl.registry import BLOCKS

from tests.tb.bench_runs import each_run, measure
from tests.tb.planted import failed_tests, needs_icarus

pytestmark = pytest.mark.verilator   # every test here runs a cocotb bench (minutes)

WEIGHT_BYTES_FP16 = 2 * (5 * 64 * 64 + 2 * 32 * 64)
"""The decode layer's seven weight matrices (`tb.pnm.layer.SMALL`) in FP16."""


@each_run("tb.base_die.bench")
def test_bench(block_name: str, config: dict) -> None:
    params, figures = measure(block_name, config)
    stated = BLOCKS[block_name].build(params)
    assert (figures["latency_cycles"], figures["initiation_interval"]) == (stated.latency, 1)
    assert figures["view_rounds"] == 3 and figures["gpu_reads_checked"] > 100
    # A quantized tensor's view is read as the DQB's weight beats, each once (every LOAD reads its rows in order,
    # the GPU idle): the FP16 run reads the weights' FP16 bytes, the INT4 run a quarter of them, the INT8 run half,
    # plus their scales and zero points; every other byte read is the same.
    fp16 = figures["memory_read_bytes_fp16"]
    assert figures["sz_read_bytes_fp16"] == 0
    for kind, ratio in (("gptq", 4), ("int8", 2)):
        read, sz = figures[f"memory_read_bytes_{kind}"], figures[f"sz_read_bytes_{kind}"]
        assert fp16 - (read - sz) == WEIGHT_BYTES_FP16 - WEIGHT_BYTES_FP16 // ratio, (kind, fp16, read, sz)
    assert all(figures[f"decode_layer_cycles_{kind}"] > 0 for kind in ("fp16", "gptq", "int8", "awq"))
    assert 0 < figures["gpu_share_of_mmu_requests"] < 1


def _views_fail(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("COCOTB_TEST_FILTER", "views")
    params = BLOCKS["base_die"].params(**BLOCKS["base_die"].bench.configs[0])
    assert failed_tests("base_die", "tb.base_die.bench", params, tmp_path) == {"views"}


@needs_icarus
def test_a_wrong_zero_point_fails_the_bench(monkeypatch, tmp_path) -> None:
    """Each lane reads its zero point one byte further along the S/Z line (two groups on for INT4, the next group's
    for INT8)."""
    class Shifted(processing.DataProcessing):
        def _select(self, stages, flags, part, beat, read, scale_line, zero_line):
            return super()._select(stages, flags, part, beat, read, scale_line, zero_line.rotate_right(8))
    monkeypatch.setattr(rtl_dqb, "DataProcessing", Shifted)
    _views_fail(monkeypatch, tmp_path)


@needs_icarus
def test_a_dropped_sz_refresh_fails_the_bench(monkeypatch, tmp_path) -> None:
    """The S/Z buffer's directories ignore the flush a DQB table update asks for: the next checkpoint's reads use
    the previous one's scales and zero points, still held at the same addresses."""
    class Stale(sz_requests.LineDirectory):
        def elaborate(self, platform):
            self.flush = Signal()   # the generator's flush now drives a port nothing reads
            return super().elaborate(platform)
    monkeypatch.setattr(sz_requests, "LineDirectory", Stale)
    _views_fail(monkeypatch, tmp_path)
