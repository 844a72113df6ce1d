"""Trace formats: each public project's columns read in its own time unit, no silent t = 0, named traces shipped
as package data, and tiling a trace at its own rate."""
import io
import json
import sys

import pytest

from basedie.cli import main
from sysmodel.errors import ConfigError
from sysmodel.simulate import SimulationConfig, simulate
from sysmodel.traces import FORMATS, NAMED, Trace, resolve

# The same three requests (arrivals 0, 1.5 and 4 s; prompts 10, 20, 30; outputs 1, 2, 3) in each project's own
# schema, as their documentation and code write them (sources in sysmodel/traces.py and docs/guides/traces.md).
THREE = [(0.0, 10, 1), (1.5, 20, 2), (4.0, 30, 3)]
FILES = {
    "azure.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.0000000,10,1\n"
                 "2023-11-16 18:15:47.5000000,20,2\n2023-11-16 18:15:50.0000000,30,3\n",
    "splitwise-sim.csv": "request_id,request_type,application_id,arrival_timestamp,batch_size,prompt_size,token_size\n"
                     "0,2,0,0,1,10,1\n1,2,0,1.5,1,20,2\n2,2,0,4,1,30,3\n",
    "distserve.json": json.dumps([{"start_time": 0.0, "prompt_len": 10, "output_len": 1},
                                  {"start_time": 1.5, "prompt_len": 20, "output_len": 2},
                                  {"start_time": 4.0, "prompt_len": 30, "output_len": 3}]),
    "vidur.csv": "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,10,1\n1.5,20,2\n4.0,30,3\n",
    "burstgpt.csv": "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                    "0,ChatGPT,10,1,11,Conversation log\n1.5,GPT-4,20,2,22,API log\n4,ChatGPT,30,3,33,API log\n",
    "mooncake.jsonl": "".join(json.dumps({"timestamp": t, "input_length": p, "output_length": o, "hash_ids": [0]})
                              + "\n" for t, p, o in ((0, 10, 1), (1500, 20, 2), (4000, 30, 3))),
    "basedie.csv": "id,arrival_s,input_len,output_len,ttft_s\n0,0,10,1,0.1\n1,1.5,20,2,0.1\n2,4.0,30,3,0.1\n",
}


def relative(requests) -> list[tuple[float, int, int]]:
    return [(round(r.arrival - requests[0].arrival, 9), r.input_len, r.output_len) for r in requests]


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_public_format_is_read_in_its_own_time_unit(name, tmp_path) -> None:
    path = tmp_path / name
    path.write_text(FILES[name])
    assert relative(Trace(str(path)).generate()) == THREE


def test_every_format_has_a_test_file() -> None:
    assert {f.name for f in FORMATS} == {n.split(".")[0] for n in FILES}


@pytest.mark.parametrize("header", ["arrival_time_s,input_len,output_len", "arrival,prompt_tokens,output_tokens",
                                    "time,ContextTokens,GeneratedTokens"])
