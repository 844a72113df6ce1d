"""`basedie sweep`: many `basedie simulate` runs over a grid (`basedie.spec`), in batches on Dask workers, into one
tidy table.

Every point is parsed by `simulate`'s own parser and run by `simulation.simulation`, the function `basedie simulate`
runs. Points go to the workers in batches, since a Dask task costs about 1 ms and a small simulation 5–70 ms. Each
finished batch is saved at once as a part file in DIR/parts; the table, the hardware file and the plots are
derived from the parts at the end, so an interrupted sweep resumes with the points it had not finished (points
that failed are tried again).
"""
import functools
import hashlib
import json
import math
import os
import re
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from .errors import UsageError
from .simulation import simulate_parser, simulation
from .spec import Point, Spec

OUTPUTS = ("points.parquet", "points.csv", "hardware.json", "spec.toml", "parts", "plots")
MAX_BATCH = 50           # points per task: ~1 s of simulation per ~1 ms of Dask overhead, progress every second
SERIES_WITH_LEGEND = 12  # more series than this are drawn as a cloud of points without a legend


# --- the engine: batches of items through a module-level function, on Dask or in this process ---

def compute(function: Callable[[list], list], items: Sequence, client=None, done: Callable = lambda b, r: None,
            failed: Callable = None, batch: int | None = None, progress: bool = True) -> None:
    """Call `function` (importable by the workers) on batches of `items` on `client`'s workers, or in this process
    without a client; `done(batch_items, results)` as each batch finishes. A batch whose task fails as a whole
    (a worker died) gets `failed(item, one-line error)` per item; without `failed` the error is raised."""
    if not items:
        return
    from tqdm import tqdm

    slots = sum(client.nthreads().values()) if client else 1
    size = batch or max(1, min(MAX_BATCH, math.ceil(len(items) / (4 * max(1, slots)))))
    batches = [list(items[i:i + size]) for i in range(0, len(items), size)]
    bar = tqdm(total=len(items), unit="point", disable=None if progress else True, file=sys.stderr)
    try:
        if client is None:
            for chunk in batches:
                done(chunk, function(chunk))
                bar.update(len(chunk))
            return
        from distributed import as_completed

        futures = client.map(function, batches, pure=False)
        chunk_of = {future.key: chunk for future, chunk in zip(futures, batches)}
        for future in as_completed(futures):
            chunk = chunk_of[future.key]
            try:
                results = future.result()
            except Exception as error:
                if failed is None:
                    raise
                results = [failed(item, one_line(error)) for item in chunk]
            done(chunk, results)
            bar.update(len(chunk))
            future.release()
    finally:
        bar.close()


def one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


@functools.cache
def _context():
    """This process's `simulate` parser and verified table (loading the table costs ~0.1 s: once per worker)."""
    from basedie import verified

    return simulate_parser(), verified.load()


def run_points(options: list[tuple[str, ...]]) -> list[dict]:
    """Simulate each option list; a row of outputs per point, its error in one line if it failed."""
    parser, table = _context()
    rows = []
    for point in options:
        try:
            _, result = simulation(parser.parse_args(point), table)
        except Exception as error:  # recorded with the point; the sweep goes on
            rows.append({"options": _key(point), "status": "error", "error": one_line(error)})
            continue
        hardware = {"hardware": result.config["hardware"], "verified_blocks": result.config["verified_blocks"]}
        text = json.dumps(hardware, sort_keys=True)
        config = {k: v for k, v in result.config.items() if k not in hardware}
        rows.append({"options": _key(point), "status": "ok", "error": "",
                     "hardware_id": hashlib.sha256(text.encode()).hexdigest()[:12], "hardware_json": text,
                     **_flat(result.summary), **_flat(config, "config.")})
    return rows


def simulate_configs(configs: list) -> list[tuple]:
    """(Result, "") or (None, why it is impossible) per `SimulationConfig`: the study scripts' grids."""
    from sysmodel.errors import ConfigError
    from sysmodel.simulate import simulate

    _, table = _context()
    results = []
    for config in configs:
        try:
            results.append((simulate(config, table), ""))
        except ConfigError as error:
            results.append((None, str(error)))
    return results


def _key(options: Sequence[str]) -> str:
    return Point({}, {}, tuple(options)).key


def _flat(value, prefix: str = "") -> dict:
    """Nested dicts as dotted columns; lists as JSON text."""
    if isinstance(value, dict):
        return {k: v for name, item in value.items() for k, v in _flat(item, f"{prefix}{name}.").items()}
    if isinstance(value, (list, tuple)):
        return {prefix[:-1]: json.dumps(value)}
    return {prefix[:-1]: value}


# --- clusters ---

SCHEDULER_TIMEOUT = "10s"     # how long a client keeps trying to reach a scheduler before giving up


