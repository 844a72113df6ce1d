"""What a simulation leaves behind: the summary printed for a person, and a folder of JSON, CSV and plots for
everything else (`basedie simulate`).

The folder is written whole or not at all: its files go into a temporary folder beside the destination,
which is renamed into place only when every file is written, so a failed run never leaves a half-written
folder or destroys the previous one. matplotlib is imported only when plotting (Agg canvas, no pyplot
state), so printing a summary does not need it.
"""
import csv
import importlib.metadata
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from .hbf.media import PAGE_BYTES
from .engine import Request
from .errors import require
from .metrics import grouped_percentiles, request_row, token_gaps
from .simulate import Result

DATA_FILES = ("summary.json", "config.json", "requests.csv", "servers.csv")
PLOT_FILES = ("latency_cdf.png", "timeline.png", "utilization.png", "temperature.png")   # the last with HBF
TIMELINE_REQUESTS = 200      # bars beyond this are too thin to read


def check_destination(out: Path) -> None:
    """Refuse a destination that `write` could not create or must not replace: only an empty folder or one
    holding nothing but a previous run's files is replaced, so a mistyped path never deletes a user's data."""
    if out.exists():
        require(out.is_dir(), f"output folder {out} exists and is not a folder")
        foreign = sorted(p.name for p in out.iterdir() if p.name not in DATA_FILES + PLOT_FILES)
        require(not foreign, f"output folder {out} holds files a simulation did not write ({', '.join(foreign[:3])}"
                             f"{', ...' if len(foreign) > 3 else ''}); choose another folder")
        return
    ancestor = next(p for p in out.absolute().parents if p.exists())
    require(ancestor.is_dir(), f"output folder {out} cannot be created: {ancestor} is not a folder")


def write(result: Result, out: Path, command: Sequence[str], plots: bool = True) -> Path:
    """Write every output file of `result` into `out` (replacing a previous run's folder there); the PNGs only
    with `plots` (drawing them takes most of a short run's time)."""
    check_destination(out)
    out = out.absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.new.", dir=out.parent))
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # as a plain mkdir would make it (mkdtemp's folder is private)
    try:
        _write_files(result, staging, command, plots)
        if out.exists():
            _swap(staging, out)
        else:
            os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # already gone when it was renamed into place
    return out


def _swap(new: Path, out: Path) -> None:
    """Replace the folder `out` by `new`, putting the old one back if the second rename fails."""
    retired = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
    try:
        os.replace(out, retired / out.name)
        try:
            os.replace(new, out)
        except BaseException:
            os.replace(retired / out.name, out)
            raise
    finally:
        shutil.rmtree(retired, ignore_errors=True)


def _write_files(result: Result, folder: Path, command: Sequence[str], plots: bool) -> None:
    _write_json(folder / "summary.json", result.summary)
    _write_json(folder / "config.json", {**result.config, "command_line": list(command),
                                         "basedie_version": _version()})
    _write_csv(folder / "requests.csv", request_table(result))
    _write_csv(folder / "servers.csv", server_table(result))
    if not plots:
        return
    plot_latency_cdf(result, folder / "latency_cdf.png")
    plot_timeline(result, folder / "timeline.png")
    plot_utilization(result, folder / "utilization.png")
    if result.temperatures:
        plot_temperature(result, folder / "temperature.png")


