"""`basedie sweep`: SPEC grids (ranges, point lists, any simulate option), a 2-worker LocalCluster giving the same
table as a serial run, resuming, failed points recorded, `simulate`'s numbers, and bad SPECs (one line, exit 2,
nothing written). One cluster for the module: starting one costs seconds."""
import json
import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from basedie.cli import main
from basedie.simulation import simulate_parser
from basedie.spec import load
from basedie.sweep import sweep

pytestmark = [pytest.mark.xdist_group("sweep"), pytest.mark.slow]   # one worker starts the cluster and runs the serial sweep, once

# 4 PNM powers (W per stack) x 5 arrival rates = 20 small DuoPD points (Poisson: the seed makes them reproducible).
SPEC = """
[base]
system = "duopd"
model = "LLaMA2-70B"
input-len = 1024
output-len = 8
requests = 4
seed = 3
[axes]
hw.pnm.power_w = {start = 4, stop = 16, step = 4}
qps = [0.5, 1, 2, 4, 8]
"""


def write_spec(folder: Path, text: str, name: str = "spec.toml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def rows(out: Path) -> list[dict]:
    return pq.read_table(out / "points.parquet").to_pylist()


def run_sweep(spec_path: Path, out: Path, client=None, plots: bool = False) -> dict:
    parser = simulate_parser()
    spec = load(spec_path, parser)
    return sweep(spec, spec.points(parser), spec_path.read_text(), out, client, progress=False, plots=plots)


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def serial(tmp_path_factory) -> Path:
    """The 20-point sweep run in this process, without Dask."""
    folder = tmp_path_factory.mktemp("serial")
    counts = run_sweep(write_spec(folder, SPEC), folder / "out", plots=True)
    assert counts == {"points": 20, "computed": 20, "reused": 0, "failed": 0}
    return folder / "out"


def test_the_grid_is_the_product_of_the_axes_first_axis_slowest(serial) -> None:
    table = rows(serial)
    assert [(r["hw.pnm.power_w"], r["qps"]) for r in table] == [(n, q) for n in (4, 8, 12, 16)
                                                               for q in (0.5, 1.0, 2.0, 4.0, 8.0)]
    assert [r["point"] for r in table] == list(range(20))
    assert all(r["status"] == "ok" and r["error"] == "" for r in table)
    assert table[0]["options"] == ("--hw pnm.power_w=4 --input-len 1024 --model LLaMA2-70B --output-len 8 --qps 0.5 "
                                   "--requests 4 --seed 3 --system duopd")
    # Every metric of the summary is a column: 4 requests over the makespan.
    assert all(r["requests"] == 4 for r in table)
    assert all(r["throughput.requests_per_s"] == pytest.approx(4 / r["makespan_s"], rel=1e-12) for r in table)


def test_a_two_worker_cluster_gives_the_serial_table(serial, client, tmp_path) -> None:
    out = tmp_path / "out"
    counts = run_sweep(write_spec(tmp_path, SPEC), out, client)
    assert counts["computed"] == 20 and counts["failed"] == 0
    assert rows(out) == rows(serial)     # same options and seeds: the same numbers, bit for bit
    assert (out / "points.csv").read_text() == (serial / "points.csv").read_text()


def test_a_sweep_point_has_the_numbers_basedie_simulate_writes(serial, tmp_path) -> None:
    point = rows(serial)[7]
    assert main(["simulate", *point["options"].split(), "--out", str(tmp_path / "one")]) == 0
    summary = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert point["ttft_s.p99"] == summary["ttft_s"]["p99"]
    assert point["energy_j.total"] == summary["energy_j"]["total"]
    config = json.loads((tmp_path / "one" / "config.json").read_text())
    hardware = json.loads((serial / "hardware.json").read_text())[point["hardware_id"]]
    assert hardware == {"hardware": config["hardware"], "verified_blocks": config["verified_blocks"]}
    assert hardware["hardware"]["pnm"]["power_w"] == point["hw.pnm.power_w"] == 8


def test_hardware_is_written_once_per_distinct_hardware_and_plots_once_per_metric(serial) -> None:
    table = rows(serial)
    hardware = json.loads((serial / "hardware.json").read_text())
    assert len(hardware) == 4      # four lane counts; the arrival rate is not hardware
    assert {r["hardware_id"] for r in table} == set(hardware)
    plots = {p.name for p in (serial / "plots").iterdir()}
    assert {"ttft_s.p50.png", "energy_j.total.png", "throughput.requests_per_s.png"} <= plots
    assert "point.png" not in plots and "hw.pnm.power_w.png" not in plots    # inputs are not metrics
    assert (serial / "plots" / "makespan_s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_resuming_computes_only_the_missing_points(serial, client, tmp_path) -> None:
    out = tmp_path / "out"
    first = run_sweep(write_spec(tmp_path, SPEC.replace("[0.5, 1, 2, 4, 8]", "[0.5, 4]")), out, client)
    assert first == {"points": 8, "computed": 8, "reused": 0, "failed": 0}
    before = set((out / "parts").iterdir())
    second = run_sweep(write_spec(tmp_path, SPEC), out, client)
    assert second == {"points": 20, "computed": 12, "reused": 8, "failed": 0}
    computed = {r["options"] for part in set((out / "parts").iterdir()) - before
                for r in pq.read_table(part).to_pylist()}
    qps = {r["options"]: r["qps"] for r in rows(out)}
    assert len(computed) == 12 and sorted({qps[k] for k in computed}) == [1.0, 2.0, 8.0]
    assert rows(out) == rows(serial)
    parts = set((out / "parts").iterdir())
    third = run_sweep(write_spec(tmp_path, SPEC), out, client)
    assert third["computed"] == 0 and set((out / "parts").iterdir()) == parts


def test_a_point_that_fails_on_a_worker_is_recorded_and_the_sweep_goes_on(client, tmp_path, capsys) -> None:
    # A million-token prompt: GPT3-175B's KV cache fits nowhere, which only the simulation finds out.
    spec = write_spec(tmp_path, SPEC.replace('"LLaMA2-70B"', '"GPT3-175B"').replace(
        "qps = [0.5, 1, 2, 4, 8]", "input-len = [1024, 1000000]"))
    out = tmp_path / "out"
    counts = run_sweep(spec, out, client)
    assert counts == {"points": 8, "computed": 8, "reused": 0, "failed": 4}
    table = rows(out)
    failed = [r for r in table if r["status"] == "error"]
    assert [r["input-len"] for r in failed] == [1000000] * 4
    assert all(r["error"].startswith("KVDoesNotFit: ") and "KV cache" in r["error"] and "\n" not in r["error"]
               and r["ttft_s.p50"] is None for r in failed)
    assert all(r["status"] == "ok" and r["ttft_s.p50"] > 0 for r in table if r["input-len"] == 1024)
    # The CLI resumes it (the failed points are tried again, and fail again): exit code 1.
    code = main(["sweep", str(spec), "--scheduler", client.scheduler.address, "-o", str(out)])
    assert code == 1 and "8 points (4 computed, 4 already in" in capsys.readouterr().out


def test_ranges_point_lists_flags_and_dotted_keys(tmp_path) -> None:
    spec = load(write_spec(tmp_path, """
        [base]
        system = "pd-1:1"
        model = "LLaMA2-70B"
        hw = ["gpus=8"]
        [axes]
        qps = {start = 0.1, stop = 0.5, step = 0.2}
        "hw.gpu.stack.bandwidth" = {start = 1e12, stop = 4e12, num = 3, spacing = "log"}
        batch = {start = 4, stop = 16, num = 3, spacing = "log"}
        shape = [{input-len = 1024, output_len = 8}, {input-len = 2048, output-len = 16, hw.gpus = 4}]
        """), simulate_parser())
    assert [a.name for a in spec.axes] == ["qps", "hw.gpu.stack.bandwidth", "batch", "shape"]
    assert [v["qps"] for v in spec.axes[0].values] == [0.1, 0.3, 0.5]            # 0.1 + 0.2 + 0.2, rounded
    assert [v["hw.gpu.stack.bandwidth"] for v in spec.axes[1].values] == [1e12, 2e12, 4e12]
    assert [v["batch"] for v in spec.axes[2].values] == [4, 8, 16]              # integers stay integers
    assert spec.axes[3].labels == ("input-len=1024,output-len=8", "input-len=2048,output-len=16,hw.gpus=4")
    points = spec.points(simulate_parser())
    assert len(points) == 3 * 3 * 3 * 2
    last = points[-1]
    assert last.labels == {"qps": 0.5, "hw.gpu.stack.bandwidth": 4e12, "batch": 16,
                           "shape": "input-len=2048,output-len=16,hw.gpus=4"}
    # Keys sorted; the repeatable --hw keeps the base list first, so an axis's hw.gpus=4 wins over gpus=8.
    assert last.options == ("--batch", "16", "--hw", "gpus=8", "--hw", "gpu.stack.bandwidth=4000000000000.0",
                            "--hw", "gpus=4", "--input-len", "2048", "--model", "LLaMA2-70B", "--output-len", "16",
                            "--qps", "0.5", "--system", "pd-1:1")


BAD_SPECS = {
    "not TOML": ("[axes\n", "is not valid TOML"),
    "unknown section": ("[axis]\nqps = [1]\n", "unknown section(s) axis"),
    "no axes": ('[base]\nsystem = "duopd"\n', "names no axis"),
    "unknown option": ('[base]\nsystem = "duopd"\nmodel = "LLaMA2-70B"\n[axes]\nlanes = [1, 2]\n',
                       "'lanes' is not a sweepable"),
    "--out is the sweep's": ('[base]\nout = "x"\n[axes]\nqps = [1]\n', "'out' is not a sweepable"),
    "FIELD on a plain option": ('[axes]\n"batch.x" = [1]\n', "only a repeatable option"),
    "empty axis": ('[axes]\nqps = []\n', "must be a non-empty list"),
    "step and num": ('[axes]\nqps = {start = 1, stop = 2, step = 1, num = 2}\n', "one of step or num"),
    "backwards range": ('[axes]\nqps = {start = 2, stop = 1, step = 1}\n', "stop >= start"),
    "log through zero": ('[axes]\nqps = {start = 0, stop = 1, num = 3, spacing = "log"}\n', "log needs"),
    "two axes, one option": ('[axes]\nqps = [1]\nother = [{qps = 2}]\n', "both set 'qps'"),
    "bad value": ('[base]\nsystem = "duopd"\nmodel = "LLaMA2-70B"\n[axes]\nbatch = ["x", 2]\n',
                  "argument --batch: invalid int value: 'x'"),
    "missing required option": ('[axes]\nqps = [1]\n', "the following arguments are required: --system, --model"),
    "unknown hw field": ('[base]\nsystem = "duopd"\nmodel = "LLaMA2-70B"\n[axes]\nhw.pnm.lanez = [1, 2]\n',
                         "hardware has no field 'pnm.lanez'"),
    "a flag the system ignores": ('[base]\nsystem = "pd-1:1"\nmodel = "LLaMA2-70B"\n[axes]\n'
                                  'mmu-policy = ["mixed"]\n',
                                  "--mmu-policy applies to duopd, duopd-4x-bw and duopd-4x-bw-4x-compute only"),
    "list for one value": ('[base]\nsystem = ["duopd"]\nmodel = "LLaMA2-70B"\n[axes]\nqps = [1]\n',
                           "takes one value, not a list"),
}


@pytest.mark.parametrize("name", list(BAD_SPECS))
def test_a_bad_spec_is_one_line_exit_2_and_nothing_written(name, tmp_path, capsys) -> None:
    text, message = BAD_SPECS[name]
    spec = write_spec(tmp_path, text)
    out = tmp_path / "out"
    code = main(["sweep", str(spec), "--workers", "0", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("basedie sweep: error: ") and err.count("\n") == 1, err
    assert message in err, err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]


def test_bad_command_lines_are_refused_before_anything_is_written(tmp_path, capsys) -> None:
    spec = write_spec(tmp_path, SPEC)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("a user's file")
    for argv, message in (([str(tmp_path / "missing.toml")], "cannot read"),
                          ([str(spec), "--workers", "-1"], "--workers takes a count >= 0"),
                          ([str(spec), "-o", str(tmp_path / "mine")], "holds files a sweep did not write")):
        out = ["-o", str(tmp_path / "out")] if "-o" not in argv else []
        assert main(["sweep", *argv, *out]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "spec.toml"]
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]


def test_a_folder_of_another_sweep_is_not_mixed_in(serial, tmp_path, capsys) -> None:
    import shutil

    out = tmp_path / "out"
    shutil.copytree(serial, out)
    spec = write_spec(tmp_path, SPEC.replace("seed = 3", "seed = 4"))
    assert main(["sweep", str(spec), "--workers", "0", "-o", str(out)]) == 2
    assert "holds 20 point(s) of another SPEC" in capsys.readouterr().err
    assert rows(out) == rows(serial)


def test_the_shipped_example_is_a_valid_spec() -> None:
    spec = load(Path(__file__).parents[2] / "examples" / "sweeps" / "duopd-lanes.toml", simulate_parser())
    points = spec.points(simulate_parser())
    assert spec.axes[0].name == "hw.pnm.lanes" and len(points) == math.prod(len(a.values) for a in spec.axes) >= 6


def test_verify_with_an_unreachable_scheduler_is_one_line_and_writes_no_table(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr("basedie.sweep.SCHEDULER_TIMEOUT", "1s")   # nothing listens there: no need to wait 10 s
    table = tmp_path / "table.json"
    code = main(["verify", "fp_to_fp32", "--scheduler", "tcp://127.0.0.1:1", "--table", str(table)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("basedie verify: error: cannot reach the Dask scheduler at tcp://127.0.0.1:1")
    assert err.count("\n") == 1 and not table.exists()