class Cluster:
    """A Dask client: on the scheduler at `address`, or on a LocalCluster of `workers` processes (one thread
    each); `workers=0` is no client at all (the points run in this process)."""

    def __init__(self, address: str | None, workers: int | None):
        self.address, self.workers, self._stack = address, workers, []

    def __enter__(self):
        if self.address is None and self.workers == 0:
            return None
        import logging

        from distributed import Client, LocalCluster

        if self.address is not None:
            try:
                client = Client(self.address, timeout=SCHEDULER_TIMEOUT)
            except (OSError, TimeoutError, ValueError) as error:
                raise UsageError(f"cannot reach the Dask scheduler at {self.address}: {one_line(error)}") from None
            self._stack.append(client)
            return client
        with warnings.catch_warnings():  # its HTTP server moves to a free port when another cluster runs: fine
            warnings.filterwarnings("ignore", message="Port .* is already in use")
            cluster = LocalCluster(n_workers=self.workers or os.cpu_count() or 1, threads_per_worker=1,
                                   processes=True, dashboard_address=None, silence_logs=logging.ERROR)
        self._stack += [cluster, Client(cluster)]
        return self._stack[-1]

    def __exit__(self, *exc):
        while self._stack:
            self._stack.pop().close()


# --- the sweep ---

def check_destination(out: Path) -> None:
    """Refuse a folder holding anything a sweep did not write (resuming needs the folder as the sweep left it)."""
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"output folder {out} exists and is not a folder")
        foreign = sorted(p.name for p in out.iterdir() if p.name not in OUTPUTS and not p.name.startswith(".tmp"))
        if foreign:
            raise UsageError(f"output folder {out} holds files a sweep did not write ({', '.join(foreign[:3])}); "
                             f"choose another folder")
        return
    ancestor = next(p for p in out.absolute().parents if p.exists())
    if not ancestor.is_dir():
        raise UsageError(f"output folder {out} cannot be created: {ancestor} is not a folder")


def stored(out: Path) -> dict[str, dict]:
    """The outputs already in `out`, by point key; a later part replaces an earlier one's row."""
    import pyarrow.parquet as pq

    rows = {}
    for part in sorted((out / "parts").glob("part-*.parquet")):
        for row in pq.read_table(part).to_pylist():
            rows[row["options"]] = {k: v for k, v in row.items() if v is not None}
    return rows