def _version() -> str:
    try:
        return importlib.metadata.version("basedie")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _json_safe(value):
    """NaN (e.g. TPOT of one-token outputs) as null: strict JSON has no NaN."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _write_json(path: Path, value) -> None:
    path.write_text(json.dumps(_json_safe(value), indent=2, allow_nan=False) + "\n")


def _write_csv(path: Path, rows: Iterable[dict]) -> None:
    rows = iter(rows)
    first = next(rows)
    with path.open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(first))
        writer.writeheader()
        writer.writerow(first)
        writer.writerows(rows)


# Requests whose token gaps are sorted at once by `request_table`: bounds its memory, not its result.
TABLE_CHUNK = 10_000


def request_table(result: Result) -> Iterator[dict]:
    """`Result.rows` with each request's own p50/p99 time between tokens (NaN below two tokens), row by row
    (written as they come: a million requests' table is never held whole)."""
    for first in range(0, len(result.requests), TABLE_CHUNK):
        requests = result.requests[first:first + TABLE_CHUNK]
        gaps, starts = token_gaps(requests)
        p50, p99 = (p.tolist() for p in grouped_percentiles(gaps, starts, (50, 99)))
        yield from ({**request_row(request), "tbt_p50_s": a, "tbt_p99_s": b}
                    for request, a, b in zip(requests, p50, p99, strict=True))


def server_table(result: Result) -> list[dict]:
    """One row per server: busy fraction, utilization of its own compute and memory peaks, energy."""
    utilization, energy = result.summary["utilization"]["by_server"], result.summary["energy_j"]["by_server"]
    return [{"server": name, "busy": u["busy"], "compute_utilization": u["compute"],
             "hbm_bandwidth_utilization": u["hbm_bandwidth"], "energy_j": energy[name]}
            for name, u in utilization.items()]


def _duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "n/a"
    return f"{seconds:.3f} s" if seconds >= 1 else f"{seconds * 1e3:.3f} ms"


def _pair(distribution: dict) -> str:
    return f"{_duration(distribution['p50'])} / {_duration(distribution['p99'])}"


def _workload(config: dict) -> str:
    w = config["workload"]
    if w["kind"] == "Trace":
        return f"trace {w['path']}"
    if w["kind"] == "GammaArrivals":   # per-field lengths: no `input_len` / `output_len`
        return (f"Gamma arrivals {w['qps']:g} req/s (cv {w['arrival_cv']:g}), {w['input']['kind']} prompts of mean "
                f"{w['input']['mean']}, {w['output']['kind']} outputs of mean {w['output']['mean']}, seed {w['seed']}")
    lengths = f"{w['input_len']} in / {w['output_len']} out"
    if w["kind"] == "PoissonArrivals":
        return f"Poisson {w['qps']:g} req/s, mean {lengths}, cv {w['length_cv']:g}, seed {w['seed']}"
    return f"fixed batch at t=0, {lengths}"


def format_summary(result: Result) -> str:
    """One two-column table of the headline metrics in human units."""
    c, s = result.config, result.summary
    system = c["system"] + (f" (MMU policy {c['mmu_policy']})" if c["mmu_policy"] else "")
    if c["chunk_tokens"] is not None:
        system += f" ({c['chunk_tokens']}-token chunks)"
    rows = [
        ("system", system),
        ("model", c["model"]["name"]),
        ("hardware", f"{c['hardware']['gpus']}x {c['hardware']['gpu']['name']} ({c['perf_model']} performance model)"),
        ("requests", f"{s['requests']} ({_workload(c)}; max decode batch {c['max_batch']})"),
        ("makespan", _duration(s["makespan_s"])),
        ("throughput", f"{s['throughput']['requests_per_s']:.3f} req/s, "
                       f"{s['throughput']['output_tokens_per_s']:.1f} output tok/s"),
        ("TTFT p50 / p99", _pair(s["ttft_s"])),
        ("TPOT p50 / p99", _pair(s["tpot_s"])),
        ("TBT p50 / p99", _pair(s["tbt_s"])),
        ("E2E p50 / p99", _pair(s["e2e_s"])),
        ("decode wait p50 / p99", _pair(s["decode_queue_s"])),
        ("GPU compute util", f"{s['utilization']['gpu_compute']:.1%}"),
        ("HBM bandwidth util", f"{s['utilization']['hbm_bandwidth']:.1%}"),
        ("energy", f"{s['energy_j']['per_request']:.1f} J/request, "
                   f"{s['energy_j']['per_output_token']:.2f} J/output token"),
    ]
    if "hbf" in s:
        rows += _hbf_rows(s["hbf"])
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label.ljust(width)}  {value}" for label, value in rows)


def sample(requests: Sequence[Request], limit: int = TIMELINE_REQUESTS) -> list[Request]:
    """At most `limit` requests spread evenly over the run (the first and the last included)."""
    if len(requests) <= limit:
        return list(requests)
    picks = np.unique(np.rint(np.linspace(0, len(requests) - 1, limit)).astype(int))
    return [requests[i] for i in picks]


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _title(result: Result) -> str:
    return f"{result.config['system']} · {result.config['model']['name']} · {result.summary['requests']} requests"


