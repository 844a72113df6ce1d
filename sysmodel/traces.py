"""Trace replay (`--trace FILE`): one request per row of a CSV or JSON-lines file, arrivals as recorded.

Columns (first match wins, case-insensitive): the arrival time in seconds (`arrival_s`, `arrival`,
`arrival_time`, `arrived_at`, `timestamp`; or an ISO date-time such as splitwise-sim's Azure traces'
`TIMESTAMP`, UTC unless it names a zone), the prompt tokens (`input_len`, `prompt_tokens`, `prompt_len`,
`num_prefill_tokens`, `ContextTokens`) and the output tokens (`output_len`, `output_tokens`, `num_decode_tokens`,
`GeneratedTokens`). A file without an arrival column replays every request at t = 0. Rows are replayed in
arrival order; ids are the row numbers. Every bad cell is a `ConfigError` naming the file, row and column.
"""
import csv
import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .engine import Request
from .errors import ConfigError

ARRIVAL = ("arrival_s", "arrival", "arrival_time", "arrived_at", "timestamp")
PROMPT = ("input_len", "prompt_tokens", "prompt_len", "num_prefill_tokens", "contexttokens")
OUTPUT = ("output_len", "output_tokens", "num_decode_tokens", "generatedtokens")


@dataclass(frozen=True)
class Trace:
    path: str

    def generate(self) -> list[Request]:
        rows = _read(Path(self.path))
        if not rows:
            raise ConfigError(f"trace {self.path}: no requests")
        columns = {key.lower(): key for key in rows[0]}
        arrival = _column(columns, ARRIVAL, self.path, required=False)
        prompt, output = _column(columns, PROMPT, self.path), _column(columns, OUTPUT, self.path)
        requests = []
        for number, row in enumerate(rows):
            where = f"trace {self.path}, row {number + 1}"
            time = _seconds(row.get(arrival, 0.0), f"{where}, {arrival}") if arrival else 0.0
            requests.append(Request(number, time, _tokens(row.get(prompt), f"{where}, {prompt}"),
                                    _tokens(row.get(output), f"{where}, {output}")))
        requests.sort(key=lambda r: r.arrival)
        return requests


def _read(path: Path) -> list[dict]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"trace {path}: cannot be read ({error})") from None
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
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


def _column(columns: dict[str, str], names: tuple[str, ...], path: str, required: bool = True) -> str | None:
    for name in names:
        if name in columns:
            return columns[name]
    if required:
        raise ConfigError(f"trace {path}: no column {' / '.join(names)} (has: {', '.join(columns.values())})")
    return None


def _seconds(value, where: str) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            try:
                moment = datetime.fromisoformat(value.strip())
                return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()
            except ValueError:
                raise ConfigError(f"{where}: {value!r} is neither seconds nor an ISO date-time") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{where}: arrival must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def _tokens(value, where: str) -> int:
    try:
        number = float(value) if isinstance(value, str) else value
    except ValueError:
        number = None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number) \
            or number != int(number) or number < 1:
        raise ConfigError(f"{where}: token count must be an integer >= 1, got {value!r}")
    return int(number)
