"""Trace replay (`--trace FILE|NAME`): one request per row of a CSV, JSON-lines or JSON-list file, arrivals as
recorded, in one of the public trace formats below — or a named trace shipped with the package.

A file is read by its format, recognised from its token columns (names compared case-insensitively), so that
an arrival column is always read in its own project's unit: `timestamp` is milliseconds in Mooncake's traces
but `Timestamp` is seconds in BurstGPT's. A file whose token columns match no format, or whose format's arrival
column is missing, is an error naming the columns found; `arrivals="none"` (`--arrivals none`) replays every
request at t = 0 instead, said explicitly. `repeat` tiles the trace end to end (see `Trace`). Rows are replayed
in arrival order; ids are the row numbers (copy k of a tiled trace: k × rows + row). Every bad cell is a
`ConfigError` naming the file, row and column.
"""
import csv
import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

from .engine import Request
from .errors import ConfigError, require


@dataclass(frozen=True)
class Format:
    """A public trace schema: its arrival column and that column's unit (`s`, `ms`, or `iso` for an ISO
    date-time, UTC unless it names a zone), and the prompt and output token columns (first alias found)."""
    name: str
    arrival: str
    unit: str
    prompt: tuple[str, ...]
    output: tuple[str, ...]
    source: str


FORMATS = (
    Format("basedie", "arrival_s", "s", ("prompt_tokens", "input_len"), ("output_tokens", "output_len"),
           "this project's traces and the requests.csv `basedie simulate` writes"),
    Format("azure", "TIMESTAMP", "iso", ("ContextTokens",), ("GeneratedTokens",),
           "Azure LLM inference traces 2023 and 2024 (github.com/Azure/AzurePublicDataset), splitwise-sim's input"),
    Format("splitwise-sim", "arrival_timestamp", "s", ("prompt_size",), ("token_size",),
           "splitwise-sim's request traces (github.com/Mutinifni/splitwise-sim, README 'Request Traces')"),
    Format("distserve", "start_time", "s", ("prompt_len",), ("output_len",),
           "DistServe's simulator, `--arrival custom --workload FILE.json` (github.com/LLMServe/DistServe, "
           "simdistserve/benchmarks/simulate_dist.py)"),
    Format("vidur", "arrived_at", "s", ("num_prefill_tokens",), ("num_decode_tokens",),
           "Vidur's trace replay (github.com/microsoft/vidur, data/processed_traces/*.csv)"),
    Format("burstgpt", "Timestamp", "s", ("Request tokens",), ("Response tokens",),
           "BurstGPT (github.com/HPMLL/BurstGPT, README 'Schema': seconds from 0:00 on the first day)"),
    Format("mooncake", "timestamp", "ms", ("input_length",), ("output_length",),
           "Mooncake's traces (github.com/kvcache-ai/Mooncake, FAST25-release/traces/*.jsonl; milliseconds "
           "since the first request)"),
)
UNITS = {"s": 1.0, "ms": 1e-3}
ARRIVALS = ("trace", "none")

# Traces shipped as package data (sysmodel/data/traces/, each folder with its licence and source).
NAMED = {"azure-conv-2023": "azure-2023/AzureLLMInferenceTrace_conv.csv",
         "azure-code-2023": "azure-2023/AzureLLMInferenceTrace_code.csv"}


@dataclass(frozen=True)
class Trace:
    """`path`: a file, or a name in `NAMED`. `arrivals`: "trace" (the format's arrival column, required) or
    "none" (every request at t = 0). `repeat`: the trace played `repeat` times back to back, copy k shifted by
    k × the trace's span × rows / (rows - 1), i.e. the span plus one mean gap between arrivals, so the tiled
    trace keeps the trace's mean rate (an hour-long trace repeated 24 times is a day at the same rate)."""
    path: str
    arrivals: str = "trace"
    repeat: int = 1

    def __post_init__(self) -> None:
        require(self.arrivals in ARRIVALS, f"trace arrivals must be one of {', '.join(ARRIVALS)}, "
                                           f"got {self.arrivals!r}")
        require(isinstance(self.repeat, int) and self.repeat >= 1,
                f"trace repeat must be an integer >= 1, got {self.repeat!r}")
        require(self.repeat == 1 or self.arrivals == "trace",
                "repeating a trace replayed at t = 0 (arrivals none) only multiplies the requests: give more rows")

    def generate(self) -> list[Request]:
        path = resolve(self.path)
        rows = _read(path)
        if not rows:
            raise ConfigError(f"trace {self.path}: no requests")
        columns = {key.lower(): key for key in rows[0]}
        form, arrival, prompt, output = _recognise(columns, self.path, self.arrivals == "trace")
        requests = []
        for number, row in enumerate(rows):
            where = f"trace {self.path}, row {number + 1}"
            time = _seconds(row.get(arrival), form.unit, f"{where}, {arrival}") if arrival else 0.0
            requests.append(Request(number, time, _tokens(row.get(prompt), f"{where}, {prompt}"),
                                    _tokens(row.get(output), f"{where}, {output}")))
        requests.sort(key=lambda r: r.arrival)
        return _tiled(requests, self.repeat, self.path) if self.repeat > 1 else requests


