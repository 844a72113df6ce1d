"""Progress of `basedie verify`/`run`: which bench is building or running, elapsed time, and an estimate of what
is left from the wall times recorded on this machine (or, before any, the stated times of the full-size sets).

A line per phase goes to stderr in any case (logs show it); the tqdm bar only when stderr is a terminal.
"""
import json
import os
import sys
import time
from pathlib import Path

from tqdm import tqdm

from .runner import BUILD_ROOT

TIMINGS = BUILD_ROOT / "timings.json"
"""Wall time of the last build-and-run of every bench run, by run name: the next estimate."""


def read_timings(path: Path = TIMINGS) -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text()).items()}
    except (FileNotFoundError, json.JSONDecodeError, AttributeError, ValueError):
        return {}


def record_timing(key: str, seconds: float, path: Path = TIMINGS) -> None:
    """Merge one time into the file (replaced atomically, so concurrent writers never leave it broken)."""
    timings = read_timings(path) | {key: round(seconds, 1)}
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f"{path.name}.tmp{os.getpid()}")
    staging.write_text(json.dumps(timings, indent=1, sort_keys=True) + "\n")
    staging.replace(path)


class Progress:
    """Tracks bench runs by name; `runs` pairs each name with its stated time (seconds) or None."""

    def __init__(self, runs: list[tuple[str, float | None]], jobs: int, waves: bool, enabled: bool = True,
                 timings: Path = TIMINGS) -> None:
        self.timings, self.jobs, self.enabled = timings, max(jobs, 1), enabled
        self.suffix = "+waves" if waves else ""
        recorded = read_timings(timings)
        self.expected: dict[str, tuple[float, str] | None] = {}
        for name, stated in runs:
            if name + self.suffix in recorded:
                self.expected[name] = (recorded[name + self.suffix], "recorded")
            else:
                self.expected[name] = (stated, "stated") if stated is not None else None
        self.started: dict[str, float] = {}
        self.phases: dict[str, str] = {}
        self.begin = time.monotonic()
        self.bar = tqdm(total=len(runs), unit="run", file=sys.stderr, dynamic_ncols=True,
                        disable=True if not enabled else None,
                        bar_format="{n_fmt}/{total_fmt} bench runs [{elapsed}] {postfix}")

    def _write(self, line: str) -> None:
        if self.enabled:
            tqdm.write(line, file=sys.stderr)

    def _estimate(self, name: str) -> str:
        known = self.expected[name]
        return f"~{known[0]:.0f} s ({known[1]})" if known else "no estimate yet"

    def phase(self, name: str, phase: str) -> None:
        """`name` started `phase` ("building" or "running")."""
        self.started.setdefault(name, time.monotonic())
        built = self.phases.get(name) == "building"
        self.phases[name] = phase
        detail = (f"built in {time.monotonic() - self.started[name]:.0f} s" if built
                  else f"build cached; expected {self._estimate(name)}" if phase == "running"
                  else f"expected {self._estimate(name)}")
        self._write(f"{name}: {phase} ({detail})")

    def finished(self, name: str) -> None:
        seconds = time.monotonic() - self.started.get(name, self.begin)
        self.phases.pop(name, None)
        self.expected.pop(name, None)
        record_timing(name + self.suffix, seconds, self.timings)
        self._write(f"{name}: passed in {seconds:.0f} s")
        self.bar.update(1)

    def remaining(self) -> tuple[float, int]:
        """Estimated seconds left at `jobs` runs at once, and how many unfinished runs have no estimate."""
        now, seconds, unknown = time.monotonic(), 0.0, 0
        for name, known in self.expected.items():
            if known is None:
                unknown += 1
            else:
                seconds += max(known[0] - (now - self.started[name] if name in self.started else 0.0), 0.0)
        return seconds / self.jobs, unknown

    def refresh(self) -> None:
        now = time.monotonic()
        running = ", ".join(f"{name} {phase} {now - self.started[name]:.0f} s"
                            for name, phase in self.phases.items())
        seconds, unknown = self.remaining()
        left = f"about {seconds / 60:.1f} min left" + (f" + {unknown} runs never timed here" if unknown else "")
        self.bar.set_postfix_str(f"{running or 'starting'} | {left}", refresh=True)

    def close(self) -> None:
        self.bar.close()
