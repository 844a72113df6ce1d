"""MoE routing-trace replay (issue 14): hand-written traces, their deduplicated demand, and bad files."""
import json

import numpy as np
import pytest

from basedie.cli import main
from sysmodel.errors import ConfigError
from sysmodel.hardware import PAPER_HARDWARE, with_overrides
from sysmodel.hbf.routing import TraceRouter, load_trace, unique_per_layer
from sysmodel.hbf.service import HBFOptions
from sysmodel.simulate import SimulationConfig, simulate
from sysmodel.workload import FixedBatch

TINY = [[[0, 1], [2, 3]],      # token 0: layer 0 picks experts 0, 1; layer 1 picks 2, 3
        [[1, 2], [2, 3]],
        [[0, 3], [0, 1]]]


def _write(tmp_path, tokens, name="trace.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(t) + "\n" for t in tokens))
    return path


def test_replay_gives_the_hand_counted_distinct_experts(tmp_path) -> None:
    picks = load_trace(_write(tmp_path, TINY), layers=2, experts=4, top_k=2)
    router = TraceRouter(picks)
    # Tokens 0-1: layer 0 {0, 1, 2}, layer 1 {2, 3}.
    assert router.touched(2).sum(axis=1).tolist() == [3, 2]
    # Tokens 2, 0 (wrapping): layer 0 {0, 1, 3}, layer 1 {0, 1, 2, 3}.
    assert router.touched(2).sum(axis=1).tolist() == [3, 4]
    # More tokens than the trace holds: the whole trace, every expert of both layers.
    assert router.touched(5).sum(axis=1).tolist() == [4, 4]
    assert router.cursor == (2 + 2 + 5) % 3
    # The same counts as deduplicating the explicit choices (layers x tokens x top_k).
    choices = np.array(TINY).transpose(1, 0, 2)
    assert unique_per_layer(choices[:, :2]).tolist() == [3, 2]
    # A slice of the experts (one GPU's local ones under expert parallelism): layer 0 of tokens 1-2 is {0,1,2,3}.
    router.restore(1)
    assert router.touched(2, slice(0, 2)).sum(axis=1).tolist() == [2, 2]


def test_a_constant_trace_replays_through_serving(tmp_path) -> None:
    """Every token picks experts 0-7 in each of Qwen3-30B-A3B's 48 layers: every iteration touches the same
    48 x 8 = 384 experts, which fit layout C's 8 GiB frame cache (913 experts of 9,437,184 B = 2,304 pages),
    so each is read from the media once and every later access hits."""
    trace = _write(tmp_path, [[list(range(8))] * 48] * 3)
    hardware = with_overrides(PAPER_HARDWARE, {"gpus": "1"})
    hbf = simulate(SimulationConfig(system="chunked", model="Qwen3-30B-A3B", workload=FixedBatch(4, 256, 8),
                                    hardware=hardware, memory="C",
                                    hbf=HBFOptions(routing_trace=str(trace)))).summary["hbf"]
    assert hbf["media_page_reads"] == 384 * 2304
    assert hbf["accesses"] % 384 == 0 and hbf["accesses"] >= 384 * 8
    assert hbf["frame_cache_hits"] == hbf["accesses"] - 384


def test_the_sample_trace_matches_the_model() -> None:
    picks = load_trace("examples/hbf/qwen3-30b-a3b-routing-sample.jsonl", layers=48, experts=128, top_k=8)
    assert picks.shape == (16, 48, 128) and (picks.sum(axis=2) == 8).all()


BASE = ["simulate", "--system", "chunked", "--model", "Qwen3-30B-A3B", "--hw", "gpus=1", "--input-len", "256",
        "--output-len", "4", "--requests", "2", "--memory", "C", "--no-plots"]


@pytest.mark.parametrize("text, message", [
    ("[[0, 1]\n", "malformed routing trace line"),
    ("[[0, 1, 2, 3, 4, 5, 6, 7]]\n", "each of the model's 48 layers"),
    (json.dumps([[0, 0, 1, 2, 3, 4, 5, 6]] * 48) + "\n", "distinct expert ids"),
    (json.dumps([[0, 1, 2, 3, 4, 5, 6, 128]] * 48) + "\n", "distinct expert ids in 0..127"),
    (json.dumps([[0, 1, 2, 3, 4, 5, 6]] * 48) + "\n", "must list 8"),
    ("\n\n", "holds no token"),
])
def test_a_malformed_trace_is_one_line_exit_2_nothing_written(tmp_path, capsys, text, message) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    out = tmp_path / "out"
    assert main([*BASE, "--routing-trace", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def test_trace_refusals(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    sample = "examples/hbf/qwen3-30b-a3b-routing-sample.jsonl"
    cases = [([*BASE, "--routing-trace", str(tmp_path / "missing.jsonl")], "cannot be read"),
             ([*BASE, "--routing-trace", sample, "--routing-skew", "1"], "give one"),
             ([*BASE[:4], "Llama-3.1-8B", *BASE[5:], "--routing-trace", sample], "needs an MoE model")]
    for argv, message in cases:
        assert main([*argv, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and not out.exists()


def test_load_trace_names_the_line(tmp_path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(TINY[0]) + "\n\n" + "nope\n")
    with pytest.raises(ConfigError, match=r"t.jsonl:3: malformed"):
        load_trace(path, 2, 4, 2)