def resolve(path: str) -> Path:
    """The file of a named trace (package data), else `path` itself."""
    if path in NAMED:
        return Path(str(resources.files("sysmodel") / "data" / "traces" / NAMED[path]))
    return Path(path)


def _recognise(columns: dict[str, str], path: str, timed: bool) -> tuple[Format, str | None, str, str]:
    """(format, arrival column or None, prompt column, output column) of a file with these columns."""
    found = ", ".join(columns.values())
    matches = []
    for form in FORMATS:
        prompt = next((columns[a.lower()] for a in form.prompt if a.lower() in columns), None)
        output = next((columns[a.lower()] for a in form.output if a.lower() in columns), None)
        if prompt and output:
            matches.append((form, columns.get(form.arrival.lower()), prompt, output))
    if not matches:
        known = "; ".join(f"{f.name}: {f.arrival}, {'|'.join(f.prompt)}, {'|'.join(f.output)}" for f in FORMATS)
        raise ConfigError(f"trace {path}: columns {found} are no known trace format ({known})")
    if not timed:
        return matches[0][0], None, matches[0][2], matches[0][3]
    timed_matches = [m for m in matches if m[1] is not None]
    if not timed_matches:
        form = matches[0][0]
        raise ConfigError(f"trace {path}: no arrival column {form.arrival} ({form.name} format, "
                          f"in {'seconds' if form.unit == 's' else form.unit}); the file has {found}. Rename the "
                          f"arrival column, or give --arrivals none to replay every request at t = 0")
    return timed_matches[0]


def _read(path: Path) -> list[dict]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"trace {path}: cannot be read ({error})") from None
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        if text.lstrip().startswith("["):        # one JSON list of objects (DistServe's workload files)
            try:
                rows = json.loads(text)
            except json.JSONDecodeError as error:
                raise ConfigError(f"trace {path}: not JSON ({error})") from None
            for number, row in enumerate(rows):
                if not isinstance(row, dict):
                    raise ConfigError(f"trace {path}, item {number + 1}: not a JSON object")
            return rows
        rows = []
        for number, line in enumerate(text.splitlines()):
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ConfigError(f"trace {path}, line {number + 1}: not JSON ({error})") from None
                if not isinstance(row, dict):
                    raise ConfigError(f"trace {path}, line {number + 1}: not a JSON object")
                rows.append(row)
        return rows
    return list(csv.DictReader(text.splitlines()))


def _seconds(value, unit: str, where: str) -> float:
    if unit == "iso":
        if not isinstance(value, str):
            raise ConfigError(f"{where}: arrival must be an ISO date-time, got {value!r}")
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ConfigError(f"{where}: {value!r} is not an ISO date-time") from None
        return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ConfigError(f"{where}: arrival must be a number of {unit}, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{where}: arrival must be a finite number of {unit} >= 0, got {value!r}")
    return float(value) * UNITS[unit]


def _tokens(value, where: str) -> int:
    try:
        number = float(value) if isinstance(value, str) else value
    except ValueError:
        number = None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number) \
            or number != int(number) or number < 1:
        raise ConfigError(f"{where}: token count must be an integer >= 1, got {value!r}")
    return int(number)


def _tiled(requests: list[Request], repeat: int, path: str) -> list[Request]:
    """`requests` (in arrival order) `repeat` times, copy k shifted by k periods (see `Trace`)."""
    rows = len(requests)
    span = requests[-1].arrival - requests[0].arrival
    if rows < 2 or span <= 0:
        raise ConfigError(f"trace {path}: repeating needs arrivals spread over time, the trace has {rows} "
                          f"request(s) over {span:g} s")
    period = span * rows / (rows - 1)
    return [Request(copy * rows + r.id, r.arrival + copy * period, r.input_len, r.output_len)
            for copy in range(repeat) for r in requests]