def plot_latency_cdf(result: Result, path: Path) -> None:
    figure = _figure(12, 3.6)
    axes = figure.subplots(1, 3)
    for ax, (key, label) in zip(axes, (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E")), strict=True):
        values = np.sort([row[key] for row in result.rows if not math.isnan(row[key])]) * 1e3
        if values.size:
            ax.step(np.concatenate(([values[0]], values)), np.arange(values.size + 1) / values.size, where="post")
        else:
            ax.text(0.5, 0.5, "no request has this metric", ha="center", transform=ax.transAxes)
        ax.set(xlabel=f"{label} (ms)", ylabel="fraction of requests", ylim=(0, 1.02), title=label)
        ax.grid(alpha=0.3)
    figure.suptitle(f"Latency CDFs: {_title(result)}")
    figure.savefig(path, dpi=100)


def plot_timeline(result: Result, path: Path) -> None:
    shown = sample(result.requests)
    figure = _figure(12, max(3.0, min(12.0, 1.5 + 0.05 * len(shown))))
    ax = figure.subplots()
    ids = np.array([r.id for r in shown])
    arrival, start, first, finish = (np.array([getattr(r, name) for r in shown])
                                     for name in ("arrival", "prefill_start", "first_token", "finish"))
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    handles = []
    for left, right, label, colour in ((arrival, start, "queueing", "0.75"), (start, first, "prefill", "tab:orange"),
                                       (first, finish, "decode", "tab:blue")):
        # One collection per phase: hundreds of separate bar patches take most of the plot's time.
        low, high = ids - 0.4, ids + 0.4
        boxes = np.stack([np.stack(corner, axis=1) for corner in
                          ((left, low), (right, low), (right, high), (left, high))], axis=1)
        ax.add_collection(PolyCollection(boxes, facecolors=colour, edgecolors="none"))
        handles.append(Patch(color=colour, label=label))
    ax.autoscale_view()
    ax.set(xlabel="time (s)", ylabel="request id", title=f"Request timeline: {_title(result)}"
           + (f" ({len(shown)} shown)" if len(shown) < len(result.requests) else ""))
    ax.invert_yaxis()
    figure.legend(handles=handles, loc="outside lower center", ncols=3)
    figure.savefig(path, dpi=100)


def plot_utilization(result: Result, path: Path) -> None:
    servers = server_table(result)
    figure = _figure(max(6.0, 2.0 + 1.6 * len(servers)), 4.2)
    ax = figure.subplots()
    x = np.arange(len(servers))
    for offset, key, label in ((-0.2, "compute_utilization", "compute"),
                               (0.2, "hbm_bandwidth_utilization", "HBM bandwidth")):
        values = [100 * s[key] for s in servers]
        ax.bar(x + offset, values, width=0.4, label=label)
        for position, value in zip(x + offset, values, strict=True):
            if math.isnan(value):  # a link has no compute and no HBM of its own
                ax.text(position, 0, "n/a", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, [s["server"] for s in servers], rotation=15)
    total = result.summary["utilization"]
    ax.set(ylabel="% of the server's own peak", title=f"Utilization: {_title(result)}\nwhole machine: "
           f"GPU compute {total['gpu_compute']:.1%}, HBM bandwidth {total['hbm_bandwidth']:.1%}")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    figure.savefig(path, dpi=100)



def _hbf_rows(h: dict) -> list[tuple[str, str]]:
    residency = h["throttle_residency_s"]
    total = sum(residency.values()) or 1.0
    return [
        ("HBF media reads", f"{h['hbf_media_read_bytes'] / 1e9:.2f} GB ({h['media_page_reads']:.0f} pages, "
                            f"{h['media_page_reads_waited']:.0f} waited for)"),
        ("HBM frame fills", f"{h['hbm_frame_fill_bytes'] / 1e9:.2f} GB"),
        ("frame cache hits", f"{h['frame_cache_hit_rate']:.1%} of weight accesses "
                             f"({h['served_without_media_read_fraction']:.1%} without a media read)"),
        *([("hits by server", ", ".join(f"{role} {f['frame_cache_hits'] / f['accesses']:.1%} of "
                                         f"{f['accesses']:.0f} ({f['hbf_media_read_bytes'] / 1e9:.2f} GB from media)"
                                         for role, f in h["servers"].items() if f["accesses"]))]
          if "servers" in h else []),
        ("throttle residency", ", ".join(f"{k} {v / total:.1%}" for k, v in residency.items())),
        ("max temperature", ", ".join(f"{k} {v:.1f} C" for k, v in h["max_temperature_c"].items())),
        ("refresh / P/E", f"{h['hbf_refresh_read_bytes'] / 1e9:.3f} GB refreshed, "
                          f"{h['pe_cycles_per_block']:.2e} P/E cycles per block"),
        ("KV in HBF", f"{h['kv_media_read_pages'] * PAGE_BYTES / 1e9:.2f} GB read, "
                      f"{h['kv_programmed_pages'] * PAGE_BYTES / 1e9:.2f} GB programmed ({h['kv_write_backs']:.0f} "
                      f"dirty blocks written back), {h['kv_hits']:.0f} / {h['kv_misses']:.0f} block hits / misses; "
                      f"{h['kv_hbm_read_bytes'] / 1e9:.2f} GB of KV/prefix read from HBM"),
    ]


def plot_temperature(result: Result, path: Path) -> None:
    """Die temperatures of the (first) package over the run, and the throttle state."""
    trace = np.array(result.temperatures)
    figure = _figure(12, 4.2)
    ax = figure.subplots()
    for column, label in ((1, "GPU"), (2, "HBM"), (3, "HBF")):
        ax.plot(trace[:, 0], trace[:, column], label=label)
    ax.set(xlabel="time (s)", ylabel="die temperature (C)", title=f"Package temperature: {_title(result)}")
    states = ax.twinx()
    states.step(trace[:, 0], trace[:, 4], where="pre", color="0.5", alpha=0.5)
    states.set(ylabel="throttle state", yticks=range(4), yticklabels=["normal", "light", "severe", "shutdown"],
               ylim=(-0.2, 3.2))
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    figure.savefig(path, dpi=100)