def test_an_unrecognised_arrival_column_is_an_error_naming_the_columns(header, tmp_path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(f"{header}\n0.5,10,2\n2.5,10,2\n")
    with pytest.raises(ConfigError, match=f"no arrival column .*the file has {header.replace(',', ', ')}.*"
                                          f"--arrivals none"):
        Trace(str(path)).generate()
    assert [r.arrival for r in Trace(str(path), "none").generate()] == [0.0, 0.0]   # said explicitly


def test_unknown_token_columns_are_an_error_naming_the_columns_and_the_formats(tmp_path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,tokens_in,tokens_out\n0,10,2\n")
    with pytest.raises(ConfigError, match=r"columns arrival_s, tokens_in, tokens_out are no known trace format "
                                          r"\(basedie: arrival_s, prompt_tokens\|input_len, output_tokens\|output_len; "
                                          r"azure: TIMESTAMP, ContextTokens, GeneratedTokens; splitwise-sim: "):
        Trace(str(path)).generate()
    with pytest.raises(ConfigError, match="no known trace format"):
        Trace(str(path), "none").generate()


def test_arrivals_in_the_wrong_unit_are_errors(tmp_path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n12.5,10,1\n")    # Azure's are date-times
    with pytest.raises(ConfigError, match="row 1, TIMESTAMP: '12.5' is not an ISO date-time"):
        Trace(str(path)).generate()
    path.write_text("arrival_s,input_len,output_len\n2023-11-16 18:15:46,10,1\n")
    with pytest.raises(ConfigError, match="row 1, arrival_s: arrival must be a number of s"):
        Trace(str(path)).generate()


def test_a_distserve_workload_arrives_as_recorded_not_at_once(tmp_path) -> None:
    """The bug this format table fixes: DistServe's `start_time` was not an arrival column, so every request
    arrived at t = 0 and queued behind the others."""
    path = tmp_path / "w.json"
    path.write_text(json.dumps([{"start_time": 2.0 * i, "prompt_len": 512, "output_len": 8} for i in range(6)]))
    result = simulate(SimulationConfig(system="chunked", model="llama2-70b", workload=Trace(str(path))))
    assert [r.arrival for r in result.requests] == [2.0 * i for i in range(6)]
    at_once = simulate(SimulationConfig(system="chunked", model="llama2-70b", workload=Trace(str(path), "none")))
    assert result.summary["ttft_s"]["p99"] < at_once.summary["ttft_s"]["p99"]


def test_repeating_a_trace_tiles_it_at_its_mean_rate(tmp_path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,input_len,output_len\n10,5,1\n11,6,1\n13,7,1\n")    # span 3 s, 3 rows: period 4.5 s
    requests = Trace(str(path), repeat=3).generate()
    assert [(r.id, r.arrival, r.input_len) for r in requests] == [
        (0, 10, 5), (1, 11, 6), (2, 13, 7), (3, 14.5, 5), (4, 15.5, 6), (5, 17.5, 7), (6, 19, 5), (7, 20, 6),
        (8, 22, 7)]
    gaps = [b.arrival - a.arrival for a, b in zip(requests, requests[1:])]
    assert sum(gaps) / len(gaps) == pytest.approx(3 / 2)     # the trace's own mean gap
    path.write_text("arrival_s,input_len,output_len\n1,5,1\n1,6,1\n")
    with pytest.raises(ConfigError, match="repeating needs arrivals spread over time"):
        Trace(str(path), repeat=2).generate()
    for bad, message in ((dict(repeat=0), "repeat must be an integer >= 1"), (dict(arrivals="t0"), "one of trace"),
                         (dict(arrivals="none", repeat=2), "only multiplies the requests")):
        with pytest.raises(ConfigError, match=message):
            Trace(str(path), **bad)


def test_named_traces_are_shipped_with_their_licence_and_citation() -> None:
    assert sorted(NAMED) == ["azure-code-2023", "azure-conv-2023"]
    folder = resolve("azure-conv-2023").parent
    assert "Creative Commons" in (folder / "LICENSE").read_text()[:200]
    assert "Splitwise" in (folder / "README.md").read_text()
    conv, code = Trace("azure-conv-2023").generate(), Trace("azure-code-2023").generate()
    assert (len(conv), len(code)) == (19366, 8819)               # the row counts the dataset's files have
    assert 55 * 60 < conv[-1].arrival - conv[0].arrival < 60 * 60   # one hour of one service
    two = Trace("azure-conv-2023", repeat=2).generate()          # 24 copies make the documented day
    assert len(two) == 2 * 19366 and len({r.id for r in two}) == len(two)
    period = two[19366].arrival - two[0].arrival
    assert 23 * 3600 < 24 * period < 24 * 3600


def run(argv, capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("extra,message", [
    (["--arrivals", "none"], "--arrivals applies to --trace only"),
    (["--trace-repeat", "2"], "--trace-repeat applies to --trace only"),
    (["--trace", "azure-conv-2023", "--trace-repeat", "0"], "trace repeat must be an integer >= 1, got 0"),
])
def test_trace_options_are_checked(extra, message, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    code, err = run(["simulate", "--system", "chunked", "--model", "llama2-70b", "--no-plots", "--out", str(out),
                     *extra], capsys)
    assert code == 2 and message in err and err.count("\n") == 1 and not out.exists()


def test_cli_refuses_a_trace_without_an_arrival_column_and_writes_nothing(tmp_path, capsys) -> None:
    trace, out = tmp_path / "t.csv", tmp_path / "out"
    trace.write_text("arrival_time_s,input_len,output_len\n0.0,64,2\n5.0,64,2\n")
    code, err = run(["simulate", "--system", "chunked", "--model", "llama2-70b", "--trace", str(trace), "--no-plots",
                     "--out", str(out)], capsys)
    assert code == 2 and "no arrival column arrival_s" in err and not out.exists()
    code, _ = run(["simulate", "--system", "chunked", "--model", "llama2-70b", "--trace", str(trace), "--arrivals",
                   "none", "--no-plots", "--out", str(out)], capsys)
    assert code == 0 and json.loads((out / "config.json").read_text())["workload"]["arrivals"] == "none"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_counts_every_arrival_on_a_terminal_and_changes_nothing(tmp_path, monkeypatch) -> None:
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,input_len,output_len\n" + "".join(f"{0.5 * i},256,4\n" for i in range(7)))
    config = SimulationConfig(system="chunked", model="llama2-70b", workload=Trace(str(path)))
    quiet = simulate(config)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    shown = simulate(config, progress=True)
    assert "arrived" in terminal.getvalue() and "7/7" in terminal.getvalue()
    assert [r.token_times for r in shown.requests] == [r.token_times for r in quiet.requests]


def test_two_requests_half_a_second_apart_tile_with_their_lengths(tmp_path) -> None:
    # Two rows, span 0.5 s: period 0.5 × 2 / 1 = 1 s; every copy keeps each request's prompt and output.
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,input_len,output_len\n3,5,7\n3.5,6,8\n")
    requests = Trace(str(path), repeat=2).generate()
    assert [(r.id, r.arrival, r.input_len, r.output_len) for r in requests] == [
        (0, 3, 5, 7), (1, 3.5, 6, 8), (2, 4, 5, 7), (3, 4.5, 6, 8)]


def test_a_date_time_is_utc_unless_it_names_its_zone(tmp_path, monkeypatch) -> None:
    # 2023-11-16 18:15:46 UTC is 1,700,158,546 s after the epoch (19:15:46 at +01:00 is the same instant),
    # whatever the machine's own zone.
    import time
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        path = tmp_path / "t.csv"
        path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,10,1\n"
                        "2023-11-16 19:15:46+01:00,20,2\n")
        assert [r.arrival for r in Trace(str(path)).generate()] == [1700158546.0, 1700158546.0]
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize("row, message", [
    ({"TIMESTAMP": 12, "ContextTokens": 10, "GeneratedTokens": 1},
     "TIMESTAMP: arrival must be an ISO date-time, got 12"),
    ({"arrival_s": "inf", "input_len": 10, "output_len": 1}, "arrival_s: arrival must be a finite number of s >= 0"),
    ({"arrival_s": True, "input_len": 10, "output_len": 1}, "arrival_s: arrival must be a finite number of s >= 0"),
    ({"arrival_s": 0, "input_len": True, "output_len": 1}, "input_len: token count must be an integer >= 1"),
    ({"arrival_s": 0, "input_len": [10], "output_len": 1}, "input_len: token count must be an integer >= 1"),
])
def test_a_json_cell_of_the_wrong_type_is_an_error_naming_its_row_and_column(row, message, tmp_path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ConfigError, match=f"row 1, {message}"):
        Trace(str(path)).generate()


def test_a_missing_arrival_column_is_named_with_its_unit(tmp_path) -> None:
    for name, text, unit in (("t.csv", "input_len,output_len\n1,2\n", "basedie format, in seconds"),
                             ("t.jsonl", '{"input_length": 1, "output_length": 2}\n', "mooncake format, in ms"),
                             ("a.csv", "ContextTokens,GeneratedTokens\n1,2\n", "azure format, in iso")):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(ConfigError, match=rf"no arrival column \w+ \({unit}\); the file has"):
            Trace(str(path)).generate()


def test_each_error_names_the_trace(tmp_path) -> None:
    path = tmp_path / "t.csv"
    for text, message, repeat in (("arrival_s,input_len,output_len\n", "no requests", 1),
                                  ("a,b\n1,2\n", "columns a, b are no known trace format", 1),
                                  ("arrival_s,input_len,output_len\n0,5,0\n", "row 1, output_len: token count", 1),
                                  ("arrival_s,input_len,output_len\n0,5,1\n", "repeating needs arrivals spread", 2)):
        path.write_text(text)
        with pytest.raises(ConfigError, match=f"^trace {path}(: |, ){message}"):
            Trace(str(path), repeat=repeat).generate()


def test_bad_trace_options_are_refused_with_the_choices() -> None:
    with pytest.raises(ConfigError) as error:
        Trace("t.csv", arrivals="later")
    assert str(error.value) == "trace arrivals must be one of trace, none, got 'later'"
    with pytest.raises(ConfigError) as error:
        Trace("t.csv", arrivals="none", repeat=2)
    assert str(error.value) == ("repeating a trace replayed at t = 0 (arrivals none) only multiplies the requests: "
                                "give more rows")


@pytest.mark.parametrize("name", ["three.ndjson", "THREE.NDJSON"])
def test_an_ndjson_file_is_read_as_json_lines(name, tmp_path) -> None:
    path = tmp_path / name
    path.write_text(FILES["mooncake.jsonl"])
    assert relative(Trace(str(path)).generate()) == THREE


def test_a_json_list_may_start_after_blank_lines(tmp_path) -> None:
    path = tmp_path / "distserve.json"
    path.write_text("\n  " + FILES["distserve.json"])
    assert relative(Trace(str(path)).generate()) == THREE


@pytest.mark.parametrize("text,message", [
    ('[{"start_time": 0,', ": not JSON ("),
    ('{"timestamp": 0, "input_length": 1, "output_length": 1}\n{"timestamp": 1,\n', ", line 2: not JSON ("),
    ('{"timestamp": 0, "input_length": 1, "output_length": 1}\n\n[1, 2]\n', ", line 3: not a JSON object"),
])
def test_a_malformed_json_line_is_named_by_its_line_number(text, message, tmp_path) -> None:
    """Line numbers count from 1 and include blank lines, as an editor shows them."""
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        Trace(str(path)).generate()
    assert str(error.value).startswith(f"trace {path}{message}")
