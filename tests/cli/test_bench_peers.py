"""scripts/bench_peers.py's wrapper: a program runs as usual under it, and the time inside one method is reported
(the figures themselves are not asserted: they are timings)."""
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "bench_peers.py"
LOOP = '''
class Loop:
    calls = 0

    def run(self, n):
        Loop.calls += 1
        return sum(range(n))
'''
PROGRAM = '''
import sys
from loop import Loop
print(Loop().run(int(sys.argv[1])), Loop().run(3), Loop.calls, sys.argv[1:])
'''


@pytest.fixture(scope="module")
def core():
    return runpy.run_path(str(SCRIPT))["CORE"]


def test_a_script_runs_unchanged_and_its_loop_is_timed(core, tmp_path) -> None:
    (tmp_path / "loop.py").write_text(LOOP)
    (tmp_path / "program.py").write_text(PROGRAM)
    done = subprocess.run([sys.executable, "-c", core, "loop:Loop.run", "program.py", "10", "x"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "45 3 2 ['10', 'x']"      # 0 + ... + 9, 0 + 1 + 2, both calls counted
    wall, cpu = map(float, done.stderr.strip().splitlines()[-1].removeprefix("CORE ").split())
    assert wall >= 0 and cpu >= 0


def test_a_function_entry_keeps_its_exit_code(core, tmp_path) -> None:
    (tmp_path / "loop.py").write_text(LOOP + "\n\ndef main():\n    return 3 if Loop().run(4) == 6 else 0\n")
    done = subprocess.run([sys.executable, "-c", core, "loop:Loop.run", "loop:main"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 3
    assert done.stderr.startswith("CORE ")
