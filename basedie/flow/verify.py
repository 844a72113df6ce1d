"""Run the benches of registered blocks and turn what they measured into verified-table entries."""
import logging
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import Manager
from pathlib import Path

from basedie.verified import VerifiedEntry, requested_params, sources_digest, tool_versions
from rtl.params import Params
from rtl.registry import BLOCKS

from .progress import Progress
from .runner import CLOCK_PERIOD_NS, run_bench, run_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Run:
    """One bench run: a block at one parameter set (`config`: a bench's own set, or every field of a set named
    with `basedie verify --param`, then `requested`), behind a `memory` model (`tb.dram.timing.MEMORIES`)."""
    block: str
    config: dict
    requested: bool = False
    memory: str = "ideal"
    soak: int = 0
    """Beats per port of a soak (`basedie verify --soak N`): the bench's `soak` test alone."""

    @property
    def name(self) -> str:
        return run_name(self.block, BLOCKS[self.block].params(**self.config), self.memory) + \
            ("-soak" if self.soak else "")


def bench_runs(block_names: list[str], include_verify_only: bool = True) -> list[tuple[str, dict]]:
    """Every (block, parameters) pair the benches of these blocks prove."""
    return [(name, config) for name in block_names
            for config in BLOCKS[name].bench.configs + (BLOCKS[name].bench.verify_only if include_verify_only else ())]


def module_runs(module: str) -> list[tuple[str, dict]]:
    """The (block, parameters) pairs `pytest` proves with the bench `module` under Verilator (its `configs`, less
    `pytest_leaves`; not `verify_only`)."""
    return [(name, config) for name, config in bench_runs([name for name, block in BLOCKS.items()
                                                           if block.bench.module == module], include_verify_only=False)
            if config not in BLOCKS[name].bench.pytest_leaves]


def run_ids(runs: list[tuple[str, dict]]) -> list[str]:
    """Test ids for bench runs: their run folders' names."""
    return [run_name(name, BLOCKS[name].params(**config)) for name, config in runs]


def planned_runs(names: list[str], params: Params | None, quick: bool, table: Path,
                 memory: str | None = None) -> tuple[list[Run], tuple[str, ...]]:
    """The runs `basedie verify` does and the blocks whose other entries they replace. `params` (one block): that
    parameter set alone, other entries kept. Otherwise every set the benches prove (`quick`: only the small
    `configs`, other entries kept) and, in full runs, the sets verified by name into `table` earlier. Every run
    is behind `memory`, or (None) its bench's own (`Bench.memory`)."""
    def behind(name: str) -> str:
        return memory or BLOCKS[name].bench.memory

    if params is not None:
        return [Run(names[0], params.as_dict(), requested=True, memory=behind(names[0]))], ()
    runs = [Run(name, config, memory=behind(name)) for name, config in bench_runs(names, include_verify_only=not quick)]
    if quick:
        return runs, ()
    known = {(run.block, BLOCKS[run.block].params(**run.config)) for run in runs}
    for block, recorded in requested_params(table, names):
        try:
            full = BLOCKS[block].params(**recorded)
        except (ValueError, TypeError) as error:
            log.warning("not re-measuring %s %s from %s: no longer a valid parameter set (%s)", block, recorded,
                        table, error)
            continue
        if (block, full) not in known:
            runs.append(Run(block, full.as_dict(), requested=True, memory=behind(block)))
    return runs, tuple(names)


def soak_runs(names: list[str], params: Params | None, beats: int) -> list[Run]:
    """The soaks `basedie verify --soak` runs: `params` (one block), else each block's small parameter sets (its
    bench's `configs`), behind the ideal memory (its random back-pressure is what a soak needs)."""
    if params is not None:
        return [Run(names[0], params.as_dict(), requested=True, soak=beats)]
    return [Run(name, BLOCKS[name].params(**config).as_dict(), soak=beats)
            for name, config in bench_runs(names, include_verify_only=False)]


def stated_seconds(run: Run) -> float | None:
    """The stated first-run time of a `verify_only` set (see `Bench.verify_only_minutes`), else None."""
    bench = BLOCKS[run.block].bench
    if bench.verify_only_minutes is not None and run.config in bench.verify_only:
        return 60 * bench.verify_only_minutes
    return None


def verify_one(run: Run, waves: bool = False, events=None) -> VerifiedEntry:
    """Run one bench and make its entry; `events` (a queue, if given) receives (run name, phase) as it goes."""
    bench = BLOCKS[run.block].bench
    params = BLOCKS[run.block].params(**run.config)
    on_phase = (lambda phase: events.put((run.name, phase))) if events is not None else None
    started = time.monotonic()
    figures = run_bench(run.block, bench.module, params, waves=waves, on_phase=on_phase, memory=run.memory,
                        soak=run.soak)
    if run.soak:
        figures["soak"]["wall_seconds"] = round(time.monotonic() - started)
    rtl_module = BLOCKS[run.block].component.__module__
    provenance = {
        "bench": bench.module,
        # The simulation's time step: it scales waveform time stamps only. The block's design clock is one of
        # its parameters (`design_clock_hz`), where one applies.
        "waveform_clock_hz": 1e9 / CLOCK_PERIOD_NS,
        "cycles_simulated": figures.pop("cycles_simulated"),
        "random_reset_seed": figures.pop("random_reset_seed"),  # Verilator's +verilator+seed (basedie.flow.runner)
        "tools": tool_versions(),
        "rtl_module": rtl_module,
        "sources_digest": sources_digest(rtl_module, bench.module),
        **({"requested": True} if run.requested else {}),
        **({"memory": run.memory} if run.memory != "ideal" else {}),
    }
    return VerifiedEntry(block=run.block, params=params.as_dict(), figures=figures, provenance=provenance)


class BenchRunsFailed(Exception):
    """A bench run failed (the cause) and stopped the others; `finished` holds the entries of the runs that passed
    before it, which a caller may keep: a long `basedie verify all` does not lose them to its last bench."""

    def __init__(self, finished: list[VerifiedEntry]) -> None:
        super().__init__(f"a bench run failed after {len(finished)} passed")
        self.finished = finished


def verify(runs: list[Run], waves: bool = False, jobs: int = 1, show_progress: bool = True) -> list[VerifiedEntry]:
    """Run the benches, `jobs` at a time (each is its own simulator process), showing progress; on the first
    failure, cancels the rest and raises `BenchRunsFailed` from it. Each run's wall time is recorded for the next
    run's estimates."""
    log.info("%d bench runs, %d at a time: %s", len(runs), max(jobs, 1), ", ".join(run.name for run in runs))
    progress = Progress([(run.name, stated_seconds(run)) for run in runs], jobs, waves, enabled=show_progress)
    with Manager() as manager, ProcessPoolExecutor(max(jobs, 1)) as pool:
        events = manager.Queue()
        futures = {pool.submit(verify_one, run, waves, events): run for run in runs}
        pending, finished = set(futures), []
        try:
            while pending:
                done, pending = wait(pending, timeout=1, return_when=FIRST_COMPLETED)
                while not events.empty():
                    progress.phase(*events.get())
                for future in done:
                    finished.append(future.result())  # raises the bench's failure
                    progress.finished(futures[future].name)
                progress.refresh()
        except BaseException as failure:
            for future in pending:
                future.cancel()
            if isinstance(failure, Exception):   # a bench's failure; an interrupt stays what it is
                raise BenchRunsFailed(finished) from failure
            raise
        finally:
            progress.close()
        return [future.result() for future in futures]
