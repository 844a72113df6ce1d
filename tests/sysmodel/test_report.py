"""`sysmodel.report` on a hand-made result: the printed summary's rows in human units (each workload kind, the
HBF rows), the tables written, strict JSON, the plots' contents and the refusal of foreign destinations."""
import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from sysmodel import report
from sysmodel.engine import Request
from sysmodel.errors import ConfigError
from sysmodel.hbf.media import PAGE_BYTES
from sysmodel.simulate import Result


def _distribution(p50: float, p99: float) -> dict:
    return {"mean": p50, "p50": p50, "p90": p99, "p99": p99}


def _request(i: int, arrival: float) -> Request:
    # Queued 0.25 s, prefilled 0.5 s, three tokens 0.25 s apart.
    request = Request(i, arrival, 100, 3, prefill_start=arrival + 0.25, first_token=arrival + 0.75,
                      finish=arrival + 1.25, decode_ready=arrival + 0.75, decode_start=arrival + 1.0)
    request.emit(arrival + 0.75)
    request.emit_block(np.array([arrival + 1.0, arrival + 1.25]))
    return request


HBF = {"hbf_media_read_bytes": 2.5e9, "media_page_reads": 1234.4, "media_page_reads_waited": 56.6,
       "hbm_frame_fill_bytes": 7.13e9, "frame_cache_hit_rate": 0.25, "served_without_media_read_fraction": 0.5,
       "throttle_residency_s": {"normal": 3.0, "light": 1.0}, "max_temperature_c": {"gpu": 61.34, "hbf": 80.0},
       "hbf_refresh_read_bytes": 1.75e6, "pe_cycles_per_block": 0.000123, "kv_media_read_pages": 1e5,
       "kv_programmed_pages": 2e5, "kv_write_backs": 7.0, "kv_hits": 30.0, "kv_misses": 10.0,
       "kv_hbm_read_bytes": 4e9}


def _result(workload: dict, mmu_policy=None, chunk_tokens=None, hbf=None, temperatures=()) -> Result:
    config = {"system": "duopd", "mmu_policy": mmu_policy, "chunk_tokens": chunk_tokens,
              "model": {"name": "Toy-1B"}, "hardware": {"gpus": 8, "gpu": {"name": "H100"}}, "perf_model": "roofline",
              "max_batch": 16, "workload": workload}
    summary = {"requests": 2, "makespan_s": 2.5, "throughput": {"requests_per_s": 0.8, "output_tokens_per_s": 2.4},
               "ttft_s": _distribution(0.75, 1.5), "tpot_s": _distribution(math.nan, math.nan),
               "tbt_s": _distribution(0.25, 0.0005), "e2e_s": _distribution(1.25, 12.0),
               "decode_queue_s": _distribution(0.25, 0.25),
               "utilization": {"gpu_compute": 0.125, "hbm_bandwidth": 0.5,
                               "by_server": {"prefill (GPU)": {"busy": 0.5, "compute": 0.25, "hbm_bandwidth": 0.75},
                                             "link": {"busy": 0.1, "compute": math.nan, "hbm_bandwidth": math.nan}}},
               "energy_j": {"per_request": 12.26, "per_output_token": 4.126, "total": 24.5,
                            "by_server": {"prefill (GPU)": 20.0, "link": 4.5}}}
    if hbf is not None:
        summary["hbf"] = hbf
    return Result(config, [_request(0, 0.0), _request(1, 1.0)], summary, list(temperatures))


FIXED = {"kind": "FixedBatch", "requests": 2, "input_len": 100, "output_len": 3}


def _table(result: Result) -> dict:
    return dict((line[:22].strip(), line[22:].strip()) for line in report.format_summary(result).splitlines())


def test_the_summary_is_one_table_of_human_units() -> None:
    lines = report.format_summary(_result(FIXED)).splitlines()
    assert len({line.index(value) for line, value in zip(lines, ("duopd", "Toy-1B"))}) == 1   # one column
    assert lines == [
        "system                 duopd",
        "model                  Toy-1B",
        "hardware               8x H100 (roofline performance model)",
        "requests               2 (fixed batch at t=0, 100 in / 3 out; max decode batch 16)",
        "makespan               2.500 s",
        "throughput             0.800 req/s, 2.4 output tok/s",
        "TTFT p50 / p99         750.000 ms / 1.500 s",
        "TPOT p50 / p99         n/a / n/a",
        "TBT p50 / p99          250.000 ms / 0.500 ms",
        "E2E p50 / p99          1.250 s / 12.000 s",
        "decode wait p50 / p99  250.000 ms / 250.000 ms",
        "GPU compute util       12.5%",
        "HBM bandwidth util     50.0%",
        "energy                 12.3 J/request, 4.13 J/output token"]


