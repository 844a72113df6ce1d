"""Every block's generated Verilog, at its benches' small configurations, passes Yosys `check -assert` with no
latches; the check itself fails on a planted latch and a planted combinational loop."""
import pytest

from rtl.generate import verilog_of
from rtl.registry import BLOCKS
from tb.structure import yosys_problems
from tb.verify import bench_runs, run_ids

RUNS = bench_runs(list(BLOCKS), include_verify_only=False)


@pytest.mark.parametrize("block_name,config", RUNS, ids=run_ids(RUNS))
def test_generated_verilog_passes_yosys_check(block_name: str, config: dict, tmp_path) -> None:
    _, text = verilog_of(BLOCKS[block_name], BLOCKS[block_name].params(**config))
    path = tmp_path / f"{block_name}.v"
    path.write_text(text)
    assert yosys_problems(path, block_name) == []


@pytest.mark.parametrize("body,message", [
    ("reg q; always @* if (en) q = d; assign o = q;", "select"),        # a latch
    ("wire a, b; assign a = b ^ d; assign b = a & en; assign o = b;", "loop"),
])
def test_check_catches_planted_faults(body: str, message: str, tmp_path) -> None:
    path = tmp_path / "bad.v"
    path.write_text(f"module bad(input en, input d, output o); {body} endmodule\n")
    problems = yosys_problems(path, "bad")
    assert problems and message in " ".join(problems).lower(), problems
