"""scripts/bench_sysmodel.py's scale mode at a tiny size: each size runs as its own process and lands in the
Markdown table with its measurements, and a baseline tree runs beside it (timings themselves are not asserted)."""
import subprocess
import sys
from pathlib import Path

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