def test_the_summary_names_the_mmu_policy_the_chunk_and_each_workload_kind() -> None:
    assert _table(_result(FIXED, "decode-first", 512))["system"] == "duopd (MMU policy decode-first) (512-token chunks)"
    trace = {"kind": "Trace", "path": "runs/a.csv"}
    assert _table(_result(trace))["requests"] == "2 (trace runs/a.csv; max decode batch 16)"
    poisson = {"kind": "PoissonArrivals", "qps": 2.5, "input_len": 100, "output_len": 3, "length_cv": 0.5, "seed": 7}
    assert _table(_result(poisson))["requests"] == (
        "2 (Poisson 2.5 req/s, mean 100 in / 3 out, cv 0.5, seed 7; max decode batch 16)")
    gamma = {"kind": "GammaArrivals", "qps": 4.0, "arrival_cv": 2.0, "seed": 3,
             "input": {"kind": "lognormal", "mean": 512, "cv": 1.0}, "output": {"kind": "fixed", "mean": 64, "cv": 0.0}}
    assert _table(_result(gamma))["requests"] == (
        "2 (Gamma arrivals 4 req/s (cv 2), lognormal prompts of mean 512, fixed outputs of mean 64, seed 3; "
        "max decode batch 16)")


def test_the_hbf_rows_follow_the_headline_table() -> None:
    servers = {"gpu": {"frame_cache_hits": 30.0, "accesses": 40.0, "hbf_media_read_bytes": 1.25e9},
               "idle": {"frame_cache_hits": 0.0, "accesses": 0.0, "hbf_media_read_bytes": 0.0},
               "pnm": {"frame_cache_hits": 1.0, "accesses": 8.0, "hbf_media_read_bytes": 0.5e9}}
    lines = report.format_summary(_result(FIXED, hbf={**HBF, "servers": servers})).splitlines()
    kv_read, kv_programmed = 1e5 * PAGE_BYTES / 1e9, 2e5 * PAGE_BYTES / 1e9
    assert lines[14:] == [
        "HBF media reads        2.50 GB (1234 pages, 57 waited for)",
        "HBM frame fills        7.13 GB",
        "frame cache hits       25.0% of weight accesses (50.0% without a media read)",
        "hits by server         gpu 75.0% of 40 (1.25 GB from media), pnm 12.5% of 8 (0.50 GB from media)",
        "throttle residency     normal 75.0%, light 25.0%",
        "max temperature        gpu 61.3 C, hbf 80.0 C",
        "refresh / P/E          0.002 GB refreshed, 1.23e-04 P/E cycles per block",
        f"KV in HBF              {kv_read:.2f} GB read, {kv_programmed:.2f} GB programmed (7 dirty blocks written "
        "back), 30 / 10 block hits / misses; 4.00 GB of KV/prefix read from HBM"]
    alone = _table(_result(FIXED, hbf={**HBF, "throttle_residency_s": {"normal": 0.0}}))
    assert "hits by server" not in alone and alone["throttle residency"] == "normal 0.0%"   # no time: no division


def test_the_tables_are_each_requests_row_and_each_servers_figures() -> None:
    result = _result(FIXED)
    rows = list(report.request_table(result))
    assert [(r["id"], r["ttft_s"], r["tpot_s"], r["tbt_p50_s"], r["tbt_p99_s"]) for r in rows] == [
        (0, 0.75, 0.25, 0.25, 0.25), (1, 0.75, 0.25, 0.25, 0.25)]
    assert report.server_table(result)[0] == {"server": "prefill (GPU)", "busy": 0.5, "compute_utilization": 0.25,
                                              "hbm_bandwidth_utilization": 0.75, "energy_j": 20.0}
    assert [s["server"] for s in report.server_table(result)] == ["prefill (GPU)", "link"]