def sweep(spec: Spec, points: list[Point], spec_text: str, out: Path, client=None, progress: bool = True,
          plots: bool = True) -> dict:
    """Run the `points` of `spec` not yet in `out`, then write the table, hardware file and (with `plots`) plots
    from every stored point. Returns counts: points, computed, reused, failed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    previous = stored(out) if out.exists() else {}
    keys = {p.key for p in points}
    foreign = [k for k in previous if k not in keys]
    if foreign:
        raise UsageError(f"{out} holds {len(foreign)} point(s) of another SPEC (e.g. {foreign[0]}); choose another "
                         f"folder")
    todo = [p for p in points if previous.get(p.key, {}).get("status") != "ok"]
    (out / "parts").mkdir(parents=True, exist_ok=True)
    (out / "spec.toml").write_text(spec_text)
    sequence = max((int(p.stem.split("-")[1]) for p in (out / "parts").glob("part-*.parquet")), default=0)

    def save(chunk, rows):
        nonlocal sequence
        sequence += 1
        _atomic(out / "parts" / f"part-{sequence:06d}.parquet",
                lambda path: pq.write_table(pa.Table.from_pylist(rows), path))

    def failed(options, error):
        return {"options": _key(options), "status": "error", "error": error}

    compute(run_points, [p.options for p in todo], client, save, failed, progress=progress)
    rows = stored(out)
    write_outputs(spec, points, rows, out, plots)
    return {"points": len(points), "computed": len(todo), "reused": len(points) - len(todo),
            "failed": sum(rows[p.key]["status"] != "ok" for p in points)}


def write_outputs(spec: Spec, points: list[Point], rows: dict[str, dict], out: Path, plots: bool = True) -> None:
    """points.parquet/.csv (inputs, status, error, hardware id, metrics, resolved configuration per point),
    hardware.json (each distinct hardware and the verified figures it used, once) and plots/<metric>.png."""
    import pyarrow.csv
    import pyarrow.parquet as pq

    hardware = {r["hardware_id"]: json.loads(r["hardware_json"]) for r in rows.values() if "hardware_id" in r}
    table = []
    for index, point in enumerate(points):
        stored_row = {k: v for k, v in rows[point.key].items() if k not in ("options", "hardware_json")}
        inputs = {k: " ".join(map(str, v)) if isinstance(v, list) else v for k, v in point.settings.items()
                  if k not in point.labels}
        table.append({"point": index, **point.labels, **inputs, "options": point.key, **stored_row})
    arrow = _arrow(table)
    _atomic(out / "points.parquet", lambda path: pq.write_table(arrow, path))
    _atomic(out / "points.csv", lambda path: pyarrow.csv.write_csv(arrow, path))
    _atomic(out / "hardware.json", lambda path: Path(path).write_text(json.dumps(hardware, indent=2) + "\n"))
    if not plots:
        return
    first = spec.axes[0]
    measured = _metric_names(rows)
    metrics = [name for name in arrow.column_names if name in measured and _numeric(arrow.column(name))]
    plot(arrow, first.name, list(first.labels), [a.name for a in spec.axes[1:]], metrics, out / "plots")


def _metric_names(rows: dict[str, dict]) -> set[str]:
    return {k for r in rows.values() for k in r if k not in ("options", "status", "error", "hardware_id",
                                                             "hardware_json") and not k.startswith("config.")}


def _numeric(column) -> bool:
    import pyarrow as pa

    return pa.types.is_floating(column.type) or pa.types.is_integer(column.type)


def _arrow(rows: list[dict]):
    """One Arrow table from rows with different keys; a column mixing ints and floats is float, one mixing
    numbers and text is text."""
    import pyarrow as pa

    names = list(dict.fromkeys(k for row in rows for k in row))
    columns = {}
    for name in names:
        values = [row.get(name) for row in rows]
        kinds = {type(v) for v in values if v is not None}
        if kinds <= {int, float} and float in kinds:
            values = [None if v is None else float(v) for v in values]
        elif len(kinds) > 1:
            values = [None if v is None else str(v) for v in values]
        columns[name] = pa.array(values)
    return pa.table(columns)


def _atomic(path: Path, write: Callable) -> None:
    """Write through a temporary file renamed into place: a killed sweep never leaves half a file."""
    temporary = path.with_name(f".tmp-{path.name}")
    write(temporary)
    os.replace(temporary, path)


def plot(table, x_name: str, x_order: list, series_names: list[str], metrics: list[str], folder: Path) -> None:
    """One PNG per metric against the first axis: a line per combination of the other axes (a cloud of points
    when there are more than SERIES_WITH_LEGEND); failed points are gaps."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    x_values = table.column(x_name).to_pylist()
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in x_order)
    positions = {v: i for i, v in enumerate(dict.fromkeys(x_order))}
    x = [v if numeric else positions.get(v, math.nan) for v in x_values]
    keys = [tuple(zip(series_names, values)) for values in zip(*(table.column(n).to_pylist() for n in series_names))] \
        if series_names else [()] * len(x)
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    staging = folder.with_name(".tmp-plots")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for metric in metrics:
        y = [math.nan if v is None else v for v in table.column(metric).to_pylist()]
        figure = Figure(figsize=(6.4, 4.0))   # fixed margins: a layout engine would draw every figure twice
        FigureCanvasAgg(figure)
        ax = figure.subplots(gridspec_kw={"left": 0.13, "right": 0.97, "bottom": 0.14, "top": 0.92})
        if len(groups) <= SERIES_WITH_LEGEND:
            for key, rows in groups.items():
                rows = sorted(rows, key=lambda i: x[i])
                ax.plot([x[i] for i in rows], [y[i] for i in rows], marker="o", markersize=3,
                        label=", ".join(f"{n}={v}" for n, v in key) or None)
            if series_names:
                ax.legend(fontsize=6)
        else:
            ax.scatter(x, y, s=4, alpha=0.5)
        if not numeric:
            ax.set_xticks(range(len(positions)), [str(v) for v in positions], rotation=15, fontsize=7)
        ax.set(xlabel=x_name, ylabel=metric, title=metric)
        ax.grid(alpha=0.3)
        figure.savefig(staging / f"{re.sub(r'[^A-Za-z0-9._+-]', '_', metric)}.png", dpi=80)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(staging, folder)


def main(args) -> int:
    """`basedie sweep` (see `cli._add_sweep`)."""
    from .spec import load
    from basedie import verified
    from basedie.verified import StaleTableError

    parser = simulate_parser()
    spec = load(args.spec, parser)
    out = args.out or Path("build") / "sweep" / args.spec.stem
    points = spec.points(parser)             # every point parsed and checked before anything runs
    check_destination(out)
    try:
        verified.load()
    except StaleTableError as error:
        raise UsageError(str(error)) from None
    if args.workers is not None and (args.workers < 0 or args.scheduler):
        raise UsageError("--workers takes a count >= 0 of LocalCluster workers (not with --scheduler)")
    started = time.perf_counter()
    with Cluster(args.scheduler, args.workers) as client:
        counts = sweep(spec, points, args.spec.read_text(), out, client)
    print(f"{counts['points']} points ({counts['computed']} computed, {counts['reused']} already in {out}, "
          f"{counts['failed']} failed) in {time.perf_counter() - started:.1f} s")
    print(f"table: {out / 'points.parquet'} (and .csv); hardware: {out / 'hardware.json'}; plots: {out / 'plots'}")
    return 1 if counts["failed"] else 0
