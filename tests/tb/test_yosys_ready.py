"""`basedie.flow.yosys.ready`: the first Yosys run of a machine is one process's, the others wait for it
(docs/guides/testing.md)."""
import fcntl
import threading

from basedie.flow import yosys


def test_ready_waits_while_another_process_holds_the_lock_then_runs_yosys_once(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(yosys, "LOCK", tmp_path / "lock")
    runs = []
    monkeypatch.setattr(yosys.subprocess, "run", lambda argv, **options: runs.append(argv))
    yosys.ready.cache_clear()
    try:
        with yosys.LOCK.open("a") as held:        # another process compiling Yosys
            fcntl.flock(held, fcntl.LOCK_EX)
            waiting = threading.Thread(target=yosys.ready)
            waiting.start()
            waiting.join(0.5)
            assert waiting.is_alive() and runs == []
        waiting.join(10)
        assert not waiting.is_alive() and runs == [[*yosys.COMMAND, "-V"]]
        yosys.ready()
        assert len(runs) == 1                     # once per process
    finally:
        yosys.ready.cache_clear()
