"""scripts/compare_peers.py on stand-ins for the peers' files: their latency models are read as documented and
our side of each point is the simulator's own iteration cost."""
import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "compare_peers.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("compare_peers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_distserve_latency_model_is_read_as_documented(script, tmp_path) -> None:
    folder = tmp_path / "simdistserve/estimators/profile_data"
    folder.mkdir(parents=True)
    model = {"decoding_large_small_bs_threshold": 95, "prefill": [10.0, 0.1, 1e-5],
             "decoding_smallbs": [20.0, 0.001, 0.5], "decoding_largebs": [5.0, 0.002, 1.0]}
    (folder / "profiler-a100-80g.distserve.json").write_text(json.dumps({"facebook/opt-13b": {"1": model}}))
    points = {what: seconds for _, _, _, _, what, seconds, _ in script.distserve_points(tmp_path)}
    # prefill 512: 10 + 0.1 × 512 + 1e-5 × 512² ms; decode batch 16 at context 512 (small batch):
    # 20 + 0.001 × 16 × 512 + 0.5 × 16 ms; batch 128 (large): 5 + 0.002 × 128 × 512 + 128 ms.
    assert points["prefill 1x512"] == pytest.approx((10 + 51.2 + 2.62144) / 1e3)
    assert points["decode b16 ctx512"] == pytest.approx((20 + 8.192 + 8) / 1e3)
    assert points["decode b128 ctx512"] == pytest.approx((5 + 131.072 + 128) / 1e3)


def test_workloads_are_written_for_both_simulators(script, tmp_path) -> None:
    script.write_workloads(tmp_path)
    for name, (count, rate, prompt, output) in script.WORKLOADS.items():
        theirs = json.loads((tmp_path / f"{name}.json").read_text())
        ours = [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
        assert len(theirs) == len(ours) == count
        assert [(r["start_time"], r["prompt_len"], r["output_len"]) for r in theirs] == [
            (r["arrival_s"], r["prompt_tokens"], r["output_tokens"]) for r in ours]
        assert theirs[-1]["start_time"] == pytest.approx(count / rate, rel=0.2)
        assert sum(r["prompt_len"] for r in theirs) / count == pytest.approx(prompt, rel=0.1)