def test_the_request_table_is_built_chunk_by_chunk_with_the_same_rows(monkeypatch) -> None:
    result = _result(FIXED)
    whole = list(report.request_table(result))
    monkeypatch.setattr(report, "TABLE_CHUNK", 1)
    assert list(report.request_table(result)) == whole


def test_the_files_hold_strict_json_and_every_row(tmp_path) -> None:
    out = report.write(_result(FIXED), tmp_path / "run", ["basedie", "simulate"], plots=False)
    assert sorted(p.name for p in out.iterdir()) == sorted(report.DATA_FILES)
    summary = json.loads((out / "summary.json").read_text(), parse_constant=pytest.fail)
    assert summary["tpot_s"] == {"mean": None, "p50": None, "p90": None, "p99": None}
    assert summary["utilization"]["by_server"]["link"] == {"busy": 0.1, "compute": None, "hbm_bandwidth": None}
    config = json.loads((out / "config.json").read_text())
    assert config["command_line"] == ["basedie", "simulate"] and config["max_batch"] == 16
    with (out / "requests.csv").open(newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert [(r["id"], r["arrival_s"], r["e2e_s"]) for r in rows] == [("0", "0.0", "1.25"), ("1", "1.0", "1.25")]
    assert (out / "servers.csv").read_text().splitlines()[0] == (
        "server,busy,compute_utilization,hbm_bandwidth_utilization,energy_j")
    assert report._json_safe((math.inf, [-math.inf, 1.5])) == [None, [None, 1.5]]


def test_a_foreign_destination_is_refused_naming_three_of_its_files(tmp_path) -> None:
    for name in ("summary.json", "a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text("")
    report.check_destination(tmp_path / "new" / "run")      # a folder to create under one that exists
    with pytest.raises(ConfigError) as three:
        report.check_destination(tmp_path)
    assert str(three.value) == (f"output folder {tmp_path} holds files a simulation did not write (a.txt, b.txt, "
                                "c.txt); choose another folder")
    (tmp_path / "d.txt").write_text("")
    with pytest.raises(ConfigError) as four:
        report.check_destination(tmp_path)
    assert str(four.value).endswith("(a.txt, b.txt, c.txt, ...); choose another folder")
    with pytest.raises(ConfigError) as file:
        report.check_destination(tmp_path / "a.txt")
    assert str(file.value) == f"output folder {tmp_path / 'a.txt'} exists and is not a folder"
    with pytest.raises(ConfigError) as below_a_file:
        report.check_destination(tmp_path / "a.txt" / "run")
    assert str(below_a_file.value) == (f"output folder {tmp_path / 'a.txt' / 'run'} cannot be created: "
                                       f"{tmp_path / 'a.txt'} is not a folder")


class _Figures:
    """`report._figure` that keeps each figure it makes."""

    def __init__(self, monkeypatch) -> None:
        self.made = []
        figure = report._figure

        def keep(width: float, height: float):
            self.made.append(figure(width, height))
            return self.made[-1]
        monkeypatch.setattr(report, "_figure", keep)


def test_the_latency_cdfs_step_through_each_requests_latency(monkeypatch, tmp_path) -> None:
    figures = _Figures(monkeypatch)
    report.plot_latency_cdf(_result(FIXED), tmp_path / "cdf.png")
    ttft, tpot, e2e = figures.made[0].axes
    assert [ax.get_title() for ax in (ttft, tpot, e2e)] == ["TTFT", "TPOT", "E2E"]
    assert (ttft.get_xlabel(), ttft.get_ylabel(), ttft.get_ylim()) == ("TTFT (ms)", "fraction of requests", (0, 1.02))
    x, y = ttft.lines[0].get_data()
    assert list(x) == [750.0, 750.0, 750.0] and list(y) == [0.0, 0.5, 1.0]       # both at 0.75 s
    assert list(e2e.lines[0].get_data()[0]) == [1250.0] * 3
    assert figures.made[0].get_suptitle() == "Latency CDFs: duopd · Toy-1B · 2 requests"
    assert (tmp_path / "cdf.png").read_bytes()[:4] == b"\x89PNG"
    one_token = _result(FIXED)
    for request in one_token.requests:
        request.output_len = 1
    report.plot_latency_cdf(one_token, tmp_path / "none.png")
    assert not figures.made[1].axes[1].lines
    assert figures.made[1].axes[1].texts[0].get_text() == "no request has this metric"


def test_the_timeline_draws_each_phase_of_each_request(monkeypatch, tmp_path) -> None:
    figures = _Figures(monkeypatch)
    report.plot_timeline(_result(FIXED), tmp_path / "t.png")
    (ax,) = figures.made[0].axes
    queueing, prefill, decode = ax.collections
    # Request 1 (arrived at 1 s): queued 1 → 1.25 s, prefilled → 1.75 s, decoded → 2.25 s, on the row 0.6 to 1.4.
    for phase, (left, right) in ((queueing, (1.0, 1.25)), (prefill, (1.25, 1.75)), (decode, (1.75, 2.25))):
        assert np.allclose(phase.get_paths()[1].vertices[:4], [[left, 0.6], [right, 0.6], [right, 1.4], [left, 1.4]])
    assert [h.get_label() for h in figures.made[0].legends[0].legend_handles] == ["queueing", "prefill", "decode"]
    assert ax.get_title() == "Request timeline: duopd · Toy-1B · 2 requests" and ax.yaxis_inverted()
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("time (s)", "request id")


def test_the_utilization_plot_has_two_bars_per_server_and_marks_a_link(monkeypatch, tmp_path) -> None:
    figures = _Figures(monkeypatch)
    report.plot_utilization(_result(FIXED), tmp_path / "u.png")
    (ax,) = figures.made[0].axes
    compute, bandwidth = ax.containers
    assert [bar.get_height() for bar in compute][0] == 25.0 and [bar.get_height() for bar in bandwidth][0] == 75.0
    assert [bar.get_x() + bar.get_width() / 2 for bar in compute] == pytest.approx([-0.2, 0.8])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["prefill (GPU)", "link"]
    assert [t.get_text() for t in ax.texts] == ["n/a", "n/a"]           # the link's compute and HBM
    assert ax.get_title() == ("Utilization: duopd · Toy-1B · 2 requests\nwhole machine: GPU compute 12.5%, "
                              "HBM bandwidth 50.0%")


def test_the_temperature_plot_is_written_only_for_a_run_with_hbf(monkeypatch, tmp_path) -> None:
    figures = _Figures(monkeypatch)
    trace = [(0.0, 40.0, 45.0, 50.0, 0), (1.0, 60.0, 65.0, 82.0, 2)]
    out = report.write(_result(FIXED, temperatures=trace), tmp_path / "run", ["basedie"])
    assert sorted(p.name for p in out.iterdir()) == sorted(report.DATA_FILES + report.PLOT_FILES)
    ax, states = figures.made[-1].axes
    assert [(line.get_label(), line.get_ydata().tolist()) for line in ax.lines] == [
        ("GPU", [40.0, 60.0]), ("HBM", [45.0, 65.0]), ("HBF", [50.0, 82.0])]
    assert states.lines[0].get_ydata().tolist()[-1] == 2
    plain = report.write(_result(FIXED), tmp_path / "plain", ["basedie"])
    assert "temperature.png" not in {p.name for p in plain.iterdir()}


def test_a_previous_run_is_put_back_when_the_new_one_cannot_take_its_place(monkeypatch, tmp_path) -> None:
    out = report.write(_result(FIXED), tmp_path / "run", ["basedie", "first"], plots=False)
    folders, replace, made = [], report.os.replace, report.tempfile.mkdtemp

    def beside(prefix, dir):
        folders.append(Path(dir))
        return made(prefix=prefix, dir=dir)
    monkeypatch.setattr(report.tempfile, "mkdtemp", beside)

    def second_fails(source, destination):
        if Path(source).name.startswith(".run.new."):
            raise OSError("no room")
        replace(source, destination)
    monkeypatch.setattr(report.os, "replace", second_fails)
    with pytest.raises(OSError):
        report.write(_result(FIXED), out, ["basedie", "second"], plots=False)
    assert json.loads((out / "config.json").read_text())["command_line"] == ["basedie", "first"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]        # no staging or retired folder left
    # Staged and retired beside the destination: on its file system, so each move is a rename.
    assert folders == [tmp_path, tmp_path]
