"""scripts/bench_sysmodel.py's scale mode at a tiny size: each size runs as its own process and lands in the
Markdown table with its measurements, and a baseline tree runs beside it (timings themselves are not asserted);
the peer comparison's table from given runs (medians and ratios by hand) and its page section."""
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "bench_sysmodel.py"


def test_scale_mode_writes_a_row_per_size(tmp_path) -> None:
    out = tmp_path / "scale.md"
    done = subprocess.run([sys.executable, str(SCRIPT), "--scale", "3", "--folder", str(tmp_path / "runs"),
                           "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows = [line for line in out.read_text().splitlines() if line.startswith("| 3 |")]
    assert len(rows) == 1
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[1].endswith(" s") and cells[3].endswith(" MB") and float(cells[3].split()[0]) > 0
    assert (tmp_path / "runs" / "duopd-3" / "summary.json").exists()


def test_peers_without_their_checkouts_is_refused() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--scale", "3", "--peers"], capture_output=True, text=True)
    assert done.returncode == 2 and "--peers needs --distserve" in done.stderr


def test_baseline_runs_beside_and_compares_the_outputs(tmp_path) -> None:
    # This tree as its own baseline: the same outputs, so the row says byte-identical.
    out = tmp_path / "scale.md"
    done = subprocess.run([sys.executable, str(SCRIPT), "--scale", "3", "--baseline", str(SCRIPT.parents[1]),
                           "--folder", str(tmp_path / "runs"), "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows = [line for line in out.read_text().splitlines() if line.startswith("| 3 |")]
    assert len(rows) == 2 and rows[1].endswith("| byte-identical |")
    assert (tmp_path / "runs" / "before-3" / "summary.json").exists()


def test_baseline_without_scale_is_refused() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--baseline", "."], capture_output=True, text=True)
    assert done.returncode == 2 and "--baseline goes with --scale" in done.stderr


def _runs(cpus: list[float]) -> list[dict[str, float]]:
    return [{"wall_s": 2 * cpu, "cpu_s": cpu, "core_wall_s": cpu / 2, "core_cpu_s": cpu / 4} for cpu in cpus]


def test_peer_table_takes_medians_and_writes_between_the_markers(tmp_path) -> None:
    module = runpy.run_path(str(SCRIPT))
    mine, bare = module["PAIRS"]["DistServe"]
    other, other_bare = module["PAIRS"]["splitwise-sim"]
    runs = {"DistServe": _runs([3.0, 5.0, 4.0]), mine: _runs([2.0, 0.5, 1.0]), bare: _runs([0.9, 0.5, 0.8]),
            "splitwise-sim": _runs([6.0, 6.0, 6.0]), other: _runs([2.0, 2.0, 2.0]), other_bare: _runs([1.0] * 3)}
    text, ratios = module["peer_table"](runs, "a test machine", 3)
    # medians: DistServe 4 s, ours 1 s (4×, missed), ours --no-plots 0.8 s (5×, met); splitwise-sim 6 s ÷ 2 s, ÷ 1 s
    assert ratios == {mine: 4.0, bare: 5.0, other: 3.0, other_bare: 6.0}
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert rows[mine] == f"| {mine} | 2.0 s | 1.00 s (0.50–2.00) | 0.25 s | 4.0× | ≥ 5×: missed |"
    assert rows[bare].endswith("| 5.0× | ≥ 5×: met |")
    assert rows["DistServe"] == "| DistServe | 8.0 s | 4.00 s (3.00–5.00) | 1.00 s |  |  |"
    doc = tmp_path / "page.md"
    doc.write_text(f"before\n{module['BEGIN']}\nold table\n{module['END']}\nafter\n")
    module["script"]("bench_hardware_loop").write_table(doc, text, module["BEGIN"], module["END"])
    assert doc.read_text() == f"before\n{module['BEGIN']}\n{text}\n{module['END']}\nafter\n"
    module["peer_plot"](runs, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_page_without_the_markers_is_refused(tmp_path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text("no markers\n")
    with pytest.raises(SystemExit, match="has no"):
        runpy.run_path(str(SCRIPT))["script"]("bench_hardware_loop").write_table(doc, "table")
    assert doc.read_text() == "no markers\n"
